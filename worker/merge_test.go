package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// mergeEnv is a message importer that holds entries (PAYSYNC_SEND=immediate
// with aggregation), its corrector, and a pipeline that sends.
type mergeEnv struct {
	*env
	mi   *worker.MessageImporter
	corr *worker.Corrector
	pipe *worker.Pipeline
}

func newMergeEnv(t *testing.T) *mergeEnv {
	e := setup(t, sandbox.Options{})
	mi, corr := e.holdingImporter(t)
	return &mergeEnv{env: e, mi: mi, corr: corr, pipe: &worker.Pipeline{L: e.led, D: e.deliverer(e.cl), Correct: corr.Run}}
}

// send commits each body as a message of its own, then sends what is
// committed (corrections included).
func (m *mergeEnv) send(t *testing.T, bodies ...string) []worker.Report {
	t.Helper()
	var out []worker.Report
	for _, b := range bodies {
		reps, errs, err := m.mi.Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", b)})
		if err != nil || errs[0] != nil || len(reps[0].ProblemList()) > 0 {
			t.Fatalf("%s: %v %v %v", b, err, errs[0], reps[0].ProblemList())
		}
		out = append(out, reps[0])
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// merge merges what is held and sends it.
func (m *mergeEnv) merge(t *testing.T) worker.MergeResult {
	t.Helper()
	res, err := m.corr.Merge(ctx(t))
	if err != nil || len(res.Problems) > 0 || res.Busy {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	return res
}

func (m *mergeEnv) writes() (creates, deletes int) {
	r := m.sb.State().Counters.Requests
	return r["create_pay_parts"], r["delete_pay_parts"]
}

func entryOn(id, emp, code, date, hours string) string {
	return fmt.Sprintf(`{"id":%q,"employee_id":%q,"date":%q,"hours":%s,"code":%q}`, id, emp, date, hours, code)
}

// TestMerge_Messages: entries streamed one per message are held at intake
// and merged into one pay part per employee × code × period with the exact
// total; a later message replaces only its group's aggregate (delete, then
// create), the others keep their payroll ids; the same message again, and
// a merge with nothing held, make no call; a correction and a tombstone by
// message keep the totals right.
func TestMerge_Messages(t *testing.T) {
	m := newMergeEnv(t)
	mette, lars := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	m.send(t, entryJSON("m1", mette, "T1", "8"), entryJSON("m2", mette, "T1", "2"), entryJSON("m3", mette, "T1", "1.25"),
		entryJSON("m4", lars, "T1", "5"), entryJSON("m5", lars, "T1", "2.5"), entryJSON("m6", mette, "SYG", "3"))
	if n := len(m.payrollParts()); n != 0 {
		t.Fatalf("before the merge payroll holds %d pay parts; want the entries held", n)
	}
	res := m.merge(t)
	if res.Held != 6 || len(res.Units) != 1 || len(res.Units[0].Unit.PayParts) != 3 || len(res.Units[0].Unit.Supersede) != 0 {
		t.Fatalf("first merge: %+v", res)
	}
	first := m.holds(t, "after the first merge", mette+"|T1|11.25", lars+"|T1|7.5", mette+"|SYG|3")

	// Run twice, the second finds nothing.
	c0, d0 := m.writes()
	if res := m.merge(t); res.Held != 0 || len(res.Units) != 0 {
		t.Fatalf("a merge with nothing held: %+v", res)
	}

	// A later message adds to one group: only its aggregate is replaced.
	m.send(t, entryJSON("m7", mette, "T1", "0.75"))
	if got := m.payrollParts(); len(got) != 3 || got[mette+"|T1|11.25"] == "" {
		t.Fatalf("a held entry reached payroll before its merge: %v", got)
	}
	res = m.merge(t)
	if len(res.Units) != 1 || len(res.Units[0].Unit.Supersede) != 1 || len(res.Units[0].Unit.PayParts) != 1 {
		t.Fatalf("second merge: %+v", res)
	}
	second := m.holds(t, "after the second merge", mette+"|T1|12", lars+"|T1|7.5", mette+"|SYG|3")
	for _, g := range []string{lars + "|T1|7.5", mette + "|SYG|3"} {
		if second[g] != first[g] {
			t.Errorf("%s, which the merge does not touch: payroll id %s became %s", g, first[g], second[g])
		}
	}
	if c, d := m.writes(); c-c0 != 1 || d-d0 != 1 {
		t.Errorf("second merge: %d create_pay_parts and %d delete_pay_parts calls, want 1 and 1", c-c0, d-d0)
	}

	// The same message again: a duplicate, nothing held, no call.
	c0, d0 = m.writes()
	if reps := m.send(t, entryJSON("m7", mette, "T1", "0.75")); !reps[0].Duplicate {
		t.Errorf("the same message again: %+v, want a duplicate", reps[0])
	}
	if res := m.merge(t); res.Held != 0 {
		t.Errorf("the same message again: the merge found %d held", res.Held)
	}
	if c, d := m.writes(); c != c0 || d != d0 {
		t.Errorf("the same message again: %d create_pay_parts and %d delete_pay_parts calls, want none", c-c0, d-d0)
	}

	// A correction (m1: 8 → 8.5) and a tombstone (m5) by message: the
	// corrector replaces the aggregates they are in.
	m.send(t, entryJSON("m1", mette, "T1", "8.5"), `{"id":"m5","deleted":true}`)
	third := m.holds(t, "after the correction and the tombstone", mette+"|T1|12.5", lars+"|T1|5", mette+"|SYG|3")
	if third[mette+"|SYG|3"] != first[mette+"|SYG|3"] {
		t.Errorf("the SYG pay part, which no correction touches, was replaced")
	}
	if res := m.merge(t); res.Held != 0 {
		t.Errorf("corrections are not held: the merge found %d", res.Held)
	}
}

// TestMerge_PendingReplacedWithoutDelete: an aggregate still pending in an
// unsent batch is simply replaced by the next merge: no delete call, one
// pay part created with the whole total.
func TestMerge_PendingReplacedWithoutDelete(t *testing.T) {
	m := newMergeEnv(t)
	mette := sandbox.EmpMetteHansen
	plan := func(body string) {
		t.Helper()
		if _, errs, err := m.mi.Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", body)}); err != nil || errs[0] != nil {
			t.Fatal(err, errs[0])
		}
	}
	plan(entryJSON("p1", mette, "T1", "4"))
	if _, err := m.corr.Merge(ctx(t)); err != nil {
		t.Fatal(err)
	}
	plan(entryJSON("p2", mette, "T1", "3"))
	res, err := m.corr.Merge(ctx(t))
	if err != nil || len(res.Units) != 1 || len(res.Units[0].Unit.Supersede) != 1 || res.Units[0].Unit.Supersede[0].State != paysync.PartPending {
		t.Fatalf("second merge: %+v, %v; want the pending aggregate replaced", res, err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	m.holds(t, "after both merges", mette+"|T1|7")
	if c, d := m.writes(); c != 1 || d != 0 {
		t.Errorf("%d create_pay_parts and %d delete_pay_parts calls, want 1 and 0", c, d)
	}
}

// TestMerge_ClosedPeriod: held entries dated in a closed period get pay
// parts of their own (late hours, for the next payroll run); the aggregate
// paid in that period stays as it is. Another month is its own aggregate.
func TestMerge_ClosedPeriod(t *testing.T) {
	m := newMergeEnv(t)
	lars := sandbox.EmpLarsNielsen
	m.send(t, entryOn("k1", lars, "T1", "2026-10-30", "7"), entryOn("k2", lars, "T1", "2026-10-29", "1"))
	m.merge(t)
	first := m.holds(t, "October merged", lars+"|T1|8")
	oct, _ := paysync.ParsePeriod("2026-10")
	if _, err := m.led.ClosePeriod(ctx(t), oct, ""); err != nil {
		t.Fatal(err)
	}
	m.send(t, entryOn("k3", lars, "T1", "2026-10-31", "2"), entryOn("k4", lars, "T1", "2026-10-31", "0.5"), entryOn("k5", lars, "T1", "2026-11-02", "4"))
	m.merge(t)
	got := m.holds(t, "late October hours and November", lars+"|T1|8", lars+"|T1|2.5", lars+"|T1|4")
	if got[lars+"|T1|8"] != first[lars+"|T1|8"] {
		t.Errorf("the closed period's aggregate was replaced")
	}
}

// TestMerge_Chunks: a held set larger than one merge takes is merged over
// several merges (More), and ends as one pay part with the exact total.
func TestMerge_Chunks(t *testing.T) {
	m := newMergeEnv(t)
	m.corr.MergeChunk = 3
	mette := sandbox.EmpMetteHansen
	var bodies []string
	for i := range 8 {
		bodies = append(bodies, entryJSON(fmt.Sprintf("q%d", i), mette, "T1", "0.5"))
	}
	m.send(t, bodies...)
	merges := 0
	for {
		res := m.merge(t)
		merges++
		if !res.More {
			break
		}
		if merges > 5 {
			t.Fatal("the merges do not end")
		}
	}
	if merges != 3 {
		t.Errorf("%d merges of 8 held entries 3 at a time, want 3", merges)
	}
	m.holds(t, "after the merges", mette+"|T1|4")
	if res := m.merge(t); res.Held != 0 {
		t.Errorf("after the last chunk: %d held", res.Held)
	}
}

// TestMerge_Cap: a pay part that sums MergeCap entries is not planned
// again: later entries of its group start another pay part beside it, so
// that a merge's work and memory stay bounded however many entries one
// group gathers; payroll still holds the exact total.
func TestMerge_Cap(t *testing.T) {
	m := newMergeEnv(t)
	m.corr.MergeCap = 3
	mette := sandbox.EmpMetteHansen
	for i := range 5 {
		m.send(t, entryJSON(fmt.Sprintf("c%d", i), mette, "T1", "1"))
		m.merge(t)
	}
	m.holds(t, "after five merges of one entry each", mette+"|T1|3", mette+"|T1|2")
}

// TestMerge_RevertMessage: revert --import of one message whose entry is in
// a merged aggregate replaces the aggregate by the others' total.
func TestMerge_RevertMessage(t *testing.T) {
	m := newMergeEnv(t)
	mette := sandbox.EmpMetteHansen
	reps := m.send(t, entryJSON("r1", mette, "T1", "8"), entryJSON("r2", mette, "T1", "3"))
	m.merge(t)
	m.holds(t, "merged", mette+"|T1|11")
	if _, err := m.corr.RevertScope(ctx(t), ledger.Scope{SourceID: reps[1].ImportID}, false); err != nil {
		t.Fatal(err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	m.holds(t, "after reverting the second message", mette+"|T1|8")
	nov, _ := paysync.ParsePeriod("2026-11")
	res, err := m.corr.ReplayScope(ctx(t), ledger.Scope{Period: nov}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	m.holds(t, fmt.Sprintf("after replaying November (%d replaced, %d created)", len(res.Unit.Supersede), len(res.Unit.PayParts)), mette+"|T1|11")
}

// TestPipeline_MergeRetried: the sending loop merges once entries are
// held; a failed merge (payroll or the ledger out of reach) is tried again
// after its backoff until it works, logged once.
func TestPipeline_MergeRetried(t *testing.T) {
	m := newMergeEnv(t)
	var logs logBuf
	m.pipe.Log = logs.logger()
	m.pipe.Linger = 10 * time.Millisecond
	var calls atomic.Int32
	m.pipe.Merge = func(c context.Context) (bool, error) {
		if calls.Add(1) <= 2 {
			return false, errors.New("ledger: database is locked")
		}
		res, err := m.corr.Merge(c)
		return res.More || res.Busy, err
	}
	m.send(t, entryJSON("t1", sandbox.EmpMetteHansen, "T1", "2"), entryJSON("t2", sandbox.EmpMetteHansen, "T1", "3"))
	m.pipe.Init()
	m.pipe.Held()
	done := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx(t))
	go func() { defer close(done); m.pipe.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for len(m.payrollParts()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m.holds(t, "after the merge was retried", sandbox.EmpMetteHansen+"|T1|5")
	if n := calls.Load(); n != 3 {
		t.Errorf("Merge called %d times, want 3 (two failures, then the merge)", n)
	}
	if n := len(logs.lines(t, "WARN", "merging held entries failed; retrying")); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestCutoff_ByMerges: a cutoff is applied as merges of at most MergeChunk
// held entries each (bounded memory however much was held), and plans
// everything held in one call.
func TestCutoff_ByMerges(t *testing.T) {
	m := newMergeEnv(t)
	m.corr.MergeChunk = 3
	mette := sandbox.EmpMetteHansen
	var bodies []string
	for i := range 8 {
		bodies = append(bodies, entryJSON(fmt.Sprintf("k%d", i), mette, "T1", "0.5"))
	}
	m.send(t, bodies...)
	res, err := m.corr.Cutoff(ctx(t), false)
	if err != nil || res.Entries != 8 || len(res.Periods) != 3 {
		t.Fatalf("cutoff of 8 held entries 3 a merge: %d entries in %d units, %v; want 8 in 3", res.Entries, len(res.Periods), err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	m.holds(t, "after the cutoff", mette+"|T1|4")
}
