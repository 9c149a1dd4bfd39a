package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paysync/paysync"
)

// BatchFilter selects batches for operators.
type BatchFilter struct {
	State    paysync.BatchState // "" = any
	Since    time.Time          // zero = any
	SourceID int64              // 0 = any
}

// ListBatches lists batches, newest first.
func (l *Ledger) ListBatches(ctx context.Context, f BatchFilter) ([]Batch, error) {
	var where []string
	var args []any
	if f.State != "" {
		where = append(where, "b.state = ?")
		args = append(args, f.State)
	}
	if !f.Since.IsZero() {
		where = append(where, "b.created_at >= ?")
		args = append(args, f.Since.UTC().Format(tsLayout))
	}
	if f.SourceID != 0 {
		where = append(where, "b.source_id = ?")
		args = append(args, f.SourceID)
	}
	q := ""
	if len(where) > 0 {
		q = "WHERE " + strings.Join(where, " AND ")
	}
	return l.queryBatches(ctx, q+" ORDER BY b.id DESC", args...)
}

// ItemEntry is one source entry behind a pay part.
type ItemEntry struct {
	Source  string `json:"source"`
	Line    int    `json:"line"`
	EntryID string `json:"entry_id"`
}

// ItemDetail is a pay part with the entries it came from.
type ItemDetail struct {
	Item
	Entries []ItemEntry `json:"entries"`
}

// Attempt is one recorded call.
type Attempt struct {
	ID         int64                  `json:"id"`
	BatchID    int64                  `json:"batch_id"`
	Op         paysync.AttemptOp      `json:"op"`
	Items      int                    `json:"items"`
	StartedAt  time.Time              `json:"started_at"`
	FinishedAt time.Time              `json:"finished_at,omitzero"`
	Outcome    paysync.AttemptOutcome `json:"outcome"`
	Status     int                    `json:"status,omitempty"`
	Error      string                 `json:"error,omitempty"`
}

// BatchDetail is a batch with its pay parts, their entries, and its attempts.
type BatchDetail struct {
	Batch
	Items []ItemDetail `json:"items"`
	Log   []Attempt    `json:"attempt_log"`
}

// BatchDetail returns everything about one batch.
func (l *Ledger) BatchDetail(ctx context.Context, id int64) (BatchDetail, error) {
	b, err := l.Batch(ctx, id)
	if err != nil {
		return BatchDetail{}, err
	}
	d := BatchDetail{Batch: b}
	items, err := l.Items(ctx, id)
	if err != nil {
		return d, err
	}
	for _, it := range items {
		idt := ItemDetail{Item: it}
		rows, err := l.rdb.QueryContext(ctx, `SELECT name, line, entry_id FROM (`+partEntriesSQL+`) WHERE pay_part_id = ? ORDER BY row`, it.ID)
		if err != nil {
			return d, fmt.Errorf("ledger: entries of pay part %d: %w", it.ID, err)
		}
		for rows.Next() {
			var ie ItemEntry
			if err := rows.Scan(&ie.Source, &ie.Line, &ie.EntryID); err != nil {
				rows.Close()
				return d, err
			}
			idt.Entries = append(idt.Entries, ie)
		}
		rows.Close()
		d.Items = append(d.Items, idt)
	}
	d.Log, err = l.Attempts(ctx, id, 0)
	return d, err
}

// partEntriesSQL selects the entries behind pay parts (pay_part_id, row,
// name, line, entry_id): those counting in the group of a live pay part
// (the lines it sums), and those linked to a pay part from before the
// desired state.
const partEntriesSQL = `SELECT p.id AS pay_part_id, e.id AS row, s.name AS name, v.line AS line, e.entry_id AS entry_id
		FROM pay_parts p JOIN lines l ON l.group_id = p.group_id AND l.counts = 1 JOIN versions v ON v.id = l.version
		JOIN entries e ON e.id = v.entry JOIN sources s ON s.id = v.source_id
		WHERE p.superseded_by IS NULL AND p.state IN ('created', 'pending')
	UNION ALL SELECT pe.pay_part_id, e.id, s.name, e.line, e.entry_id FROM pay_part_entries pe JOIN entries e ON e.id = pe.entry_id
		JOIN sources s ON s.id = e.source_id`

// Attempts lists attempts of a batch (batchID 0: of all batches), oldest
// first; limit 0 means all (else the newest limit).
func (l *Ledger) Attempts(ctx context.Context, batchID int64, limit int) ([]Attempt, error) {
	q := `SELECT id, batch_id, op, items, started_at, coalesce(finished_at, ''), outcome, status, error FROM attempts`
	var args []any
	if batchID != 0 {
		q += ` WHERE batch_id = ?`
		args = append(args, batchID)
	}
	q += ` ORDER BY id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := l.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var s, f string
		if err := rows.Scan(&a.ID, &a.BatchID, &a.Op, &a.Items, &s, &f, &a.Outcome, &a.Status, &a.Error); err != nil {
			return nil, err
		}
		a.StartedAt, a.FinishedAt = parseTS(s), parseTS(f)
		out = append(out, a)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, rows.Err()
}

// ListSources lists imports, newest first.
func (l *Ledger) ListSources(ctx context.Context, since time.Time) ([]Source, error) {
	// Source 0 is the reconciler's (its plans no import caused): not one.
	q := `SELECT ` + sourceCols + ` FROM sources WHERE id <> 0`
	var args []any
	if !since.IsZero() {
		q += ` AND received_at >= ?`
		args = append(args, since.UTC().Format(tsLayout))
	}
	rows, err := l.rdb.QueryContext(ctx, q+` ORDER BY id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: list imports: %w", err)
	}
	defer rows.Close()
	var out []Source
	for rows.Next() {
		s, err := scanSource(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Reject is a recorded problem.
type Reject struct {
	EntryID string    `json:"entry_id,omitempty"`
	Line    int       `json:"line,omitempty"`
	Field   string    `json:"field,omitempty"`
	Message string    `json:"message"`
	Hint    string    `json:"hint,omitempty"`
	BatchID int64     `json:"batch_id,omitempty"`
	At      time.Time `json:"at"`
}

// Rejects lists an import's recorded problems.
func (l *Ledger) Rejects(ctx context.Context, sourceID int64) ([]Reject, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT entry_id, line, field, message, hint, coalesce(batch_id, 0), created_at FROM rejects WHERE source_id = ? ORDER BY id`, sourceID)
	if err != nil {
		return nil, fmt.Errorf("ledger: rejects: %w", err)
	}
	defer rows.Close()
	var out []Reject
	for rows.Next() {
		var r Reject
		var at string
		if err := rows.Scan(&r.EntryID, &r.Line, &r.Field, &r.Message, &r.Hint, &r.BatchID, &at); err != nil {
			return nil, err
		}
		r.At = parseTS(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// PendingPayParts counts pay parts committed and not yet created.
func (l *Ledger) PendingPayParts(ctx context.Context) (int, error) {
	var n int
	err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts WHERE state = 'pending'`).Scan(&n)
	return n, err
}

// CheckWritable takes the write lock and releases it: the ledger can be
// written right now (for /readyz).
func (l *Ledger) CheckWritable(ctx context.Context) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return l.classifyOpen("check", err)
	}
	return tx.Rollback()
}
