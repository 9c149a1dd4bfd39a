package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/metrics"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// fakeClock is the pipeline's clock in these tests: time moves only when
// the test says so, so backoff is asserted by counting, never by sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuf captures a JSON slog stream for counting lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the records at level (and, when msg is not empty, with
// that message).
func (l *logBuf) lines(t *testing.T, level, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == level && (msg == "" || rec["msg"] == msg) {
			out = append(out, rec)
		}
	}
	return out
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// counter reads a counter of a vector (0 when the series does not exist).
func counter(t *testing.T, v *prometheus.CounterVec, label string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(label).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// wire connects a deliverer to the metrics as paysync run does.
func wire(d *worker.Deliverer, m *metrics.Metrics) {
	d.OnBatch, d.OnPayParts = m.ObserveBatch, m.ObservePayParts
}

// createAttempts counts the create_pay_parts calls the sandbox saw,
// those a rate_limit fault answered included.
func (e *env) createAttempts() int {
	st := e.sb.State()
	return st.Counters.Requests["create_pay_parts"] + st.Counters.Faults[sandbox.FaultRateLimit]
}

// oneBatch commits five pay parts in one sealed batch and returns its id.
func oneBatch(t *testing.T, e *env, name string) int64 {
	t.Helper()
	rep, err := e.importer(t, nil, 10).Plan(ctx(t), "file", name+".ndjson", ndjson(5, name))
	if err != nil || len(rep.Batches) != 1 {
		t.Fatalf("plan: %v, batches %v", err, rep.Batches)
	}
	return rep.Batches[0]
}

func batchState(t *testing.T, e *env, id int64) paysync.BatchState {
	t.Helper()
	b, err := e.led.Batch(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return b.State
}

// Item 7 of issue 13: a batch that ran out of attempts was retried on
// every look of the sending loop, at once, ignoring Retry-After; every
// retry logged a warning and counted as another failed batch. A failed
// batch now backs off (capped exponential with jitter, never before
// Retry-After), is reported once when it fails and once when it recovers,
// and counts once in paysync_batches_total{outcome="failed"}.
//
// Each iteration is one look of the loop (Flush) followed by a second of
// the pipeline's clock.
func TestPipeline_FailedBatchBacksOff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		looks      int // one a second
		minRetries int // retries of the failed batch over the looks
		maxRetries int
		recoverBy  time.Duration // after the looks, the retry is due within this
	}{
		// The first retry comes 15–30 s after the failure, the next
		// 30–60 s after that: over 60 s, one or two.
		{name: "short Retry-After", retryAfter: time.Second, looks: 60, minRetries: 1, maxRetries: 2, recoverBy: 10 * time.Minute},
		// Retry-After longer than the backoff: nothing before it.
		{name: "long Retry-After", retryAfter: 2 * time.Minute, looks: 110, minRetries: 0, maxRetries: 0, recoverBy: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, sandbox.Options{})
			id := oneBatch(t, e, "storm")
			e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: tc.retryAfter})
			var logs logBuf
			m := metrics.New(metrics.Funcs{})
			clock := newClock()
			var mu sync.Mutex
			var slept []time.Duration
			d := &worker.Deliverer{L: e.led, P: e.cl, MaxAttempts: 8, Log: logs.logger(),
				Sleep: func(ctx context.Context, d time.Duration) error {
					mu.Lock()
					slept = append(slept, d)
					mu.Unlock()
					return ctx.Err()
				}}
			wire(d, m)
			p := &worker.Pipeline{L: e.led, D: d, Linger: time.Hour, InFlight: 2, Log: logs.logger(), Now: clock.Now}
			for i := 0; i < tc.looks; i++ {
				if err := p.Flush(ctx(t), 0); err != nil {
					t.Fatalf("look %d: %v", i, err)
				}
				clock.Advance(time.Second)
			}
			attempts := e.createAttempts()
			if retries := attempts - 8; retries < tc.minRetries || retries > tc.maxRetries {
				t.Errorf("%d create attempts over %d looks a second apart: %d retries of the failed batch, want %d to %d",
					attempts, tc.looks, retries, tc.minRetries, tc.maxRetries)
			}
			if s := batchState(t, e, id); s != paysync.BatchFailed {
				t.Errorf("batch is %s, want failed", s)
			}
			for _, d := range slept {
				if d < tc.retryAfter {
					t.Errorf("slept %v between attempts, shorter than Retry-After %v", d, tc.retryAfter)
				}
			}
			if w := logs.lines(t, "WARN", ""); len(w) != 1 {
				t.Errorf("%d warnings, want one (the batch failed):\n%s", len(w), logs.String())
			}
			if n := counter(t, m.Batches, "failed"); n != 1 {
				t.Errorf(`paysync_batches_total{outcome="failed"} = %v, want 1 (one batch failed)`, n)
			}
			if n := counter(t, m.PayParts, "failed"); n != 5 {
				t.Errorf(`paysync_pay_parts_total{outcome="failed"} = %v, want 5`, n)
			}

			// The API recovers: the retry creates the batch, said once.
			e.sb.SetFaults()
			clock.Advance(tc.recoverBy)
			if err := p.Flush(ctx(t), 0); err != nil {
				t.Fatal(err)
			}
			if s := batchState(t, e, id); s != paysync.BatchCreated {
				t.Fatalf("after the API recovered the batch is %s, want created", s)
			}
			if r := logs.lines(t, "INFO", "batch recovered"); len(r) != 1 {
				t.Errorf("%d 'batch recovered' lines, want 1:\n%s", len(r), logs.String())
			}
			if w := logs.lines(t, "WARN", ""); len(w) != 1 {
				t.Errorf("%d warnings after recovery, want still one", len(w))
			}
			if n := counter(t, m.Batches, "failed"); n != 1 {
				t.Errorf(`paysync_batches_total{outcome="failed"} = %v after recovery, want 1`, n)
			}
			if n := counter(t, m.Batches, "recovered"); n != 1 {
				t.Errorf(`paysync_batches_total{outcome="recovered"} = %v, want 1`, n)
			}
			if len(e.sandboxParts()) != 5 {
				t.Errorf("payroll holds %d pay parts, want 5", len(e.sandboxParts()))
			}
			e.checkLedger(t)
		})
	}
}

// lookCounter counts the sending loop's looks.
type lookCounter struct {
	*ledger.Ledger
	looks atomic.Int64
}

func (l *lookCounter) OpenHeads(ctx context.Context) (map[string]int64, error) {
	l.looks.Add(1)
	return l.Ledger.OpenHeads(ctx)
}

// The daemon's loop (Run), not only Flush: once the batch failed, further
// looks (here 40, with the pipeline's clock standing still) make no
// attempt: the batch waits for its backoff. Before the fix each look
// retried it at once and logged a warning: a retry storm.
func TestPipeline_RunDoesNotRetryFailedBatchAtOnce(t *testing.T) {
	e := setup(t, sandbox.Options{})
	id := oneBatch(t, e, "run")
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: time.Second})
	var logs logBuf
	m := metrics.New(metrics.Funcs{})
	d := &worker.Deliverer{L: e.led, P: e.cl, MaxAttempts: 8, Sleep: noSleep, Log: logs.logger()}
	wire(d, m)
	lc := &lookCounter{Ledger: e.led}
	p := &worker.Pipeline{L: lc, D: d, Linger: 80 * time.Millisecond, InFlight: 2, Log: logs.logger(), Now: newClock().Now}
	p.Init()
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	stop := func() { cancel(); <-done }
	defer stop()

	poll := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30 s for %s", what)
			}
		}
	}
	poll("the batch to fail", func() bool { return batchState(t, e, id) == paysync.BatchFailed })
	from := lc.looks.Load()
	poll("40 more looks", func() bool { return lc.looks.Load() >= from+40 })
	stop()
	if n := e.createAttempts(); n != 8 {
		t.Errorf("%d create attempts, want the 8 before the batch failed and none while its backoff runs", n)
	}
	if w := logs.lines(t, "WARN", ""); len(w) != 1 {
		t.Errorf("%d warnings, want one", len(w))
	}
	if n := counter(t, m.Batches, "failed"); n != 1 {
		t.Errorf(`paysync_batches_total{outcome="failed"} = %v, want 1`, n)
	}
}

// A batch failed by an earlier run and tried again (paysync import, run
// --once, a restarted daemon) gets a full round of attempts and ends; if
// it fails again, that is no new failure: no warning, not counted again.
// The one-shot paths end while the API keeps refusing.
func TestDeliverer_FailedAgainIsNotANewFailure(t *testing.T) {
	e := setup(t, sandbox.Options{})
	id := oneBatch(t, e, "again")
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: time.Second})
	run := func(oneShot func(ctx context.Context, d *worker.Deliverer) error) (*logBuf, *metrics.Metrics) {
		t.Helper()
		var logs logBuf
		m := metrics.New(metrics.Funcs{})
		d := &worker.Deliverer{L: e.led, P: e.cl, MaxAttempts: 8, Sleep: noSleep, Log: logs.logger()}
		wire(d, m)
		before := e.createAttempts()
		c, cancel := context.WithTimeout(ctx(t), 30*time.Second)
		defer cancel()
		if err := oneShot(c, d); err != nil || c.Err() != nil {
			t.Fatalf("one-shot delivery: %v (context: %v)", err, c.Err())
		}
		if n := e.createAttempts() - before; n != 8 {
			t.Errorf("%d attempts, want a full round of 8", n)
		}
		if s := batchState(t, e, id); s != paysync.BatchFailed {
			t.Errorf("batch is %s, want failed", s)
		}
		return &logs, m
	}
	// paysync import: the Deliverer on its own.
	logs, m := run(func(ctx context.Context, d *worker.Deliverer) error { return d.Deliver(ctx, []int64{id}) })
	if w := logs.lines(t, "WARN", "batch failed"); len(w) != 1 || counter(t, m.Batches, "failed") != 1 {
		t.Errorf("first failure: %d warnings, metric %v; want 1 and 1\n%s", len(w), counter(t, m.Batches, "failed"), logs)
	}
	// paysync run --once (Pipeline.Flush) in a new process: the same batch
	// fails again.
	logs, m = run(func(ctx context.Context, d *worker.Deliverer) error {
		return (&worker.Pipeline{L: e.led, D: d, Linger: time.Hour}).Flush(ctx, 0)
	})
	if w := logs.lines(t, "WARN", ""); len(w) != 0 {
		t.Errorf("failed again: %d warnings, want none (its state did not change)\n%s", len(w), logs)
	}
	if n := counter(t, m.Batches, "failed"); n != 0 {
		t.Errorf(`failed again: paysync_batches_total{outcome="failed"} = %v, want 0`, n)
	}
}

// A revoked connection leaves the batch pending and does not use up its
// attempts: after ten revoked rounds and a re-connection, seven 429s and
// then success create the batch (the limit is eight not-applied answers).
// The company's snapshot is taken before the revocation, as in a daemon
// that was sending, so each round's create attempt is begun.
func TestDeliverer_RevokedAttemptsDoNotCount(t *testing.T) {
	e := setup(t, sandbox.Options{Rotate: true})
	first := oneBatch(t, e, "before")
	id := oneBatch(t, e, "revoked")
	d := &worker.Deliverer{L: e.led, P: e.cl, MaxAttempts: 8, Sleep: noSleep}
	if err := d.Deliver(ctx(t), []int64{first}); err != nil {
		t.Fatal(err)
	}
	e.sb.RevokeAll()
	d.P = e.client(t, "stale-token")
	for i := 0; i < 10; i++ {
		if err := d.Deliver(ctx(t), []int64{id}); !errors.Is(err, payroll.ErrRevoked) {
			t.Fatalf("round %d: err = %v, want revoked", i, err)
		}
		if s := batchState(t, e, id); s != paysync.BatchPending {
			t.Fatalf("round %d: batch is %s, want pending", i, s)
		}
	}
	if b, _ := e.led.Batch(ctx(t), id); b.Attempts == 0 {
		t.Fatalf("no create attempt was begun while revoked: the test does not test")
	}
	d.P = e.client(t, e.sb.IssueRefreshToken())
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", Times: 7})
	if err := d.Deliver(ctx(t), []int64{id}); err != nil {
		t.Fatal(err)
	}
	if s := batchState(t, e, id); s != paysync.BatchCreated {
		t.Fatalf("batch is %s after 7 not-applied answers and success, want created (revoked attempts must not count)", s)
	}
	e.checkLedger(t)
}

// Item 11 of issue 13 (first half): a pay part the API refuses is logged
// at WARN with its batch, employee, code and the server's reason, and
// counted in paysync_pay_parts_total{outcome="rejected"}; no batch is
// counted for it.
func TestDeliverer_RejectedPayPartIsWarnedAndCounted(t *testing.T) {
	e := setup(t, sandbox.Options{})
	payload := []byte(`{"id":"r1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"7.5","code":"T1"}
{"id":"r2","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"2","code":"T2"}
{"id":"r3","employee_id":"MV8xXzM=","date":"2026-11-02","hours":"6","code":"T1"}
`)
	var logs logBuf
	m := metrics.New(metrics.Funcs{})
	im := e.importer(t, nil, 10)
	im.D.Log = logs.logger()
	wire(im.D, m)
	if _, err := im.Import(ctx(t), "file", "rej.ndjson", payload); err != nil {
		t.Fatal(err)
	}
	w := logs.lines(t, "WARN", "pay part rejected by the payroll API")
	if len(w) != 1 {
		t.Fatalf("%d rejection warnings, want 1:\n%s", len(w), logs.String())
	}
	rec := w[0]
	if rec["employee_id"] != "MV8xXzI=" || rec["code"] != "T2" || rec["batch"] == nil || !strings.Contains(rec["reason"].(string), "rate") {
		t.Errorf("warning lacks the batch, employee, code or reason: %v", rec)
	}
	if strings.Contains(logs.String(), e.sb.Options().ClientSecret) {
		t.Errorf("the log holds the client secret")
	}
	if n := counter(t, m.PayParts, "rejected"); n != 1 {
		t.Errorf(`paysync_pay_parts_total{outcome="rejected"} = %v, want 1`, n)
	}
	if n := counter(t, m.Batches, "rejected"); n != 0 {
		t.Errorf(`paysync_batches_total{outcome="rejected"} = %v, want 0: a pay part is not a batch`, n)
	}
}

// The loop's own failures (here the company's pay parts cannot be read
// before the first send, 503) are logged once when they begin, not on
// every look, and once when delivery works again.
func TestPipeline_LookFailuresLoggedOnce(t *testing.T) {
	e := setup(t, sandbox.Options{})
	id := oneBatch(t, e, "looks")
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "pay_parts", Status: 503})
	o := e.sb.Options()
	cl, err := payroll.New(payroll.Config{URL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RefreshToken: e.sb.IssueRefreshToken(), Timeout: 5 * time.Second, QueryRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuf
	d := &worker.Deliverer{L: e.led, P: cl, MaxAttempts: 8, Sleep: noSleep, Log: logs.logger()}
	p := &worker.Pipeline{L: e.led, D: d, Linger: 80 * time.Millisecond, InFlight: 2, Log: logs.logger()}
	p.Init()
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	poll := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30 s for %s", what)
			}
		}
	}
	poll("three failed reads", func() bool { return e.sb.State().Counters.Faults[sandbox.FaultErrorBefore] >= 3 })
	if w := logs.lines(t, "WARN", ""); len(w) != 1 {
		t.Errorf("%d warnings after 3 failed looks, want 1", len(w))
	}
	e.sb.SetFaults()
	poll("the batch to be sent", func() bool { return batchState(t, e, id) == paysync.BatchCreated })
	poll("'delivery works again'", func() bool { return len(logs.lines(t, "INFO", "delivery works again")) == 1 })
	if w := logs.lines(t, "WARN", ""); len(w) != 1 {
		t.Errorf("%d warnings in all, want 1", len(w))
	}
}

// retryAfter503 adds a Retry-After header to the sandbox's 503 answers
// (its error_before fault sends none), as a server in maintenance or an
// overloaded proxy does.
func retryAfter503(ra time.Duration) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&retryAfterWriter{ResponseWriter: w, ra: ra}, r)
		})
	}
}

type retryAfterWriter struct {
	http.ResponseWriter
	ra time.Duration
}

func (w *retryAfterWriter) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(w.ra/time.Second)))
	}
	w.ResponseWriter.WriteHeader(code)
}

// createCounter counts create_pay_parts calls and cancels the delivery's
// context after limit of them, so that a retry storm ends the test
// instead of running for ever.
type createCounter struct {
	worker.Payroll
	calls  atomic.Int64
	limit  int64
	cancel context.CancelFunc
}

func (c *createCounter) CreatePayParts(ctx context.Context, company string, in []paysync.PayPartInput) ([]paysync.PayPart, error) {
	if c.calls.Add(1) > c.limit {
		c.cancel()
	}
	return c.Payroll.CreatePayParts(ctx, company, in)
}

// sleepLog is a Deliverer.Sleep that records the pauses and returns at
// once.
type sleepLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepLog) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

// Item 7 of issue 13, for 5xx answers: a 5xx on create_pay_parts is
// ambiguous (the server may have executed it), so the batch is reconciled
// before it is sent again. Before the fix, when reconciliation found
// nothing created, the batch was sent again at once: no sleep, Retry-After
// ignored, the answer not counted towards MaxAttempts, the batch never
// failed (1,110 calls in 3 s against a sandbox answering 503 to
// create_pay_parts). Now such an answer counts as a try and backs off like
// a not-applied one, and the batch fails after MaxAttempts; then the
// failed batch's backoff applies. Both drivers: a command (Deliver, no
// rate limiter) and the daemon's loop (one look a second of a fake clock).
func TestDeliverer_Ambiguous5xxBacksOffAndFails(t *testing.T) {
	const retryAfter = 30 * time.Second
	for _, tc := range []struct {
		name  string
		calls int64 // create calls in all
		run   func(t *testing.T, c context.Context, d *worker.Deliverer, e *env, id int64, clock *fakeClock)
	}{
		{
			// A round of 8, then (the deliverer saw it fail) one attempt.
			name: "command", calls: 9,
			run: func(t *testing.T, c context.Context, d *worker.Deliverer, _ *env, id int64, _ *fakeClock) {
				for round := 1; round <= 2; round++ {
					if err := d.Deliver(c, []int64{id}); err != nil {
						t.Fatalf("round %d: Deliver: %v (a retry storm was cut after %d create calls)", round, err, d.P.(*createCounter).calls.Load())
					}
				}
			},
		},
		{
			// 40 looks a second apart: a round of 8 at once, one attempt
			// when its backoff (Retry-After, 30 s) has run, and none for the
			// next backoff (30–60 s).
			name: "daemon", calls: 9,
			run: func(t *testing.T, c context.Context, d *worker.Deliverer, e *env, _ int64, clock *fakeClock) {
				p := &worker.Pipeline{L: e.led, D: d, Linger: time.Hour, InFlight: 2, Log: d.Log, Now: clock.Now}
				for i := 0; i < 40; i++ {
					if err := p.Flush(c, 0); err != nil {
						t.Fatalf("look %d: %v (a retry storm was cut after %d create calls)", i, err, d.P.(*createCounter).calls.Load())
					}
					clock.Advance(time.Second)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setupWith(t, sandbox.Options{}, retryAfter503(retryAfter))
			id := oneBatch(t, e, "amb5xx")
			e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503})
			c, cancel := context.WithCancel(ctx(t))
			defer cancel()
			cc := &createCounter{Payroll: e.cl, limit: 200, cancel: cancel}
			var logs logBuf
			var sl sleepLog
			m := metrics.New(metrics.Funcs{})
			clock := newClock()
			d := &worker.Deliverer{L: e.led, P: cc, MaxAttempts: 8, Sleep: sl.sleep, Now: clock.Now, Log: logs.logger()}
			wire(d, m)
			tc.run(t, c, d, e, id, clock)

			if n := cc.calls.Load(); n != tc.calls {
				t.Errorf("%d create calls, want %d", n, tc.calls)
			}
			if s := batchState(t, e, id); s != paysync.BatchFailed {
				t.Errorf("batch is %s, want failed", s)
			}
			slept := sl.all()
			if len(slept) != 7 {
				t.Errorf("%d sleeps, want 7 (between the 8 tries of the first round): %v", len(slept), slept)
			}
			for _, d := range slept {
				if d < retryAfter {
					t.Errorf("slept %v between tries, shorter than Retry-After %v", d, retryAfter)
				}
			}
			if w := logs.lines(t, "WARN", "batch failed"); len(w) != 1 || len(logs.lines(t, "WARN", "")) != 1 {
				t.Errorf("want one warning (the batch failed):\n%s", logs.String())
			}
			if n := len(logs.lines(t, "INFO", "")); n != 0 {
				t.Errorf("%d info lines, want none (nothing changed state but the batch, failed, a warning):\n%s", n, logs.String())
			}
			if n := counter(t, m.Batches, "failed"); n != 1 {
				t.Errorf(`paysync_batches_total{outcome="failed"} = %v, want 1`, n)
			}
			if n := len(e.sandboxParts()); n != 0 {
				t.Errorf("payroll holds %d pay parts, want none", n)
			}

			// The API recovers: the batch is created, once.
			e.sb.SetFaults()
			clock.Advance(time.Hour)
			if err := d.Deliver(c, []int64{id}); err != nil {
				t.Fatal(err)
			}
			if s := batchState(t, e, id); s != paysync.BatchCreated {
				t.Fatalf("after the API recovered the batch is %s, want created", s)
			}
			if n := len(e.sandboxParts()); n != 5 {
				t.Errorf("payroll holds %d pay parts, want 5", n)
			}
			e.checkLedger(t)
		})
	}
}

// partly makes every nth create_pay_parts call (of two or more pay parts)
// execute only its first half and then answer 503 with Retry-After, as a
// server that fails midway through a request: the answer is ambiguous and
// some of it was applied.
type partly struct {
	worker.Payroll
	every      int
	retryAfter time.Duration

	mu       sync.Mutex
	calls    int
	partials int // half-executed calls answered 503
}

func (p *partly) CreatePayParts(ctx context.Context, company string, in []paysync.PayPartInput) ([]paysync.PayPart, error) {
	p.mu.Lock()
	p.calls++
	half := len(in) >= 2 && p.calls%p.every == 0
	p.mu.Unlock()
	if !half {
		return p.Payroll.CreatePayParts(ctx, company, in)
	}
	if _, err := p.Payroll.CreatePayParts(ctx, company, in[:len(in)/2]); err != nil {
		return nil, err // the sandbox's own fault, as it answered
	}
	p.mu.Lock()
	p.partials++
	p.mu.Unlock()
	return nil, &payroll.Error{Op: "create_pay_parts", Class: payroll.Ambiguous, Index: -1, StatusCode: 503,
		RetryAfter: p.retryAfter, Reason: "server error (HTTP 503)"}
}

// Ambiguous answers, some executed and some not: 30 % of create calls
// executed and answered 502 by a proxy, ~20 % answered 503 with
// Retry-After without executing, and every fourth call executing half of
// its pay parts and answering 503 with Retry-After. Every pay part lands
// exactly once (identical pay parts seeded before are never claimed), a
// batch with some of its pay parts found created goes on with the rest,
// and every answer that said Retry-After is waited out before the next
// call. Before the fix the not-executed and half-executed 503s were sent
// again at once: no sleep at all.
func TestDeliverer_IntermittentAmbiguousExactlyOnce(t *testing.T) {
	const retryAfter = 30 * time.Second
	e := setupWith(t, sandbox.Options{Seed: 11}, retryAfter503(retryAfter))
	payload := ndjson(300, "amb")
	want := expectedFor(t, e, payload)
	var seeded []string
	for i := 0; i < 3; i++ {
		in := paysync.PayPartInput{EmployeeID: sandbox.EmpMetteHansen, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("7.5")}}
		if _, err := e.sb.SeedPayPart(sandbox.CompanyNordlys, in); err != nil {
			t.Fatal(err)
		}
		seeded = append(seeded, key(sandbox.CompanyNordlys, in.EmployeeID, in.Code, in.Numbers))
	}
	e.sb.SetFaults(
		sandbox.Fault{Kind: sandbox.FaultBadGatewayAfterCommit, Op: "create_pay_parts", Probability: 0.3},
		sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503, Probability: 0.2 / 0.7},
	)
	im := e.importer(t, nil, 10)
	var sl sleepLog
	part := &partly{Payroll: e.cl, every: 4, retryAfter: retryAfter}
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	cc := &createCounter{Payroll: part, limit: 2000, cancel: cancel}
	im.D.P, im.D.Sleep, im.D.MaxAttempts = cc, sl.sleep, 8
	rep, err := im.Import(c, "file", "amb.ndjson", payload)
	if err != nil || len(rep.ProblemList()) > 0 {
		t.Fatalf("import: %v %v (create calls %d)", err, rep.ProblemList(), cc.calls.Load())
	}
	faults := e.sb.State().Counters.Faults
	t.Logf("faults fired: %v; half-executed: %d; create calls %d; reconciled %d", faults, part.partials, cc.calls.Load(), im.D.Stats.Reconciled)
	if faults[sandbox.FaultBadGatewayAfterCommit] == 0 || faults[sandbox.FaultErrorBefore] == 0 || part.partials == 0 {
		t.Fatalf("not every kind of answer was given: %v, %d half-executed", faults, part.partials)
	}
	sameMultiset(t, e.sandboxParts(), append(seeded, want...))
	e.checkLedger(t)

	// One sleep per answer with Retry-After (none other failed), each at
	// least as long.
	slept := sl.all()
	if want := faults[sandbox.FaultErrorBefore] + part.partials; len(slept) != want {
		t.Errorf("%d sleeps, want %d (one per 503 with Retry-After)", len(slept), want)
	}
	for _, d := range slept {
		if d < retryAfter {
			t.Errorf("slept %v before sending again, shorter than Retry-After %v", d, retryAfter)
		}
	}
}
