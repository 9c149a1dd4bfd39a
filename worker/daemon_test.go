package worker_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
	"github.com/paysync/paysync/worker/stream"
)

// daemonConfig is a daemon on e's ledger, sending through cl, with one
// pay part per entry.
func daemonConfig(e *env, cl *payroll.Client) worker.DaemonConfig {
	rules := mapping.DefaultRules()
	rules.Aggregate = false
	d := &worker.Deliverer{L: e.led, P: cl, Sleep: noSleep, MaxAttempts: 20}
	return worker.DaemonConfig{Ledger: e.led, Payroll: cl, Deliverer: d, TokenRevoked: cl.Tokens().Revoked,
		Rules: rules, Company: sandbox.CompanyNordlys, BatchSize: 50, AllOrNothing: true, Linger: 20 * time.Millisecond, InFlight: 2}
}

// realInbox makes the daemon poll dir every second; a file is taken on the
// first poll that finds it.
func realInbox(dir string) func(*worker.InboxSink) (worker.InboxSource, error) {
	return func(sink *worker.InboxSink) (worker.InboxSource, error) {
		return inbox.New(inbox.Config{Dir: dir, Schedule: "@every 1s", SettleLook: 20 * time.Millisecond}, sink)
	}
}

// failedChecks lists the /readyz conditions that do not hold.
func failedChecks(d *worker.Daemon) []string {
	var out []string
	for _, c := range d.Checks() {
		if err := c.Fn(); err != nil {
			out = append(out, c.Name+": "+err.Error())
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start returns while payroll is down: /readyz says what the start-up
// waits for (its next try measured on the daemon's clock), nothing is
// sent; once payroll answers, the inbox's file is delivered and every
// check holds.
func TestDaemon_StartWaitsForPayroll(t *testing.T) {
	t.Parallel()
	e := setup(t, sandbox.Options{})
	cl := e.client(t, e.sb.IssueRefreshToken()) // a fresh client: no schema read yet
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Status: 503})
	dir := t.TempDir()
	payload := ndjson(12, "start")
	if err := os.WriteFile(filepath.Join(dir, "hours.ndjson"), payload, 0o644); err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	cfg := daemonConfig(e, cl)
	cfg.Inbox, cfg.Now = realInbox(dir), clock.Now
	d, err := worker.NewDaemon(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "/readyz to name the schema probe", func() bool {
		return slices.ContainsFunc(failedChecks(d), func(s string) bool {
			return strings.HasPrefix(s, "payroll: waiting for the schema probe: ") && strings.Contains(s, "next try in ")
		})
	})
	if n := e.sb.PayPartCount(); n != 0 {
		t.Fatalf("payroll holds %d pay parts before it answered", n)
	}

	e.sb.SetFaults()
	want := expectedFor(t, e, payload)
	waitUntil(t, "the file's pay parts in payroll", func() bool { return len(e.sandboxParts()) == len(want) })
	waitUntil(t, "every check to hold", func() bool { return len(failedChecks(d)) == 0 })
	if err := d.Close(ctx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	sameMultiset(t, e.sandboxParts(), want)
	e.checkLedger(t)
	if st := d.Stats(); st.Created != len(want) {
		t.Errorf("Stats().Created = %d, want %d", st.Created, len(want))
	}
}

// /readyz runs the adapters' own probes, as doctor does: the ledger's
// (its mode and the write lock) and the inbox's (its folder), each named.
func TestDaemon_ChecksProbeTheAdapters(t *testing.T) {
	t.Parallel()
	e := setup(t, sandbox.Options{})
	dir := t.TempDir()
	cfg := daemonConfig(e, e.cl)
	cfg.Inbox = realInbox(dir)
	d, err := worker.NewDaemon(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx(t))
	failing := func(name string) string {
		for _, f := range failedChecks(d) {
			if strings.HasPrefix(f, name+": ") {
				return f
			}
		}
		return ""
	}
	var names []string
	for _, c := range d.Checks() {
		names = append(names, c.Name)
	}
	if !slices.Contains(names, "ledger") || !slices.Contains(names, "inbox") {
		t.Fatalf("checks %v, want the ledger's and the inbox's", names)
	}
	if f := failing("ledger") + failing("inbox"); f != "" {
		t.Fatalf("failing before anything broke: %s", f)
	}
	if err := os.Chmod(e.led.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if f := failing("ledger"); !strings.Contains(f, "has mode 0644") {
		t.Errorf("ledger readable by others: %q, want it named", f)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if f := failing("inbox"); f != "inbox: "+dir+" does not exist" {
		t.Errorf("inbox folder gone: %q, want it named", f)
	}
}

// event records a fake source's lifecycle.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

type fakeInbox struct{ ev *events }

func (f fakeInbox) Start(context.Context) error { f.ev.add("inbox start"); return nil }
func (f fakeInbox) Close(context.Context) error { f.ev.add("inbox close"); return nil }
func (f fakeInbox) RunNow()                     {}
func (f fakeInbox) Probe() paysync.Check {
	return paysync.Checked(paysync.CheckOK, nil, "fake")
}

type fakeStream struct{ ev *events }

func (f fakeStream) Start(context.Context) error { f.ev.add("nats start"); return nil }
func (f fakeStream) Close(context.Context) error { f.ev.add("nats close"); return nil }
func (f fakeStream) Status() (bool, string)      { return true, "" }

// The sources start once the mapper is ready (the inbox first) and are
// closed first on stop; a stop while the start-up waits for payroll starts
// nothing and returns.
func TestDaemon_Lifecycle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		down bool // payroll refuses everything
		want []string
	}{
		{"started", false, []string{"inbox start", "nats start", "nats close", "inbox close"}},
		{"stopped while waiting for payroll", true, []string{"nats close", "inbox close"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, sandbox.Options{})
			cl := e.client(t, e.sb.IssueRefreshToken())
			if tt.down {
				e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Status: 503})
			}
			ev := &events{}
			cfg := daemonConfig(e, cl)
			cfg.Inbox = func(*worker.InboxSink) (worker.InboxSource, error) { return fakeInbox{ev}, nil }
			cfg.NATS = func(*worker.MessageSink) (worker.MessageSource, error) { return fakeStream{ev}, nil }
			d, err := worker.NewDaemon(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Start(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if tt.down {
				waitUntil(t, "a refused schema probe", func() bool {
					return slices.ContainsFunc(failedChecks(d), func(s string) bool { return strings.HasPrefix(s, "payroll: waiting for") })
				})
			} else {
				waitUntil(t, "every check to hold and NATS started", func() bool {
					return len(failedChecks(d)) == 0 && slices.Contains(ev.list(), "nats start")
				})
			}
			if err := d.Close(ctx(t)); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := ev.list(); !slices.Equal(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}

// A replica whose ledger holds work of a company its NATS filter does not
// take refuses to start, before it talks to payroll.
func TestDaemon_RefusesAnotherReplicasCompany(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	e := setupWith(t, sandbox.Options{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); h.ServeHTTP(w, r) })
	})
	im := e.importer(t, nil, 50)
	left := ndjson(3, "left")
	if _, err := im.Plan(ctx(t), paysync.SourceFile, "left.ndjson", left); err != nil {
		t.Fatal(err)
	}
	cl := e.client(t, e.sb.IssueRefreshToken())
	before := calls.Load()
	cfg := daemonConfig(e, cl)
	cfg.Filter = "timesheets.someone-else.>"
	d, err := worker.NewDaemon(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Start(ctx(t))
	var ne *worker.NotOwnerError
	if !errors.Is(err, worker.ErrNotOwner) || !errors.As(err, &ne) || !slices.Equal(ne.Companies, []string{sandbox.CompanyNordlys}) {
		t.Fatalf("Start = %v, want ErrNotOwner for %s", err, sandbox.CompanyNordlys)
	}
	if err := d.RunOnce(ctx(t), &payroll.Waiter{}, nil); !errors.Is(err, worker.ErrNotOwner) {
		t.Fatalf("RunOnce = %v, want ErrNotOwner", err)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("a refused replica made %d payroll request(s)", n)
	}
	if err := d.Close(ctx(t)); err != nil {
		t.Errorf("Close after a refused Start: %v", err)
	}

	// The owner sends it.
	cfg.Filter = "timesheets." + sandbox.CompanyNordlys + ".>"
	if d, err = worker.NewDaemon(cfg); err != nil {
		t.Fatal(err)
	}
	if err := d.RunOnce(ctx(t), &payroll.Waiter{Until: time.Now().Add(30 * time.Second)}, nil); err != nil {
		t.Fatalf("RunOnce with the owner's filter: %v", err)
	}
	sameMultiset(t, e.sandboxParts(), expectedFor(t, e, left))
}

// RunOnce settles what an earlier run left, polls once, and delivers
// everything: the earlier import's pay parts and the file's.
func TestDaemon_RunOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, sandbox.Options{})
	im := e.importer(t, nil, 50)
	left := ndjson(5, "left")
	if _, err := im.Plan(ctx(t), paysync.SourceFile, "left.ndjson", left); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	payload := ndjson(9, "once")
	if err := os.WriteFile(filepath.Join(dir, "hours.ndjson"), payload, 0o644); err != nil {
		t.Fatal(err)
	}
	var in *inbox.Inbox
	cfg := daemonConfig(e, e.cl)
	cfg.Inbox = func(sink *worker.InboxSink) (_ worker.InboxSource, err error) {
		in, err = inbox.New(inbox.Config{Dir: dir, SettleLook: 20 * time.Millisecond}, sink)
		return in, err
	}
	d, err := worker.NewDaemon(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var res inbox.Result
	err = d.RunOnce(ctx(t), &payroll.Waiter{Until: time.Now().Add(30 * time.Second)}, func(ctx context.Context) (err error) {
		res, err = in.Poll(ctx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Processed != 1 {
		t.Errorf("poll: %+v, want one file processed", res)
	}
	want := append(expectedFor(t, e, left), expectedFor(t, e, payload)...)
	sameMultiset(t, e.sandboxParts(), want)
	e.checkLedger(t)
	if st := d.Stats(); st.Created == 0 {
		t.Errorf("Stats().Created = 0 after delivering the file")
	}
}

func TestMessageOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rep     worker.Report
		want    stream.Outcome
		invalid string
	}{
		{"committed", worker.Report{ImportID: 1, Entries: 1, PayParts: 1}, stream.Committed, ""},
		{"duplicate message", worker.Report{ImportID: 1, Duplicate: true}, stream.Duplicate, ""},
		{"only known entries", worker.Report{ImportID: 2, Entries: 2, Duplicates: 2}, stream.Duplicate, ""},
		{"some new entries", worker.Report{ImportID: 2, Entries: 2, Duplicates: 1, PayParts: 1}, stream.Committed, ""},
		{"a problem", worker.Report{Entries: 1, Problems: []error{errors.New("line 1: no employee"), errors.New("line 2: no date")}}, 0, "line 1: no employee; line 2: no date"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := worker.MessageOutcome(tt.rep)
			var inv *stream.Invalid
			switch {
			case tt.invalid != "":
				if !errors.As(err, &inv) || inv.Reason != tt.invalid {
					t.Fatalf("MessageOutcome = %v, %v; want Invalid %q", got, err, tt.invalid)
				}
			case err != nil || got != tt.want:
				t.Fatalf("MessageOutcome = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
