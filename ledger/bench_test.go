package ledger

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

// benchBatch is the size of the imports and batches of the benchmarks.
const benchBatch = 100

// openBenchLedger opens a fresh ledger file in b.TempDir() with the real
// clock (newLedger takes a *testing.T); it is closed at the end.
func openBenchLedger(b *testing.B) *Ledger {
	b.Helper()
	l, err := Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), Options{})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() {
		if err := l.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
	return l
}

// benchIntent is import k: a file of n lines, n mapped entries and n pay
// parts of company A (one per entry) in one batch. Entry ids and the
// payload, hence its content hash, are unique per k.
func benchIntent(b *testing.B, k, n int) ImportIntent {
	b.Helper()
	name := fmt.Sprintf("bench-%d.csv", k)
	var payload strings.Builder
	payload.WriteString("id,employee_id,hours\n")
	es := make([]NewEntry, 0, n)
	pps := make([]paysync.PlannedPayPart, 0, n)
	for i := range n {
		e := ent(name, i+1, fmt.Sprintf("k%d-e%d", k, i), "7.5")
		h, _, err := paysync.EntryHash(e)
		if err != nil {
			b.Fatal(err)
		}
		es = append(es, NewEntry{Entry: e, Hash: h, Status: paysync.EntryMapped})
		pps = append(pps, pp("A", e.EmployeeID, e.Ref()))
		fmt.Fprintf(&payload, "%s,%s,7.5\n", e.ID, e.EmployeeID)
	}
	return ImportIntent{Source: src(name, payload.String()), Entries: es, PayParts: pps, BatchSize: n}
}

// countRows returns the number of rows of table matching where.
func countRows(b *testing.B, l *Ledger, table, where string) int {
	b.Helper()
	var n int
	if err := l.db.QueryRowContext(b.Context(), "SELECT count(*) FROM "+table+" WHERE "+where).Scan(&n); err != nil {
		b.Fatalf("count %s: %v", table, err)
	}
	return n
}

// BenchmarkLedger_CommitImport commits an import of 100 entries and 100
// pay parts (one batch) in one transaction to a SQLite file: the source
// with its gzipped payload, entries, pay parts and their links. Building
// the intent is not timed. It reports pay parts committed per second.
func BenchmarkLedger_CommitImport(b *testing.B) {
	l := openBenchLedger(b)
	ctx := b.Context()
	k := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		in := benchIntent(b, k, benchBatch)
		k++
		b.StartTimer()
		c, err := l.CommitImport(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.BatchIDs) != 1 {
			b.Fatalf("%d batches, want 1", len(c.BatchIDs))
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "payparts/s")

	want := k * benchBatch
	if got := countRows(b, l, "pay_parts", "state = 'pending'"); got != want {
		b.Fatalf("the ledger holds %d pending pay parts, want %d", got, want)
	}
	if got := countRows(b, l, "entries", "status = 'mapped'"); got != want {
		b.Fatalf("the ledger holds %d entries, want %d", got, want)
	}
	if got := countRows(b, l, "pay_part_entries", "1"); got != want {
		b.Fatalf("the ledger holds %d pay part links, want %d", got, want)
	}
}

// BenchmarkLedger_RecordCreated records the payroll ids of a 100-item
// batch and the attempt's outcome in one transaction, as the sender does
// after create_pay_parts answers. Committing the batch and BeginAttempt
// are not timed. It reports pay parts recorded per second.
func BenchmarkLedger_RecordCreated(b *testing.B) {
	l := openBenchLedger(b)
	ctx := b.Context()
	k := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		c, err := l.CommitImport(ctx, benchIntent(b, k, benchBatch))
		if err != nil {
			b.Fatal(err)
		}
		batch := c.BatchIDs[0]
		items, err := l.Items(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		att, err := l.BeginAttempt(ctx, batch, "create", len(items))
		if err != nil {
			b.Fatal(err)
		}
		ids := make(map[int64]string, len(items))
		for _, it := range items {
			ids[it.ID] = fmt.Sprintf("payroll-%d-%d", k, it.Seq)
		}
		k++
		b.StartTimer()
		if err := l.RecordCreated(ctx, batch, att, ids, "ok"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "payparts/s")

	if got, want := countRows(b, l, "pay_parts", "state = 'created' AND payroll_id IS NOT NULL"), k*benchBatch; got != want {
		b.Fatalf("the ledger holds %d created pay parts, want %d", got, want)
	}
	if got := countRows(b, l, "batches", "state = 'created'"); got != k {
		b.Fatalf("%d created batches, want %d", got, k)
	}
	if got := countRows(b, l, "attempts", "outcome = 'ok' AND finished_at IS NOT NULL"); got != k {
		b.Fatalf("%d finished attempts, want %d", got, k)
	}
}

// BenchmarkFloor_EntryRowsOnly is a floor, not paysync's path: only the
// one row per entry that dedupe cannot do without (entries, with its
// unique entry_id), 64 per transaction as NATS intake commits them, with
// no source, pay part or link rows and no Go-side planning. Whatever
// paysync does per message costs more than this; it is here so that the
// ceiling BENCHMARKS.md gives for the ledger can be measured again.
func BenchmarkFloor_EntryRowsOnly(b *testing.B) {
	l := openBenchLedger(b)
	ctx := b.Context()
	res, err := l.db.ExecContext(ctx, `INSERT INTO sources (kind, name, content_hash, status, received_at) VALUES ('nats', 'floor', 'floor', 'committed', '2026-01-01T00:00:00Z')`)
	if err != nil {
		b.Fatal(err)
	}
	source, _ := res.LastInsertId()
	const group = 64
	n := 0
	for b.Loop() {
		err := l.tx(ctx, "floor", func(tx *sql.Tx) error {
			st := l.stmts(ctx, tx)
			defer st.close()
			for range group {
				id := fmt.Sprintf("floor-%d", n)
				data := fmt.Sprintf(`{"id":%q,"employee_id":"emp-%d","hours":"7.5"}`, id, n%50)
				var rowID int64
				if err := st.queryRow(`INSERT INTO entries (source_id, entry_id, line, content_hash, data, status, note) VALUES (?, ?, ?, ?, ?, ?, ?)
					ON CONFLICT (entry_id) DO UPDATE SET source_id = excluded.source_id WHERE entries.status <> 'mapped'
					RETURNING id`, source, id, 1, paysync.PayloadHash([]byte(data)), []byte(data), paysync.EntryMapped, "").Scan(&rowID); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
}
