package ledger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// corrEntry is an entry of company for employee with hours (a tombstone
// when hours is "deleted").
func corrEntry(source string, line int, id, company, employee, hours string) paysync.Entry {
	e := paysync.Entry{ID: id, Source: source, Line: line}
	if hours == "deleted" {
		e.Deleted = true
		return e
	}
	e.CompanyID, e.EmployeeID, e.Date, e.Code = company, employee, "2026-11-02", "T1"
	h, err := paysync.ParseHours(hours, false)
	if err != nil {
		panic(err)
	}
	e.Hours = h
	return e
}

// sendAll records every pending pay part of batch as created with payroll
// ids "p<id>", as the sender would after a successful call.
func sendAll(t *testing.T, l *Ledger, batch int64) {
	t.Helper()
	ids := map[int64]string{}
	for _, it := range mustItems(t, l, batch) {
		if it.State == paysync.PartPending {
			ids[it.ID] = fmt.Sprintf("p%d", it.ID)
		}
	}
	att, err := l.BeginAttempt(t.Context(), batch, paysync.AttemptCreate, len(ids))
	if err != nil {
		t.Fatalf("BeginAttempt(%d): %v", batch, err)
	}
	if err := l.RecordCreated(t.Context(), batch, att, ids, paysync.AttemptOK); err != nil {
		t.Fatalf("RecordCreated(%d): %v", batch, err)
	}
}

// deleteSuperseded records the delete of what unit replaces, as the
// sender does before the unit's batches go out.
func deleteSuperseded(t *testing.T, l *Ledger, unit int64) {
	t.Helper()
	for _, company := range []string{"A", "B"} {
		deleteSupersededOf(t, l, unit, company)
	}
}

func deleteSupersededOf(t *testing.T, l *Ledger, unit int64, company string) {
	t.Helper()
	byBatch, order, err := l.SupersededBy(t.Context(), unit, company)
	if err != nil {
		t.Fatalf("SupersededBy(%d): %v", unit, err)
	}
	for _, b := range order {
		items := byBatch[b]
		att, err := l.BeginSupersedeDelete(t.Context(), b, len(items))
		if err != nil {
			t.Fatal(err)
		}
		ids := itemIDs(items)
		if err := l.MarkDeleting(t.Context(), att, ids); err != nil {
			t.Fatal(err)
		}
		if err := l.MarkSupersededRemoved(t.Context(), b, att, ids, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// correct commits an import of name bringing new versions of entries
// (corrections, as intake records them) and reconciles: the groups they
// change are planned again as one unit per company, which replaces the
// live pay parts of those groups. It returns the (one) unit and its
// batches.
func correct(t *testing.T, l *Ledger, name string, versions ...paysync.Entry) (int64, []int64) {
	t.Helper()
	c := hold(t, l, name, nil, versions)
	batches := reconcile(t, l, c.SourceID)
	if len(batches) == 0 {
		t.Fatalf("%s: the reconcile recorded nothing", name)
	}
	unit := mustBatch(t, l, batches[0]).Correction
	for _, b := range batches {
		if u := mustBatch(t, l, b).Correction; u != unit || u == 0 {
			t.Fatalf("%s: batches %v of units %d and %d, want one", name, batches, unit, u)
		}
	}
	return unit, batches
}

// describe renders a unit in detail, one line per thing, for comparison.
func describe(d CorrectionDetail) string {
	var b strings.Builder
	fmt.Fprintf(&b, "unit %d: import %d %s, company %s, %d entries, %d replaced (%d to delete), %d new (%d not sent), batches %v, %s\n",
		d.ID, d.SourceID, d.ImportName, d.CompanyID, d.Entries, d.Replaced, d.ToDelete, d.New, d.NotSent, d.Batches, d.State)
	ver := func(v EntryVersion) string {
		what := v.Entry.Hours.String()
		if v.Entry.Deleted {
			what = "deleted"
		}
		return fmt.Sprintf("%s:%d (import %d) %s %s", v.Source, v.Line, v.ImportID, what, v.Status)
	}
	for _, c := range d.Corrected {
		fmt.Fprintf(&b, "entry %s: %s -> %s\n", c.EntryID, ver(c.Before), ver(c.After))
	}
	part := func(it ItemDetail) string {
		var from []string
		for _, e := range it.Entries {
			from = append(from, fmt.Sprintf("%s:%d %s", e.Source, e.Line, e.EntryID))
		}
		return fmt.Sprintf("%d batch %d %s %s %s %s payroll %q [%s]", it.ID, it.BatchID, it.EmployeeID, it.Code, it.Units.Decimal, it.State, it.PayrollID, strings.Join(from, ", "))
	}
	for _, r := range d.ReplacedParts {
		fmt.Fprintf(&b, "replaced %s: %s\n", part(r.ItemDetail), r.Status)
	}
	for _, n := range d.NewParts {
		fmt.Fprintf(&b, "new %s\n", part(n))
	}
	opt := func(n decimal.NullDecimal) string {
		if !n.Valid {
			return "-"
		}
		return n.Decimal.String()
	}
	for _, x := range d.Delta {
		fmt.Fprintf(&b, "delta %s %s %s: units %s -> %s, amount %s -> %s, %v -> %v\n",
			x.CompanyID, x.EmployeeID, x.Code, opt(x.UnitsBefore), opt(x.UnitsAfter), opt(x.AmountBefore), opt(x.AmountAfter), x.Replaced, x.Created)
	}
	return b.String()
}

// TestLedger_CorrectionDetail follows plan units (ApplyPlan) through their
// life: the first plan, a correction whose unit replaces a pay part payroll
// holds (delete first, then create), a later unit replacing a pay part
// never sent, a tombstone whose unit only deletes, and a split batch.
func TestLedger_CorrectionDetail(t *testing.T) {
	l, c := newLedger(t)
	e1 := corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8")
	e2 := corr("v1.ndjson", 2, "e2", "A", "X", "2026-11-03", "2")
	e3 := corr("v1.ndjson", 3, "e3", "B", "Y", "2026-11-02", "5")
	first := hold(t, l, "v1.ndjson", []paysync.Entry{e1, e2, e3}, nil)
	for _, b := range reconcile(t, l, first.SourceID) {
		sendAll(t, l, b)
	}

	var units [3]int64
	var batches [3][]int64
	stages := []struct {
		name string
		act  func(t *testing.T)
		unit *int64
		want string
	}{
		{
			name: "the first plan: one unit per company",
			unit: new(int64(1)),
			want: `unit 1: import 1 v1.ndjson, company A, 1 entries, 0 replaced (0 to delete), 1 new (0 not sent), batches [1], done
new 1 batch 1 X T1 10 created payroll "p1" [v1.ndjson:1 e1, v1.ndjson:2 e2]
delta A X T1: units - -> 10, amount - -> -, [] -> [1]
`,
		},
		{
			name: "applied, nothing sent yet",
			act: func(t *testing.T) {
				c.Advance(time.Hour)
				units[0], batches[0] = correct(t, l, "v2.ndjson", corr("v2.ndjson", 4, "e1", "A", "X", "2026-11-02", "8.5"))
			},
			unit: &units[0],
			want: `unit 3: import 2 v2.ndjson, company A, 1 entries, 1 replaced (1 to delete), 1 new (1 not sent), batches [3], pending
replaced 1 batch 1 X T1 10 created payroll "p1" []: to_delete
new 3 batch 3 X T1 10.5 pending payroll "" [v2.ndjson:4 e1, v1.ndjson:2 e2]
delta A X T1: units 10 -> 10.5, amount - -> -, [1] -> [3]
`,
		},
		{
			name: "sent: the replaced pay part deleted first, then the new one created",
			act: func(t *testing.T) {
				deleteSuperseded(t, l, units[0])
				sendAll(t, l, batches[0][0])
			},
			unit: &units[0],
			want: `unit 3: import 2 v2.ndjson, company A, 1 entries, 1 replaced (0 to delete), 1 new (0 not sent), batches [3], done
replaced 1 batch 1 X T1 10 deleted payroll "p1" []: deleted
new 3 batch 3 X T1 10.5 created payroll "p3" [v2.ndjson:4 e1, v1.ndjson:2 e2]
delta A X T1: units 10 -> 10.5, amount - -> -, [1] -> [3]
`,
		},
		{
			name: "e1 corrected again, its pay part replaced before it was sent",
			act: func(t *testing.T) {
				c.Advance(time.Hour)
				units[1], batches[1] = correct(t, l, "v3.ndjson", corr("v3.ndjson", 1, "e1", "A", "X", "2026-11-02", "9"))
				c.Advance(time.Hour)
				units[2], batches[2] = correct(t, l, "v4.ndjson", corr("v4.ndjson", 1, "e1", "A", "X", "2026-11-02", "7"))
			},
			unit: &units[1],
			// Its pay part, never sent, is simply not sent.
			want: `unit 4: import 3 v3.ndjson, company A, 1 entries, 1 replaced (1 to delete), 1 new (0 not sent), batches [4], pending
replaced 3 batch 3 X T1 10.5 created payroll "p3" []: to_delete
new 4 batch 4 X T1 11 deleted payroll "" []
delta A X T1: units 10.5 -> 11, amount - -> -, [3] -> [4]
`,
		},
		{
			name: "the unit that replaced a pay part never sent",
			unit: &units[2],
			want: `unit 5: import 4 v4.ndjson, company A, 1 entries, 1 replaced (0 to delete), 1 new (1 not sent), batches [5], pending
replaced 4 batch 4 X T1 11 deleted payroll "" []: not_sent
new 5 batch 5 X T1 9 pending payroll "" [v4.ndjson:1 e1, v1.ndjson:2 e2]
delta A X T1: units 11 -> 9, amount - -> -, [4] -> [5]
`,
		},
		{
			name: "a tombstone: an empty batch carries the delete",
			act: func(t *testing.T) {
				c.Advance(time.Hour)
				if u, _ := correct(t, l, "v5.ndjson", corr("v5.ndjson", 1, "e3", "", "", "", "deleted")); u != 6 {
					t.Fatalf("tombstone unit %d, want 6", u)
				}
			},
			unit: new(int64(6)),
			want: `unit 6: import 5 v5.ndjson, company B, 1 entries, 1 replaced (1 to delete), 0 new (0 not sent), batches [6], pending
replaced 2 batch 2 Y T1 5 created payroll "p2" []: to_delete
delta B Y T1: units 5 -> -, amount - -> -, [2] -> []
`,
		},
		{
			name: "a unit's batch split: its pay parts in the child batch are still the unit's",
			act: func(t *testing.T) {
				if _, err := l.SplitBatch(t.Context(), batches[2][0], 0, "too large", [][]int64{{5}}); err != nil {
					t.Fatal(err)
				}
			},
			unit: &units[2],
			want: `unit 5: import 4 v4.ndjson, company A, 1 entries, 1 replaced (0 to delete), 1 new (1 not sent), batches [5 7], pending
replaced 4 batch 4 X T1 11 deleted payroll "" []: not_sent
new 5 batch 7 X T1 9 pending payroll "" [v4.ndjson:1 e1, v1.ndjson:2 e2]
delta A X T1: units 11 -> 9, amount - -> -, [4] -> [5]
`,
		},
	}
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			if s.act != nil {
				s.act(t)
			}
			d, err := l.CorrectionDetail(t.Context(), *s.unit)
			if err != nil {
				t.Fatalf("CorrectionDetail(%d): %v", *s.unit, err)
			}
			if got := describe(d); got != s.want {
				t.Errorf("got\n%s\nwant\n%s", got, s.want)
			}
			if d.Import.ID != d.SourceID || d.Import.Name != d.ImportName {
				t.Errorf("import %+v, want %d %s", d.Import, d.SourceID, d.ImportName)
			}
		})
	}
	// Whatever was replaced, payroll ends up with the desired totals.
	deleteSuperseded(t, l, 6)
	sendAll(t, l, 7)
	checkPaid(t, l, "after everything was sent")
	checkTotals(t, l, "after everything was sent",
		"A|X|T1|2026-11: 32400 s (2) live [9@7:created]",
		"B|Y|T1|2026-11: - s (0) live []")

	t.Run("not found", func(t *testing.T) {
		if _, err := l.CorrectionDetail(t.Context(), 99); !errors.Is(err, ErrNotFound) {
			t.Errorf("CorrectionDetail(99) = %v, want ErrNotFound", err)
		}
	})
}

// TestLedger_ListCorrections: units by import, company and time, newest
// first; a unit whose batch failed is failed.
func TestLedger_ListCorrections(t *testing.T) {
	l, c := newLedger(t)
	e1 := corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8")
	e2 := corr("v1.ndjson", 2, "e2", "B", "Y", "2026-11-02", "5")
	first := hold(t, l, "v1.ndjson", []paysync.Entry{e1, e2}, nil)
	for _, b := range reconcile(t, l, first.SourceID) {
		sendAll(t, l, b)
	}
	c.Advance(time.Hour)
	_, bs := correct(t, l, "v2.ndjson", corr("v2.ndjson", 1, "e1", "A", "X", "2026-11-02", "8.5"))
	if err := l.SetBatchState(t.Context(), bs[0], paysync.BatchFailed, "503"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	correct(t, l, "v3.ndjson", corr("v3.ndjson", 1, "e2", "B", "Y", "2026-11-02", "6"))

	for _, tc := range []struct {
		name string
		f    CorrectionFilter
		want []string
	}{
		{"all", CorrectionFilter{}, []string{"4 import 3 B pending", "3 import 2 A failed", "2 import 1 B done", "1 import 1 A done"}},
		{"by import", CorrectionFilter{SourceID: 2}, []string{"3 import 2 A failed"}},
		{"the first import's plan", CorrectionFilter{SourceID: 1}, []string{"2 import 1 B done", "1 import 1 A done"}},
		{"an import without units", CorrectionFilter{SourceID: 99}, nil},
		{"by company", CorrectionFilter{CompanyID: "B"}, []string{"4 import 3 B pending", "2 import 1 B done"}},
		{"since", CorrectionFilter{Since: t0.Add(90 * time.Minute)}, []string{"4 import 3 B pending"}},
		{"since, none", CorrectionFilter{Since: t0.Add(24 * time.Hour)}, nil},
		{"all of them", CorrectionFilter{SourceID: 3, CompanyID: "B", Since: t0}, []string{"4 import 3 B pending"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us, err := l.ListCorrections(t.Context(), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range us {
				got = append(got, fmt.Sprintf("%d import %d %s %s", u.ID, u.SourceID, u.CompanyID, u.State))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
