package ledger

import (
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

// t0 is the fake clock's start: whole seconds, so that stored timestamps
// compare as text the same way they compare as times.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newLedger opens a fresh ledger in a temporary directory; it is closed at
// the end of the test.
func newLedger(t *testing.T) (*Ledger, *clock) {
	t.Helper()
	c := &clock{t: t0}
	l, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), Options{Now: c.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l, c
}

// rawDB opens path with the plain driver, outside the ledger.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db interface {
	Exec(string, ...any) (sql.Result, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// dirState describes every file of a directory (name, mode, size, mtime,
// content hash), to show that an operation changed nothing.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	var lines []string
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		line := fmt.Sprintf("%s %v %d %s", de.Name(), fi.Mode(), fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, de.Name()))
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// tableCounts returns the row count of every ledger table, to show that a
// failed operation changed nothing.
func tableCounts(t *testing.T, l *Ledger) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tb := range []string{"sources", "entries", "batches", "pay_parts", "pay_part_entries", "attempts", "rejects", "foreign_pay_parts", "company_snapshots", "credentials"} {
		var n int
		if err := l.db.QueryRow("SELECT count(*) FROM " + tb).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tb, err)
		}
		out[tb] = n
	}
	return out
}

// dump renders the mutable state of batches, pay parts, entries and
// attempts, to show that a rolled-back operation changed nothing.
func dump(t *testing.T, l *Ledger) string {
	t.Helper()
	var sb strings.Builder
	for _, q := range []string{
		`SELECT id, company_id, coalesce(source_id, 0), coalesce(parent_id, 0), state, attempts, last_error, updated_at FROM batches ORDER BY id`,
		`SELECT id, batch_id, seq, state, coalesce(payroll_id, ''), error, updated_at FROM pay_parts ORDER BY id`,
		`SELECT id, source_id, entry_id, line, content_hash, status, note FROM entries ORDER BY id`,
		`SELECT id, batch_id, op, items, coalesce(finished_at, ''), outcome, status, error FROM attempts ORDER BY id`,
		`SELECT id, coalesce(source_id, 0), coalesce(batch_id, 0), entry_id, message FROM rejects ORDER BY id`,
		`SELECT id, kind, name, content_hash FROM sources ORDER BY id`,
	} {
		rows, err := l.db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&sb, vals...)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		sb.WriteString("--\n")
	}
	return sb.String()
}

// ent builds an entry of a source.
func ent(source string, line int, id, hours string) paysync.Entry {
	e := paysync.Entry{
		ID:         id,
		Source:     source,
		Line:       line,
		CompanyID:  "A",
		EmployeeID: "emp-" + id,
		Date:       "2025-02-1" + fmt.Sprint(line%10),
		Type:       "normal",
	}
	if hours != "" {
		h, err := paysync.ParseHours(hours, false)
		if err != nil {
			panic(err)
		}
		e.Hours = h
	}
	return e
}

// newEntry wraps an entry with its hash and status.
func newEntry(t *testing.T, e paysync.Entry, status paysync.EntryStatus) NewEntry {
	t.Helper()
	h, _, err := paysync.EntryHash(e)
	if err != nil {
		t.Fatalf("EntryHash: %v", err)
	}
	return NewEntry{Entry: e, Hash: h, Status: status}
}

// src builds a file source for payload.
func src(name, payload string) *NewSource {
	return &NewSource{Kind: "file", Name: name, Format: "csv", Hash: paysync.PayloadHash([]byte(payload)), Payload: []byte(payload)}
}

// pp builds a planned pay part of company for employee, from entries.
func pp(company, employee string, refs ...paysync.EntryRef) paysync.PlannedPayPart {
	return paysync.PlannedPayPart{
		CompanyID:    company,
		PayPartInput: paysync.PayPartInput{EmployeeID: employee, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("7.50")}},
		EmployeeName: "Name of " + employee,
		Description:  "Normal hours",
		Rule:         "rule-1",
		Entries:      refs,
	}
}

// commit commits an intent and fails the test on error.
func commit(t *testing.T, l *Ledger, in ImportIntent) Committed {
	t.Helper()
	c, err := l.CommitImport(t.Context(), in)
	if err != nil {
		t.Fatalf("CommitImport: %v", err)
	}
	return c
}

func mustBatch(t *testing.T, l *Ledger, id int64) Batch {
	t.Helper()
	b, err := l.Batch(t.Context(), id)
	if err != nil {
		t.Fatalf("Batch(%d): %v", id, err)
	}
	return b
}

func mustItems(t *testing.T, l *Ledger, batchID int64) []Item {
	t.Helper()
	items, err := l.Items(t.Context(), batchID)
	if err != nil {
		t.Fatalf("Items(%d): %v", batchID, err)
	}
	return items
}

func batchIDs(bs []Batch) []int64 {
	out := []int64{}
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func itemIDs(items []Item) []int64 {
	out := []int64{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// entriesWhere reads stored entries (their current content, with source
// name and line) selected by q, which returns e.data, e.line, s.name.
func entriesWhere(t *testing.T, l *Ledger, q string, args ...any) []paysync.Entry {
	t.Helper()
	rows, err := l.db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("entries: %v", err)
	}
	defer rows.Close()
	out := []paysync.Entry{}
	for rows.Next() {
		var data []byte
		var line int
		var name string
		if err := rows.Scan(&data, &line, &name); err != nil {
			t.Fatal(err)
		}
		var e paysync.Entry
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("stored entry: %v", err)
		}
		e.Source, e.Line = name, line
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// entriesOfSource returns every entry an import recorded (entries whose
// row names it), in ledger order.
func entriesOfSource(t *testing.T, l *Ledger, source int64) []paysync.Entry {
	t.Helper()
	return entriesWhere(t, l, `SELECT e.data, e.line, s.name FROM entries e JOIN sources s ON s.id = e.source_id WHERE e.source_id = ? ORDER BY e.id`, source)
}

// entriesOfBatch returns the distinct entries linked to a batch's pay
// parts, in ledger order.
func entriesOfBatch(t *testing.T, l *Ledger, batch int64) []paysync.Entry {
	t.Helper()
	return entriesWhere(t, l, `SELECT DISTINCT e.data, e.line, s.name FROM pay_parts p JOIN pay_part_entries pe ON pe.pay_part_id = p.id
		JOIN entries e ON e.id = pe.entry_id JOIN sources s ON s.id = e.source_id WHERE p.batch_id = ? ORDER BY e.id`, batch)
}
