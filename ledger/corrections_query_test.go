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

// corrPart is a planned pay part of T1 with units, from entries.
func corrPart(company, employee, units string, es ...paysync.Entry) paysync.PlannedPayPart {
	p := paysync.PlannedPayPart{
		CompanyID:    company,
		PayPartInput: paysync.PayPartInput{EmployeeID: employee, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec(units)}},
		EmployeeName: "Name of " + employee,
	}
	for _, e := range es {
		p.Entries = append(p.Entries, e.Ref())
	}
	return p
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

// correct commits an import of name bringing new versions of paid
// entries and applies them as one unit: the live pay parts they are in
// are replaced by parts (their entries by entry id). It returns the unit
// and its batches.
func correct(t *testing.T, l *Ledger, name string, versions []paysync.Entry, parts ...paysync.PlannedPayPart) (int64, []int64) {
	t.Helper()
	in := ImportIntent{Source: src(name, name+" payload")}
	for _, v := range versions {
		in.AddCorrection(newEntry(t, v, paysync.EntryMapped), nil)
	}
	c := commit(t, l, in)
	pcs, err := l.PendingCorrections(t.Context(), 100)
	if err != nil || len(pcs) != len(versions) {
		t.Fatalf("PendingCorrections = %d, %v; want %d", len(pcs), err, len(versions))
	}
	status := map[int64]NewEntryStatus{}
	var rows []int64
	for _, pc := range pcs {
		st := NewEntryStatus{Status: paysync.EntryMapped}
		if pc.New.Deleted {
			st = NewEntryStatus{Status: paysync.EntrySkipped, Note: "deleted"}
		}
		status[pc.Entry] = st
		rows = append(rows, pc.Entry)
	}
	live, err := l.PartsOfEntries(t.Context(), rows)
	if err != nil {
		t.Fatal(err)
	}
	rowOf := map[string]int64{}
	for _, p := range live {
		for _, le := range p.Entries {
			rowOf[le.Entry.ID] = le.Row
		}
	}
	cor := Correction{SourceID: c.SourceID, CompanyID: live[0].CompanyID, Pending: pcs, Status: status, Supersede: live}
	for _, p := range parts {
		var rs []int64
		for _, r := range p.Entries {
			rs = append(rs, rowOf[r.ID])
		}
		cor.PayParts = append(cor.PayParts, p)
		cor.PayPartRows = append(cor.PayPartRows, rs)
	}
	unit, batches, err := l.ApplyCorrection(t.Context(), cor)
	if err != nil {
		t.Fatalf("ApplyCorrection: %v", err)
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

// TestLedger_CorrectionDetail follows units through their life: applied
// (what they replace still in payroll), sent, a later unit correcting the
// same entry again before the first one's pay part was sent, and a
// tombstone whose unit only deletes.
func TestLedger_CorrectionDetail(t *testing.T) {
	l, c := newLedger(t)
	e1 := corrEntry("v1.ndjson", 1, "e1", "A", "X", "8")
	e2 := corrEntry("v1.ndjson", 2, "e2", "A", "X", "2")
	e3 := corrEntry("v1.ndjson", 3, "e3", "B", "Y", "5")
	first := commit(t, l, ImportIntent{
		Source:   src("v1.ndjson", "v1"),
		Entries:  []NewEntry{newEntry(t, e1, paysync.EntryMapped), newEntry(t, e2, paysync.EntryMapped), newEntry(t, e3, paysync.EntryMapped)},
		PayParts: []paysync.PlannedPayPart{corrPart("A", "X", "10", e1, e2), corrPart("B", "Y", "5", e3)},
	})
	for _, b := range first.BatchIDs {
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
			name: "applied, nothing sent yet",
			act: func(t *testing.T) {
				c.Advance(time.Hour)
				e1b := corrEntry("v2.ndjson", 4, "e1", "A", "X", "8.5")
				units[0], batches[0] = correct(t, l, "v2.ndjson", []paysync.Entry{e1b}, corrPart("A", "X", "10.5", e1b, e2))
			},
			unit: &units[0],
			want: `unit 1: import 2 v2.ndjson, company A, 1 entries, 1 replaced (1 to delete), 1 new (1 not sent), batches [3], pending
entry e1: v1.ndjson:1 (import 1) 8 mapped -> v2.ndjson:4 (import 2) 8.5 mapped
replaced 1 batch 1 X T1 10 created payroll "p1" [v1.ndjson:1 e1, v1.ndjson:2 e2]: to_delete
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
			want: `unit 1: import 2 v2.ndjson, company A, 1 entries, 1 replaced (0 to delete), 1 new (0 not sent), batches [3], done
entry e1: v1.ndjson:1 (import 1) 8 mapped -> v2.ndjson:4 (import 2) 8.5 mapped
replaced 1 batch 1 X T1 10 deleted payroll "p1" [v1.ndjson:1 e1, v1.ndjson:2 e2]: deleted
new 3 batch 3 X T1 10.5 created payroll "p3" [v2.ndjson:4 e1, v1.ndjson:2 e2]
delta A X T1: units 10 -> 10.5, amount - -> -, [1] -> [3]
`,
		},
		{
			name: "e1 corrected again, its pay part replaced before it was sent",
			act: func(t *testing.T) {
				c.Advance(time.Hour)
				e1c := corrEntry("v3.ndjson", 1, "e1", "A", "X", "9")
				units[1], batches[1] = correct(t, l, "v3.ndjson", []paysync.Entry{e1c}, corrPart("A", "X", "11", e1c, e2))
				c.Advance(time.Hour)
				e1d := corrEntry("v4.ndjson", 1, "e1", "A", "X", "7")
				units[2], batches[2] = correct(t, l, "v4.ndjson", []paysync.Entry{e1d}, corrPart("A", "X", "9", e1d, e2))
			},
			unit: &units[1],
			// Its after version is still 9 (the entry holds 7 now), and
			// its pay part, never sent, is simply not sent.
			want: `unit 2: import 3 v3.ndjson, company A, 1 entries, 1 replaced (1 to delete), 1 new (0 not sent), batches [4], pending
entry e1: v2.ndjson:4 (import 2) 8.5 mapped -> v3.ndjson:1 (import 3) 9 mapped
replaced 3 batch 3 X T1 10.5 created payroll "p3" [v2.ndjson:4 e1, v1.ndjson:2 e2]: to_delete
new 4 batch 4 X T1 11 deleted payroll "" [v3.ndjson:1 e1, v1.ndjson:2 e2]
delta A X T1: units 10.5 -> 11, amount - -> -, [3] -> [4]
`,
		},
		{
			name: "the unit that replaced a pay part never sent",
			unit: &units[2],
			want: `unit 3: import 4 v4.ndjson, company A, 1 entries, 1 replaced (0 to delete), 1 new (1 not sent), batches [5], pending
entry e1: v3.ndjson:1 (import 3) 9 mapped -> v4.ndjson:1 (import 4) 7 mapped
replaced 4 batch 4 X T1 11 deleted payroll "" [v3.ndjson:1 e1, v1.ndjson:2 e2]: not_sent
new 5 batch 5 X T1 9 pending payroll "" [v4.ndjson:1 e1, v1.ndjson:2 e2]
delta A X T1: units 11 -> 9, amount - -> -, [4] -> [5]
`,
		},
		{
			name: "a tombstone: an empty batch carries the delete",
			act: func(t *testing.T) {
				c.Advance(time.Hour)
				var u int64
				u, _ = correct(t, l, "v5.ndjson", []paysync.Entry{corrEntry("v5.ndjson", 1, "e3", "", "", "deleted")})
				if u != 4 {
					t.Fatalf("tombstone unit %d, want 4", u)
				}
			},
			unit: new(int64(4)),
			want: `unit 4: import 5 v5.ndjson, company B, 1 entries, 1 replaced (1 to delete), 0 new (0 not sent), batches [6], pending
entry e3: v1.ndjson:3 (import 1) 5 mapped -> v5.ndjson:1 (import 5) deleted skipped
replaced 2 batch 2 Y T1 5 created payroll "p2" [v1.ndjson:3 e3]: to_delete
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
			want: `unit 3: import 4 v4.ndjson, company A, 1 entries, 1 replaced (0 to delete), 1 new (1 not sent), batches [5 7], pending
entry e1: v3.ndjson:1 (import 3) 9 mapped -> v4.ndjson:1 (import 4) 7 mapped
replaced 4 batch 4 X T1 11 deleted payroll "" [v3.ndjson:1 e1, v1.ndjson:2 e2]: not_sent
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
	e1 := corrEntry("v1.ndjson", 1, "e1", "A", "X", "8")
	e2 := corrEntry("v1.ndjson", 2, "e2", "B", "Y", "5")
	first := commit(t, l, ImportIntent{
		Source:   src("v1.ndjson", "v1"),
		Entries:  []NewEntry{newEntry(t, e1, paysync.EntryMapped), newEntry(t, e2, paysync.EntryMapped)},
		PayParts: []paysync.PlannedPayPart{corrPart("A", "X", "8", e1), corrPart("B", "Y", "5", e2)},
	})
	for _, b := range first.BatchIDs {
		sendAll(t, l, b)
	}
	c.Advance(time.Hour)
	e1b := corrEntry("v2.ndjson", 1, "e1", "A", "X", "8.5")
	_, bs := correct(t, l, "v2.ndjson", []paysync.Entry{e1b}, corrPart("A", "X", "8.5", e1b))
	if err := l.SetBatchState(t.Context(), bs[0], paysync.BatchFailed, "503"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	e2b := corrEntry("v3.ndjson", 1, "e2", "B", "Y", "6")
	correct(t, l, "v3.ndjson", []paysync.Entry{e2b}, corrPart("B", "Y", "6", e2b))

	for _, tc := range []struct {
		name string
		f    CorrectionFilter
		want []string
	}{
		{"all", CorrectionFilter{}, []string{"2 import 3 B pending", "1 import 2 A failed"}},
		{"by import", CorrectionFilter{SourceID: 2}, []string{"1 import 2 A failed"}},
		{"an import without corrections", CorrectionFilter{SourceID: 1}, nil},
		{"by company", CorrectionFilter{CompanyID: "B"}, []string{"2 import 3 B pending"}},
		{"since", CorrectionFilter{Since: t0.Add(90 * time.Minute)}, []string{"2 import 3 B pending"}},
		{"since, none", CorrectionFilter{Since: t0.Add(24 * time.Hour)}, nil},
		{"all of them", CorrectionFilter{SourceID: 3, CompanyID: "B", Since: t0}, []string{"2 import 3 B pending"}},
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

// TestApplyCorrection_StaleEntry: a unit planned from entries as stored (a
// cutoff, a replay) is refused as stale when an entry changed since it was
// read (intake took a held entry again with other content), so that what
// payroll gets always matches what the ledger holds.
func TestApplyCorrection_StaleEntry(t *testing.T) {
	l, _ := newLedger(t)
	ctx := t.Context()
	e := ent("a.ndjson", 1, "st-1", "8")
	commit(t, l, ImportIntent{Source: src("a.ndjson", "a"), Entries: []NewEntry{newEntry(t, e, paysync.EntryMapped)}})
	nov, _ := paysync.ParsePeriod(e.Date[:7])
	stored, err := l.EntriesIn(ctx, Scope{Period: nov})
	if err != nil || len(stored) != 1 {
		t.Fatalf("EntriesIn = %v, %v", stored, err)
	}
	le := stored[0]
	planned := Correction{Pending: []PendingCorrection{{Entry: le.Row, New: le.Entry, Old: le.Entry, Hash: "cutoff", OldHash: le.Hash}},
		Status: map[int64]NewEntryStatus{le.Row: {Status: paysync.EntryMapped}}, CompanyID: "A", Source: &NewSource{Kind: paysync.SourceReplay, Name: "cutoff", Hash: "c1"}}
	// Meanwhile the entry is taken again with other content.
	changed := ent("b.ndjson", 1, "st-1", "6")
	commit(t, l, ImportIntent{Source: src("b.ndjson", "b"), Entries: []NewEntry{newEntry(t, changed, paysync.EntryRejected)}})
	if _, _, err := l.ApplyCorrection(ctx, planned); !errors.Is(err, ErrCorrectionStale) {
		t.Fatalf("ApplyCorrection after the entry changed = %v, want ErrCorrectionStale", err)
	}
}
