package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

// beginImport starts a streaming import and rolls it back at the end of
// the test unless it was committed.
func beginImport(t *testing.T, l *Ledger, in StreamImport) *ImportTx {
	t.Helper()
	tx, err := l.BeginImport(t.Context(), in)
	if err != nil {
		t.Fatalf("BeginImport: %v", err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

func mustWrite(t *testing.T, tx *ImportTx, s string) {
	t.Helper()
	if _, err := tx.Write([]byte(s)); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func mustAddEntry(t *testing.T, tx *ImportTx, e NewEntry) int64 {
	t.Helper()
	id, err := tx.AddEntry(e, nil)
	if err != nil {
		t.Fatalf("AddEntry(%s): %v", e.Entry.ID, err)
	}
	return id
}

func query(t *testing.T, l *Ledger, q string, args ...any) string {
	t.Helper()
	rows, err := l.db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var f []string
		for _, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			f = append(f, fmt.Sprint(v))
		}
		out = append(out, strings.Join(f, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

func TestImportTx_Commit(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	tx := beginImport(t, l, StreamImport{Kind: "file", Name: "hours.csv", BatchSize: 2})
	payload := "id,hours\n" + strings.Repeat("e,1\n", 50)
	mustWrite(t, tx, payload[:7])
	mustWrite(t, tx, payload[7:])

	if seen, err := tx.Seen("e1"); err != nil || seen {
		t.Fatalf("Seen(e1) = %v, %v; want false", seen, err)
	}
	if seen, err := tx.Seen("e1"); err != nil || !seen {
		t.Fatalf("Seen(e1) again = %v, %v; want true", seen, err)
	}
	// Entries: e1..e5 mapped, e6 skipped.
	var rows []int64
	for i := 1; i <= 6; i++ {
		status := EntryMapped
		if i == 6 {
			status = EntrySkipped
		}
		rows = append(rows, mustAddEntry(t, tx, newEntry(t, ent("hours.csv", i+1, fmt.Sprintf("e%d", i), "7.5"), status)))
	}
	// Rejects out of phase order: stored by phase, then in order added.
	for _, r := range []struct {
		phase int
		msg   string
	}{{PhasePlan, "plan 1"}, {PhaseEntry, "entry 1"}, {PhaseRead, "read 1"}, {PhaseEntry, "entry 2"}, {PhaseRead, "read 2"}} {
		if err := tx.AddReject(r.phase, NewReject{Message: r.msg, EntryID: "x", Line: 3, Field: "f", Hint: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	// Company A: a direct pay part of e1, then aggregated ones (linked):
	// part 7 of e2+e3, part 8 of e3+e4, part 9 of e5 (dropped: never added).
	// Company B: one of e2 (direct) in between.
	if err := tx.AddPayPart(0, pp("A", "a1"), rows[0]); err != nil {
		t.Fatal(err)
	}
	for _, link := range []struct {
		row  int64
		part int
	}{{rows[1], 7}, {rows[2], 7}, {rows[2], 8}, {rows[3], 8}, {rows[4], 9}, {rows[1], 7}} {
		if err := tx.Link(link.row, link.part); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.AddPayPart(1, pp("B", "b1"), rows[1]); err != nil {
		t.Fatal(err)
	}
	for _, part := range []int{7, 8} {
		if err := tx.AddPayPart(part, pp("A", fmt.Sprintf("a%d", part))); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tx.Commit("csv", 3)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if c.SourceID != tx.SourceID() || !reflect.DeepEqual(c.BatchIDs, []int64{1, 2, 3}) {
		t.Fatalf("Committed = %+v", c)
	}
	s, err := l.Source(ctx, c.SourceID)
	if err != nil {
		t.Fatal(err)
	}
	want := Source{ID: c.SourceID, Kind: "file", Name: "hours.csv", Hash: HashPayload([]byte(payload)), Format: "csv", Size: int64(len(payload)),
		Status: "committed", Entries: 6, Duplicates: 3, Rejects: 5, ReceivedAt: t0}
	if s != want {
		t.Errorf("Source = %+v\nwant     %+v", s, want)
	}
	if got, err := l.SourcePayload(ctx, c.SourceID); err != nil || string(got) != payload {
		t.Errorf("SourcePayload = %q, %v", got, err)
	}
	var buf bytes.Buffer
	if n, err := l.CopySourcePayload(ctx, c.SourceID, &buf); err != nil || n != int64(len(payload)) || buf.String() != payload {
		t.Errorf("CopySourcePayload = %d, %v: %q", n, err, buf.String())
	}
	if got, want := query(t, l, `SELECT message FROM rejects WHERE source_id = ? ORDER BY id`, c.SourceID), "read 1\nread 2\nentry 1\nentry 2\nplan 1"; got != want {
		t.Errorf("rejects:\n%s\nwant\n%s", got, want)
	}
	// Batches: A's first two pay parts in batch 1, B's in 2, A's third in 3.
	if got, want := query(t, l, `SELECT b.id, b.company_id, b.sealed, p.seq, p.employee_id FROM pay_parts p JOIN batches b ON b.id = p.batch_id ORDER BY p.id`),
		"1 A 1 0 a1\n2 B 1 0 b1\n1 A 1 1 a7\n3 A 1 0 a8"; got != want {
		t.Errorf("pay parts:\n%s\nwant\n%s", got, want)
	}
	if got, want := query(t, l, `SELECT p.employee_id, e.entry_id FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id JOIN entries e ON e.id = pe.entry_id ORDER BY p.id, e.id`),
		"a1 e1\nb1 e2\na7 e2\na7 e3\na8 e3\na8 e4"; got != want {
		t.Errorf("links:\n%s\nwant\n%s", got, want)
	}
	// e5 went only into the dropped pay part 9: rejected.
	if got, want := query(t, l, `SELECT entry_id, status FROM entries ORDER BY id`), "e1 mapped\ne2 mapped\ne3 mapped\ne4 mapped\ne5 rejected\ne6 skipped"; got != want {
		t.Errorf("entries:\n%s\nwant\n%s", got, want)
	}
	if got := query(t, l, `SELECT count(*) FROM sqlite_temp_master`); got != "0" {
		t.Errorf("%s temporary tables left", got)
	}
	if err := tx.Rollback(); err != nil {
		t.Errorf("Rollback after Commit: %v", err)
	}
}

func TestImportTx_ChunkedPayload(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	// 3.5 chunks of barely compressible text, written in odd pieces.
	var payload bytes.Buffer
	for payload.Len() < chunkSize*7/2 {
		fmt.Fprintf(&payload, "%d,%x\n", payload.Len(), rng.Uint64())
	}
	tx := beginImport(t, l, StreamImport{Kind: "stdin", Name: "stdin"})
	for b := payload.Bytes(); len(b) > 0; {
		n := min(len(b), 1+rng.IntN(200_000))
		mustWrite(t, tx, string(b[:n]))
		b = b[n:]
	}
	if got, want := tx.Hash(), HashPayload(payload.Bytes()); got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
	c, err := tx.Commit("csv", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := query(t, l, `SELECT payload IS NULL, size FROM sources WHERE id = ?`, c.SourceID); got != fmt.Sprintf("1 %d", payload.Len()) {
		t.Errorf("payload NULL, size = %s", got)
	}
	if got := query(t, l, `SELECT group_concat(seq) FROM (SELECT seq FROM source_chunks WHERE source_id = ? ORDER BY seq)`, c.SourceID); got != "0,1,2,3" {
		t.Errorf("chunks %s, want 0,1,2,3", got)
	}
	var buf bytes.Buffer
	if n, err := l.CopySourcePayload(ctx, c.SourceID, &buf); err != nil || n != int64(payload.Len()) || !bytes.Equal(buf.Bytes(), payload.Bytes()) {
		t.Errorf("CopySourcePayload = %d, %v; the payload differs: %v", n, err, !bytes.Equal(buf.Bytes(), payload.Bytes()))
	}
	if found, ok, err := l.SourceByHash(ctx, HashPayload(payload.Bytes())); err != nil || !ok || found.ID != c.SourceID {
		t.Errorf("SourceByHash = %+v, %v, %v", found, ok, err)
	}
	if _, err := l.CopySourcePayload(ctx, 999, &buf); !errors.Is(err, ErrNotFound) {
		t.Errorf("CopySourcePayload(999) = %v, want ErrNotFound", err)
	}
	// An empty source is one (empty) chunk.
	tx = beginImport(t, l, StreamImport{Kind: "file", Name: "empty.csv"})
	c, err = tx.Commit("csv", 0)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if n, err := l.CopySourcePayload(ctx, c.SourceID, &buf); err != nil || n != 0 {
		t.Errorf("CopySourcePayload(empty) = %d, %v", n, err)
	}
}

// TestImportTx_RollbackLeavesNothing: an import abandoned at any point (a
// failure, a cancelled context, a crash) leaves the ledger as it was.
func TestImportTx_RollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"rollback", "cancel"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			l, _ := newLedger(t)
			// Something there before: an earlier import with a rejected entry
			// that the abandoned import takes again.
			old := commit(t, l, ImportIntent{Source: src("old.csv", "old"), Entries: []NewEntry{newEntry(t, ent("old.csv", 1, "r1", "1"), EntryRejected)}})
			before, counts := dump(t, l), tableCounts(t, l)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			tx, err := l.BeginImport(ctx, StreamImport{Kind: "file", Name: "new.csv", BatchSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, tx, strings.Repeat("x", 3*chunkSize+5))
			r1 := mustAddEntry(t, tx, newEntry(t, ent("new.csv", 1, "r1", "2"), EntryMapped))
			r2 := mustAddEntry(t, tx, newEntry(t, ent("new.csv", 2, "r2", "2"), EntryMapped))
			if err := tx.Link(r2, 0); err != nil {
				t.Fatal(err)
			}
			if err := tx.AddPayPart(0, pp("A", "a")); err != nil {
				t.Fatal(err)
			}
			if err := tx.AddPayPart(1, pp("A", "a"), r1); err != nil {
				t.Fatal(err)
			}
			if err := tx.AddReject(PhaseEntry, NewReject{Message: "m"}); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "rollback":
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
			case "cancel":
				cancel()
				if _, err := tx.Commit("csv", 0); !errors.Is(err, context.Canceled) {
					t.Fatalf("Commit after cancel = %v", err)
				}
			}
			if after := dump(t, l); after != before {
				t.Errorf("the ledger changed:\n%s\nwant\n%s", after, before)
			}
			if got := tableCounts(t, l); !reflect.DeepEqual(got, counts) {
				t.Errorf("tables %v, want %v", got, counts)
			}
			if got := query(t, l, `SELECT count(*) FROM source_chunks`); got != "0" {
				t.Errorf("%s chunks left", got)
			}
			// The ledger is usable afterwards; the temporary tables are gone.
			tx = beginImport(t, l, StreamImport{Kind: "file", Name: "again.csv"})
			if seen, err := tx.Seen("r2"); err != nil || seen {
				t.Errorf("Seen(r2) in a new import = %v, %v", seen, err)
			}
			if _, err := tx.Commit("csv", 0); err != nil {
				t.Fatal(err)
			}
			_ = old
		})
	}
}

func TestImportTx_DuplicateSource(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	first := commit(t, l, ImportIntent{Source: src("a.csv", "same content")})
	before := dump(t, l)
	tx := beginImport(t, l, StreamImport{Kind: "stdin", Name: "stdin"})
	mustWrite(t, tx, "same content")
	mustAddEntry(t, tx, newEntry(t, ent("stdin", 1, "d1", "1"), EntryMapped))
	if _, err := tx.Commit("csv", 0); !errors.Is(err, ErrDuplicateSource) {
		t.Fatalf("Commit of the same content = %v, want ErrDuplicateSource", err)
	}
	if after := dump(t, l); after != before {
		t.Errorf("the ledger changed:\n%s\nwant\n%s", after, before)
	}
	if s, ok, err := l.SourceByHash(t.Context(), tx.Hash()); err != nil || !ok || s.ID != first.SourceID {
		t.Errorf("SourceByHash = %+v, %v, %v", s, ok, err)
	}
}

func TestImportTx_Rejected(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	tx := beginImport(t, l, StreamImport{Kind: "file", Name: "bad.csv", Rejected: true})
	mustWrite(t, tx, "bad content")
	if _, err := tx.AddEntry(newEntry(t, ent("bad.csv", 1, "b1", "1"), EntryMapped), nil); err == nil {
		t.Error("AddEntry of a rejected source succeeded")
	}
	if err := tx.AddPayPart(0, pp("A", "a")); err == nil {
		t.Error("AddPayPart of a rejected source succeeded")
	}
	if err := tx.AddReject(PhaseEntry, NewReject{EntryID: "b1", Line: 2, Message: "bad"}); err != nil {
		t.Fatal(err)
	}
	c, err := tx.Commit("csv", 4)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := query(t, l, `SELECT status, entries, duplicates, rejects FROM sources WHERE id = ?`, c.SourceID), "rejected 0 0 1"; got != want {
		t.Errorf("source: %s, want %s", got, want)
	}
	if got := query(t, l, `SELECT (SELECT count(*) FROM entries) + (SELECT count(*) FROM batches) + (SELECT count(*) FROM pay_parts)`); got != "0" {
		t.Errorf("%s entries, batches or pay parts stored", got)
	}
	// A rejected source is not "already imported": the same content again
	// is imported.
	if _, ok, _ := l.SourceByHash(t.Context(), HashPayload([]byte("bad content"))); ok {
		t.Error("a rejected source counts as imported")
	}
	tx = beginImport(t, l, StreamImport{Kind: "file", Name: "bad.csv"})
	mustWrite(t, tx, "bad content")
	if _, err := tx.Commit("csv", 0); err != nil {
		t.Errorf("the same content after a rejected source: %v", err)
	}
}

func TestImportTx_EntriesSeenBefore(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	commit(t, l, ImportIntent{Source: src("old.csv", "old"), Entries: []NewEntry{
		newEntry(t, ent("old.csv", 1, "paid", "1"), EntryMapped),
		newEntry(t, ent("old.csv", 2, "skip", "0"), EntrySkipped),
		newEntry(t, ent("old.csv", 3, "rej", "1"), EntryRejected),
	}})
	tx := beginImport(t, l, StreamImport{Kind: "file", Name: "new.csv"})
	ids := []string{"paid", "skip", "rej", "new"}
	for i := 0; i < 600; i++ { // past one lookup chunk
		ids = append(ids, fmt.Sprintf("none-%d", i))
	}
	known, err := tx.Lookup(ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != 3 || known["paid"].Status != EntryMapped || known["skip"].Status != EntrySkipped || known["rej"].SourceName != "old.csv" {
		t.Fatalf("Lookup = %+v", known)
	}
	// A rejected or skipped entry is taken again with its new content.
	for _, id := range []string{"skip", "rej", "new"} {
		mustAddEntry(t, tx, newEntry(t, ent("new.csv", 1, id, "3"), EntryMapped))
	}
	// A paid one is not.
	if _, err := tx.AddEntry(newEntry(t, ent("new.csv", 1, "paid", "3"), EntryMapped), nil); err == nil || !strings.Contains(err.Error(), "already paid") {
		t.Fatalf("AddEntry(paid) = %v", err)
	}
	c, err := tx.Commit("csv", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := query(t, l, `SELECT entry_id, source_id, status FROM entries ORDER BY entry_id`),
		fmt.Sprintf("new %d mapped\npaid 1 mapped\nrej %d mapped\nskip %d mapped", c.SourceID, c.SourceID, c.SourceID); got != want {
		t.Errorf("entries:\n%s\nwant\n%s", got, want)
	}
}

func TestImportTx_Accumulate(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	// An open batch of company A with one pay part, from an earlier source.
	e0 := ent("m0", 1, "m0", "1")
	first := commit(t, l, ImportIntent{Source: src("m0", "m0"), Entries: []NewEntry{newEntry(t, e0, EntryMapped)},
		PayParts: []paysync.PlannedPayPart{pp("A", "a0", e0.Ref())}, BatchSize: 3, Accumulate: true})
	tx := beginImport(t, l, StreamImport{Kind: "nats", Name: "m1", BatchSize: 3, Accumulate: true})
	mustWrite(t, tx, "m1")
	for i := 1; i <= 4; i++ {
		row := mustAddEntry(t, tx, newEntry(t, ent("m1", i, fmt.Sprintf("m1-%d", i), "1"), EntryMapped))
		if err := tx.AddPayPart(i, pp("A", fmt.Sprintf("a%d", i)), row); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tx.Commit("json", 0)
	if err != nil {
		t.Fatal(err)
	}
	// a1, a2 fill the earlier open batch (sealed when full), a3, a4 open a new one.
	if want := []int64{first.BatchIDs[0], first.BatchIDs[0] + 1}; !reflect.DeepEqual(c.BatchIDs, want) {
		t.Errorf("BatchIDs = %v, want %v", c.BatchIDs, want)
	}
	if got, want := query(t, l, `SELECT b.id, b.sealed, coalesce(b.source_id, 0), group_concat(p.employee_id) FROM batches b JOIN pay_parts p ON p.batch_id = b.id GROUP BY b.id ORDER BY b.id`),
		fmt.Sprintf("1 1 %d a0,a1,a2\n2 0 %d a3,a4", first.SourceID, c.SourceID); got != want {
		t.Errorf("batches:\n%s\nwant\n%s", got, want)
	}
}
