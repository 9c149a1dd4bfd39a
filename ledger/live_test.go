package ledger

import (
	"fmt"
	"slices"
	"testing"

	"github.com/paysync/paysync"
)

// livePartsOf returns "entry@batch:state[:replay]" for the live pay parts
// of ids, in order.
func livePartsOf(t *testing.T, l *Ledger, ids ...string) []string {
	t.Helper()
	lps, err := l.LiveParts(t.Context(), ids)
	if err != nil {
		t.Fatalf("LiveParts: %v", err)
	}
	out := []string{}
	for _, lp := range lps {
		s := fmt.Sprintf("%s@%d:%s", lp.EntryID, lp.BatchID, lp.State)
		if lp.Replay {
			s += ":replay"
		}
		out = append(out, s)
	}
	return out
}

// TestLedger_LiveParts: a pay part is live while created, or pending in a
// batch still to be sent; not once deleted, gone or rejected, nor pending
// in a reverted batch. A replay's pay parts are marked as such, whether the
// replay has a source of its own (CommitReplay) or, as replays were
// recorded before, only names the batch it replayed.
func TestLedger_LiveParts(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	e1, e2, e3 := ent("f.csv", 1, "e1", "1"), ent("f.csv", 2, "e2", "2"), ent("f.csv", 3, "e3", "3")
	first := commit(t, l, ImportIntent{
		Source:    src("f.csv", "f"),
		Entries:   []NewEntry{newEntry(t, e1, paysync.EntryMapped), newEntry(t, e2, paysync.EntryMapped), newEntry(t, e3, paysync.EntryRejected)},
		PayParts:  []paysync.PlannedPayPart{pp("A", "a", e1.Ref()), pp("A", "b", e2.Ref())},
		BatchSize: 1,
	})
	b1, b2 := first.BatchIDs[0], first.BatchIDs[1]
	if got, want := livePartsOf(t, l, "e1", "e2", "e3", "nope"), []string{"e1@1:pending", "e2@2:pending"}; !slices.Equal(got, want) {
		t.Fatalf("committed: live = %v, want %v", got, want)
	}
	// b1 created, then reverted; b2 reverted before it was sent.
	i1 := mustItems(t, l, b1)
	if err := l.RecordCreated(ctx, b1, 0, map[int64]string{i1[0].ID: "p1"}, "ok"); err != nil {
		t.Fatal(err)
	}
	if got, want := livePartsOf(t, l, "e1", "e2"), []string{"e1@1:created", "e2@2:pending"}; !slices.Equal(got, want) {
		t.Fatalf("b1 created: live = %v, want %v", got, want)
	}
	if err := l.MarkRemoved(ctx, b1, 0, []int64{i1[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.SetBatchState(ctx, b2, paysync.BatchReverted, "reverted before it was sent"); err != nil {
		t.Fatal(err)
	}
	if got := livePartsOf(t, l, "e1", "e2"); len(got) != 0 {
		t.Fatalf("reverted: live = %v, want none", got)
	}

	// A replay of batch 1 with its own source; e3 (rejected before) too.
	rc, err := l.CommitReplay(ctx, ReplayIntent{Of: first.SourceID, Batch: b1, Name: "batch 1 of import 1 (f.csv)", Entries: 2,
		PayParts: []paysync.PlannedPayPart{pp("A", "a", e1.Ref()), pp("A", "c", e3.Ref())}, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rc.SourceID == first.SourceID || len(rc.BatchIDs) != 1 {
		t.Fatalf("CommitReplay = %+v", rc)
	}
	rb := mustBatch(t, l, rc.BatchIDs[0])
	if rb.SourceID != rc.SourceID || rb.ReplayOf != b1 || rb.State != paysync.BatchPending {
		t.Errorf("replay batch = %+v", rb)
	}
	s, err := l.Source(ctx, rc.SourceID)
	if err != nil || s.Kind != paysync.SourceReplay || s.Status != "committed" || s.Entries != 2 {
		t.Errorf("replay source = %+v, %v", s, err)
	}
	if of, err := l.SourceReplayOf(ctx, rc.SourceID); err != nil || of != first.SourceID {
		t.Errorf("SourceReplayOf = %d, %v; want %d", of, err, first.SourceID)
	}
	if got, want := livePartsOf(t, l, "e1", "e2", "e3"), []string{"e1@3:pending:replay", "e3@3:pending:replay"}; !slices.Equal(got, want) {
		t.Fatalf("replayed: live = %v, want %v", got, want)
	}
	// e3 is paid now: a later import must not take it again.
	known, err := l.LookupEntries(ctx, []string{"e3"})
	if err != nil || known["e3"].Status != paysync.EntryMapped {
		t.Errorf("e3 after the replay = %+v, %v; want mapped", known["e3"], err)
	}

	// A replay as recorded before: in the original source, naming the batch.
	old := commit(t, l, ImportIntent{SourceID: first.SourceID, ReplayOf: b2, PayParts: []paysync.PlannedPayPart{pp("A", "b", e2.Ref())}})
	if got, want := livePartsOf(t, l, "e2"), []string{"e2@4:pending:replay"}; !slices.Equal(got, want) {
		t.Fatalf("old-style replay: live = %v, want %v", got, want)
	}
	// Rejected by payroll: not live.
	items := mustItems(t, l, old.BatchIDs[0])
	if err := l.RejectItems(ctx, old.BatchIDs[0], 0, map[int64]string{items[0].ID: "no"}); err != nil {
		t.Fatal(err)
	}
	if got := livePartsOf(t, l, "e2"); len(got) != 0 {
		t.Fatalf("rejected: live = %v, want none", got)
	}

	// Reverting the import takes its replays along.
	bs, err := l.BatchesOfImport(ctx, first.SourceID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := batchIDs(bs), []int64{b1, b2, rb.ID, old.BatchIDs[0]}; !slices.Equal(got, want) {
		t.Errorf("BatchesOfImport = %v, want %v", got, want)
	}
}

// TestLedger_LinkReplay: a re-drive is linked once, never to itself, and
// never overwrites a link.
func TestLedger_LinkReplay(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	refused := commit(t, l, ImportIntent{Source: src("f.csv", "f"), Rejected: true, Rejects: []NewReject{{Message: "bad"}}})
	e := ent("f.csv", 1, "e1", "1")
	again := commit(t, l, ImportIntent{Source: src("f.csv", "f"), Entries: []NewEntry{newEntry(t, e, paysync.EntryMapped)},
		PayParts: []paysync.PlannedPayPart{pp("A", "a", e.Ref())}})
	other := commit(t, l, ImportIntent{Source: src("g.csv", "g")})
	for range 2 {
		if err := l.LinkReplay(ctx, again.SourceID, refused.SourceID); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.LinkReplay(ctx, again.SourceID, other.SourceID); err != nil {
		t.Fatal(err)
	}
	if err := l.LinkReplay(ctx, refused.SourceID, refused.SourceID); err != nil {
		t.Fatal(err)
	}
	if of, _ := l.SourceReplayOf(ctx, again.SourceID); of != refused.SourceID {
		t.Errorf("re-drive links to %d, want %d", of, refused.SourceID)
	}
	if of, _ := l.SourceReplayOf(ctx, refused.SourceID); of != 0 {
		t.Errorf("the refused import links to %d, want none", of)
	}
	bs, err := l.BatchesOfImport(ctx, refused.SourceID)
	if err != nil || !slices.Equal(batchIDs(bs), again.BatchIDs) {
		t.Errorf("BatchesOfImport(refused) = %v, %v; want the re-drive's %v", batchIDs(bs), err, again.BatchIDs)
	}
}
