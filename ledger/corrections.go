package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/paysync/paysync"
)

// addCorrection records c, a new version of the entry with c's id paid
// before, as a pending correction brought by source.
func addCorrection(st *stmts, source int64, c NewEntry, now string) error {
	data := c.Data
	if data == nil {
		var err error
		if data, err = json.Marshal(c.Entry); err != nil {
			return err
		}
	}
	res, err := st.exec(`INSERT INTO entry_corrections (entry, source_id, line, content_hash, data, state, created_at)
		SELECT id, ?, ?, ?, ?, 'pending', ? FROM entries WHERE entry_id = ?`, source, c.Entry.Line, c.Hash, data, now, c.Entry.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("correction of entry %s: no such entry", c.Entry.ID)
	}
	return nil
}

// HeldNote marks a mapped entry held for the cutoff (PAYSYNC_SEND=cutoff):
// no pay part yet.
const HeldNote = "held"

// SupersededBy returns the pay parts of company that correction unit
// replaces and payroll may still hold (created), by batch. (A unit's
// batch of one company deletes that company's: each company's calls stay
// one at a time.)
func (l *Ledger) SupersededBy(ctx context.Context, unit int64, company string) (map[int64][]Item, []int64, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT id, batch_id, company_id, coalesce(payroll_id, ''), coalesce(delete_attempt, 0),
			coalesce(group_id IN (`+frozenGroupIDs+`), 0)
		FROM pay_parts WHERE superseded_by = ? AND +company_id = ? AND state = 'created' ORDER BY batch_id, id`, unit, company)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: superseded pay parts: %w", err)
	}
	defer rows.Close()
	out := map[int64][]Item{}
	var order []int64
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.ID, &it.BatchID, &it.CompanyID, &it.PayrollID, &it.DeleteAttempt, &it.Frozen); err != nil {
			return nil, nil, err
		}
		it.State = paysync.PartCreated
		if _, ok := out[it.BatchID]; !ok {
			order = append(order, it.BatchID)
		}
		out[it.BatchID] = append(out[it.BatchID], it)
	}
	return out, order, rows.Err()
}

// BeginSupersedeDelete records, before delete_pay_parts is called, a
// delete attempt on batch for pay parts a correction replaces. Unlike a
// revert's, it leaves the batch's state alone: its other pay parts stay.
func (l *Ledger) BeginSupersedeDelete(ctx context.Context, batchID int64, items int) (int64, error) {
	var id int64
	// A period closed since the plan: its pay parts there stay.
	if changed, err := l.freezeBatch(ctx, batchID, true); err != nil {
		return 0, err
	} else if changed {
		return 0, ErrBatchChanged // the sender reads what to delete again
	}
	err := l.tx(ctx, "begin supersede delete", func(tx *sql.Tx) error {
		if f, err := frozen(ctx, tx, batchNoParts, batchSupersedeOf, nil, batchID); err != nil {
			return err
		} else if f {
			return ErrBatchChanged
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO attempts (batch_id, op, items, started_at) VALUES (?, 'delete', ?, ?)`, batchID, items, l.ts())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// KeepFrozen keeps pay parts a plan replaces whose period was closed while
// their delete was in flight and that payroll still holds (the delete was
// not carried out): they are live again, their groups planned again (a
// late change).
func (l *Ledger) KeepFrozen(ctx context.Context, ids []int64) error {
	return l.tx(ctx, "keep frozen pay parts", func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE pay_parts SET superseded_by = NULL, delete_attempt = NULL, updated_at = ? WHERE id = ? AND state = 'created'`, l.ts(), id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE groups SET dirty = 1 WHERE id = (SELECT group_id FROM pay_parts WHERE id = ?)`, id); err != nil {
				return err
			}
		}
		return nil
	})
}
