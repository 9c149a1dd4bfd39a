package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
	"github.com/shopspring/decimal"
)

func TestCheckOwnership(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		companies []string
		filter    string
		outside   []string // nil: accepted
	}{
		{"empty ledger", nil, "timesheets.MV8x.>", nil},
		{"empty filter takes all", []string{"MV8x", "MV8y"}, "", nil},
		{"stream subject", []string{"MV8x", "MV8y"}, "timesheets.>", nil},
		{"full wildcard", []string{"MV8x"}, ">", nil},
		{"own company", []string{"MV8x"}, "timesheets.MV8x.>", nil},
		{"own company, spaces", []string{"MV8x"}, " timesheets.MV8x.> ", nil},
		{"other company", []string{"MV8x"}, "timesheets.MV8y.>", []string{"MV8x"}},
		{"one of two outside", []string{"MV8x", "MV8y"}, "timesheets.MV8x.>", []string{"MV8y"}},
		{"two outside", []string{"MV8x", "MV8z"}, "timesheets.MV8y.>", []string{"MV8x", "MV8z"}},
		{"company wildcard", []string{"MV8x", "MV8y"}, "timesheets.*.>", nil},
		{"company wildcard, one source", []string{"MV8x"}, "timesheets.*.toggl", nil},
		{"one source of the company", []string{"MV8x"}, "timesheets.MV8x.toggl", nil},
		{"one source of another company", []string{"MV8x"}, "timesheets.MV8y.toggl", []string{"MV8x"}},
		{"prefix wildcard", []string{"MV8x"}, "*.MV8x.*", nil},
		{"prefix is not checked", []string{"MV8x"}, "acme.MV8x.>", nil},
		{"no source token", []string{"MV8x"}, "timesheets.MV8x", []string{"MV8x"}},
		{"two tokens with wildcard", []string{"MV8x"}, "timesheets.*", []string{"MV8x"}},
		{"longer than a subject", []string{"MV8x"}, "timesheets.MV8x.toggl.more", []string{"MV8x"}},
		{"company is a whole token", []string{"MV8x"}, "timesheets.MV8.>", []string{"MV8x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOwnership(t.Context(), tt.companies, tt.filter)
			if tt.outside == nil {
				if err != nil {
					t.Fatalf("checkOwnership(%v, %q) = %v, want nil", tt.companies, tt.filter, err)
				}
				return
			}
			if !errors.Is(err, errNotOwner) {
				t.Fatalf("checkOwnership(%v, %q) = %v, want errNotOwner", tt.companies, tt.filter, err)
			}
			msg := err.Error()
			for _, want := range []string{errNotOwner.Error() + ": " + strings.Join(tt.outside, ", ") + " (", "PAYSYNC_NATS_FILTER", fmt.Sprintf("%q", strings.TrimSpace(tt.filter)),
				"PAYSYNC_LEDGER", "paysync batches --state pending", "docs/scaling.md"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q:\n%s", want, msg)
				}
			}
		})
	}
}

// commitWork commits one pay part of company (units 1, code T1) to l as a
// file import of its own and returns its batch.
func commitWork(t *testing.T, l *ledger.Ledger, company, employee, id string) int64 {
	t.Helper()
	e := paysync.Entry{ID: id, Source: id + ".json", Line: 1, CompanyID: company, EmployeeID: employee, Date: "2026-11-02", Code: "T1",
		Hours: paysync.HoursFromSeconds(3600)}
	h, _, err := paysync.EntryHash(e)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(id)
	c, err := l.CommitImport(t.Context(), ledger.ImportIntent{
		Source:  &ledger.NewSource{Kind: paysync.SourceFile, Name: e.Source, Format: "json", Hash: paysync.PayloadHash(payload), Payload: payload},
		Entries: []ledger.NewEntry{{Entry: e, Hash: h, Status: paysync.EntryMapped}},
		PayParts: []paysync.PlannedPayPart{{CompanyID: company, Entries: []paysync.EntryRef{e.Ref()},
			PayPartInput: paysync.PayPartInput{EmployeeID: employee, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("1")}}}},
	})
	if err != nil || len(c.BatchIDs) != 1 {
		t.Fatalf("commit %s: %v, %d batches", id, err, len(c.BatchIDs))
	}
	return c.BatchIDs[0]
}

// TestLedger_CompaniesWithWork: only batches paysync may still send or
// delete for count, not settled history.
func TestLedger_CompaniesWithWork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := l.CompaniesWithWork(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty ledger: %v, %v", got, err)
	}
	created := func(batch int64, payrollID string) {
		t.Helper()
		items, err := l.Items(ctx, batch)
		if err != nil || len(items) != 1 {
			t.Fatalf("items of %d: %v, %v", batch, items, err)
		}
		if err := l.RecordCreated(ctx, batch, 0, map[int64]string{items[0].ID: payrollID}, paysync.AttemptOK); err != nil {
			t.Fatal(err)
		}
	}
	// A: delivered (history only). B: pending. C: sending (a call in
	// doubt). D: failed. E: delivered, then a revert in progress. F: delivered
	// and reverted.
	created(commitWork(t, l, "A", "a1", "a-1"), "pa")
	commitWork(t, l, "B", "b1", "b-1")
	if _, err := l.BeginAttempt(ctx, commitWork(t, l, "C", "c1", "c-1"), paysync.AttemptCreate, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.SetBatchState(ctx, commitWork(t, l, "D", "d1", "d-1"), paysync.BatchFailed, "gave up"); err != nil {
		t.Fatal(err)
	}
	e := commitWork(t, l, "E", "e1", "e-1")
	created(e, "pe")
	if _, err := l.BeginAttempt(ctx, e, paysync.AttemptDelete, 1); err != nil {
		t.Fatal(err)
	}
	f := commitWork(t, l, "F", "f1", "f-1")
	created(f, "pf")
	if err := l.SetBatchState(ctx, f, paysync.BatchReverted, ""); err != nil {
		t.Fatal(err)
	}
	got, err := l.CompaniesWithWork(ctx)
	if want := []string{"B", "C", "D", "E"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("CompaniesWithWork = %v, %v; want %v", got, err, want)
	}
}

// daemon is `paysync run` running in this process.
type daemon struct {
	name   string
	cancel context.CancelFunc
	done   chan int
	stderr *lockedBuffer
}

func startDaemon(t *testing.T, name string, env map[string]string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{name: name, cancel: cancel, done: make(chan int, 1), stderr: &lockedBuffer{}}
	out, stderr := &lockedBuffer{}, d.stderr
	go func() {
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		d.done <- run(ctx, []string{"run"}, stdio{in: strings.NewReader(""), out: out, err: stderr}, lookup)
	}()
	t.Cleanup(func() { d.stop(t) })
	addr := env["PAYSYNC_HTTP_ADDR"]
	waitFor(t, name+" ready", 20*time.Second, func() bool {
		select {
		case code := <-d.done:
			d.done = nil // nothing left to stop
			t.Fatalf("%s exited %d before it was ready:\n%s", name, code, stderr.String())
		default:
		}
		c, _ := httpGet("http://" + addr + "/readyz")
		return c == 200
	})
	return d
}

// stop asks for a graceful stop and waits; it fails the test on a non-zero
// exit. Calling it again is a no-op.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if d.done == nil {
		return
	}
	d.cancel()
	select {
	case code := <-d.done:
		if code != 0 {
			t.Errorf("%s exited %d:\n%s", d.name, code, d.stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Errorf("%s did not stop:\n%s", d.name, d.stderr.String())
	}
	d.done = nil
}

// TestReplicas_TwoWorkers: two replicas on one stream, each with its own
// durable, filter and ledger, share the work by company: every entry is
// created exactly once, each ledger holds only its own company's batches,
// and a replica started with the other's filter while its ledger still
// holds work for its own company refuses to start, touching neither payroll
// nor its consumer.
func TestReplicas_TwoWorkers(t *testing.T) {
	const n = 600
	s := startSandbox(t, sandbox.Options{})
	ns := natstest.Start(t)
	url := ns.ClientURL()
	dir := t.TempDir()
	base := with(s.env, "NATS_URL", url, "PAYSYNC_BATCH_LINGER", "100ms", "PAYSYNC_RATE_LIMIT", "1000", "PAYSYNC_LOG_LEVEL", "error",
		"PAYSYNC_MAPPING", noAggregateRules(t)) // one pay part per entry
	delete(base, "PAYSYNC_TOKEN_FILE") // each replica keeps its token in its own ledger
	type replica struct {
		company, durable, filter, ledger string
		env                              map[string]string
	}
	replicas := []*replica{
		{company: sandbox.CompanyNordlys, durable: "paysync-a"},
		{company: sandbox.CompanyFjordtech, durable: "paysync-b"},
	}
	for i, r := range replicas {
		r.filter = "timesheets." + r.company + ".>"
		r.ledger = filepath.Join(dir, fmt.Sprintf("ledger-%c.db", 'a'+i))
		r.env = with(base, "PAYSYNC_LEDGER", r.ledger, "PAYSYNC_HTTP_ADDR", freeAddr(t),
			"PAYSYNC_NATS_DURABLE", r.durable, "PAYSYNC_NATS_FILTER", r.filter)
	}
	a, b := replicas[0], replicas[1]
	da := startDaemon(t, "replica A", a.env)
	db := startDaemon(t, "replica B", b.env)

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Half the entries each; units i+1 hundredths make every pay part
	// distinct, so payroll's multiset shows each entry exactly once.
	emps := map[string][]string{
		sandbox.CompanyNordlys:   {sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen},
		sandbox.CompanyFjordtech: {sandbox.EmpJonasLarsen, sandbox.EmpEmmaChristensen},
	}
	var want []string
	pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
	defer pcancel()
	for i := range n {
		company := replicas[i%2].company
		e := paysync.Entry{ID: fmt.Sprintf("r-%d", i), CompanyID: company, EmployeeID: emps[company][(i/2)%len(emps[company])],
			Date: "2026-11-02", Code: "T1", Hours: paysync.HoursFromSeconds(int64(36 * (i + 1)))}
		if dup, err := stream.Publish(pctx, js, stream.Subject("timesheets", company, "test"), e); err != nil || dup {
			t.Fatalf("publish %s: dup %v, %v", e.ID, dup, err)
		}
		want = append(want, company+"|"+e.EmployeeID+"|T1|units="+decimal.New(int64(i+1), -2).String())
	}
	slices.Sort(want)
	waitFor(t, "every entry in payroll", 60*time.Second, func() bool { return len(payrollKeys(s.sb)) >= n })
	time.Sleep(300 * time.Millisecond) // nothing more may arrive
	if got := payrollKeys(s.sb); !reflect.DeepEqual(got, want) {
		t.Fatalf("payroll holds %d pay parts, want each of the %d entries once; first differences:\n%s", len(got), n, firstDiff(got, want))
	}
	da.stop(t)
	db.stop(t)

	// Each ledger holds exactly its own company's work, all of it created;
	// each consumer has nothing left and no acknowledgement outstanding
	// (what docs/scaling.md has an operator check before moving a company).
	for _, r := range replicas {
		cons, err := js.Consumer(t.Context(), stream.DefaultStream, r.durable)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.FilterSubject != r.filter || info.NumPending != 0 || info.NumAckPending != 0 {
			t.Errorf("consumer %s after a graceful stop: filter %q (want %q), %d pending, %d unacknowledged; want none",
				r.durable, info.Config.FilterSubject, r.filter, info.NumPending, info.NumAckPending)
		}

		l, err := ledger.Open(t.Context(), r.ledger, ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := l.ListBatches(t.Context(), ledger.BatchFilter{})
		if err != nil {
			t.Fatal(err)
		}
		created := 0
		for _, bt := range bs {
			if bt.CompanyID != r.company || bt.State != paysync.BatchCreated {
				t.Errorf("%s: batch %d of company %s is %s; want only %s's batches, created", r.durable, bt.ID, bt.CompanyID, bt.State, r.company)
			}
			created += bt.Created
		}
		if created != n/2 {
			t.Errorf("%s: %d pay parts created, want %d", r.durable, created, n/2)
		}
		if work, err := l.CompaniesWithWork(t.Context()); err != nil || len(work) != 0 {
			t.Errorf("%s: work left after a graceful stop: %v, %v", r.durable, work, err)
		}
		l.Close()
	}

	// Replica A was killed in the middle of a call for its company (a batch
	// in sending), and is then started with B's filter: it must refuse
	// before it reconciles or sends anything, and before it touches its
	// consumer (the work-queue stream would refuse the overlap with B's
	// anyway, but only after A had already sent).
	l, err := ledger.Open(t.Context(), a.ledger, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inDoubt := commitWork(t, l, a.company, sandbox.EmpMetteHansen, "in-doubt")
	if _, err := l.BeginAttempt(t.Context(), inDoubt, paysync.AttemptCreate, 1); err != nil {
		t.Fatal(err)
	}
	l.Close()
	before := s.sb.State().Counters.Requests
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	var out, errb bytes.Buffer
	wrong := with(a.env, "PAYSYNC_NATS_FILTER", b.filter)
	code := run(rctx, []string{"run"}, stdio{in: strings.NewReader(""), out: &out, err: &errb},
		func(k string) (string, bool) { v, ok := wrong[k]; return v, ok })
	msg := errb.String()
	if code != 1 || !strings.Contains(msg, errNotOwner.Error()+": "+a.company+" (") ||
		!strings.Contains(msg, fmt.Sprintf("%q", b.filter)) || !strings.Contains(msg, "docs/scaling.md") {
		t.Fatalf("replica A with B's filter: exit %d, want 1 with the ownership error naming %s:\n%s", code, a.company, msg)
	}
	after := s.sb.State().Counters.Requests
	for _, op := range []string{"create_pay_parts", "pay_parts"} {
		if after[op] != before[op] {
			t.Errorf("the refused start made %d %s requests, want none", after[op]-before[op], op)
		}
	}
	l, err = ledger.Open(t.Context(), a.ledger, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if bt, err := l.Batch(t.Context(), inDoubt); err != nil || bt.State != paysync.BatchSending {
		t.Errorf("the batch in doubt is %s, %v after the refused start; want sending, untouched", bt.State, err)
	}
	cons, err := js.Consumer(t.Context(), stream.DefaultStream, a.durable)
	if err != nil {
		t.Fatal(err)
	}
	if f := cons.CachedInfo().Config.FilterSubject; f != a.filter {
		t.Errorf("consumer %s filters %q after the refused start, want %q", a.durable, f, a.filter)
	}
}

// firstDiff lists the first few keys only one side holds.
func firstDiff(got, want []string) string {
	var sb strings.Builder
	lines := 0
	add := func(prefix string, keys, other []string) {
		for _, k := range keys {
			if _, found := slices.BinarySearch(other, k); !found && lines < 10 {
				fmt.Fprintf(&sb, "%s %s\n", prefix, k)
				lines++
			}
		}
	}
	add("unexpected:", got, want)
	add("missing:   ", want, got)
	if lines == 0 {
		sb.WriteString("(the same keys, different counts)\n")
	}
	return sb.String()
}
