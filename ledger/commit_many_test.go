package ledger

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

// message builds the intent of one streaming message as intake records
// it: one entry of company, mapped and held for the reconciler (no pay
// part), accumulating.
func message(t testing.TB, company, id string) ImportIntent {
	e := ent("nats:"+id, 1, id, "1.5")
	e.CompanyID = company
	h, data, err := paysync.EntryHash(e)
	if err != nil {
		t.Fatal(err)
	}
	payload := fmt.Sprintf(`{"id":%q,"hours":"1.5"}`, id)
	return ImportIntent{
		Source:     &NewSource{Kind: "nats", Name: "timesheets." + company, Format: "json", Hash: paysync.PayloadHash([]byte(payload)), Payload: []byte(payload)},
		Entries:    []NewEntry{{Entry: e, Hash: h, Status: paysync.EntryMapped, Note: HeldNote, Data: data}},
		BatchSize:  3,
		Accumulate: true,
	}
}

// accumulating is a message with one pay part of company added to the
// company's open batch (as intake recorded messages before the desired
// state; the ledger still accumulates such intents): for the open batch
// queries.
func accumulating(t testing.TB, company, id string) ImportIntent {
	in := message(t, company, id)
	in.Entries[0].Note = ""
	in.PayParts = []paysync.PlannedPayPart{pp(company, "emp-"+id, paysync.EntryRef{ID: id, Source: in.Entries[0].Entry.Source, Line: 1})}
	return in
}

// heldEntries counts the entries held for the reconciler, and those not.
func heldEntries(t *testing.T, l *Ledger) (held, other int) {
	t.Helper()
	if err := l.db.QueryRowContext(t.Context(), `SELECT count(*) FILTER (WHERE note = 'held' AND status = 'mapped'), count(*) FILTER (WHERE note <> 'held') FROM entries`).Scan(&held, &other); err != nil {
		t.Fatal(err)
	}
	return held, other
}

// noPayParts checks that intake recorded no batch and no pay part.
func noPayParts(t *testing.T, l *Ledger, when string) {
	t.Helper()
	if c := tableCounts(t, l); c["batches"] != 0 || c["pay_parts"] != 0 || c["pay_part_entries"] != 0 {
		t.Errorf("%s: counts %v, want no batch and no pay part (the reconciler plans them)", when, c)
	}
	if n, err := l.Unsealed(t.Context()); err != nil || n != 0 {
		t.Errorf("%s: Unsealed = %d, %v; want 0", when, n, err)
	}
}

func TestCommitImports(t *testing.T) {
	l, _ := newLedger(t)
	ctx := t.Context()
	var ins []ImportIntent
	for i := range 5 {
		ins = append(ins, message(t, []string{"A", "B"}[i%2], fmt.Sprintf("m-%d", i)))
	}
	out, errs, err := l.CommitImports(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ins {
		if errs[i] != nil || out[i].SourceID == 0 {
			t.Fatalf("intent %d: %+v, %v", i, out[i], errs[i])
		}
	}
	// Every entry held for the reconciler; no batch, no pay part.
	if held, other := heldEntries(t, l); held != 5 || other != 0 {
		t.Fatalf("%d entries held, %d not; want the 5 held", held, other)
	}
	noPayParts(t, l, "committed")
	if m, err := l.Lingering(ctx); err != nil || len(m) != 0 {
		t.Fatalf("Lingering = %v, %v; want nothing", m, err)
	}
	got, err := l.SourcePayload(ctx, out[0].SourceID)
	if err != nil || string(got) != string(ins[0].Source.Payload) {
		t.Fatalf("SourcePayload = %q, %v (small payloads are stored raw and read back as they were)", got, err)
	}

	// The same messages again, plus a new one and a refused one (its entry
	// id already held, with other content: intake makes that a correction,
	// never a second entry): each refused alone in its savepoint, the new
	// one committed.
	again := append([]ImportIntent{}, ins[0], message(t, "B", "m-new"))
	changed := message(t, "A", "m-1")
	changed.Source.Payload = []byte(`{"id":"m-1","hours":"9"}`)
	changed.Source.Hash = paysync.PayloadHash(changed.Source.Payload)
	again = append(again, changed)
	before := tableCounts(t, l)
	out, errs, err = l.CommitImports(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], ErrDuplicateSource) {
		t.Errorf("same source again: %v, want ErrDuplicateSource", errs[0])
	}
	if errs[1] != nil || out[1].SourceID == 0 {
		t.Errorf("new message: %+v, %v", out[1], errs[1])
	}
	if errs[2] == nil {
		t.Errorf("entry held before, other content: committed as %+v", out[2])
	}
	after := tableCounts(t, l)
	if after["sources"] != before["sources"]+1 || after["entries"] != before["entries"]+1 || after["pay_parts"] != 0 {
		t.Errorf("counts before %v after %v: want exactly one more source and entry, no pay part", before, after)
	}
	if held, other := heldEntries(t, l); held != 6 || other != 0 {
		t.Errorf("%d entries held, %d not; want 6 held", held, other)
	}
	if s, err := l.SourcesByHash(ctx, []string{ins[0].Source.Hash, again[1].Source.Hash, "nope"}); err != nil || len(s) != 2 || !ok(s, ins[0].Source.Hash) {
		t.Errorf("SourcesByHash = %v, %v", s, err)
	}
}

func ok(m map[string]Source, h string) bool { _, found := m[h]; return found }

// TestCommitImports_BulkFallsBack: a group is first written many rows per
// statement; an entry stored before as rejected (to take again) makes
// that attempt fail, and the group is written intent by intent. The
// outcome is the one of writing it row by row: the entry row taken again
// in place (its id kept, now held), a refused message with its rejects,
// the others committed with their entries held (no pay part).
func TestCommitImports_BulkFallsBack(t *testing.T) {
	l, _ := newLedger(t)
	ctx := t.Context()
	first := message(t, "A", "r-1")
	first.Entries[0].Status, first.Entries[0].Note = paysync.EntryRejected, ""
	out, errs, err := l.CommitImports(ctx, []ImportIntent{first})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	var rowID int64
	if err := l.db.QueryRowContext(ctx, `SELECT id FROM entries WHERE entry_id = 'r-1'`).Scan(&rowID); err != nil {
		t.Fatal(err)
	}
	refused := message(t, "B", "bad")
	refused.Rejected, refused.Rejects = true, []NewReject{{EntryID: "bad", Field: "hours", Message: "is not a number"}}
	again := message(t, "A", "r-1")
	again.Source.Payload = []byte(`{"id":"r-1","hours":"1.5","fixed":true}`)
	again.Source.Hash = paysync.PayloadHash(again.Source.Payload)
	group := []ImportIntent{message(t, "A", "n-1"), refused, again, message(t, "B", "n-2")}
	before := tableCounts(t, l)
	out, errs, err = l.CommitImports(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for i := range group {
		if errs[i] != nil || out[i].SourceID == 0 {
			t.Fatalf("intent %d: %+v, %v", i, out[i], errs[i])
		}
	}
	after := tableCounts(t, l)
	if after["sources"] != before["sources"]+4 || after["entries"] != before["entries"]+2 {
		t.Errorf("counts before %v after %v: want 4 sources, 2 new entries (r-1 taken again in place)", before, after)
	}
	noPayParts(t, l, "committed")
	var id, src int64
	var status, note string
	if err := l.db.QueryRowContext(ctx, `SELECT id, source_id, status, note FROM entries WHERE entry_id = 'r-1'`).Scan(&id, &src, &status, &note); err != nil {
		t.Fatal(err)
	}
	if id != rowID || src != out[2].SourceID || status != "mapped" || note != HeldNote {
		t.Errorf("r-1 = row %d of source %d, %s %q; want row %d of source %d, mapped and held", id, src, status, note, rowID, out[2].SourceID)
	}
	var rejects int
	if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM rejects WHERE source_id = ?`, out[1].SourceID).Scan(&rejects); err != nil || rejects != 1 {
		t.Errorf("rejects of the refused message = %d, %v; want 1", rejects, err)
	}
	var refusedEntries int
	if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM entries WHERE source_id = ?`, out[1].SourceID).Scan(&refusedEntries); err != nil || refusedEntries != 0 {
		t.Errorf("entries of the refused message = %d, %v; want none", refusedEntries, err)
	}
	if held, other := heldEntries(t, l); held != 3 || other != 0 {
		t.Errorf("%d entries held, %d not; want n-1, r-1, n-2 held", held, other)
	}
}

// TestCommitImports_Bulk: a group of many messages (more than one
// statement's rows) commits as row by row would: every source and entry
// stored, each entry held in its own source, no pay part.
func TestCommitImports_Bulk(t *testing.T) {
	l, _ := newLedger(t)
	ctx := t.Context()
	var ins []ImportIntent
	for i := range 2*maxBulkRows + 7 {
		in := message(t, []string{"A", "B", "C"}[i%3], fmt.Sprintf("b-%d", i))
		in.BatchSize = 10
		ins = append(ins, in)
	}
	out, errs, err := l.CommitImports(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ins {
		if errs[i] != nil || out[i].SourceID == 0 {
			t.Fatalf("intent %d: %+v, %v", i, out[i], errs[i])
		}
	}
	// sources: the imports and migration 13's source 0 (the reconciler's).
	if c := tableCounts(t, l); c["sources"] != len(ins)+1 || c["entries"] != len(ins) {
		t.Errorf("counts %v, want %d sources (and source 0) and entries", c, len(ins))
	}
	noPayParts(t, l, "committed")
	var wrong int
	err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM entries e WHERE e.note <> 'held' OR e.status <> 'mapped'
		OR json_extract(CAST(e.data AS TEXT), '$.employee_id') <> 'emp-' || e.entry_id`).Scan(&wrong)
	if err != nil || wrong != 0 {
		t.Errorf("entries not held, or with another's content = %d, %v", wrong, err)
	}
	for i, in := range ins {
		var src int64
		if err := l.db.QueryRowContext(ctx, `SELECT source_id FROM entries WHERE entry_id = ?`, in.Entries[0].Entry.ID).Scan(&src); err != nil || src != out[i].SourceID {
			t.Fatalf("entry %s: source %d, %v; want %d", in.Entries[0].Entry.ID, src, err, out[i].SourceID)
		}
	}
}

// BenchmarkCommitImports: groups of 256 one-entry messages (the NATS
// intake's unit of work), each a source and a held entry.
func BenchmarkCommitImports(b *testing.B) {
	l, err := Open(b.Context(), b.TempDir()+"/ledger.db", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const group = 256
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		ins := make([]ImportIntent, group)
		for i := range ins {
			ins[i] = message(b, fmt.Sprintf("C%d", n%4), fmt.Sprintf("b-%d", n))
			ins[i].BatchSize = 100
			n++
		}
		if _, errs, err := l.CommitImports(b.Context(), ins); err != nil || errors.Join(errs...) != nil {
			b.Fatal(err, errors.Join(errs...))
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "messages/s")
	var held int
	if err := l.db.QueryRow(`SELECT count(*) FROM entries WHERE note = 'held'`).Scan(&held); err != nil || held != n {
		b.Fatalf("%d held entries, want %d (%v)", held, n, err)
	}
}

// TestOpenHeads: what the sending loop reads after every intake commit.
// Per company, the oldest sealed batch still to send (pending, sending or
// failed), never an open or settled one; the lists after it; and the
// queries go through the batches_open index, so that a look costs an
// index seek per company however long the backlog.
func TestOpenHeads(t *testing.T) {
	l, clk := newLedger(t)
	ctx := t.Context()
	var ins []ImportIntent
	// A: 7 messages in batches of 3 → two sealed batches and one open;
	// B: 3 → one sealed; C: 1 → open only.
	for i := range 7 {
		ins = append(ins, accumulating(t, "A", fmt.Sprintf("a-%d", i)))
	}
	for i := range 3 {
		ins = append(ins, accumulating(t, "B", fmt.Sprintf("b-%d", i)))
	}
	ins = append(ins, accumulating(t, "C", "c-0"))
	if _, errs, err := l.CommitImports(ctx, ins); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errors.Join(errs...))
	}
	open, err := l.OpenBatches(ctx, 0)
	if err != nil || len(open) != 3 {
		t.Fatalf("OpenBatches = %v, %v; want 3 sealed", batchIDs(open), err)
	}
	a1, a2, b1 := open[0].ID, open[1].ID, open[2].ID
	heads, err := l.OpenHeads(ctx)
	if err != nil || len(heads) != 2 || heads["A"] != a1 || heads["B"] != b1 {
		t.Fatalf("OpenHeads = %v, %v; want A:%d B:%d", heads, err, a1, b1)
	}
	if ids, err := l.OpenAfter(ctx, "A", a1, 16); err != nil || fmt.Sprint(ids) != fmt.Sprint([]int64{a1, a2}) {
		t.Errorf("OpenAfter(A) = %v, %v; want [%d %d]", ids, err, a1, a2)
	}
	if ids, err := l.SealedPendingAfter(ctx, "A", a1, 16); err != nil || fmt.Sprint(ids) != fmt.Sprint([]int64{a2}) {
		t.Errorf("SealedPendingAfter(A, %d) = %v, %v; want [%d]", a1, ids, err, a2)
	}
	// A failed batch is still to send; a created one is not.
	if err := l.SetBatchState(ctx, a1, paysync.BatchFailed, "boom"); err != nil {
		t.Fatal(err)
	}
	if err := l.SetBatchState(ctx, b1, paysync.BatchCreated, ""); err != nil {
		t.Fatal(err)
	}
	if heads, err := l.OpenHeads(ctx); err != nil || len(heads) != 1 || heads["A"] != a1 {
		t.Errorf("OpenHeads after A's failure and B's creation = %v, %v; want A:%d", heads, err, a1)
	}
	if ids, err := l.SealedPendingAfter(ctx, "A", 0, 16); err != nil || fmt.Sprint(ids) != fmt.Sprint([]int64{a2}) {
		t.Errorf("SealedPendingAfter(A, 0) = %v, %v; want only the pending [%d]", ids, err, a2)
	}

	// SealDueAny: the open batches of A and C opened at t0.
	if due, err := l.SealDueAny(ctx, time.Second); err != nil || due {
		t.Errorf("SealDueAny(1s) at t0 = %v, %v; want false", due, err)
	}
	clk.Advance(time.Second)
	if due, err := l.SealDueAny(ctx, time.Second); err != nil || !due {
		t.Errorf("SealDueAny(1s) at t0+1s = %v, %v; want true", due, err)
	}
	if err := l.SealDue(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if due, err := l.SealDueAny(ctx, 0); err != nil || due {
		t.Errorf("SealDueAny(0) with nothing open = %v, %v; want false", due, err)
	}
	if heads, err := l.OpenHeads(ctx); err != nil || len(heads) != 2 || heads["C"] == 0 {
		t.Errorf("OpenHeads after sealing = %v, %v; want A and C", heads, err)
	}

	for _, q := range []string{
		`SELECT min(company_id) FROM ` + openBatches + ` WHERE ` + openWhere + ` AND company_id > 'A'`,
		`SELECT id FROM ` + openBatches + ` WHERE ` + openWhere + ` AND company_id = 'A' AND id >= 0 ORDER BY id LIMIT 16`,
		`SELECT id FROM ` + openBatches + ` WHERE ` + openWhere + ` AND state = 'pending' AND company_id = 'A' AND id > 0 ORDER BY id LIMIT 16`,
	} {
		var plan strings.Builder
		rows, err := l.db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "; ")
		}
		rows.Close()
		if !strings.Contains(plan.String(), "batches_open") {
			t.Errorf("query %q does not use batches_open: %s", q, plan.String())
		}
	}
}

// TestCommitImports_YieldsToDelivery: while another transaction waits for
// the writer, intake commits one intent per transaction. The outcome is
// the same as one transaction: every intent committed or refused alone,
// its entry held, no pay part.
func TestCommitImports_YieldsToDelivery(t *testing.T) {
	l, _ := newLedger(t)
	ctx := t.Context()
	first := message(t, "A", "y-0")
	if _, errs, err := l.CommitImports(ctx, []ImportIntent{first}); err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	ins := []ImportIntent{first} // a duplicate source: refused alone
	for i := 1; i < 7; i++ {
		ins = append(ins, message(t, "A", fmt.Sprintf("y-%d", i)))
	}
	before := tableCounts(t, l)
	l.waiting.Add(1) // as if the sender waited all along
	out, errs, err := l.CommitImports(ctx, ins)
	l.waiting.Add(-1)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], ErrDuplicateSource) {
		t.Errorf("duplicate source: %v, want ErrDuplicateSource", errs[0])
	}
	for i := 1; i < len(ins); i++ {
		if errs[i] != nil || out[i].SourceID == 0 {
			t.Errorf("intent %d: %+v, %v", i, out[i], errs[i])
		}
	}
	after := tableCounts(t, l)
	if after["sources"]-before["sources"] != 6 || after["entries"]-before["entries"] != 6 {
		t.Errorf("counts before %v after %v: want 6 more sources and entries", before, after)
	}
	if held, other := heldEntries(t, l); held != 7 || other != 0 {
		t.Errorf("%d entries held, %d not; want 7 held", held, other)
	}
	noPayParts(t, l, "committed")
}
