package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/paysync/paysync"
)

// Batch is one create_pay_parts call's worth of pay parts for a company.
type Batch struct {
	ID        int64  `json:"id"`
	CompanyID string `json:"company_id"`
	SourceID  int64  `json:"import_id"`
	ParentID  int64  `json:"split_from,omitempty"`
	ReplayOf  int64  `json:"replay_of,omitempty"`
	// Correction is the correction unit whose pay parts the batch sends
	// (0: none): it goes out only after the pay parts the unit replaces
	// are deleted.
	Correction int64              `json:"correction,omitempty"`
	State      paysync.BatchState `json:"state"`
	Attempts   int                `json:"attempts"`
	LastError  string             `json:"last_error,omitempty"`
	CreatedAt  time.Time          `json:"created_at"`
	UpdatedAt  time.Time          `json:"updated_at"`
	// Item counts by state.
	Items    int `json:"items"`
	Pending  int `json:"pending"`
	Created  int `json:"created"`
	Rejected int `json:"rejected"`
	Deleted  int `json:"deleted"`
	Gone     int `json:"gone"`
}

// Item is one pay part of a batch.
type Item struct {
	ID      int64 `json:"id"`
	BatchID int64 `json:"batch_id"`
	Seq     int   `json:"seq"`
	paysync.PayPartInput
	CompanyID    string            `json:"company_id"`
	EmployeeName string            `json:"employee_name"`
	Description  string            `json:"description"`
	Rule         string            `json:"rule"`
	State        paysync.PartState `json:"state"`
	PayrollID    string            `json:"payroll_id,omitempty"`
	Error        string            `json:"error,omitempty"`
	// DeleteAttempt is the delete attempt the pay part was sent in (0: none).
	DeleteAttempt int64 `json:"delete_attempt,omitempty"`
	// Frozen: its group's period is closed (SupersededBy).
	Frozen bool `json:"-"`
}

const batchCols = `b.id, b.company_id, coalesce(b.source_id, 0), coalesce(b.parent_id, 0), coalesce(b.replay_of, 0), coalesce(b.correction_id, 0), b.state, b.attempts, b.last_error, b.created_at, b.updated_at,
	(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id),
	(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'pending'),
	(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'created'),
	(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'rejected'),
	(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'deleted'),
	(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'gone')`

func scanBatch(sc interface{ Scan(...any) error }) (Batch, error) {
	var b Batch
	var c, u string
	err := sc.Scan(&b.ID, &b.CompanyID, &b.SourceID, &b.ParentID, &b.ReplayOf, &b.Correction, &b.State, &b.Attempts, &b.LastError, &c, &u,
		&b.Items, &b.Pending, &b.Created, &b.Rejected, &b.Deleted, &b.Gone)
	b.CreatedAt, b.UpdatedAt = parseTS(c), parseTS(u)
	return b, err
}

func (l *Ledger) queryBatches(ctx context.Context, where string, args ...any) ([]Batch, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT `+batchCols+` FROM batches b `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: list batches: %w", err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Batch returns one batch.
func (l *Ledger) Batch(ctx context.Context, id int64) (Batch, error) {
	b, err := scanBatch(l.rdb.QueryRowContext(ctx, `SELECT `+batchCols+` FROM batches b WHERE b.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, fmt.Errorf("ledger: batch %d: %w", id, ErrNotFound)
	}
	return b, err
}

// OpenBatches lists the batches that still owe work (pending, sending,
// failed), oldest first; sourceID 0 means all.
func (l *Ledger) OpenBatches(ctx context.Context, sourceID int64) ([]Batch, error) {
	if sourceID != 0 {
		return l.queryBatches(ctx, `WHERE b.state IN ('pending','sending','failed') AND b.sealed = 1 AND b.source_id = ? ORDER BY b.id`, sourceID)
	}
	return l.queryBatches(ctx, `WHERE b.state IN ('pending','sending','failed') AND b.sealed = 1 ORDER BY b.id`)
}

// BatchesInState lists batches in one state, oldest first.
func (l *Ledger) BatchesInState(ctx context.Context, state paysync.BatchState) ([]Batch, error) {
	return l.queryBatches(ctx, `WHERE b.state = ? ORDER BY b.id`, state)
}

// BatchesOfSource lists an import's batches.
func (l *Ledger) BatchesOfSource(ctx context.Context, sourceID int64) ([]Batch, error) {
	return l.queryBatches(ctx, `WHERE b.source_id = ? ORDER BY b.id`, sourceID)
}

// Items returns a batch's pay parts in order.
func (l *Ledger) Items(ctx context.Context, batchID int64) ([]Item, error) {
	out, err := l.queryItems(ctx, `batch_id = ? ORDER BY seq`, batchID)
	if err != nil {
		return nil, fmt.Errorf("ledger: items of batch %d: %w", batchID, err)
	}
	return out, nil
}

// queryItems reads the pay parts where says.
func (l *Ledger) queryItems(ctx context.Context, where string, args ...any) ([]Item, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT id, batch_id, seq, company_id, employee_id, employee_name, code, units, rate, amount, description, rule, state, coalesce(payroll_id, ''), error, coalesce(delete_attempt, 0)
		FROM pay_parts WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		var u, r, a sql.NullString
		if err := rows.Scan(&it.ID, &it.BatchID, &it.Seq, &it.CompanyID, &it.EmployeeID, &it.EmployeeName, &it.Code, &u, &r, &a,
			&it.Description, &it.Rule, &it.State, &it.PayrollID, &it.Error, &it.DeleteAttempt); err != nil {
			return nil, err
		}
		it.Units, it.Rate, it.Amount = textDec(u), textDec(r), textDec(a)
		out = append(out, it)
	}
	return out, rows.Err()
}

// ErrBatchChanged: a batch's pending pay parts are not the ones the
// sender read (a correction took one out); read it again.
var ErrBatchChanged = errors.New("the batch changed since it was read")

// BeginAttempt records that a call is about to be made. For a create the
// batch becomes sending: if the process dies now, the next start knows the
// outcome is unknown and reconciles before sending again.
func (l *Ledger) BeginAttempt(ctx context.Context, batchID int64, op paysync.AttemptOp, items int) (int64, error) {
	var id int64
	if op == paysync.AttemptCreate {
		// Its pending count then tells the sender to read it again.
		if _, err := l.freezeBatch(ctx, batchID, false); err != nil {
			return 0, err
		}
	}
	err := l.tx(ctx, "begin attempt", func(tx *sql.Tx) error {
		var err error
		id, err = beginAttempt(ctx, tx, batchID, op, items, l.ts())
		return err
	})
	return id, err
}

func beginAttempt(ctx context.Context, tx *sql.Tx, batchID int64, op paysync.AttemptOp, items int, now string) (int64, error) {
	if op == paysync.AttemptCreate {
		// A period closed since the batch was planned: what it would send
		// there is not sent (BeginAttempt froze it; closed since: the
		// sender reads the batch again, and the next try freezes it).
		if f, err := frozen(ctx, tx, batchNewParts, batchReplacedParts, batchID, batchID); err != nil {
			return 0, err
		} else if f {
			return 0, fmt.Errorf("batch %d: a period closed since it was planned: %w", batchID, ErrBatchChanged)
		}
		// The sender read the items before: a correction may have taken
		// one out of the batch since (never to be sent).
		var pending int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts WHERE batch_id = ? AND state = 'pending'`, batchID).Scan(&pending); err != nil {
			return 0, err
		}
		if pending != items {
			return 0, fmt.Errorf("batch %d has %d pending pay parts, not %d: %w", batchID, pending, items, ErrBatchChanged)
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO attempts (batch_id, op, items, started_at) VALUES (?, ?, ?, ?)`, batchID, op, items, now)
	if err != nil {
		return 0, err
	}
	id, _ := res.LastInsertId()
	switch op {
	case paysync.AttemptCreate:
		_, err = tx.ExecContext(ctx, `UPDATE batches SET state = 'sending', attempts = attempts + 1, updated_at = ? WHERE id = ?`, now, batchID)
	case paysync.AttemptDelete:
		_, err = tx.ExecContext(ctx, `UPDATE batches SET state = 'reverting', updated_at = ? WHERE id = ?`, now, batchID)
	}
	return id, err
}

// RecordCreatedThenBegin is RecordCreated followed by BeginAttempt of the
// company's next batch (a create of nextItems), in one transaction: the
// sender's bookkeeping between two calls costs one fsync, not two. The
// next batch must be pending. When an item of the first batch is at fault
// (see RecordCreated), nothing is begun and next is 0.
func (l *Ledger) RecordCreatedThenBegin(ctx context.Context, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome, nextBatch int64, nextItems int) (next int64, err error) {
	err = l.tx(ctx, "record created", func(tx *sql.Tx) error {
		if err := l.recordCreated(ctx, tx, batchID, attemptID, ids, outcome, true); err != nil {
			return err
		}
		var state paysync.BatchState
		if err := tx.QueryRowContext(ctx, `SELECT state FROM batches WHERE id = ?`, nextBatch).Scan(&state); err != nil {
			return fmt.Errorf("batch %d: %w", nextBatch, err)
		}
		if state != paysync.BatchPending {
			return fmt.Errorf("batch %d is %s, not pending: %w", nextBatch, state, errRecordOneByOne)
		}
		next, err = beginAttempt(ctx, tx, nextBatch, paysync.AttemptCreate, nextItems, l.ts())
		if errors.Is(err, ErrBatchChanged) {
			return errRecordOneByOne
		}
		return err
	})
	if errors.Is(err, errRecordOneByOne) {
		return 0, l.RecordCreated(ctx, batchID, attemptID, ids, outcome)
	}
	return next, err
}

// EndAttempt records an attempt's outcome and, when state is not empty,
// moves the batch to it.
func (l *Ledger) EndAttempt(ctx context.Context, attemptID int64, outcome paysync.AttemptOutcome, status int, msg string, state paysync.BatchState) error {
	return l.tx(ctx, "end attempt", func(tx *sql.Tx) error {
		return endAttempt(ctx, tx, attemptID, outcome, status, msg, state, l.ts())
	})
}

func endAttempt(ctx context.Context, tx *sql.Tx, attemptID int64, outcome paysync.AttemptOutcome, status int, msg string, state paysync.BatchState, now string) error {
	var batchID int64
	if err := tx.QueryRowContext(ctx, `UPDATE attempts SET finished_at = ?, outcome = ?, status = ?, error = ? WHERE id = ? RETURNING batch_id`,
		now, outcome, status, msg, attemptID).Scan(&batchID); err != nil {
		return fmt.Errorf("attempt %d: %w", attemptID, err)
	}
	if state != "" {
		if _, err := tx.ExecContext(ctx, `UPDATE batches SET state = ?, last_error = ?, updated_at = ? WHERE id = ?`, state, msg, now, batchID); err != nil {
			return err
		}
	}
	return nil
}

// RecordCreated stores payroll ids for items (item id → payroll id) and the
// attempt's outcome in one transaction. The batch becomes created when no
// item is pending any more, else pending (the rest is sent again).
func (l *Ledger) RecordCreated(ctx context.Context, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome) error {
	err := l.tx(ctx, "record created", func(tx *sql.Tx) error {
		return l.recordCreated(ctx, tx, batchID, attemptID, ids, outcome, true)
	})
	if errors.Is(err, errRecordOneByOne) {
		// Something is wrong with an item: one by one, to say which.
		err = l.tx(ctx, "record created", func(tx *sql.Tx) error {
			return l.recordCreated(ctx, tx, batchID, attemptID, ids, outcome, false)
		})
	}
	return err
}

// errRecordOneByOne sends RecordCreated back to one UPDATE per item.
var errRecordOneByOne = errors.New("record created one by one")

// recordChunk is how many items one UPDATE records: one statement for a
// whole batch instead of one per pay part.
const recordChunk = 500

// recordCreated stores the payroll ids in tx: all at once (fast), which
// gives up with errRecordOneByOne on any anomaly, or one UPDATE per item,
// which names the item at fault.
func (l *Ledger) recordCreated(ctx context.Context, tx *sql.Tx, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome, fast bool) error {
	now := l.ts()
	st := l.stmts(ctx, tx)
	defer st.close()
	if fast {
		items := slices.Sorted(maps.Keys(ids))
		for start := 0; start < len(items); start += recordChunk {
			part := items[start:min(start+recordChunk, len(items))]
			args := make([]any, 0, 2*len(part)+2)
			args = append(args, now) // updated_at, the VALUES, batch_id
			for _, id := range part {
				args = append(args, id, ids[id])
			}
			args = append(args, batchID)
			res, err := st.exec(`UPDATE pay_parts SET state = 'created', payroll_id = v.column2, updated_at = ?
				FROM (VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?),", len(part)), ",")+`) AS v
				WHERE pay_parts.id = v.column1 AND pay_parts.batch_id = ? AND pay_parts.state = 'pending'`,
				args...)
			if err != nil {
				if isConstraint(err) {
					return errRecordOneByOne
				}
				return err
			}
			if n, _ := res.RowsAffected(); n != int64(len(part)) {
				return errRecordOneByOne
			}
		}
	} else {
		for itemID, pid := range ids {
			res, err := st.exec(`UPDATE pay_parts SET state = 'created', payroll_id = ?, updated_at = ? WHERE id = ? AND batch_id = ? AND state = 'pending'`, pid, now, itemID, batchID)
			if err != nil {
				if isConstraint(err) {
					return fmt.Errorf("payroll id %s is already recorded for another pay part", pid)
				}
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("pay part %d of batch %d is not pending", itemID, batchID)
			}
		}
	}
	state, err := settledState(ctx, tx, batchID)
	if err != nil {
		return err
	}
	if attemptID != 0 {
		if err := endAttempt(ctx, tx, attemptID, outcome, 0, "", "", now); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE batches SET state = ?, last_error = '', updated_at = ? WHERE id = ?`, state, now, batchID)
	return err
}

// settledState is created when nothing is pending, else pending.
func settledState(ctx context.Context, tx *sql.Tx, batchID int64) (paysync.BatchState, error) {
	var pending int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts WHERE batch_id = ? AND state = 'pending'`, batchID).Scan(&pending); err != nil {
		return "", err
	}
	if pending == 0 {
		return paysync.BatchCreated, nil
	}
	return paysync.BatchPending, nil
}

// RejectItems marks items the API refused for good (item id → reason),
// records a reject for each, and settles the batch.
func (l *Ledger) RejectItems(ctx context.Context, batchID, attemptID int64, reasons map[int64]string) error {
	return l.tx(ctx, "reject items", func(tx *sql.Tx) error {
		now := l.ts()
		for itemID, why := range reasons {
			res, err := tx.ExecContext(ctx, `UPDATE pay_parts SET state = 'rejected', error = ?, updated_at = ? WHERE id = ? AND batch_id = ? AND state = 'pending'`, why, now, itemID, batchID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("pay part %d of batch %d is not pending", itemID, batchID)
			}
			// The reject names the entries behind the pay part: those
			// counting in its group (from before the desired state: those
			// linked to it), each with the import of its version.
			if _, err := tx.ExecContext(ctx, `INSERT INTO rejects (source_id, batch_id, entry_id, line, field, message, hint, created_at)
				SELECT v.source_id, ?, e.entry_id, v.line, 'pay_part', ?, 'fix the mapping or the entry, then replay the batch (paysync replay BATCH_ID)', ?
				FROM pay_parts p JOIN lines l ON l.group_id = p.group_id AND l.counts = 1 JOIN versions v ON v.id = l.version JOIN entries e ON e.id = v.entry
				WHERE p.id = ?
				UNION ALL SELECT e.source_id, ?, e.entry_id, e.line, 'pay_part', ?, 'fix the mapping or the entry, then replay the batch (paysync replay BATCH_ID)', ?
				FROM pay_part_entries pe JOIN entries e ON e.id = pe.entry_id WHERE pe.pay_part_id = ?`, batchID, why, now, itemID, batchID, why, now, itemID); err != nil {
				return err
			}
		}
		if attemptID != 0 {
			if err := endAttempt(ctx, tx, attemptID, paysync.AttemptRejected, 0, "", "", now); err != nil {
				return err
			}
		}
		state, err := settledState(ctx, tx, batchID)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE batches SET state = ?, updated_at = ? WHERE id = ?`, state, now, batchID)
		return err
	})
}

// SplitBatch moves a batch's pending items into new child batches, one per
// group of item ids; the parent becomes split. It returns the children.
func (l *Ledger) SplitBatch(ctx context.Context, batchID, attemptID int64, msg string, groups [][]int64) ([]int64, error) {
	var children []int64
	err := l.tx(ctx, "split batch", func(tx *sql.Tx) error {
		now := l.ts()
		var company string
		var source, replayOf sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT company_id, source_id, replay_of FROM batches WHERE id = ?`, batchID).Scan(&company, &source, &replayOf); err != nil {
			return err
		}
		for _, g := range groups {
			if len(g) == 0 {
				continue
			}
			cid, err := insertBatch(ctx, tx, company, source.Int64, batchID, replayOf.Int64, now)
			if err != nil {
				return err
			}
			for i, itemID := range g {
				res, err := tx.ExecContext(ctx, `UPDATE pay_parts SET batch_id = ?, seq = ?, updated_at = ? WHERE id = ? AND batch_id = ? AND state = 'pending'`, cid, i, now, itemID, batchID)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return fmt.Errorf("pay part %d of batch %d is not pending", itemID, batchID)
				}
			}
			children = append(children, cid)
		}
		var left int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts WHERE batch_id = ? AND state = 'pending'`, batchID).Scan(&left); err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("split of batch %d leaves %d pending pay parts behind", batchID, left)
		}
		if attemptID != 0 {
			if err := endAttempt(ctx, tx, attemptID, paysync.AttemptRejected, 0, msg, "", now); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE batches SET state = 'split', last_error = ?, updated_at = ? WHERE id = ?`, msg, now, batchID)
		return err
	})
	return children, err
}

// SetBatchState moves a batch to state with a message.
func (l *Ledger) SetBatchState(ctx context.Context, batchID int64, state paysync.BatchState, msg string) error {
	return l.tx(ctx, "set batch state", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE batches SET state = ?, last_error = ?, updated_at = ? WHERE id = ?`, state, msg, l.ts(), batchID)
		return err
	})
}

// ---- ownership: which pay parts in payroll are not ours ----

// HasSnapshot reports whether the company's foreign pay parts were recorded.
func (l *Ledger) HasSnapshot(ctx context.Context, company string) (bool, error) {
	var n int
	err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM company_snapshots WHERE company_id = ?`, company).Scan(&n)
	return n > 0, err
}

// AddForeign records payroll ids of pay parts that are not ours, so that
// reconciliation never claims them. snapshot marks a full read of the
// company's pay parts.
func (l *Ledger) AddForeign(ctx context.Context, company string, ids []string, snapshot bool) error {
	return l.tx(ctx, "record foreign pay parts", func(tx *sql.Tx) error {
		now := l.ts()
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO foreign_pay_parts (company_id, payroll_id, seen_at) VALUES (?, ?, ?)`, company, id, now); err != nil {
				return err
			}
		}
		if snapshot {
			_, err := tx.ExecContext(ctx, `INSERT INTO company_snapshots (company_id, taken_at) VALUES (?, ?) ON CONFLICT (company_id) DO UPDATE SET taken_at = excluded.taken_at`, company, now)
			return err
		}
		return nil
	})
}

// Known returns the payroll ids of a company that are foreign or ours.
func (l *Ledger) Known(ctx context.Context, company string) (map[string]bool, error) {
	return l.idSet(ctx, "known pay parts", `SELECT payroll_id FROM foreign_pay_parts WHERE company_id = ?
		UNION SELECT payroll_id FROM pay_parts WHERE company_id = ? AND payroll_id IS NOT NULL`, company, company)
}

// Owned returns the payroll ids recorded as ours for a company.
func (l *Ledger) Owned(ctx context.Context, company string) (map[string]bool, error) {
	return l.idSet(ctx, "our pay parts", `SELECT payroll_id FROM pay_parts WHERE company_id = ? AND payroll_id IS NOT NULL`, company)
}

func (l *Ledger) idSet(ctx context.Context, what, q string, args ...any) (map[string]bool, error) {
	rows, err := l.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: %s: %w", what, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// MarkRemoved records the outcome of a revert: deleted (by us) or gone
// (deleted by someone else). The batch becomes reverted when none of its
// items is created any more.
func (l *Ledger) MarkRemoved(ctx context.Context, batchID, attemptID int64, deleted, gone []int64) error {
	return l.markRemoved(ctx, batchID, attemptID, deleted, gone, true)
}

// MarkSupersededRemoved is MarkRemoved for the pay parts a correction
// replaces: the batch's state is left alone (its other pay parts, created
// or still to send, stay as they are).
func (l *Ledger) MarkSupersededRemoved(ctx context.Context, batchID, attemptID int64, deleted, gone []int64) error {
	return l.markRemoved(ctx, batchID, attemptID, deleted, gone, false)
}

func (l *Ledger) markRemoved(ctx context.Context, batchID, attemptID int64, deleted, gone []int64, revert bool) error {
	return l.tx(ctx, "record deleted", func(tx *sql.Tx) error {
		now := l.ts()
		for _, set := range []struct {
			ids   []int64
			state paysync.PartState
		}{{deleted, paysync.PartDeleted}, {gone, paysync.PartGone}} {
			for _, id := range set.ids {
				if _, err := tx.ExecContext(ctx, `UPDATE pay_parts SET state = ?, updated_at = ? WHERE id = ? AND batch_id = ? AND state = 'created'`, set.state, now, id, batchID); err != nil {
					return err
				}
			}
		}
		if attemptID != 0 {
			if err := endAttempt(ctx, tx, attemptID, paysync.AttemptOK, 0, "", "", now); err != nil {
				return err
			}
		}
		if !revert {
			return nil
		}
		var left int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts WHERE batch_id = ? AND state = 'created'`, batchID).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			_, err := tx.ExecContext(ctx, `UPDATE batches SET state = 'reverted', last_error = '', updated_at = ? WHERE id = ?`, now, batchID)
			return err
		}
		return nil
	})
}

// Family returns a batch and, recursively, the batches it was split into.
func (l *Ledger) Family(ctx context.Context, id int64) ([]Batch, error) {
	return l.queryBatches(ctx, `WHERE b.id IN (
		WITH RECURSIVE fam(id) AS (SELECT ? UNION ALL SELECT c.id FROM batches c JOIN fam ON c.parent_id = fam.id)
		SELECT id FROM fam) ORDER BY b.id`, id)
}

// MarkDeleting records, before delete_pay_parts is called, that these
// created pay parts are sent in delete attempt attemptID.
func (l *Ledger) MarkDeleting(ctx context.Context, attemptID int64, itemIDs []int64) error {
	return l.tx(ctx, "record delete intent", func(tx *sql.Tx) error {
		for _, id := range itemIDs {
			res, err := tx.ExecContext(ctx, `UPDATE pay_parts SET delete_attempt = ?, updated_at = ? WHERE id = ? AND state = 'created'`, attemptID, l.ts(), id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("pay part %d is not created", id)
			}
		}
		return nil
	})
}

// InterruptAttempts marks attempts left in flight by a process that died.
// Call it only while holding the ledger's work lock.
func (l *Ledger) InterruptAttempts(ctx context.Context) error {
	return l.tx(ctx, "mark interrupted attempts", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE attempts SET outcome = ?, finished_at = ? WHERE outcome = ?`, paysync.AttemptInterrupted, l.ts(), paysync.AttemptInFlight)
		return err
	})
}
