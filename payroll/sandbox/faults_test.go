package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServer_Faults(t *testing.T) {
	createVars := map[string]any{"c": CompanyNordlys, "pp": []any{t1(8)}}
	tests := []struct {
		name        string
		fault       string
		timeout     time.Duration // client timeout; 0 = default
		wantErr     bool          // transport error instead of a response
		wantStatus  int
		wantHeader  [2]string
		wantBody    string
		wantCreated bool
	}{
		{name: "drop after commit", fault: "drop_after_commit:create_pay_parts,times=1", wantErr: true, wantCreated: true},
		{name: "bad gateway after commit", fault: "bad_gateway_after_commit:create_pay_parts,times=1", wantStatus: 502,
			wantHeader: [2]string{"Content-Type", "text/html"}, wantBody: "<h1>502 Bad Gateway</h1>", wantCreated: true},
		{name: "timeout after commit", fault: "timeout_after_commit:create_pay_parts,times=1,delay=10s", timeout: 300 * time.Millisecond, wantErr: true, wantCreated: true},
		{name: "timeout shorter than client", fault: "timeout_after_commit,times=1,delay=50ms", wantStatus: 200, wantBody: `"create_pay_parts"`, wantCreated: true},
		{name: "rate limit", fault: "rate_limit:create_pay_parts,times=1,retry_after=2s", wantStatus: 429, wantHeader: [2]string{"Retry-After", "2"}},
		{name: "rate limit default retry", fault: "rate_limit,times=1", wantStatus: 429, wantHeader: [2]string{"Retry-After", "1"}},
		{name: "rate limit rounds up", fault: "rate_limit,times=1,retry_after=1500ms", wantStatus: 429, wantHeader: [2]string{"Retry-After", "2"}},
		{name: "error before", fault: "error_before:create_pay_parts,times=1", wantStatus: 503, wantBody: "503"},
		{name: "error before with status", fault: "error_before,times=1,status=500", wantStatus: 500},
		{name: "error before with retry", fault: "error_before,times=1,retry_after=30s", wantStatus: 503, wantHeader: [2]string{"Retry-After", "30"}},
		{name: "unauthorized", fault: "unauthorized,times=1", wantStatus: 401, wantHeader: [2]string{"WWW-Authenticate", `Bearer error="invalid_token"`}, wantBody: "invalid_token"},
		{name: "latency", fault: "latency:create_pay_parts,times=1,delay=50ms", wantStatus: 200, wantCreated: true},
		{name: "other op does not match", fault: "error_before:delete_pay_parts", wantStatus: 200, wantCreated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFault(tt.fault)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, Options{Faults: []Fault{f}})
			tok := e.accessToken()
			if tt.timeout > 0 {
				e.hc.Timeout = tt.timeout
			}
			start := time.Now()
			resp, body, err := e.post(tok, map[string]any{"query": createMutation, "variables": createVars}, nil)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got a response %d %s, want a transport error", resp.StatusCode, body)
				}
				t.Logf("client error: %v", err)
			} else {
				if err != nil {
					t.Fatalf("transport error: %v", err)
				}
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("status = %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
				}
				if k := tt.wantHeader[0]; k != "" && resp.Header.Get(k) != tt.wantHeader[1] {
					t.Errorf("%s = %q, want %q", k, resp.Header.Get(k), tt.wantHeader[1])
				}
				if !strings.Contains(string(body), tt.wantBody) {
					t.Errorf("body = %s, want it to contain %s", body, tt.wantBody)
				}
			}
			if f.Kind == FaultLatency || f.Kind == FaultTimeoutAfterCommit && !tt.wantErr {
				if el := time.Since(start); el < f.Delay {
					t.Errorf("answered after %v, want at least %v", el, f.Delay)
				}
			}
			st := e.s.State()
			created := len(st.Companies[0].PayParts) == 1
			if created != tt.wantCreated {
				t.Fatalf("pay part created = %v, want %v", created, tt.wantCreated)
			}
			if executed := st.Counters.Requests["create_pay_parts"] == 1; executed != tt.wantCreated {
				t.Errorf("Requests = %v, want executed = %v", st.Counters.Requests, tt.wantCreated)
			}
			fired := st.Counters.Faults[f.Kind]
			if want := map[bool]int{true: 0, false: 1}[f.Op == "delete_pay_parts"]; fired != want {
				t.Errorf("Faults[%s] = %d, want %d", f.Kind, fired, want)
			}
			if f.Times == 1 {
				// Disarmed: the next request is served normally.
				if len(e.s.Faults()) != 0 {
					t.Errorf("faults left armed: %v", e.s.Faults())
				}
				e.hc.Timeout = 10 * time.Second
				if r := e.gql(tok, `{ current_company { id } }`, nil); len(r.Errors) > 0 {
					t.Errorf("after disarm: %+v", r.Errors)
				}
			}
		})
	}
}

func TestServer_FaultMatching(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()
	status := func(query, opName string) int {
		t.Helper()
		resp, _, err := e.post(tok, map[string]any{"query": query, "operationName": opName}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	e.s.SetFaults(Fault{Kind: FaultErrorBefore, Op: "pay_parts_meta", Times: 2})
	steps := []struct {
		query, opName string
		want          int
	}{
		{`{ companies { id } }`, "", 200},
		{`query M { m: pay_parts_meta { code } }`, "", 503},                            // alias seen through
		{`query A { companies { id } } query B { pay_parts_meta { code } }`, "A", 200}, // operationName chooses
		{`query A { companies { id } } query B { pay_parts_meta { code } }`, "B", 503}, // second and last time
		{`{ pay_parts_meta { code } }`, "", 200},                                       // disarmed
		{`query { ...F } fragment F on Query { pay_parts_meta { code } }`, "", 200},    // still disarmed
	}
	for i, s := range steps {
		if got := status(s.query, s.opName); got != s.want {
			t.Fatalf("step %d (%s): status %d, want %d", i, s.query, got, s.want)
		}
	}
	if got := e.s.State().Counters.Faults[FaultErrorBefore]; got != 2 {
		t.Errorf("fired %d times, want 2", got)
	}

	// Times=0 fires on every matching request; SetFaults() clears.
	e.s.SetFaults(Fault{Kind: FaultRateLimit})
	for range 3 {
		if got := status(`{ companies { id } }`, ""); got != 429 {
			t.Fatalf("status %d, want 429", got)
		}
	}
	e.s.SetFaults()
	if got := status(`{ companies { id } }`, ""); got != 200 {
		t.Fatalf("after clearing: %d", got)
	}
}

func TestServer_FaultWaitsEndOnClose(t *testing.T) {
	s := New(Options{Faults: []Fault{{Kind: FaultTimeoutAfterCommit, Delay: time.Minute}}})
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, s: s, base: base, hc: &http.Client{Timeout: 10 * time.Second}}
	tok := e.accessToken()
	done := make(chan error, 1)
	go func() {
		_, _, err := e.post(tok, map[string]any{"query": `{ companies { id } }`}, nil)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the request reach the wait
	ctx, cancel := contextWithTimeout(2 * time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("close took %v", el)
	}
	if err := <-done; err == nil {
		t.Error("request got a response; want the connection dropped by Close")
	}
}

func TestParseFault(t *testing.T) {
	tests := []struct {
		in      string
		want    Fault
		wantErr string
	}{
		{in: "drop_after_commit:create_pay_parts,times=1", want: Fault{Kind: FaultDropAfterCommit, Op: "create_pay_parts", Times: 1}},
		{in: "latency,delay=300ms", want: Fault{Kind: FaultLatency, Delay: 300 * time.Millisecond}},
		{in: "error_before:companies,status=500,times=2", want: Fault{Kind: FaultErrorBefore, Op: "companies", Status: 500, Times: 2}},
		{in: "rate_limit,retry_after=2s", want: Fault{Kind: FaultRateLimit, RetryAfter: 2 * time.Second}},
		{in: "timeout_after_commit:__schema,delay=1m", want: Fault{Kind: FaultTimeoutAfterCommit, Op: "__schema", Delay: time.Minute}},
		{in: "explode", wantErr: "unknown fault kind"},
		{in: "latency:create_pay_part", wantErr: "unknown op"},
		{in: "latency,delay=soon", wantErr: "delay"},
		{in: "latency,speed=1", wantErr: "unknown key"},
		{in: "latency,times", wantErr: "not key=value"},
		{in: "error_before,status=42", wantErr: "not an HTTP status"},
		{in: "error_before,times=-1", wantErr: "negative"},
		{in: "rate_limit:create_pay_parts,probability=0.3", want: Fault{Kind: FaultRateLimit, Op: "create_pay_parts", Probability: 0.3}},
		{in: "error_before,status=503,times=2,probability=1", want: Fault{Kind: FaultErrorBefore, Status: 503, Times: 2, Probability: 1}},
		{in: "latency,delay=10ms,probability=0.14285714285714285", want: Fault{Kind: FaultLatency, Delay: 10 * time.Millisecond, Probability: 0.1 / 0.7}},
		{in: "rate_limit,probability=1.5", wantErr: "probability"},
		{in: "rate_limit,probability=-0.1", wantErr: "probability"},
		{in: "rate_limit,probability=NaN", wantErr: "probability"},
		{in: "rate_limit,probability=often", wantErr: "probability"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFault(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseFault = %+v, %v; want %+v", got, err, tt.want)
			}
			again, err := ParseFault(got.String())
			if err != nil || again != got {
				t.Errorf("String round trip: %q -> %+v, %v", got.String(), again, err)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Fault
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Errorf("JSON round trip: %s -> %+v, %v", b, back, err)
			}
		})
	}
}

func TestFault_JSON(t *testing.T) {
	b, _ := json.Marshal([]Fault{{Kind: FaultLatency, Delay: 300 * time.Millisecond}})
	if want := `[{"kind":"latency","delay":"300ms"}]`; string(b) != want {
		t.Errorf("marshal = %s, want %s", b, want)
	}
	var fs []Fault
	if err := json.Unmarshal([]byte(`[{"kind":"rate_limit","retry_after":2000000000},{"kind":"latency","delay":"1s"}]`), &fs); err != nil {
		t.Fatal(err)
	}
	want := []Fault{{Kind: FaultRateLimit, RetryAfter: 2 * time.Second}, {Kind: FaultLatency, Delay: time.Second}}
	if !reflect.DeepEqual(fs, want) {
		t.Errorf("unmarshal = %+v", fs)
	}
	if err := json.Unmarshal([]byte(`{"kind":"latency","dealy":"1s"}`), &Fault{}); err == nil {
		t.Error("unknown field accepted")
	}
}

// fired runs takeFaults n times for op and counts the requests a
// non-latency fault answered, by kind.
func fired(s *Server, op string, n int) map[FaultKind]int {
	got := map[FaultKind]int{}
	for range n {
		if p := s.takeFaults(op); p.respond != nil {
			got[p.respond.Kind]++
		}
	}
	return got
}

func TestFault_Probability(t *testing.T) {
	const op = "create_pay_parts"
	f := Fault{Kind: FaultErrorBefore, Op: op, Probability: 0.3}
	s := New(Options{Seed: 42, Faults: []Fault{f}})
	n := fired(s, op, 1000)[FaultErrorBefore]
	if n < 230 || n > 370 {
		t.Errorf("p=0.3 fired %d of 1000, want 230..370", n)
	}
	if c := s.State().Counters.Faults[FaultErrorBefore]; c != n {
		t.Errorf("Counters.Faults = %d, want %d", c, n)
	}
	if got := fired(s, "companies", 100); len(got) != 0 {
		t.Errorf("other op: fired %v", got)
	}

	// Same seed, same draws; SetFaults restarts the source.
	again := fired(New(Options{Seed: 42, Faults: []Fault{f}}), op, 1000)[FaultErrorBefore]
	s.SetFaults(f)
	restarted := fired(s, op, 1000)[FaultErrorBefore]
	if again != n || restarted != n {
		t.Errorf("seed 42 fired %d, then %d in a new server and %d after SetFaults", n, again, restarted)
	}
	// The default seed is 1.
	if o := New(Options{}).Options(); o.Seed != 1 {
		t.Errorf("default Seed = %d, want 1", o.Seed)
	}
	if a, b := fired(New(Options{Faults: []Fault{f}}), op, 1000), fired(New(Options{Seed: 1, Faults: []Fault{f}}), op, 1000); a[FaultErrorBefore] != b[FaultErrorBefore] {
		t.Errorf("Seed 0 fired %d, Seed 1 fired %d", a[FaultErrorBefore], b[FaultErrorBefore])
	}

	t.Run("p=1 always", func(t *testing.T) {
		s := New(Options{Faults: []Fault{{Kind: FaultRateLimit, Probability: 1}}})
		if n := fired(s, op, 1000)[FaultRateLimit]; n != 1000 {
			t.Errorf("p=1 fired %d of 1000", n)
		}
	})

	t.Run("latency draws on its own", func(t *testing.T) {
		s := New(Options{Faults: []Fault{{Kind: FaultLatency, Delay: time.Millisecond, Probability: 0.5}}})
		var n int
		for range 1000 {
			if p := s.takeFaults(op); p.delay > 0 {
				n++
			}
		}
		if n < 400 || n > 600 {
			t.Errorf("latency p=0.5 fired %d of 1000", n)
		}
	})

	t.Run("times counts only firing", func(t *testing.T) {
		s := New(Options{Seed: 7, Faults: []Fault{{Kind: FaultRateLimit, Op: op, Times: 5, Probability: 0.3}}})
		var n, requests int
		for len(s.Faults()) > 0 {
			before := s.Faults()[0].Times
			requests++
			fire := s.takeFaults(op).respond != nil
			if fire {
				n++
			}
			left := 0
			if fs := s.Faults(); len(fs) > 0 {
				left = fs[0].Times
			}
			if want := before - map[bool]int{true: 1, false: 0}[fire]; left != want {
				t.Fatalf("request %d: fired %v, Times %d -> %d, want %d", requests, fire, before, left, want)
			}
			if requests > 10000 {
				t.Fatal("never disarmed")
			}
		}
		if n != 5 {
			t.Errorf("fired %d times, want 5", n)
		}
		if requests <= 5 {
			t.Errorf("disarmed after %d requests; p=0.3 should have skipped some", requests)
		}
		if got := fired(s, op, 100); len(got) != 0 {
			t.Errorf("after disarm: fired %v", got)
		}
	})

	t.Run("exact shares", func(t *testing.T) {
		// The Fault doc's recipe: 30% / 10% / 10%, the rest served.
		s := New(Options{Seed: 3, Faults: []Fault{
			{Kind: FaultDropAfterCommit, Op: op, Probability: 0.3},
			{Kind: FaultErrorBefore, Op: op, Status: 503, Probability: 0.1 / 0.7},
			{Kind: FaultRateLimit, Op: op, Probability: 0.1 / 0.6},
		}})
		const n = 20000
		got := fired(s, op, n)
		for kind, share := range map[FaultKind]float64{FaultDropAfterCommit: 0.3, FaultErrorBefore: 0.1, FaultRateLimit: 0.1} {
			if f := float64(got[kind]) / n; f < share-0.02 || f > share+0.02 {
				t.Errorf("%s: share %.3f, want %.2f±0.02 (%v)", kind, f, share, got)
			}
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		s := New(Options{Faults: []Fault{{Kind: FaultErrorBefore, Probability: 0.3}, {Kind: FaultLatency, Probability: 0.5}}})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { fired(s, op, 200) })
		}
		wg.Go(func() {
			for range 20 {
				s.SetFaults(Fault{Kind: FaultRateLimit, Probability: 0.5})
			}
		})
		wg.Wait()
	})
}

func TestFault_ProbabilityJSON(t *testing.T) {
	in := []Fault{{Kind: FaultRateLimit, Op: "create_pay_parts", Times: 3, Probability: 0.3}, {Kind: FaultLatency, Delay: time.Second, Probability: 0.1 / 0.7}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"kind":"rate_limit","op":"create_pay_parts","times":3,"probability":0.3},{"kind":"latency","delay":"1s","probability":0.14285714285714285}]`; string(b) != want {
		t.Errorf("marshal = %s, want %s", b, want)
	}
	var back []Fault
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, in) {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	for _, f := range in {
		if again, err := ParseFault(f.String()); err != nil || again != f {
			t.Errorf("String round trip: %q -> %+v, %v", f.String(), again, err)
		}
	}
	for _, p := range []float64{1.5, -0.1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetFaults with probability %v did not panic", p)
				}
			}()
			New(Options{}).SetFaults(Fault{Kind: FaultRateLimit, Probability: p})
		}()
	}
}

// TestServer_FaultProbabilityHTTP goes through /graphql and PUT
// /_sandbox/faults: a seeded run gives the same statuses twice.
func TestServer_FaultProbabilityHTTP(t *testing.T) {
	e := newEnv(t, Options{Seed: 99})
	tok := e.accessToken()
	put := func(body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, e.base+"/_sandbox/faults", strings.NewReader(body))
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{`[{"kind":"rate_limit","probability":1.5}]`, `[{"kind":"rate_limit","probability":-0.1}]`} {
		if st := put(bad); st != http.StatusBadRequest {
			t.Errorf("PUT %s: %d, want 400", bad, st)
		}
	}
	run := func() string {
		t.Helper()
		if st := put(`[{"kind":"rate_limit","op":"companies","probability":0.3}]`); st != http.StatusOK {
			t.Fatalf("PUT faults: %d", st)
		}
		var b strings.Builder
		for range 300 {
			resp, _, err := e.post(tok, map[string]any{"query": `{ companies { id } }`}, nil)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%d ", resp.StatusCode)
		}
		return b.String()
	}
	first := run()
	if n := strings.Count(first, "429"); n < 60 || n > 120 {
		t.Errorf("429 on %d of 300 requests, want about 90", n)
	}
	if strings.Count(first, "200")+strings.Count(first, "429") != 300 {
		t.Errorf("unexpected statuses: %s", first)
	}
	if second := run(); second != first {
		t.Errorf("same seed, different statuses:\n%s\n%s", first, second)
	}
}
