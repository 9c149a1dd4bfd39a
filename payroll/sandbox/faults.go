package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FaultKind names a misbehaviour the sandbox can inject on /graphql.
type FaultKind string

// The fault kinds. The *_after_commit kinds execute the request (so a
// mutation is committed) and then misbehave, which is what makes a client
// unsure whether its write happened.
const (
	FaultLatency               FaultKind = "latency"                  // sleep Delay (context-aware) before handling, then handle normally
	FaultErrorBefore           FaultKind = "error_before"             // respond Status (default 503, with Retry-After when RetryAfter is set) WITHOUT executing
	FaultRateLimit             FaultKind = "rate_limit"               // respond 429 with Retry-After (RetryAfter in whole seconds, default 1) WITHOUT executing
	FaultUnauthorized          FaultKind = "unauthorized"             // respond 401 as for an expired token WITHOUT executing, even with a valid token
	FaultDropAfterCommit       FaultKind = "drop_after_commit"        // execute, then close the connection without writing anything
	FaultBadGatewayAfterCommit FaultKind = "bad_gateway_after_commit" // execute, then respond 502 with an HTML body like a proxy
	FaultTimeoutAfterCommit    FaultKind = "timeout_after_commit"     // execute, then wait Delay (default 30s) or until the client goes away before writing the real response
)

// faultKinds lists the kinds in documentation order.
var faultKinds = []FaultKind{
	FaultLatency, FaultErrorBefore, FaultRateLimit, FaultUnauthorized,
	FaultDropAfterCommit, FaultBadGatewayAfterCommit, FaultTimeoutAfterCommit,
}

// faultOps lists the root fields a fault may be limited to.
var faultOps = []string{
	"companies", "pay_parts", "pay_parts_meta", "current_company",
	"create_pay_parts", "delete_pay_parts", "__schema", "__type",
}

// defaultTimeoutDelay is how long timeout_after_commit holds the response
// when the fault gives no Delay: longer than any sane client timeout.
const defaultTimeoutDelay = 30 * time.Second

// Fault is one armed misbehaviour. In JSON, Delay and RetryAfter are
// duration strings ("300ms"); numbers are read as nanoseconds.
//
// With Probability p > 0 a matching request fires the fault only with
// probability p (0 < p <= 1; 0 means always). Times counts only the
// requests on which the fault fired. The draws come from a PCG source
// seeded with Options.Seed, restarted each time the fault list is set
// (New, SetFaults, PUT /_sandbox/faults), so a test that sends the same
// requests in the same order sees the same faults.
//
// Several faults combine as without probabilities: every latency fault
// draws and fires on its own, and of the other kinds only the first one
// (in list order) that fires applies; the ones after it do not draw. So
// the probability of a later fault applies only to the requests the
// earlier ones let through. To give non-latency faults the exact shares
// s1, s2, s3, ... of the matching requests, set
//
//	p1 = s1, p2 = s2/(1-s1), p3 = s3/(1-s1-s2), ...
//
// For example, for 30% dropped after commit, 10% 503 and 10% 429, and the
// other 50% served normally, set p = 0.3, 0.1/0.7 and 0.1/0.6:
//
//	drop_after_commit:create_pay_parts,probability=0.3
//	error_before:create_pay_parts,status=503,probability=0.14285714285714285
//	rate_limit:create_pay_parts,probability=0.16666666666666666
//
// whereas p = 0.3, 0.1, 0.1 would give 30%, 7% and 6.3%.
//
// The shares hold while all the faults stay armed: when one with Times
// runs out, the ones after it see more requests.
type Fault struct {
	Kind        FaultKind     `json:"kind"`
	Op          string        `json:"op,omitempty"`    // root field to match; "" matches every /graphql request
	Times       int           `json:"times,omitempty"` // fire on the next Times matching requests, then disarm; 0 = every matching request
	Delay       time.Duration `json:"delay,omitempty"`
	Status      int           `json:"status,omitempty"`
	RetryAfter  time.Duration `json:"retry_after,omitempty"`
	Probability float64       `json:"probability,omitempty"` // fire on a matching request with this probability, 0 < p <= 1; 0 = always
}

// ParseFault parses the CLI syntax
// "kind[:op][,times=N][,delay=300ms][,status=503][,retry_after=2s][,probability=0.3]",
// for example "drop_after_commit:create_pay_parts,times=1".
func ParseFault(s string) (Fault, error) {
	head, rest, _ := strings.Cut(strings.TrimSpace(s), ",")
	kind, op, _ := strings.Cut(head, ":")
	f := Fault{Kind: FaultKind(strings.TrimSpace(kind)), Op: strings.TrimSpace(op)}
	if rest != "" {
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return Fault{}, fmt.Errorf("parse fault %q: %q is not key=value", s, kv)
			}
			var err error
			switch k {
			case "times":
				f.Times, err = strconv.Atoi(v)
			case "delay":
				f.Delay, err = time.ParseDuration(v)
			case "status":
				f.Status, err = strconv.Atoi(v)
			case "retry_after":
				f.RetryAfter, err = time.ParseDuration(v)
			case "probability":
				f.Probability, err = strconv.ParseFloat(v, 64)
			default:
				return Fault{}, fmt.Errorf("parse fault %q: unknown key %q (want times, delay, status, retry_after or probability)", s, k)
			}
			if err != nil {
				return Fault{}, fmt.Errorf("parse fault %q: %s: %w", s, k, err)
			}
		}
	}
	if err := f.validate(); err != nil {
		return Fault{}, fmt.Errorf("parse fault %q: %w", s, err)
	}
	return f, nil
}

// String renders f in the syntax ParseFault reads.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Op != "" {
		b.WriteString(":" + f.Op)
	}
	if f.Times != 0 {
		fmt.Fprintf(&b, ",times=%d", f.Times)
	}
	if f.Delay != 0 {
		fmt.Fprintf(&b, ",delay=%s", f.Delay)
	}
	if f.Status != 0 {
		fmt.Fprintf(&b, ",status=%d", f.Status)
	}
	if f.RetryAfter != 0 {
		fmt.Fprintf(&b, ",retry_after=%s", f.RetryAfter)
	}
	if f.Probability != 0 {
		b.WriteString(",probability=" + strconv.FormatFloat(f.Probability, 'g', -1, 64))
	}
	return b.String()
}

func (f Fault) validate() error {
	switch {
	case !slices.Contains(faultKinds, f.Kind):
		return fmt.Errorf("unknown fault kind %q (want one of %v)", f.Kind, faultKinds)
	case f.Op != "" && !slices.Contains(faultOps, f.Op):
		return fmt.Errorf("unknown op %q (want one of %v, or empty for all)", f.Op, faultOps)
	case f.Times < 0:
		return fmt.Errorf("times %d is negative", f.Times)
	case f.Delay < 0 || f.RetryAfter < 0:
		return fmt.Errorf("negative duration")
	case f.Status != 0 && (f.Status < 100 || f.Status > 599):
		return fmt.Errorf("status %d is not an HTTP status", f.Status)
	case !(f.Probability >= 0 && f.Probability <= 1): // also rejects NaN
		return fmt.Errorf("probability %v is not in (0, 1] (or 0 for always)", f.Probability)
	}
	return nil
}

// faultJSON is Fault with durations as strings.
type faultJSON struct {
	Kind        FaultKind    `json:"kind"`
	Op          string       `json:"op,omitempty"`
	Times       int          `json:"times,omitempty"`
	Delay       jsonDuration `json:"delay,omitempty"`
	Status      int          `json:"status,omitempty"`
	RetryAfter  jsonDuration `json:"retry_after,omitempty"`
	Probability float64      `json:"probability,omitempty"`
}

// MarshalJSON writes durations as strings such as "300ms".
func (f Fault) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultJSON{f.Kind, f.Op, f.Times, jsonDuration(f.Delay), f.Status, jsonDuration(f.RetryAfter), f.Probability})
}

// UnmarshalJSON reads durations as strings ("2s") or nanoseconds.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a typo such as "dealy" must not pass silently
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	*f = Fault{
		Kind: j.Kind, Op: j.Op, Times: j.Times, Delay: time.Duration(j.Delay),
		Status: j.Status, RetryAfter: time.Duration(j.RetryAfter), Probability: j.Probability,
	}
	return nil
}

type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var ns int64
		if err := json.Unmarshal(b, &ns); err != nil {
			return fmt.Errorf("duration: want a string like \"300ms\" or nanoseconds, got %s", b)
		}
		*d = jsonDuration(ns)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = jsonDuration(v)
	return nil
}

func mustValidFaults(fs []Fault) []Fault {
	for _, f := range fs {
		if err := f.validate(); err != nil {
			panic(fmt.Sprintf("sandbox: fault %v: %v", f, err))
		}
	}
	return slices.Clone(fs)
}

// SetFaults replaces the fault list and restarts the random source for
// Fault.Probability from Options.Seed. It panics on an invalid fault, as
// that is a mistake in the test that sets it.
func (s *Server) SetFaults(f ...Fault) {
	fs := mustValidFaults(f)
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.faults = fs
	s.rng = newFaultRand(s.opts.Seed)
}

// newFaultRand returns the source of Fault.Probability draws.
func newFaultRand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0))
}

// draw reports whether f fires on a matching request, by its
// Probability. The caller holds cmu.
func (s *Server) draw(f Fault) bool {
	if f.Probability == 0 || f.Probability >= 1 {
		return true // no draw, so p=1 does not shift the others' draws
	}
	return s.rng.Float64() < f.Probability
}

// Faults returns the armed faults, with the Times they have left.
func (s *Server) Faults() []Fault {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return slices.Clone(s.faults)
}

// faultPlan is what the armed faults do to one request.
type faultPlan struct {
	delay time.Duration // latency faults, summed
	// respond is the one fault that replaces the response: before
	// execution (error_before, rate_limit, unauthorized) or after it.
	respond *Fault
}

func (k FaultKind) afterCommit() bool {
	return k == FaultDropAfterCommit || k == FaultBadGatewayAfterCommit || k == FaultTimeoutAfterCommit
}

// takeFaults fires the faults matching op: every latency fault, and the
// first fault (in list order) of the other kinds, each only if its
// Probability draw passes; a non-latency fault after the one that fired
// does not draw. It counts the fired faults and disarms those whose Times
// run out.
func (s *Server) takeFaults(op string) faultPlan {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	var plan faultPlan
	kept := s.faults[:0]
	for _, f := range s.faults {
		fire := f.Op == "" || f.Op == op
		if fire {
			switch {
			case f.Kind == FaultLatency:
				if fire = s.draw(f); fire {
					plan.delay += f.Delay
				}
			case plan.respond == nil:
				if fire = s.draw(f); fire {
					g := f
					plan.respond = &g
				}
			default:
				fire = false
			}
		}
		if fire {
			s.counters.Faults[f.Kind]++
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					continue // disarmed
				}
			}
		}
		kept = append(kept, f)
	}
	clear(s.faults[len(kept):])
	s.faults = kept
	return plan
}

// respondBefore serves a fault that answers without executing.
func (s *Server) respondBefore(w http.ResponseWriter, f Fault) {
	switch f.Kind {
	case FaultUnauthorized:
		s.unauthorized(w)
	case FaultRateLimit:
		ra := f.RetryAfter
		if ra <= 0 {
			ra = time.Second
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ra.Seconds()))))
		writeJSON(w, http.StatusTooManyRequests, graphQLErrors("rate limit exceeded"))
	default: // FaultErrorBefore
		status := f.Status
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		if f.RetryAfter > 0 { // a 503 during maintenance says when to come back
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds()))))
		}
		writeJSON(w, status, graphQLErrors(fmt.Sprintf("sandbox: injected fault: %d %s", status, http.StatusText(status))))
	}
}

const badGatewayHTML = "<html><body><h1>502 Bad Gateway</h1></body></html>\n"

// respondAfter serves a fault after the request was executed; body is the
// real response. It reports whether it wrote nothing, so the caller
// writes the real response.
func (s *Server) respondAfter(w http.ResponseWriter, r *http.Request, f Fault) (writeReal bool) {
	switch f.Kind {
	case FaultDropAfterCommit:
		dropConnection(w)
		return false
	case FaultBadGatewayAfterCommit:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(badGatewayHTML))
		return false
	default: // FaultTimeoutAfterCommit
		d := f.Delay
		if d <= 0 {
			d = defaultTimeoutDelay
		}
		if !s.wait(r, d) {
			dropConnection(w) // the client left or the server is closing
			return false
		}
		return true
	}
}

// dropConnection closes the client's connection without a response.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// HTTP/2 or a wrapped writer: abort the response instead.
	panic(http.ErrAbortHandler)
}

// wait sleeps for d, and reports false if the client went away or the
// server is closing first.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closing:
		return false
	}
}
