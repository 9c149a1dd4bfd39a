package main

// Start-up through payroll faults: the reads a command cannot start
// without (the schema probe, the current company, recovery, the token
// refresh) wait out transient failures. The daemon stays up and not ready
// (/readyz says what it waits for) until payroll answers, also through a
// revoked connection; an import waits PAYSYNC_STARTUP_TIMEOUT at most.
//
//	go test -race -run 'TestDaemon_Start|TestImport_Startup' ./cmd/paysync/

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
)

// flakyPayroll stands between paysync and the sandbox. Its mode says what
// it answers itself instead of forwarding: "down" every request (the
// token endpoint too) with HTTP 500, "throttled" every GraphQL request
// with 429 and Retry-After: 1; "" forwards everything.
type flakyPayroll struct {
	url     string
	mode    atomic.Value // string
	refused atomic.Int64 // GraphQL requests answered with a failure
}

func newFlakyPayroll(t *testing.T, sandboxURL string) *flakyPayroll {
	t.Helper()
	target, err := url.Parse(sandboxURL)
	if err != nil {
		t.Fatal(err)
	}
	fp := &flakyPayroll{}
	fp.mode.Store("")
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gql := strings.HasSuffix(r.URL.Path, "/graphql")
		switch mode := fp.mode.Load().(string); {
		case mode == "down":
			if gql {
				fp.refused.Add(1)
			}
			http.Error(w, "upstream unavailable", http.StatusInternalServerError)
		case mode == "throttled" && gql:
			fp.refused.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	fp.url = srv.URL
	return fp
}

func (fp *flakyPayroll) set(mode string) { fp.mode.Store(mode) }

// waitNotReady polls /readyz until it answers 503 with a line containing
// want; the process must stay up meanwhile.
func waitNotReady(t *testing.T, p *daemonProc, want string) {
	t.Helper()
	var last string
	waitFor(t, "/readyz: 503 "+want, 60*time.Second, func() bool {
		if p.exited() {
			t.Fatalf("paysync run ended while payroll failed: %s (want it up, not ready)\n%s", p.exitDesc(), p.errb.String())
		}
		code, body := httpGet("http://" + p.addr + "/readyz")
		last = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, want)
	})
	t.Logf("/readyz: %s", strings.TrimSpace(last))
}

func waitReady(t *testing.T, p *daemonProc) {
	t.Helper()
	waitFor(t, "/readyz 200", 60*time.Second, func() bool {
		if p.exited() {
			t.Fatalf("paysync run ended: %s\n%s", p.exitDesc(), p.errb.String())
		}
		code, _ := httpGet("http://" + p.addr + "/readyz")
		return code == http.StatusOK
	})
}

// logLines counts the JSON log lines whose msg starts with prefix.
func logLines(stderr, prefix string) int {
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		var rec struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && strings.HasPrefix(rec.Msg, prefix) {
			n++
		}
	}
	return n
}

// The daemon started while the payroll API fails everything (first HTTP
// 500 from the token endpoint and GraphQL alike, then 429 from GraphQL)
// stays up and not ready, /readyz naming what it waits for and why, with
// one log line per kind of failure; once the API recovers it becomes ready
// and delivers every entry exactly once (for the inbox, files dropped
// while payroll was down).
func TestDaemon_StartsWhilePayrollDown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	for _, drv := range sourceDrivers {
		t.Run(drv.name, func(t *testing.T) {
			h := newDaemonHarness(t, drv.new(t), "startdown-"+drv.name)
			fp := newFlakyPayroll(t, h.env["PAYSYNC_PAYROLL_URL"])
			h.env["PAYSYNC_PAYROLL_URL"], h.env["PAYSYNC_AUTH_URL"] = fp.url, fp.url
			fp.set("down")
			p := h.launch(t)
			entries := daemonEntries(h.prefix, 150)
			// The NATS stream is made by paysync run once it can map
			// messages: publish after the outage. Inbox files can wait.
			early := drv.name == "inbox"
			if early {
				h.drv.feed(t, entries)
			}

			waitNotReady(t, p, "payroll: waiting for the schema probe: token endpoint answered HTTP 500")
			fp.set("throttled")
			from := fp.refused.Load()
			waitNotReady(t, p, "payroll: waiting for the schema probe: rate limited (HTTP 429)")
			waitFor(t, "three throttled schema probes", 60*time.Second, func() bool { return fp.refused.Load()-from >= 3 })
			if code, _ := httpGet("http://" + p.addr + "/healthz"); code != http.StatusOK {
				t.Errorf("/healthz while payroll is down: %d, want 200 (the process is fine)", code)
			}
			if n := h.payroll(); n != 0 {
				t.Fatalf("payroll holds %d pay parts before it answered", n)
			}

			fp.set("")
			if !early {
				waitReady(t, p)
				h.drv.feed(t, entries)
			}
			h.finish(t, entries, 90*time.Second)
			waitReady(t, p)
			p.stop(t)
			h.checkLedger(t, len(entries))
			if parked := h.drv.parked(t); len(parked) != 0 {
				t.Errorf("parked %d input(s) because payroll was down: %v", len(parked), parked)
			}
			// One line per kind of failure (the 500s, the 429s), not per try.
			if n := logLines(p.errb.String(), "payroll: waiting"); n != 2 {
				t.Errorf("%d 'payroll: waiting' log lines over %d refused probes, want 2 (one per kind of failure)\n%s", n, fp.refused.Load(), p.errb.String())
			}
			if testing.Verbose() {
				t.Logf("paysync run's log:\n%s", p.errb.String())
			}
		})
	}
}

// The daemon started with a revoked connection stays up, not ready,
// /readyz naming the revoked connection; nothing is parked. An operator
// saves a new token into the ledger (paysync auth password --save) and the
// running daemon picks it up, without a restart, and delivers.
func TestDaemon_StartsRevokedWaitsForReconnect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	h := newDaemonHarness(t, newInboxDriver(t), "startrevoked")
	h.sb.RevokeAll() // PAYSYNC_REFRESH_TOKEN is dead
	p := h.launch(t)
	entries := daemonEntries(h.prefix, 120)
	h.drv.feed(t, entries)
	waitNotReady(t, p, "connection revoked")
	time.Sleep(1500 * time.Millisecond) // a poll or two of the inbox
	if parked := h.drv.parked(t); len(parked) != 0 {
		t.Fatalf("parked %d input(s) because the connection was revoked: %v", len(parked), parked)
	}

	r := runBinary(t, with(h.env, "PAYSYNC_PASSWORD", h.sb.Options().Password), "auth", "password", "--username", h.sb.Options().Username, "--save")
	if r.code != 0 {
		t.Fatalf("auth password --save: exit %d\n%s", r.code, r.stderr)
	}
	h.finish(t, entries, 90*time.Second)
	waitReady(t, p)
	p.stop(t)
	h.checkLedger(t, len(entries))
	if parked := h.drv.parked(t); len(parked) != 0 {
		t.Errorf("parked %d input(s): %v", len(parked), parked)
	}
	if n := logLines(p.errb.String(), "payroll: no working token"); n != 1 {
		t.Errorf("%d 'payroll: no working token' log lines, want 1 (once, not per try)\n%s", n, p.errb.String())
	}
}

// importEnv is a sandbox, a ledger and an NDJSON file of n entries.
func importEnv(t *testing.T, n int) (sandboxEnv, map[string]string, string, []paysync.Entry) {
	t.Helper()
	s := startSandbox(t, sandbox.Options{})
	dir := t.TempDir()
	entries := daemonEntries("startup-import", n)
	var b bytes.Buffer
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	file := filepath.Join(dir, "entries.ndjson")
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(dir, "ledger.db"), "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys)
	return s, env, file, entries
}

// A short burst of 429 on the schema probe is waited out: the import
// goes through, saying what it waited for.
func TestImport_StartupSurvivesRateLimitBurst(t *testing.T) {
	s, env, file, _ := importEnv(t, 8)
	s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "__schema", Times: 3, RetryAfter: time.Second})
	r := runInProcess(t, env, "import", "--no-aggregate", file)
	t.Logf("exit %d\n%s", r.code, r.stderr)
	if r.code != 0 {
		t.Fatalf("import with 3 × 429 on the schema probe: exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := s.sb.PayPartCount(); got != 8 {
		t.Errorf("payroll holds %d pay parts, want 8", got)
	}
	if !strings.Contains(r.stderr, "waiting for the schema probe: rate limited (HTTP 429)") {
		t.Errorf("stderr does not say what the import waited for:\n%s", r.stderr)
	}
	if n := strings.Count(r.stderr, "waiting for"); n != 1 {
		t.Errorf("%d 'waiting for' lines for one kind of failure, want 1:\n%s", n, r.stderr)
	}
	assertClean(t, r, env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"])
}

// Payroll down for longer than PAYSYNC_STARTUP_TIMEOUT: the import gives
// up after about that long with an error naming what it waited for, why,
// and the setting; nothing was read or sent.
func TestImport_StartupGivesUpAfterTimeout(t *testing.T) {
	s, env, file, _ := importEnv(t, 8)
	s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Status: http.StatusInternalServerError})
	env = with(env, "PAYSYNC_STARTUP_TIMEOUT", "3s")
	start := time.Now()
	r := runInProcess(t, env, "import", file)
	took := time.Since(start)
	t.Logf("after %s: exit %d\n%s", took.Round(time.Millisecond), r.code, r.stderr)
	if r.code != 1 {
		t.Fatalf("import with payroll down: exit %d, want 1\nstderr: %s", r.code, r.stderr)
	}
	for _, want := range []string{"gave up waiting for the schema probe", "server error (HTTP 500)", "PAYSYNC_STARTUP_TIMEOUT=3s"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
		}
	}
	if took < 2*time.Second || took > 30*time.Second {
		t.Errorf("gave up after %s, want about PAYSYNC_STARTUP_TIMEOUT (3s)", took.Round(time.Millisecond))
	}
	if m := regexp.MustCompile(`\((\d+) attempts\)`).FindStringSubmatch(r.stderr); m == nil || m[1] == "1" {
		t.Errorf("stderr does not say the probe was tried more than once:\n%s", r.stderr)
	}
	if got := s.sb.PayPartCount(); got != 0 {
		t.Errorf("payroll holds %d pay parts", got)
	}
	assertClean(t, r, env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"])
}

// In this process (under the race detector when the tests run with
// -race): a daemon waiting for payroll stops cleanly and at once on a
// signal, sending nothing; started again, it waits, then delivers once
// payroll answers.
func TestRun_StartupWaitInProcess(t *testing.T) {
	h := newDaemonHarness(t, newInboxDriver(t), "startinproc")
	fp := newFlakyPayroll(t, h.env["PAYSYNC_PAYROLL_URL"])
	addr := freeAddr(t)
	env := with(h.env, "PAYSYNC_PAYROLL_URL", fp.url, "PAYSYNC_AUTH_URL", fp.url, "PAYSYNC_HTTP_ADDR", addr)
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	start := func() (cancel func(), done chan int, errb *lockedBuffer) {
		ctx, cancel := context.WithCancel(context.Background())
		done, errb = make(chan int, 1), &lockedBuffer{}
		go func() {
			done <- run(ctx, []string{"run"}, stdio{in: strings.NewReader(""), out: &lockedBuffer{}, err: errb}, lookup)
		}()
		return cancel, done, errb
	}
	notReady := func(done chan int, errb *lockedBuffer) {
		t.Helper()
		waitFor(t, "/readyz: waiting for the schema probe", 60*time.Second, func() bool {
			select {
			case code := <-done:
				t.Fatalf("paysync run ended (exit %d) while payroll was down\n%s", code, errb.String())
			default:
			}
			code, body := httpGet("http://" + addr + "/readyz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "payroll: waiting for the schema probe: ")
		})
	}
	stop := func(cancel func(), done chan int, errb *lockedBuffer) {
		t.Helper()
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("paysync run after the signal: exit %d, want 0\n%s", code, errb.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("paysync run did not stop within 20 s of the signal\n%s", errb.String())
		}
	}

	fp.set("throttled")
	cancel, done, errb := start()
	notReady(done, errb)
	stop(cancel, done, errb)
	if n := h.payroll(); n != 0 {
		t.Fatalf("payroll holds %d pay parts", n)
	}

	entries := daemonEntries(h.prefix, 40)
	h.drv.feed(t, entries)
	cancel, done, errb = start()
	notReady(done, errb)
	fp.set("")
	waitFor(t, "/readyz 200", 60*time.Second, func() bool { c, _ := httpGet("http://" + addr + "/readyz"); return c == http.StatusOK })
	h.finish(t, entries, 60*time.Second)
	stop(cancel, done, errb)
	h.checkLedger(t, len(entries))
}

// The other operator commands wait out a short burst of 429s at start the
// same way: the dry run, revert and replay. A longer burst later, on the
// read of payroll's pay parts before a revert's delete, may stop the
// revert; run again, it finishes: nothing is left, nothing deleted twice.
func TestCommands_StartupSurviveRateLimitBurst(t *testing.T) {
	s, env, file, _ := importEnv(t, 8)
	if r := runInProcess(t, env, "import", "--no-aggregate", file); r.code != 0 {
		t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
	}
	steps := []struct {
		name  string
		fault sandbox.Fault
		args  []string
		want  int // pay parts in payroll after it
	}{
		{"dry run", sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "__schema", Times: 2, RetryAfter: time.Second}, []string{"import", "--dry-run", file}, 8},
		{"revert", sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "__schema", Times: 2, RetryAfter: time.Second}, []string{"revert", "--import", "1", "--yes"}, 0},
		// The replay maps with the rules, which sum per employee: 4.
		{"replay", sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "__schema", Times: 2, RetryAfter: time.Second}, []string{"replay", "--import", "1", "--yes"}, 4},
	}
	for _, st := range steps {
		s.sb.SetFaults(st.fault)
		r := runInProcess(t, env, st.args...)
		if r.code != 0 {
			t.Fatalf("%s with 2 × 429 at start: exit %d, want 0\nstdout: %s\nstderr: %s", st.name, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "rate limited (HTTP 429)") {
			t.Errorf("%s: stderr does not say what it waited for:\n%s", st.name, r.stderr)
		}
		if got := s.sb.PayPartCount(); got != st.want {
			t.Errorf("after %s: payroll holds %d pay parts, want %d", st.name, got, st.want)
		}
	}

	// More 429s than the client's own retries of a read, on the reads of
	// payroll's pay parts a revert's delete makes.
	deletes := s.sb.State().Counters.Requests["delete_pay_parts"]
	s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "pay_parts", Times: 5, RetryAfter: time.Second})
	r := runInProcess(t, env, "revert", "--import", "1", "--yes")
	s.sb.SetFaults()
	if r.code != 0 {
		if !strings.Contains(r.stderr, "rate limited (HTTP 429)") {
			t.Errorf("revert stopped by 5 × 429: exit %d without saying why:\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if r := runInProcess(t, env, "revert", "--import", "1", "--yes"); r.code != 0 {
			t.Fatalf("revert run again: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	}
	if got := s.sb.PayPartCount(); got != 0 {
		t.Errorf("after the revert: payroll holds %d pay parts, want 0", got)
	}
	if n := s.sb.State().Counters.Requests["delete_pay_parts"] - deletes; n < 1 {
		t.Errorf("the revert made %d delete_pay_parts calls", n)
	}
}
