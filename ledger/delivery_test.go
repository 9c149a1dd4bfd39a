package ledger

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

// fixture is one committed import with a single batch of n pay parts, each
// from its own entry (line i+1, id "<company>-e<i>").
type fixture struct {
	source int64
	batch  int64
	items  []int64
}

func setupBatch(t *testing.T, l *Ledger, company string, n int) fixture {
	t.Helper()
	name := company + ".csv"
	var es []NewEntry
	var pps []paysync.PlannedPayPart
	for i := range n {
		e := ent(name, i+1, fmt.Sprintf("%s-e%d", company, i), "1")
		es = append(es, newEntry(t, e, paysync.EntryMapped))
		pps = append(pps, pp(company, fmt.Sprintf("emp%d", i), e.Ref()))
	}
	c := commit(t, l, ImportIntent{Source: src(name, name+fmt.Sprint(n)), Entries: es, PayParts: pps, BatchSize: n})
	if len(c.BatchIDs) != 1 {
		t.Fatalf("setup: %d batches", len(c.BatchIDs))
	}
	return fixture{source: c.SourceID, batch: c.BatchIDs[0], items: itemIDs(mustItems(t, l, c.BatchIDs[0]))}
}

func begin(t *testing.T, l *Ledger, batch int64, op paysync.AttemptOp, items int) int64 {
	t.Helper()
	id, err := l.BeginAttempt(t.Context(), batch, op, items)
	if err != nil {
		t.Fatalf("BeginAttempt: %v", err)
	}
	return id
}

func lastAttempt(t *testing.T, l *Ledger, batch int64) Attempt {
	t.Helper()
	as, err := l.Attempts(t.Context(), batch, 1)
	if err != nil || len(as) != 1 {
		t.Fatalf("Attempts(%d, 1) = %v, %v", batch, as, err)
	}
	return as[0]
}

func TestLedger_BeginAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		op           paysync.AttemptOp
		state        paysync.BatchState
		attempts     int
		pendingAfter bool
	}{
		{"create", paysync.BatchSending, 1, true},
		{"delete", paysync.BatchReverting, 0, true},
		{"reconcile", paysync.BatchPending, 0, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			l, clk := newLedger(t)
			f := setupBatch(t, l, "A", 3)
			clk.Advance(time.Minute)
			id := begin(t, l, f.batch, tt.op, 3)
			b := mustBatch(t, l, f.batch)
			if b.State != tt.state || b.Attempts != tt.attempts {
				t.Errorf("after BeginAttempt(%s): state %s, attempts %d; want %s, %d", tt.op, b.State, b.Attempts, tt.state, tt.attempts)
			}
			want := Attempt{ID: id, BatchID: f.batch, Op: tt.op, Items: 3, StartedAt: t0.Add(time.Minute), Outcome: "in_flight"}
			if a := lastAttempt(t, l, f.batch); a != want {
				t.Errorf("attempt = %+v, want %+v", a, want)
			}
		})
	}
	t.Run("unknown op", func(t *testing.T) {
		l, _ := newLedger(t)
		f := setupBatch(t, l, "A", 1)
		before := dump(t, l)
		if _, err := l.BeginAttempt(t.Context(), f.batch, "explode", 1); err == nil {
			t.Error("BeginAttempt(explode) succeeded")
		}
		if after := dump(t, l); after != before {
			t.Error("a failed BeginAttempt changed the ledger")
		}
	})
	t.Run("create twice counts attempts", func(t *testing.T) {
		l, _ := newLedger(t)
		f := setupBatch(t, l, "A", 1)
		a1 := begin(t, l, f.batch, "create", 1)
		if err := l.EndAttempt(t.Context(), a1, "error", 503, "unavailable", paysync.BatchPending); err != nil {
			t.Fatal(err)
		}
		begin(t, l, f.batch, "create", 1)
		if b := mustBatch(t, l, f.batch); b.Attempts != 2 || b.State != paysync.BatchSending {
			t.Errorf("batch = %+v, want sending with 2 attempts", b)
		}
	})
}

func TestLedger_RecordCreated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		created    []int // indexes of items given payroll ids
		noAttempt  bool
		wantState  paysync.BatchState
		wantCounts [2]int // pending, created
	}{
		{name: "all", created: []int{0, 1, 2}, wantState: paysync.BatchCreated, wantCounts: [2]int{0, 3}},
		{name: "partial", created: []int{1}, wantState: paysync.BatchPending, wantCounts: [2]int{2, 1}},
		{name: "all but one", created: []int{0, 2}, wantState: paysync.BatchPending, wantCounts: [2]int{1, 2}},
		{name: "none", created: nil, wantState: paysync.BatchPending, wantCounts: [2]int{3, 0}},
		{name: "all without attempt", created: []int{0, 1, 2}, noAttempt: true, wantState: paysync.BatchCreated, wantCounts: [2]int{0, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newLedger(t)
			ctx := t.Context()
			f := setupBatch(t, l, "A", 3)
			att := begin(t, l, f.batch, "create", 3)
			if err := l.EndAttempt(ctx, att, "error", 500, "boom", ""); err != nil { // leaves the state, sets no error
				t.Fatal(err)
			}
			if err := l.SetBatchState(ctx, f.batch, paysync.BatchSending, "earlier error"); err != nil {
				t.Fatal(err)
			}
			att = begin(t, l, f.batch, "create", 3)
			clk.Advance(time.Second)
			ids := map[int64]string{}
			for _, i := range tt.created {
				ids[f.items[i]] = fmt.Sprintf("payroll-%d", i)
			}
			a := att
			if tt.noAttempt {
				a = 0
			}
			if err := l.RecordCreated(ctx, f.batch, a, ids, "ok"); err != nil {
				t.Fatalf("RecordCreated: %v", err)
			}
			b := mustBatch(t, l, f.batch)
			if b.State != tt.wantState || b.Pending != tt.wantCounts[0] || b.Created != tt.wantCounts[1] || b.LastError != "" || !b.UpdatedAt.Equal(t0.Add(time.Second)) {
				t.Errorf("batch = %+v, want %s with %v pending/created and no error", b, tt.wantState, tt.wantCounts)
			}
			for i, it := range mustItems(t, l, f.batch) {
				if pid, ok := ids[it.ID]; ok {
					if it.State != paysync.PartCreated || it.PayrollID != pid {
						t.Errorf("item %d: %s %q, want created %q", i, it.State, it.PayrollID, pid)
					}
				} else if it.State != paysync.PartPending || it.PayrollID != "" {
					t.Errorf("item %d: %s %q, want pending", i, it.State, it.PayrollID)
				}
			}
			last := lastAttempt(t, l, f.batch)
			if tt.noAttempt {
				if last.Outcome != "in_flight" || !last.FinishedAt.IsZero() {
					t.Errorf("attempt touched without an attempt id: %+v", last)
				}
			} else if last.Outcome != "ok" || !last.FinishedAt.Equal(t0.Add(time.Second)) || last.Status != 0 || last.Error != "" {
				t.Errorf("attempt = %+v, want finished ok", last)
			}
		})
	}
}

func TestLedger_RecordCreatedErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ids  func(a, b fixture) map[int64]string
		msg  string
	}{
		{
			name: "item already created",
			ids:  func(a, b fixture) map[int64]string { return map[int64]string{a.items[0]: "new-0", a.items[1]: "p-1"} },
			msg:  "not pending",
		},
		{
			name: "item of another batch",
			ids:  func(a, b fixture) map[int64]string { return map[int64]string{a.items[1]: "p-1", b.items[0]: "p-b"} },
			msg:  "not pending",
		},
		{
			name: "unknown item",
			ids:  func(a, b fixture) map[int64]string { return map[int64]string{a.items[1]: "p-1", 9999: "p-x"} },
			msg:  "not pending",
		},
		{
			name: "payroll id already recorded",
			ids:  func(a, b fixture) map[int64]string { return map[int64]string{a.items[1]: "first"} },
			msg:  "already recorded",
		},
		{
			name: "payroll id of another company",
			ids:  func(a, b fixture) map[int64]string { return map[int64]string{a.items[1]: "b-created"} },
			msg:  "already recorded",
		},
		{
			name: "same payroll id twice in one call",
			ids:  func(a, b fixture) map[int64]string { return map[int64]string{a.items[1]: "twin", a.items[2]: "twin"} },
			msg:  "already recorded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newLedger(t)
			ctx := t.Context()
			a := setupBatch(t, l, "A", 3)
			b := setupBatch(t, l, "B", 2)
			if err := l.RecordCreated(ctx, a.batch, 0, map[int64]string{a.items[0]: "first"}, "ok"); err != nil {
				t.Fatal(err)
			}
			if err := l.RecordCreated(ctx, b.batch, 0, map[int64]string{b.items[1]: "b-created"}, "ok"); err != nil {
				t.Fatal(err)
			}
			att := begin(t, l, a.batch, "create", 2)
			clk.Advance(time.Minute)
			before := dump(t, l)
			err := l.RecordCreated(ctx, a.batch, att, tt.ids(a, b), "ok")
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("RecordCreated = %v, want an error saying %q", err, tt.msg)
			}
			if after := dump(t, l); after != before {
				t.Errorf("a failed RecordCreated changed the ledger:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestLedger_RejectItems(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	// Three pay parts; the last one aggregates two entries.
	e := []paysync.Entry{ent("r.csv", 1, "r1", "1"), ent("r.csv", 2, "r2", "1"), ent("r.csv", 3, "r3", "1"), ent("r.csv", 4, "r4", "1")}
	var es []NewEntry
	for _, x := range e {
		es = append(es, newEntry(t, x, paysync.EntryMapped))
	}
	c := commit(t, l, ImportIntent{
		Source:   src("r.csv", "r"),
		Entries:  es,
		Rejects:  []NewReject{{Line: 9, Message: "import-time"}},
		PayParts: []paysync.PlannedPayPart{pp("A", "a", e[0].Ref()), pp("A", "b", e[1].Ref()), pp("A", "c", e[2].Ref(), e[3].Ref())},
	})
	batch := c.BatchIDs[0]
	items := itemIDs(mustItems(t, l, batch))
	att := begin(t, l, batch, "create", 3)
	clk.Advance(time.Minute)

	// One rejected, others still pending: the batch goes back to pending.
	if err := l.RejectItems(ctx, batch, att, map[int64]string{items[2]: "code T1 is not allowed for c"}); err != nil {
		t.Fatal(err)
	}
	b := mustBatch(t, l, batch)
	if b.State != paysync.BatchPending || b.Rejected != 1 || b.Pending != 2 {
		t.Errorf("after one reject: %+v, want pending with 1 rejected", b)
	}
	it := mustItems(t, l, batch)[2]
	if it.State != paysync.PartRejected || it.Error != "code T1 is not allowed for c" || it.PayrollID != "" {
		t.Errorf("rejected item = %+v", it)
	}
	if a := lastAttempt(t, l, batch); a.Outcome != "rejected" || a.FinishedAt.IsZero() {
		t.Errorf("attempt = %+v, want finished rejected", a)
	}
	rj, err := l.Rejects(ctx, c.SourceID)
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	hint := "fix the mapping or the entry, then replay the batch (paysync replay BATCH_ID)"
	want := []Reject{
		{Line: 9, Message: "import-time", At: t0},
		{EntryID: "r3", Line: 3, Field: "pay_part", Message: "code T1 is not allowed for c", Hint: hint, BatchID: batch, At: at},
		{EntryID: "r4", Line: 4, Field: "pay_part", Message: "code T1 is not allowed for c", Hint: hint, BatchID: batch, At: at},
	}
	if !reflect.DeepEqual(rj, want) {
		t.Errorf("Rejects = %+v\nwant %+v", rj, want)
	}

	// The rest: one created, one rejected; nothing pending, so created.
	if err := l.RecordCreated(ctx, batch, 0, map[int64]string{items[0]: "p0"}, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := l.RejectItems(ctx, batch, 0, map[int64]string{items[1]: "employee b left"}); err != nil {
		t.Fatal(err)
	}
	b = mustBatch(t, l, batch)
	if b.State != paysync.BatchCreated || b.Created != 1 || b.Rejected != 2 || b.Pending != 0 {
		t.Errorf("after all settled: %+v, want created", b)
	}
	if rj, _ := l.Rejects(ctx, c.SourceID); len(rj) != 4 || rj[3].EntryID != "r2" || rj[3].Message != "employee b left" {
		t.Errorf("Rejects = %+v", rj)
	}
}

// TestLedger_RejectItemsNotPending: a created item cannot be rejected after
// the fact; the call must fail and change nothing.
func TestLedger_RejectItemsNotPending(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	f := setupBatch(t, l, "A", 2)
	if err := l.RecordCreated(ctx, f.batch, 0, map[int64]string{f.items[0]: "p0"}, "ok"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	before := dump(t, l)
	err := l.RejectItems(ctx, f.batch, 0, map[int64]string{f.items[0]: "too late"})
	if after := dump(t, l); err == nil || after != before {
		t.Fatalf("BUG (delivery.go RejectItems): an item that is not pending (here created, payroll id p0) is left as it is, "+
			"but a reject row is still recorded for its entries and the call succeeds (err = %v); check RowsAffected as RecordCreated does", err)
	}
}

func TestLedger_SplitBatch(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	f := setupBatch(t, l, "A", 5)
	att := begin(t, l, f.batch, "create", 5)
	clk.Advance(time.Minute)
	children, err := l.SplitBatch(ctx, f.batch, att, "400: batch too large", [][]int64{{f.items[3], f.items[0]}, {}, {f.items[1], f.items[2], f.items[4]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 {
		t.Fatalf("children = %v, want 2 (the empty group makes none)", children)
	}
	parent := mustBatch(t, l, f.batch)
	if parent.State != paysync.BatchSplit || parent.LastError != "400: batch too large" || parent.Items != 0 {
		t.Errorf("parent = %+v, want split with no items", parent)
	}
	if a := lastAttempt(t, l, f.batch); a.Outcome != "rejected" || a.Error != "400: batch too large" || a.FinishedAt.IsZero() {
		t.Errorf("attempt = %+v", a)
	}
	wantGroups := [][]int64{{f.items[3], f.items[0]}, {f.items[1], f.items[2], f.items[4]}}
	for i, cid := range children {
		c := mustBatch(t, l, cid)
		if c.State != paysync.BatchPending || c.ParentID != f.batch || c.SourceID != f.source || c.CompanyID != "A" || c.Attempts != 0 ||
			c.Items != len(wantGroups[i]) || !c.CreatedAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("child %d = %+v", i, c)
		}
		items := mustItems(t, l, cid)
		if got := itemIDs(items); !slices.Equal(got, wantGroups[i]) {
			t.Errorf("child %d items %v, want %v (in group order)", i, got, wantGroups[i])
		}
		for j, it := range items {
			if it.Seq != j || it.State != paysync.PartPending || it.BatchID != cid {
				t.Errorf("child %d item %d = %+v", i, j, it)
			}
		}
	}
	open, err := l.OpenBatches(ctx, 0)
	if err != nil || !slices.Equal(batchIDs(open), children) {
		t.Errorf("OpenBatches = %v, %v; want the children %v", batchIDs(open), err, children)
	}
	fam, err := l.Family(ctx, f.batch)
	if err != nil || !slices.Equal(batchIDs(fam), append([]int64{f.batch}, children...)) {
		t.Errorf("Family = %v, %v", batchIDs(fam), err)
	}
	// Split again: grandchildren belong to the family too.
	grand, err := l.SplitBatch(ctx, children[1], 0, "again", [][]int64{{f.items[1]}, {f.items[2], f.items[4]}})
	if err != nil {
		t.Fatal(err)
	}
	fam, err = l.Family(ctx, f.batch)
	if want := append(append([]int64{f.batch}, children...), grand...); err != nil || !slices.Equal(batchIDs(fam), want) {
		t.Errorf("Family = %v, %v; want %v", batchIDs(fam), err, want)
	}
	if fam, err := l.Family(ctx, children[0]); err != nil || !slices.Equal(batchIDs(fam), children[:1]) {
		t.Errorf("Family(child without children) = %v, %v", batchIDs(fam), err)
	}
	// Entries follow their pay parts.
	if es := entriesOfBatch(t, l, children[0]); len(es) != 2 || es[0].ID != "A-e0" || es[1].ID != "A-e3" {
		t.Errorf("entries of child 0 = %v", es)
	}
}

func TestLedger_EndAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, msg string
		outcome   paysync.AttemptOutcome
		state     paysync.BatchState
		status    int
		wantState paysync.BatchState
	}{
		{"to failed", "503 unavailable", "error", paysync.BatchFailed, 503, paysync.BatchFailed},
		{"to pending", "deadline exceeded", "timeout", paysync.BatchPending, 0, paysync.BatchPending},
		{"state unchanged", "boom", "error", "", 500, paysync.BatchSending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newLedger(t)
			f := setupBatch(t, l, "A", 2)
			att := begin(t, l, f.batch, "create", 2)
			clk.Advance(time.Second)
			if err := l.EndAttempt(t.Context(), att, tt.outcome, tt.status, tt.msg, tt.state); err != nil {
				t.Fatal(err)
			}
			b := mustBatch(t, l, f.batch)
			wantErr := tt.msg
			if tt.state == "" {
				wantErr = ""
			}
			if b.State != tt.wantState || b.LastError != wantErr || b.Pending != 2 {
				t.Errorf("batch = %+v, want %s with last error %q", b, tt.wantState, wantErr)
			}
			want := Attempt{ID: att, BatchID: f.batch, Op: "create", Items: 2, StartedAt: t0, FinishedAt: t0.Add(time.Second),
				Outcome: tt.outcome, Status: tt.status, Error: tt.msg}
			if a := lastAttempt(t, l, f.batch); a != want {
				t.Errorf("attempt = %+v\nwant %+v", a, want)
			}
		})
	}
	t.Run("unknown attempt", func(t *testing.T) {
		l, _ := newLedger(t)
		f := setupBatch(t, l, "A", 1)
		before := dump(t, l)
		if err := l.EndAttempt(t.Context(), 4242, "ok", 0, "", paysync.BatchCreated); err == nil || !strings.Contains(err.Error(), "4242") {
			t.Errorf("EndAttempt(unknown) = %v, want an error naming it", err)
		}
		if after := dump(t, l); after != before {
			t.Error("changed the ledger")
		}
		_ = f
	})
}

func TestLedger_BatchQueries(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	a := setupBatch(t, l, "A", 2) // t0
	clk.Advance(time.Hour)
	b := setupBatch(t, l, "B", 2) // t0+1h
	clk.Advance(time.Hour)
	c := setupBatch(t, l, "C", 1) // t0+2h
	d := setupBatch(t, l, "D", 1) // t0+2h
	// a: created, b: sending, c: failed, d: pending.
	if err := l.RecordCreated(ctx, a.batch, 0, map[int64]string{a.items[0]: "a0", a.items[1]: "a1"}, "ok"); err != nil {
		t.Fatal(err)
	}
	begin(t, l, b.batch, "create", 2)
	cAtt := begin(t, l, c.batch, "create", 1)
	if err := l.EndAttempt(ctx, cAtt, "error", 500, "gave up", paysync.BatchFailed); err != nil {
		t.Fatal(err)
	}

	open, err := l.OpenBatches(ctx, 0)
	if want := []int64{b.batch, c.batch, d.batch}; err != nil || !slices.Equal(batchIDs(open), want) {
		t.Errorf("OpenBatches(0) = %v, %v; want %v (oldest first)", batchIDs(open), err, want)
	}
	open, err = l.OpenBatches(ctx, c.source)
	if want := []int64{c.batch}; err != nil || !slices.Equal(batchIDs(open), want) {
		t.Errorf("OpenBatches(source c) = %v, %v; want %v", batchIDs(open), err, want)
	}
	if open, err := l.OpenBatches(ctx, a.source); err != nil || len(open) != 0 {
		t.Errorf("OpenBatches(source a) = %v, %v; want none", batchIDs(open), err)
	}
	for state, want := range map[paysync.BatchState][]int64{
		paysync.BatchCreated: {a.batch}, paysync.BatchSending: {b.batch}, paysync.BatchFailed: {c.batch}, paysync.BatchPending: {d.batch}, paysync.BatchSplit: {},
	} {
		got, err := l.BatchesInState(ctx, state)
		if err != nil || !slices.Equal(batchIDs(got), want) {
			t.Errorf("BatchesInState(%s) = %v, %v; want %v", state, batchIDs(got), err, want)
		}
	}
	if got := mustBatch(t, l, c.batch); got.LastError != "gave up" || got.Attempts != 1 {
		t.Errorf("failed batch = %+v", got)
	}

	tests := []struct {
		name string
		f    BatchFilter
		want []int64
	}{
		{"all, newest first", BatchFilter{}, []int64{d.batch, c.batch, b.batch, a.batch}},
		{"state", BatchFilter{State: paysync.BatchCreated}, []int64{a.batch}},
		{"since", BatchFilter{Since: t0.Add(time.Hour)}, []int64{d.batch, c.batch, b.batch}},
		{"since, other zone", BatchFilter{Since: t0.Add(90 * time.Minute).In(time.FixedZone("x", 5*3600))}, []int64{d.batch, c.batch}},
		{"since the future", BatchFilter{Since: t0.Add(3 * time.Hour)}, []int64{}},
		{"source", BatchFilter{SourceID: b.source}, []int64{b.batch}},
		{"state and since", BatchFilter{State: paysync.BatchPending, Since: t0.Add(time.Hour)}, []int64{d.batch}},
		{"state and since, none", BatchFilter{State: paysync.BatchCreated, Since: t0.Add(time.Hour)}, []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.ListBatches(ctx, tt.f)
			if err != nil || !slices.Equal(batchIDs(got), tt.want) {
				t.Errorf("ListBatches(%+v) = %v, %v; want %v", tt.f, batchIDs(got), err, tt.want)
			}
		})
	}

	// ListSources also lists migration 13's source 0 (the reconciler's
	// units of no import), received when the ledger was made (wall clock):
	// callers that list imports leave it out.
	imports := func(ss []Source) []Source {
		var out []Source
		for _, s := range ss {
			if s.ID != 0 {
				out = append(out, s)
			}
		}
		return out
	}
	srcs, err := l.ListSources(ctx, t0.Add(time.Hour))
	if srcs = imports(srcs); err != nil || len(srcs) != 3 || srcs[0].ID != d.source || srcs[2].ID != b.source {
		t.Errorf("ListSources(since 1h) = %+v, %v", srcs, err)
	}
	all, err := l.ListSources(ctx, time.Time{})
	if err != nil || len(all) != 4 || len(imports(all)) != 4 {
		t.Errorf("ListSources(all) = %+v, %v; want the 4 imports (not the reconciler's source 0)", all, err)
	}
}

// TestLedger_ListBatchesSinceSubsecond: times are stored as RFC 3339 text
// with a variable number of decimals, which does not sort as time within a
// second ("09:00:00.5Z" < "09:00:00Z" as text).
func TestLedger_ListBatchesSinceSubsecond(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	clk.Set(t0.Add(500 * time.Millisecond))
	f := setupBatch(t, l, "A", 1)
	got, err := l.ListBatches(t.Context(), BatchFilter{Since: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(batchIDs(got), []int64{f.batch}) {
		t.Fatalf("BUG (ledger.go ts, query.go ListBatches/ListSources): a batch created at %s is not listed since %s: "+
			"RFC3339Nano text does not sort as time; store and compare a fixed-width form such as 2006-01-02T15:04:05.000000000Z07:00",
			t0.Add(500*time.Millisecond).Format(time.RFC3339Nano), t0.Format(time.RFC3339Nano))
	}
}

func TestLedger_Attempts(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	a := setupBatch(t, l, "A", 1)
	b := setupBatch(t, l, "B", 1)
	var ids []int64
	for i, batch := range []int64{a.batch, b.batch, a.batch, a.batch} {
		clk.Advance(time.Second)
		id := begin(t, l, batch, "create", 1)
		ids = append(ids, id)
		if i < 3 {
			if err := l.EndAttempt(ctx, id, "error", 502, "bad gateway", paysync.BatchPending); err != nil {
				t.Fatal(err)
			}
		}
	}
	attIDs := func(as []Attempt) []int64 {
		out := []int64{}
		for _, x := range as {
			out = append(out, x.ID)
		}
		return out
	}
	tests := []struct {
		batch int64
		limit int
		want  []int64
	}{
		{a.batch, 0, []int64{ids[0], ids[2], ids[3]}},
		{a.batch, 2, []int64{ids[2], ids[3]}},
		{b.batch, 0, []int64{ids[1]}},
		{0, 0, ids},
		{0, 1, ids[3:]},
		{4242, 0, []int64{}},
	}
	for _, tt := range tests {
		got, err := l.Attempts(ctx, tt.batch, tt.limit)
		if err != nil || !slices.Equal(attIDs(got), tt.want) {
			t.Errorf("Attempts(%d, %d) = %v, %v; want %v (oldest first)", tt.batch, tt.limit, attIDs(got), err, tt.want)
		}
	}
	all, _ := l.Attempts(ctx, a.batch, 0)
	if all[0].StartedAt != t0.Add(time.Second) || all[0].FinishedAt != t0.Add(time.Second) || all[0].Status != 502 || all[2].Outcome != "in_flight" || !all[2].FinishedAt.IsZero() {
		t.Errorf("attempts = %+v", all)
	}
	d, err := l.BatchDetail(ctx, a.batch)
	if err != nil || !slices.Equal(attIDs(d.Log), []int64{ids[0], ids[2], ids[3]}) || d.Attempts != 3 || d.State != paysync.BatchSending {
		t.Errorf("BatchDetail = %+v, %v", d, err)
	}
}

func TestLedger_MarkRemoved(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	f := setupBatch(t, l, "A", 4)
	// Three created, one rejected.
	if err := l.RecordCreated(ctx, f.batch, 0, map[int64]string{f.items[0]: "p0", f.items[1]: "p1", f.items[2]: "p2"}, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := l.RejectItems(ctx, f.batch, 0, map[int64]string{f.items[3]: "no"}); err != nil {
		t.Fatal(err)
	}
	if b := mustBatch(t, l, f.batch); b.State != paysync.BatchCreated {
		t.Fatalf("batch = %+v, want created", b)
	}
	att := begin(t, l, f.batch, "delete", 3)
	if b := mustBatch(t, l, f.batch); b.State != paysync.BatchReverting || b.Attempts != 0 {
		t.Errorf("after BeginAttempt(delete): %+v, want reverting", b)
	}
	clk.Advance(time.Minute)

	// Partly removed: still reverting. A pending/rejected/unknown id is ignored.
	if err := l.MarkRemoved(ctx, f.batch, att, []int64{f.items[0], f.items[3], 4242}, []int64{f.items[1]}); err != nil {
		t.Fatal(err)
	}
	b := mustBatch(t, l, f.batch)
	if b.State != paysync.BatchReverting || b.Deleted != 1 || b.Gone != 1 || b.Created != 1 || b.Rejected != 1 {
		t.Errorf("after a partial revert: %+v, want reverting with 1 deleted, 1 gone, 1 created", b)
	}
	if a := lastAttempt(t, l, f.batch); a.Op != "delete" || a.Outcome != "ok" || a.FinishedAt.IsZero() {
		t.Errorf("attempt = %+v", a)
	}

	// The last one, deleted by us. Reverted.
	att = begin(t, l, f.batch, "delete", 1)
	if err := l.MarkRemoved(ctx, f.batch, att, []int64{f.items[2]}, nil); err != nil {
		t.Fatal(err)
	}
	b = mustBatch(t, l, f.batch)
	if b.State != paysync.BatchReverted || b.Deleted != 2 || b.Gone != 1 || b.Created != 0 || b.LastError != "" {
		t.Errorf("after the revert: %+v, want reverted", b)
	}
	states := map[string]paysync.PartState{}
	for _, it := range mustItems(t, l, f.batch) {
		states[it.PayrollID] = it.State
	}
	if want := map[string]paysync.PartState{"p0": paysync.PartDeleted, "p1": paysync.PartGone, "p2": paysync.PartDeleted, "": paysync.PartRejected}; !reflect.DeepEqual(states, want) {
		t.Errorf("item states %v, want %v", states, want)
	}
	// Payroll ids stay known: reconciliation never claims them again.
	if known, _ := l.Known(ctx, "A"); !known["p0"] || !known["p2"] {
		t.Errorf("Known after revert = %v", known)
	}
	if rev, _ := l.BatchesInState(ctx, paysync.BatchReverted); !slices.Equal(batchIDs(rev), []int64{f.batch}) {
		t.Errorf("BatchesInState(reverted) = %v", batchIDs(rev))
	}
}

// TestLedger_MarkRemovedNothingCreated: a batch reverted before anything was
// created (pending or failed) becomes reverted at once and is no longer open.
func TestLedger_MarkRemovedNothingCreated(t *testing.T) {
	t.Parallel()
	for _, state := range []paysync.BatchState{paysync.BatchPending, paysync.BatchFailed} {
		t.Run(string(state), func(t *testing.T) {
			l, _ := newLedger(t)
			ctx := t.Context()
			f := setupBatch(t, l, "A", 2)
			if err := l.SetBatchState(ctx, f.batch, state, "x"); err != nil {
				t.Fatal(err)
			}
			if err := l.MarkRemoved(ctx, f.batch, 0, nil, nil); err != nil {
				t.Fatal(err)
			}
			if b := mustBatch(t, l, f.batch); b.State != paysync.BatchReverted || b.LastError != "" || b.Pending != 2 {
				t.Errorf("batch = %+v, want reverted", b)
			}
			if open, err := l.OpenBatches(ctx, 0); err != nil || len(open) != 0 {
				t.Errorf("OpenBatches = %v, %v; want none", batchIDs(open), err)
			}
		})
	}
}

// TestLedger_RecordCreatedThenBegin: the result of one batch and the next
// batch's attempt in one transaction; when the next batch is not pending,
// only the result is recorded; when an item is at fault, the error names it
// and nothing changes.
func TestLedger_RecordCreatedThenBegin(t *testing.T) {
	l, _ := newLedger(t)
	ctx := t.Context()
	a := setupBatch(t, l, "A", 2)
	b := setupBatch(t, l, "B", 3)
	att := begin(t, l, a.batch, "create", 2)

	before := dump(t, l)
	if _, err := l.RecordCreatedThenBegin(ctx, a.batch, att, map[int64]string{a.items[0]: "p0", 9999: "px"}, "ok", b.batch, 3); err == nil || !strings.Contains(err.Error(), "not pending") {
		t.Errorf("an unknown item: %v, want an error saying not pending", err)
	}
	if after := dump(t, l); after != before {
		t.Errorf("a failed RecordCreatedThenBegin changed the ledger:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	next, err := l.RecordCreatedThenBegin(ctx, a.batch, att, map[int64]string{a.items[0]: "p0", a.items[1]: "p1"}, "ok", b.batch, 3)
	if err != nil || next == 0 {
		t.Fatalf("RecordCreatedThenBegin = %d, %v", next, err)
	}
	if got := mustBatch(t, l, a.batch); got.State != paysync.BatchCreated || got.Created != 2 {
		t.Errorf("batch A = %+v, want created with 2", got)
	}
	if got := mustBatch(t, l, b.batch); got.State != paysync.BatchSending || got.Attempts != 1 {
		t.Errorf("batch B = %+v, want sending after its first attempt", got)
	}
	if la := lastAttempt(t, l, b.batch); la.ID != next || la.Items != 3 || la.Outcome != "in_flight" {
		t.Errorf("B's attempt = %+v, want %d in flight with 3 items", la, next)
	}
	if la := lastAttempt(t, l, a.batch); la.ID != att || la.Outcome != "ok" {
		t.Errorf("A's attempt = %+v, want ok", la)
	}

	// B is sending now: recording its result begins nothing more, and A
	// (created) cannot be begun.
	if next2, err := l.RecordCreatedThenBegin(ctx, b.batch, next, map[int64]string{b.items[0]: "q0", b.items[1]: "q1", b.items[2]: "q2"}, "ok", a.batch, 2); err != nil || next2 != 0 {
		t.Errorf("next batch not pending: %d, %v; want 0 and the result recorded", next2, err)
	}
	if got := mustBatch(t, l, b.batch); got.State != paysync.BatchCreated || got.Created != 3 {
		t.Errorf("batch B = %+v, want created with 3", got)
	}
	if got := mustBatch(t, l, a.batch); got.State != paysync.BatchCreated || got.Attempts != 1 {
		t.Errorf("batch A = %+v, want created after its one attempt, not begun again", got)
	}
}
