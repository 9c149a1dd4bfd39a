package worker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// beforeApply is the real ledger, with a hook run once just before a
// unit is applied: it interleaves another action between a merge's plan
// and its commit, as the console's revert (an HTTP goroutine) does
// against the daemon's merge (the pipeline's goroutine), which share no
// lock.
type beforeApply struct {
	*ledger.Ledger
	hook func()
}

func (b *beforeApply) ApplyCorrection(ctx context.Context, c ledger.Correction) (int64, []int64, error) {
	if h := b.hook; h != nil {
		b.hook = nil
		h()
	}
	return b.Ledger.ApplyCorrection(ctx, c)
}

// TestRace_RevertBeforeMergeCommits: a held NATS entry is reverted (revert
// --import, as the console does it inside paysync run) after the daemon's
// merge read it held and before the merge commits. The revert un-holds
// the entry; the merge's commit is stale (it checked only the content
// hash, and paid the reverted entry) and pays nothing.
func TestRace_RevertBeforeMergeCommits(t *testing.T) {
	m := newMergeEnv(t)
	reps := m.send(t, entryJSON("r1", sandbox.EmpMetteHansen, "T1", "8"))
	imp := reps[0].ImportID
	racing := *m.corr
	racing.L = &beforeApply{Ledger: m.led, hook: func() {
		res, err := m.corr.RevertScope(ctx(t), ledger.Scope{SourceID: imp}, false)
		if err != nil || !res.Changes() {
			t.Fatalf("revert --import %d: %+v, %v", imp, res, err)
		}
	}}
	res, err := racing.Merge(ctx(t))
	t.Logf("merge after the revert: %+v, %v", res, err)
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if got := m.payrollParts(); len(got) != 0 {
		t.Errorf("import %d was reverted before it was paid, yet payroll holds %v", imp, got)
	}
}

// TestRace_MergeBeforeRevertCommits: the other order. The revert plans while
// the entry is held (nothing in payroll: it un-holds it), the merge
// commits a pay part for it, then the revert's commit is stale (it
// reported done, and payroll kept the entry's hours): run again, it
// deletes what the merge paid.
func TestRace_MergeBeforeRevertCommits(t *testing.T) {
	m := newMergeEnv(t)
	reps := m.send(t, entryJSON("r1", sandbox.EmpMetteHansen, "T1", "8"))
	imp := reps[0].ImportID
	racing := *m.corr
	racing.L = &beforeApply{Ledger: m.led, hook: func() {
		if _, err := m.corr.Merge(ctx(t)); err != nil {
			t.Fatalf("merge: %v", err)
		}
	}}
	if _, err := racing.RevertScope(ctx(t), ledger.Scope{SourceID: imp}, false); !errors.Is(err, worker.ErrScopeBusy) {
		t.Fatalf("revert --import %d after a merge committed meanwhile: %v, want ErrScopeBusy (plan it again)", imp, err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	// Run again: the merged pay part is deleted.
	res, err := m.corr.RevertScope(ctx(t), ledger.Scope{SourceID: imp}, false)
	if err != nil {
		t.Fatalf("revert --import %d again: %v", imp, err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if got := m.payrollParts(); len(got) != 0 {
		t.Errorf("revert --import %d run again (%d pay parts replaced): payroll holds %v", imp, len(res.Unit.Supersede), got)
	}
}

var _ worker.CorrectionLedger = (*beforeApply)(nil)

// TestRace_ReplayBeforeMergeCommits: a replay of the period of a held entry
// (the console's replay of a period inside paysync run) commits between the
// daemon's merge plan and its commit: the merge's commit is stale (it was
// not, and payroll held the hours twice), so the entry is paid once.
func TestRace_ReplayBeforeMergeCommits(t *testing.T) {
	m := newMergeEnv(t)
	m.send(t, entryJSON("r1", sandbox.EmpMetteHansen, "T1", "8"))
	racing := *m.corr
	racing.L = &beforeApply{Ledger: m.led, hook: func() {
		p, _ := paysync.ParsePeriod("2026-11")
		res, err := m.corr.ReplayScope(ctx(t), ledger.Scope{Period: p}, false)
		t.Logf("replay --period 2026-11: %d pay parts to create, %v", len(res.Unit.PayParts), err)
	}}
	res, err := racing.Merge(ctx(t))
	t.Logf("merge after the replay: held %d, busy %v, %v", res.Held, res.Busy, err)
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range m.sb.State().Companies {
		n += len(c.PayParts)
	}
	if n != 1 {
		t.Errorf("one 8-hour entry: payroll holds %d pay parts (%v), want 1", n, m.payrollParts())
	}
}
