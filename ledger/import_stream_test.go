package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

// beginImport starts staging an import; it is rolled back at the end of
// the test unless it was committed.
func beginImport(t *testing.T, l *Ledger, in StreamImport) *StagedImport {
	t.Helper()
	s, err := l.BeginImport(t.Context(), in)
	if err != nil {
		t.Fatalf("BeginImport: %v", err)
	}
	t.Cleanup(func() { s.Rollback() })
	return s
}

func mustWrite(t *testing.T, s *StagedImport, p string) {
	t.Helper()
	if _, err := s.Write([]byte(p)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	writtenMu.Lock()
	defer writtenMu.Unlock()
	if writtenSums[s] == nil {
		writtenSums[s] = &paysync.PayloadDigest{}
	}
	writtenSums[s].Write([]byte(p))
}

// writtenSums hash what mustWrite wrote to each staged import, as intake
// does (the ledger takes the hash at Commit).
var (
	writtenMu   sync.Mutex
	writtenSums = map[*StagedImport]*paysync.PayloadDigest{}
)

// written is the content hash of what mustWrite wrote to s.
func written(s *StagedImport) string {
	writtenMu.Lock()
	defer writtenMu.Unlock()
	if d := writtenSums[s]; d != nil {
		return d.Sum()
	}
	return paysync.PayloadHash(nil)
}

func mustAddEntry(t *testing.T, s *StagedImport, e NewEntry) int64 {
	t.Helper()
	seq, err := s.AddEntry(e, nil)
	if err != nil {
		t.Fatalf("AddEntry(%s): %v", e.Entry.ID, err)
	}
	return seq
}

func mustFlush(t *testing.T, s *StagedImport) {
	t.Helper()
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// query renders the rows of q, one line each.
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

func TestStagedImport_Commit(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	s := beginImport(t, l, StreamImport{Kind: "file", Name: "hours.csv", BatchSize: 2})
	payload := "id,hours\n" + strings.Repeat("e,1\n", 50)
	mustWrite(t, s, payload[:7])
	mustWrite(t, s, payload[7:])

	// Entries: e1..e6 mapped, e7 skipped, in two flushes.
	var seqs []int64
	for i := 1; i <= 7; i++ {
		status := paysync.EntryMapped
		if i == 7 {
			status = paysync.EntrySkipped
		}
		s.See(fmt.Sprintf("e%d", i))
		seqs = append(seqs, mustAddEntry(t, s, newEntry(t, ent("hours.csv", i+1, fmt.Sprintf("e%d", i), "7.5"), status)))
		if i == 3 {
			mustFlush(t, s)
		}
	}
	if _, seen, err := s.Lookup([]string{"e1", "e7", "e8"}); err != nil || !reflect.DeepEqual(seen, map[string]bool{"e1": true, "e7": true}) {
		t.Fatalf("Lookup: seen %v, %v", seen, err)
	}
	// Rejects out of phase order: stored by phase, then in order added.
	for _, r := range []struct {
		phase int
		msg   string
	}{{PhasePlan, "plan 1"}, {PhaseEntry, "entry 1"}, {PhaseRead, "read 1"}, {PhaseEntry, "entry 2"}, {PhaseRead, "read 2"}} {
		s.AddReject(r.phase, NewReject{Message: r.msg, EntryID: "x", Line: 3, Field: "f", Hint: "h"})
	}
	// Pay parts by index in order of first appearance: 0 (A, of e1),
	// 1 (B, of e2), 2 (A, of e2 and e3), 3 (A, of e3 and e4), 4 (dropped,
	// of e5 only), 5 (dropped, of e6), 6 (A, of e6): e5 is rejected, e6 not.
	for _, link := range []struct {
		entry int64
		part  int
	}{{seqs[0], 0}, {seqs[1], 1}, {seqs[1], 2}, {seqs[2], 2}, {seqs[2], 3}, {seqs[3], 3}, {seqs[4], 4}, {seqs[5], 5}, {seqs[5], 6}, {seqs[1], 2}} {
		s.Link(link.entry, link.part)
	}
	s.AddPayPart(1, pp("B", "b1"))
	s.AddPayPart(0, pp("A", "a0"))
	mustFlush(t, s)
	s.AddPayPart(3, pp("A", "a3"))
	s.AddPayPart(2, pp("A", "a2"))
	s.AddPayPart(6, pp("A", "a6"))
	s.DropPayPart(4)
	s.DropPayPart(5)
	c, err := s.Commit("csv", written(s), 3, false)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if !reflect.DeepEqual(c.BatchIDs, []int64{1, 2, 3}) {
		t.Fatalf("Committed = %+v", c)
	}
	src, err := l.Source(ctx, c.SourceID)
	if err != nil {
		t.Fatal(err)
	}
	want := Source{ID: c.SourceID, Kind: "file", Name: "hours.csv", Hash: paysync.PayloadHash([]byte(payload)), Format: "csv", Size: int64(len(payload)),
		Status: "committed", Entries: 7, Duplicates: 3, Rejects: 5, ReceivedAt: t0}
	if src != want {
		t.Errorf("Source = %+v\nwant     %+v", src, want)
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
	// Batches: A (first seen) a0, a2 | a3, a6, then B: b1.
	if got, want := query(t, l, `SELECT b.id, b.company_id, b.sealed, p.seq, p.employee_id, p.units FROM pay_parts p JOIN batches b ON b.id = p.batch_id ORDER BY p.id`),
		"1 A 1 0 a0 7.5\n1 A 1 1 a2 7.5\n2 A 1 0 a3 7.5\n2 A 1 1 a6 7.5\n3 B 1 0 b1 7.5"; got != want {
		t.Errorf("pay parts:\n%s\nwant\n%s", got, want)
	}
	if got, want := query(t, l, `SELECT p.employee_id, group_concat(e.entry_id) FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id JOIN entries e ON e.id = pe.entry_id
		GROUP BY p.id ORDER BY p.id`), "a0 e1\na2 e2,e3\na3 e3,e4\na6 e6\nb1 e2"; got != want {
		t.Errorf("links:\n%s\nwant\n%s", got, want)
	}
	if got, want := query(t, l, `SELECT entry_id, status, line FROM entries ORDER BY id`),
		"e1 mapped 2\ne2 mapped 3\ne3 mapped 4\ne4 mapped 5\ne5 rejected 6\ne6 mapped 7\ne7 skipped 8"; got != want {
		t.Errorf("entries:\n%s\nwant\n%s", got, want)
	}
	if got := query(t, l, `SELECT count(*) FROM sqlite_temp_master`); got != "0" {
		t.Errorf("%s temporary tables and indexes left", got)
	}
	if _, err := s.Commit("csv", written(s), 0, false); err == nil {
		t.Error("a second Commit succeeded")
	}
}

func TestStagedImport_ChunkedPayload(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	// 3.5 chunks of barely compressible text, written in odd pieces.
	var payload bytes.Buffer
	for payload.Len() < chunkSize*7/2 {
		fmt.Fprintf(&payload, "%d,%x\n", payload.Len(), rng.Uint64())
	}
	s := beginImport(t, l, StreamImport{Kind: "stdin", Name: "stdin"})
	for b := payload.Bytes(); len(b) > 0; {
		n := min(len(b), 1+rng.IntN(200_000))
		mustWrite(t, s, string(b[:n]))
		b = b[n:]
	}
	c, err := s.Commit("csv", written(s), 0, false)
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
	if found, ok, err := l.SourceByHash(ctx, paysync.PayloadHash(payload.Bytes())); err != nil || !ok || found.ID != c.SourceID {
		t.Errorf("SourceByHash = %+v, %v, %v", found, ok, err)
	}
	if _, err := l.CopySourcePayload(ctx, 999, &buf); !errors.Is(err, ErrNotFound) {
		t.Errorf("CopySourcePayload(999) = %v, want ErrNotFound", err)
	}
	// An empty source is one (empty) chunk.
	s = beginImport(t, l, StreamImport{Kind: "file", Name: "empty.csv"})
	c, err = s.Commit("csv", written(s), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if n, err := l.CopySourcePayload(ctx, c.SourceID, &buf); err != nil || n != 0 {
		t.Errorf("CopySourcePayload(empty) = %d, %v", n, err)
	}
}

// TestStagedImport_NothingUntilCommit: while an import is staged the ledger
// is free for other work (no transaction is held: the payroll token can be
// saved meanwhile), shows nothing of the import, and an import abandoned
// at any point leaves it as it was.
func TestStagedImport_NothingUntilCommit(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"rollback", "cancel", "paid meanwhile"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			l, _ := newLedger(t)
			// Something there before: an earlier import with a rejected entry
			// that the abandoned import takes again.
			commit(t, l, ImportIntent{Source: src("old.csv", "old"), Entries: []NewEntry{newEntry(t, ent("old.csv", 1, "r1", "1"), paysync.EntryRejected)}})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := l.BeginImport(ctx, StreamImport{Kind: "file", Name: "new.csv", BatchSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, s, strings.Repeat("x", 3*chunkSize+5))
			// As intake stages entries now: mapped, held for the
			// reconciler, linked to the lines' places, no pay part.
			held := func(e paysync.Entry) NewEntry {
				ne := newEntry(t, e, paysync.EntryMapped)
				ne.Note = HeldNote
				return ne
			}
			r1 := mustAddEntry(t, s, held(ent("new.csv", 1, "r1", "2")))
			r2 := mustAddEntry(t, s, held(ent("new.csv", 2, "r2", "2")))
			s.Link(r1, 0)
			s.Link(r2, 1)
			s.AddReject(PhaseEntry, NewReject{Message: "m"})
			mustFlush(t, s)
			// Meanwhile: other work on the ledger, within a second.
			wctx, wcancel := context.WithTimeout(t.Context(), time.Second)
			defer wcancel()
			if err := l.SaveCredentials(wctx, "payroll", "rt", "seed", "", time.Time{}, time.Time{}); err != nil {
				t.Fatalf("SaveCredentials while an import is staged: %v", err)
			}
			before, counts := dump(t, l), tableCounts(t, l)
			switch how {
			case "rollback":
				if err := s.Rollback(); err != nil {
					t.Fatal(err)
				}
			case "cancel":
				cancel()
				if _, err := s.Commit("csv", written(s), 0, false); !errors.Is(err, context.Canceled) {
					t.Fatalf("Commit after cancel = %v", err)
				}
			case "paid meanwhile":
				// Another import brings r2 before this one commits, and
				// the reconciler takes it in: it counts (paid).
				other := hold(t, l, "other.csv", []paysync.Entry{ent("other.csv", 1, "r2", "5")}, nil)
				reconcile(t, l, other.SourceID)
				before, counts = dump(t, l), tableCounts(t, l)
				if _, err := s.Commit("csv", written(s), 0, false); err == nil || !strings.Contains(err.Error(), "entry r2 was already paid") {
					t.Fatalf("Commit = %v, want entry r2 already paid", err)
				}
			}
			if after := dump(t, l); after != before {
				t.Errorf("the ledger changed:\n%s\nwant\n%s", after, before)
			}
			if got := tableCounts(t, l); !reflect.DeepEqual(got, counts) {
				t.Errorf("tables %v, want %v", got, counts)
			}
			if got := query(t, l, `SELECT (SELECT count(*) FROM source_chunks) + (SELECT count(*) FROM sqlite_temp_master)`); got != "0" {
				t.Errorf("%s chunks or temporary tables left", got)
			}
		})
	}
}

func TestStagedImport_DuplicateSource(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	first := commit(t, l, ImportIntent{Source: src("a.csv", "same content")})
	before := dump(t, l)
	s := beginImport(t, l, StreamImport{Kind: "stdin", Name: "stdin"})
	mustWrite(t, s, "same content")
	mustAddEntry(t, s, newEntry(t, ent("stdin", 1, "d1", "1"), paysync.EntryMapped))
	if _, err := s.Commit("csv", written(s), 0, false); !errors.Is(err, ErrDuplicateSource) {
		t.Fatalf("Commit of the same content = %v, want ErrDuplicateSource", err)
	}
	if after := dump(t, l); after != before {
		t.Errorf("the ledger changed:\n%s\nwant\n%s", after, before)
	}
	if src, ok, err := l.SourceByHash(t.Context(), written(s)); err != nil || !ok || src.ID != first.SourceID {
		t.Errorf("SourceByHash = %+v, %v, %v", src, ok, err)
	}
}

func TestStagedImport_Rejected(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	s := beginImport(t, l, StreamImport{Kind: "file", Name: "bad.csv"})
	mustWrite(t, s, "bad content")
	seq := mustAddEntry(t, s, newEntry(t, ent("bad.csv", 1, "b1", "1"), paysync.EntryMapped))
	s.Link(seq, 0)
	s.AddPayPart(0, pp("A", "a"))
	s.AddReject(PhaseEntry, NewReject{EntryID: "b2", Line: 2, Message: "bad"})
	c, err := s.Commit("csv", written(s), 4, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := query(t, l, `SELECT status, entries, duplicates, rejects FROM sources WHERE id = ?`, c.SourceID), "rejected 0 0 1"; got != want {
		t.Errorf("source: %s, want %s", got, want)
	}
	if got := query(t, l, `SELECT (SELECT count(*) FROM entries) + (SELECT count(*) FROM batches) + (SELECT count(*) FROM pay_parts)`); got != "0" || len(c.BatchIDs) != 0 {
		t.Errorf("%s entries, batches or pay parts stored; batches %v", got, c.BatchIDs)
	}
	if got := query(t, l, `SELECT entry_id, message FROM rejects`); got != "b2 bad" {
		t.Errorf("rejects: %s", got)
	}
	// A rejected source is not "already imported": the same content again
	// is imported.
	if _, ok, _ := l.SourceByHash(t.Context(), paysync.PayloadHash([]byte("bad content"))); ok {
		t.Error("a rejected source counts as imported")
	}
	s = beginImport(t, l, StreamImport{Kind: "file", Name: "bad.csv"})
	mustWrite(t, s, "bad content")
	if _, err := s.Commit("csv", written(s), 0, false); err != nil {
		t.Errorf("the same content after a rejected source: %v", err)
	}
}

func TestStagedImport_EntriesSeenBefore(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	commit(t, l, ImportIntent{Source: src("old.csv", "old"), Entries: []NewEntry{
		newEntry(t, ent("old.csv", 1, "paid", "1"), paysync.EntryMapped),
		newEntry(t, ent("old.csv", 2, "skip", "0"), paysync.EntrySkipped),
		newEntry(t, ent("old.csv", 3, "rej", "1"), paysync.EntryRejected),
	}})
	s := beginImport(t, l, StreamImport{Kind: "file", Name: "new.csv"})
	ids := []string{"paid", "skip", "rej", "new"}
	for i := 0; i < 600; i++ { // past one lookup chunk
		ids = append(ids, fmt.Sprintf("none-%d", i))
		s.See(fmt.Sprintf("none-%d", i))
	}
	known, seen, err := s.Lookup(ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != 3 || known["paid"].Status != paysync.EntryMapped || known["skip"].Status != paysync.EntrySkipped || known["rej"].SourceName != "old.csv" {
		t.Fatalf("Lookup: known %+v", known)
	}
	if len(seen) != 600 || !seen["none-599"] || seen["new"] {
		t.Fatalf("Lookup: %d seen", len(seen))
	}
	// A rejected or skipped entry is taken again with its new content.
	for _, id := range []string{"skip", "rej", "new"} {
		mustAddEntry(t, s, newEntry(t, ent("new.csv", 1, id, "3"), paysync.EntryMapped))
	}
	c, err := s.Commit("csv", written(s), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := query(t, l, `SELECT entry_id, source_id, status FROM entries ORDER BY entry_id`),
		fmt.Sprintf("new %d mapped\npaid 1 mapped\nrej %d mapped\nskip %d mapped", c.SourceID, c.SourceID, c.SourceID); got != want {
		t.Errorf("entries:\n%s\nwant\n%s", got, want)
	}
}

func TestStagedImport_Accumulate(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	// An open batch of company A with one pay part, from an earlier source.
	e0 := ent("m0", 1, "m0", "1")
	first := commit(t, l, ImportIntent{Source: src("m0", "m0"), Entries: []NewEntry{newEntry(t, e0, paysync.EntryMapped)},
		PayParts: []paysync.PlannedPayPart{pp("A", "a0", e0.Ref())}, BatchSize: 3, Accumulate: true})
	s := beginImport(t, l, StreamImport{Kind: "nats", Name: "m1", BatchSize: 3, Accumulate: true})
	mustWrite(t, s, "m1")
	for i := 1; i <= 4; i++ {
		seq := mustAddEntry(t, s, newEntry(t, ent("m1", i, fmt.Sprintf("m1-%d", i), "1"), paysync.EntryMapped))
		s.Link(seq, i)
		s.AddPayPart(i, pp("A", fmt.Sprintf("a%d", i)))
	}
	c, err := s.Commit("json", written(s), 0, false)
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

// TestStagedImport_TwoAtOnce: two imports staged at the same time on the
// ledger's connection keep apart.
func TestStagedImport_TwoAtOnce(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	a := beginImport(t, l, StreamImport{Kind: "file", Name: "a.csv"})
	b := beginImport(t, l, StreamImport{Kind: "file", Name: "b.csv"})
	mustWrite(t, a, "a")
	mustWrite(t, b, "b")
	a.See("x")
	mustAddEntry(t, a, newEntry(t, ent("a.csv", 1, "x", "1"), paysync.EntryMapped))
	mustAddEntry(t, b, newEntry(t, ent("b.csv", 1, "y", "1"), paysync.EntryMapped))
	if _, seen, err := b.Lookup([]string{"x"}); err != nil || seen["x"] {
		t.Fatalf("b sees a's entry: %v %v", seen, err)
	}
	ca, err := a.Commit("csv", written(a), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.Commit("csv", written(b), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := query(t, l, `SELECT source_id, entry_id FROM entries ORDER BY id`), fmt.Sprintf("%d x\n%d y", ca.SourceID, cb.SourceID); got != want {
		t.Errorf("entries:\n%s\nwant\n%s", got, want)
	}
}
