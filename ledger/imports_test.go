package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// sameEntry compares entries field by field, decimals by value.
func sameEntry(t *testing.T, got, want paysync.Entry) {
	t.Helper()
	if got.ID != want.ID || got.Source != want.Source || got.Line != want.Line {
		t.Errorf("entry %s: got id/source/line %q %q %d, want %q %q %d", want.ID, got.ID, got.Source, got.Line, want.ID, want.Source, want.Line)
	}
	if got.Hours.Valid != want.Hours.Valid || !got.Hours.Seconds.Equal(want.Hours.Seconds) {
		t.Errorf("entry %s: hours %v (%s s), want %v (%s s)", want.ID, got.Hours, got.Hours.Seconds, want.Hours, want.Hours.Seconds)
	}
	if !got.Numbers.Equal(want.Numbers) {
		t.Errorf("entry %s: numbers %v, want %v", want.ID, got.Numbers, want.Numbers)
	}
	// Everything else, through JSON (which leaves out Source and Line).
	_, gj, err1 := paysync.EntryHash(got)
	_, wj, err2 := paysync.EntryHash(want)
	if err1 != nil || err2 != nil || !bytes.Equal(gj, wj) {
		t.Errorf("entry %s: content differs: %s vs %s (%v %v)", want.ID, gj, wj, err1, err2)
	}
}

func TestLedger_CommitImport(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()

	yes := true
	e1 := ent("hours.csv", 1, "e1", "0:20:00") // 1/3 hour: exact only in seconds
	e1.Numbers = paysync.Numbers{Units: paysync.Dec("7.50"), Rate: paysync.Dec("123.456789012345678901"), Amount: paysync.Dec("-0.01")}
	e1.Tags = []string{"a", "b"}
	e1.Billable = &yes
	e1.Fields = map[string]string{"km": "12,5"}
	e1.Description = "Ünïcode – ok"
	e2 := ent("hours.csv", 2, "e2", "7.5")
	e3 := ent("hours.csv", 3, "e3", "25:30:15")
	e4 := ent("hours.csv", 4, "e4", "")
	payload := "id,hours\ne1,0:20:00\ne2,7.5\ne3,25:30:15\ne4,\n" + strings.Repeat("padding,0\n", 100)

	var pps []paysync.PlannedPayPart
	// A,B,A,A,B,A,A: five for A, two for B, interleaved.
	for i, c := range []string{"A", "B", "A", "A", "B", "A", "A"} {
		refs := []paysync.EntryRef{e1.Ref()}
		if i%2 == 1 {
			refs = []paysync.EntryRef{e1.Ref(), e2.Ref(), e1.Ref()} // aggregated, with a repeated ref
		}
		p := pp(c, fmt.Sprintf("emp%d", i), refs...)
		p.Rate = paysync.Dec(fmt.Sprintf("%d.10", i))
		pps = append(pps, p)
	}
	in := ImportIntent{
		Source: src("hours.csv", payload),
		Entries: []NewEntry{
			newEntry(t, e1, paysync.EntryMapped),
			newEntry(t, e2, paysync.EntryMapped),
			newEntry(t, e3, paysync.EntryRejected),
			{Entry: e4, Hash: "h4", Status: paysync.EntrySkipped, Note: "no hours"},
		},
		Duplicates: 3,
		Rejects: []NewReject{
			{EntryID: "e3", Line: 3, Field: "code", Message: "no rule for type normal", Hint: "add a rule"},
			{Line: 9, Message: "bad line"},
		},
		PayParts:  pps,
		BatchSize: 2,
	}
	c := commit(t, l, in)

	// Source.
	if c.SourceID == 0 {
		t.Fatal("no source id")
	}
	s, err := l.Source(ctx, c.SourceID)
	if err != nil {
		t.Fatal(err)
	}
	want := Source{ID: c.SourceID, Kind: "file", Name: "hours.csv", Hash: paysync.PayloadHash([]byte(payload)), Format: "csv", Size: int64(len(payload)),
		Status: "committed", Entries: 4, Duplicates: 3, Rejects: 2, ReceivedAt: t0}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Source = %+v\nwant     %+v", s, want)
	}
	if _, err := l.Source(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Source(999) = %v, want ErrNotFound", err)
	}
	got, err := l.SourcePayload(ctx, c.SourceID)
	if err != nil || string(got) != payload {
		t.Errorf("SourcePayload = %q, %v; want the payload", got, err)
	}
	var raw []byte
	if err := l.db.QueryRowContext(ctx, "SELECT payload FROM sources WHERE id = ?", c.SourceID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) || len(raw) >= len(payload) {
		t.Errorf("stored payload is not gzip (%d bytes, starts % x)", len(raw), raw[:min(4, len(raw))])
	}
	if found, ok, err := l.SourceByHash(ctx, paysync.PayloadHash([]byte(payload))); err != nil || !ok || found != want {
		t.Errorf("SourceByHash = %+v, %v, %v", found, ok, err)
	}
	if _, ok, err := l.SourceByHash(ctx, "nope"); err != nil || ok {
		t.Errorf("SourceByHash(unknown) = %v, %v; want not found", ok, err)
	}

	// Entries: all four, in order, with their source and line; exact hours and decimals.
	es := entriesOfSource(t, l, c.SourceID)
	if len(es) != 4 {
		t.Fatalf("EntriesOfSource: %d entries, want 4", len(es))
	}
	for i, w := range []paysync.Entry{e1, e2, e3, e4} {
		sameEntry(t, es[i], w)
	}
	for _, tc := range []struct {
		i       int
		seconds string
	}{{0, "1200"}, {1, "27000"}, {2, "91815"}} {
		if !es[tc.i].Hours.Seconds.Equal(decimal.RequireFromString(tc.seconds)) {
			t.Errorf("entry %s: %s seconds, want %s", es[tc.i].ID, es[tc.i].Hours.Seconds, tc.seconds)
		}
	}
	if es[3].Hours.Valid {
		t.Errorf("entry e4: hours %v, want none", es[3].Hours)
	}
	if r := es[0].Rate.Decimal.String(); r != "123.456789012345678901" {
		t.Errorf("rate = %s, want 123.456789012345678901", r)
	}
	if es[0].Fields["km"] != "12,5" || !reflect.DeepEqual(es[0].Tags, []string{"a", "b"}) || es[0].Billable == nil || !*es[0].Billable {
		t.Errorf("entry e1 lost fields: %+v", es[0])
	}

	// Rejects.
	rj, err := l.Rejects(ctx, c.SourceID)
	if err != nil {
		t.Fatal(err)
	}
	wantRj := []Reject{
		{EntryID: "e3", Line: 3, Field: "code", Message: "no rule for type normal", Hint: "add a rule", At: t0},
		{Line: 9, Message: "bad line", At: t0},
	}
	if !reflect.DeepEqual(rj, wantRj) {
		t.Errorf("Rejects = %+v\nwant %+v", rj, wantRj)
	}

	// Batches: per company in order of first appearance, at most 2 each.
	wantBatches := []struct {
		company   string
		employees []string
	}{
		{"A", []string{"emp0", "emp2"}},
		{"A", []string{"emp3", "emp5"}},
		{"A", []string{"emp6"}},
		{"B", []string{"emp1", "emp4"}},
	}
	if len(c.BatchIDs) != len(wantBatches) {
		t.Fatalf("BatchIDs = %v, want %d batches", c.BatchIDs, len(wantBatches))
	}
	for i, wb := range wantBatches {
		b := mustBatch(t, l, c.BatchIDs[i])
		if b.CompanyID != wb.company || b.State != paysync.BatchPending || b.SourceID != c.SourceID || b.ParentID != 0 || b.ReplayOf != 0 ||
			b.Attempts != 0 || b.Items != len(wb.employees) || b.Pending != len(wb.employees) || !b.CreatedAt.Equal(t0) {
			t.Errorf("batch %d = %+v, want company %s pending with %d items", i, b, wb.company, len(wb.employees))
		}
		d, err := l.BatchDetail(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Log) != 0 {
			t.Errorf("batch %d: attempts %v, want none", i, d.Log)
		}
		if len(d.Items) != len(wb.employees) {
			t.Fatalf("batch %d: %d items, want %d", i, len(d.Items), len(wb.employees))
		}
		for j, it := range d.Items {
			k := 0
			fmt.Sscanf(wb.employees[j], "emp%d", &k)
			p := pps[k]
			if it.Seq != j || it.BatchID != b.ID || it.EmployeeID != p.EmployeeID || it.CompanyID != wb.company || it.Code != "T1" ||
				!it.Numbers.Equal(p.Numbers) || it.EmployeeName != p.EmployeeName || it.Description != "Normal hours" || it.Rule != "rule-1" ||
				it.State != paysync.PartPending || it.PayrollID != "" || it.Error != "" {
				t.Errorf("batch %d item %d = %+v, want pay part %+v", i, j, it.Item, p)
			}
			if it.Rate.Decimal.String() != fmt.Sprintf("%d.1", k) || it.Units.Decimal.String() != "7.5" || it.Amount.Valid {
				t.Errorf("batch %d item %d: numbers %v", i, j, it.Numbers)
			}
			wantRefs := []ItemEntry{{Source: "hours.csv", Line: 1, EntryID: "e1"}}
			if k%2 == 1 {
				wantRefs = append(wantRefs, ItemEntry{Source: "hours.csv", Line: 2, EntryID: "e2"})
			}
			if !reflect.DeepEqual(it.Entries, wantRefs) {
				t.Errorf("batch %d item %d: entries %+v, want %+v", i, j, it.Entries, wantRefs)
			}
		}
	}
	bs, err := l.BatchesOfSource(ctx, c.SourceID)
	if err != nil || !reflect.DeepEqual(batchIDs(bs), c.BatchIDs) {
		t.Errorf("BatchesOfSource = %v, %v; want %v", batchIDs(bs), err, c.BatchIDs)
	}
	if _, err := l.BatchDetail(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("BatchDetail(999) = %v, want ErrNotFound", err)
	}

	// The same content again, under another name: refused, nothing added.
	clk.Advance(1)
	before := dump(t, l)
	dup := in
	dup.Source = src("hours-copy.csv", payload)
	dup.Entries = []NewEntry{newEntry(t, ent("hours-copy.csv", 1, "new1", "1"), paysync.EntryMapped)}
	dup.PayParts = []paysync.PlannedPayPart{pp("C", "x", paysync.EntryRef{ID: "new1"})}
	if _, err := l.CommitImport(ctx, dup); !errors.Is(err, ErrDuplicateSource) {
		t.Errorf("CommitImport of the same content = %v, want ErrDuplicateSource", err)
	}
	if after := dump(t, l); after != before {
		t.Errorf("a refused duplicate changed the ledger:\n%s\nvs\n%s", before, after)
	}
}

func TestLedger_CommitImportBatchSizes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		companies string // one letter per pay part
		size      int
		want      []string // batches as company letter × items
	}{
		{"spec example", "AAAAABB", 2, []string{"AA", "AA", "A", "BB"}},
		{"interleaved", "ABCABCA", 2, []string{"AA", "A", "BB", "CC"}},
		{"exact fit", "AAAA", 2, []string{"AA", "AA"}},
		{"one each", "ABA", 1, []string{"A", "A", "B"}},
		{"default size 100", strings.Repeat("A", 101), 0, []string{strings.Repeat("A", 100), "A"}},
		{"no pay parts", "", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newLedger(t)
			e := ent("f.csv", 1, "e1", "1")
			var pps []paysync.PlannedPayPart
			for i, c := range tt.companies {
				pps = append(pps, pp(string(c), fmt.Sprint(i), e.Ref()))
			}
			c := commit(t, l, ImportIntent{
				Source:    src("f.csv", tt.name),
				Entries:   []NewEntry{newEntry(t, e, paysync.EntryMapped)},
				PayParts:  pps,
				BatchSize: tt.size,
			})
			var got []string
			for _, id := range c.BatchIDs {
				b := mustBatch(t, l, id)
				got = append(got, strings.Repeat(b.CompanyID, b.Items))
				// Items keep the order of the intent.
				prev := -1
				for _, it := range mustItems(t, l, id) {
					var k int
					fmt.Sscan(it.EmployeeID, &k)
					if k <= prev {
						t.Errorf("batch %d: pay part %d after %d", id, k, prev)
					}
					prev = k
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("batches %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLedger_LookupEntries(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	const n = 1203 // three chunks of 500
	var es []NewEntry
	var ids []string
	for i := range n {
		e := ent("big.ndjson", i+1, fmt.Sprintf("id-%04d", i), "1")
		ne := newEntry(t, e, []paysync.EntryStatus{paysync.EntryMapped, paysync.EntrySkipped, paysync.EntryRejected}[i%3])
		es = append(es, ne)
		ids = append(ids, e.ID)
	}
	c := commit(t, l, ImportIntent{Source: src("big.ndjson", "big"), Entries: es})
	ids = append(ids, "unknown-1", "unknown-2")

	got, err := l.LookupEntries(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Errorf("LookupEntries: %d known, want %d", len(got), n)
	}
	for _, ne := range es {
		k, ok := got[ne.Entry.ID]
		want := KnownEntry{Status: ne.Status, Hash: ne.Hash, SourceID: c.SourceID, SourceName: "big.ndjson", ImportedAt: t0, Date: ne.Entry.Date}
		if !ok || k != want {
			t.Errorf("%s: %+v, %v; want %+v", ne.Entry.ID, k, ok, want)
			break
		}
	}
	if _, ok := got["unknown-1"]; ok {
		t.Error("unknown id reported as known")
	}
	if got, err := l.LookupEntries(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("LookupEntries(nil) = %v, %v", got, err)
	}
}

// TestLedger_CommitImportEntryAgain: an entry seen before and never paid
// (rejected, skipped) is taken again with its new content; one that
// counts in the desired state (paid) never is: the whole import is
// refused (intake records its new content as a correction instead); once
// its import is reverted it no longer counts and is taken again.
func TestLedger_CommitImportEntryAgain(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	paid := newEntry(t, ent("one.csv", 3, "paid", "1"), paysync.EntryMapped)
	paid.Note = HeldNote
	first := commit(t, l, ImportIntent{
		Source: src("one.csv", "one"),
		Entries: []NewEntry{
			newEntry(t, ent("one.csv", 1, "rej", "1"), paysync.EntryRejected),
			newEntry(t, ent("one.csv", 2, "skip", "1"), paysync.EntrySkipped),
			paid,
		},
	})
	reconcile(t, l, first.SourceID) // paid counts, and has its pay part
	clk.Advance(3600e9)

	// Rejected and skipped entries come back with new content: taken.
	rej2 := ent("two.csv", 7, "rej", "2")
	rej2.Code = "FIXED"
	skip2 := ent("two.csv", 8, "skip", "3")
	held := func(e paysync.Entry) NewEntry {
		ne := newEntry(t, e, paysync.EntryMapped)
		ne.Note = HeldNote
		return ne
	}
	second := commit(t, l, ImportIntent{
		Source:  src("two.csv", "two"),
		Entries: []NewEntry{held(rej2), held(skip2)},
	})
	if len(second.BatchIDs) != 0 {
		t.Errorf("the second import made batches %v, want none (held for the reconciler)", second.BatchIDs)
	}
	known, err := l.LookupEntries(ctx, []string{"rej", "skip", "paid"})
	if err != nil {
		t.Fatal(err)
	}
	h2, _, _ := paysync.EntryHash(rej2)
	if k := known["rej"]; k.Status != paysync.EntryMapped || k.Hash != h2 || k.SourceID != second.SourceID || k.SourceName != "two.csv" {
		t.Errorf("rej after the second import: %+v", k)
	}
	if k := known["paid"]; k.Status != paysync.EntryMapped || k.SourceID != first.SourceID {
		t.Errorf("paid after the second import: %+v", k)
	}
	es := entriesOfSource(t, l, second.SourceID)
	if len(es) != 2 {
		t.Fatalf("entries of the second import = %v", es)
	}
	sameEntry(t, es[0], rej2)
	sameEntry(t, es[1], skip2)

	// A paid entry never comes back: the whole import is refused.
	before := dump(t, l)
	paid2 := ent("three.csv", 1, "paid", "9")
	_, err = l.CommitImport(ctx, ImportIntent{
		Source:  src("three.csv", "three"),
		Entries: []NewEntry{held(ent("three.csv", 2, "fresh", "1")), held(paid2)},
	})
	if err == nil || !strings.Contains(err.Error(), "paid") || !strings.Contains(err.Error(), "already") {
		t.Errorf("CommitImport of a paid entry: %v, want an 'already paid' error", err)
	}
	if after := dump(t, l); after != before {
		t.Errorf("a refused import changed the ledger:\n%s\nvs\n%s", before, after)
	}
	if _, ok, _ := l.SourceByHash(ctx, paysync.PayloadHash([]byte("three"))); ok {
		t.Error("the refused source was stored")
	}

	// Its import reverted, it no longer counts: taken again.
	if _, err := l.Revert(ctx, Target{Import: first.SourceID}); err != nil {
		t.Fatal(err)
	}
	four := commit(t, l, ImportIntent{Source: src("four.csv", "four"), Entries: []NewEntry{held(ent("four.csv", 1, "paid", "9"))}})
	if k, err := l.LookupEntries(ctx, []string{"paid"}); err != nil || k["paid"].SourceID != four.SourceID || k["paid"].Status != paysync.EntryMapped {
		t.Errorf("paid after its import was reverted and it came again: %+v, %v", k["paid"], err)
	}
}

// sameRefs compares entry refs regardless of order.
func sameRefs(got, want []ItemEntry) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[ItemEntry]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] == 0 {
			return false
		}
		seen[w]--
	}
	return true
}

func TestLedger_CommitImportErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   ImportIntent
		msg  string
	}{
		{
			name: "pay part of an unknown entry",
			in: ImportIntent{
				Source:   src("x.csv", "x"),
				Entries:  []NewEntry{newEntry(t, ent("x.csv", 1, "e1", "1"), paysync.EntryMapped)},
				PayParts: []paysync.PlannedPayPart{pp("A", "a", paysync.EntryRef{ID: "e1"}), pp("A", "b", paysync.EntryRef{ID: "ghost"})},
			},
			msg: "ghost",
		},
		{
			name: "same entry twice in one import, second paid",
			in: ImportIntent{
				Source: src("y.csv", "y"),
				Entries: []NewEntry{
					newEntry(t, ent("y.csv", 1, "twice", "1"), paysync.EntryMapped),
					newEntry(t, ent("y.csv", 2, "twice", "2"), paysync.EntryMapped),
				},
			},
			msg: "twice",
		},
		{
			name: "bad entry status",
			in: ImportIntent{
				Source:  src("z.csv", "z"),
				Entries: []NewEntry{{Entry: ent("z.csv", 1, "e1", "1"), Hash: "h", Status: "weird"}},
			},
			msg: "CHECK",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newLedger(t)
			commit(t, l, ImportIntent{Source: src("base.csv", "base"), Entries: []NewEntry{newEntry(t, ent("base.csv", 1, "base", "1"), paysync.EntryMapped)}})
			before := dump(t, l)
			_, err := l.CommitImport(t.Context(), tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("CommitImport = %v, want an error mentioning %q", err, tt.msg)
			}
			if errors.Is(err, ErrDuplicateSource) {
				t.Errorf("reported as a duplicate source: %v", err)
			}
			if after := dump(t, l); after != before {
				t.Errorf("a failed import changed the ledger:\n%s\nvs\n%s", before, after)
			}
		})
	}
}

// TestLedger_CommitImportBadKind: a source the schema refuses for another
// reason than its content hash must not be reported as a duplicate.
func TestLedger_CommitImportBadKind(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	s := src("x.csv", "x")
	s.Kind = "ftp"
	_, err := l.CommitImport(t.Context(), ImportIntent{Source: s})
	if err == nil {
		t.Fatal("CommitImport of kind ftp succeeded")
	}
	if errors.Is(err, ErrDuplicateSource) {
		t.Fatalf("BUG (imports.go CommitImport, isConstraint on the sources insert): any constraint failure, here CHECK (kind IN ...), "+
			"is reported as ErrDuplicateSource; test the extended code SQLITE_CONSTRAINT_UNIQUE instead: %v", err)
	}
}

func TestLedger_CommitImportReplay(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	e := ent("f.csv", 1, "e1", "1")
	first := commit(t, l, ImportIntent{
		Source:   src("f.csv", "f"),
		Entries:  []NewEntry{newEntry(t, e, paysync.EntryMapped)},
		PayParts: []paysync.PlannedPayPart{pp("A", "a", e.Ref())},
	})
	clk.Advance(60e9)
	replay := commit(t, l, ImportIntent{
		SourceID: first.SourceID,
		ReplayOf: first.BatchIDs[0],
		PayParts: []paysync.PlannedPayPart{pp("A", "a2", e.Ref())},
	})
	if replay.SourceID != first.SourceID || len(replay.BatchIDs) != 1 {
		t.Fatalf("replay committed %+v", replay)
	}
	b := mustBatch(t, l, replay.BatchIDs[0])
	if b.SourceID != first.SourceID || b.ReplayOf != first.BatchIDs[0] || b.State != paysync.BatchPending || b.Items != 1 {
		t.Errorf("replay batch = %+v", b)
	}
	es := entriesOfBatch(t, l, b.ID)
	if len(es) != 1 {
		t.Fatalf("entries of the replay batch = %v", es)
	}
	sameEntry(t, es[0], e)
}
