package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paysync/paysync"
)

// LivePart is a pay part behind an entry that is in payroll, or on its
// way there: created (as far as the ledger knows), or pending in a batch
// that is still to be sent (pending, sending or failed). A pending pay
// part of a reverted or reverting batch is never sent, and is not live.
type LivePart struct {
	EntryID   string // the entry's id in its source
	PayPartID int64
	BatchID   int64
	CompanyID string
	State     paysync.PartState // created or pending
	PayrollID string            // when created
	// Replay is set when the batch was made by a replay (its source is of
	// kind replay, or, as replays recorded it before, it names the batch it
	// replayed).
	Replay bool
}

// LiveParts returns the live pay parts behind the entries with these ids,
// in order of entry id, then pay part.
func (l *Ledger) LiveParts(ctx context.Context, entryIDs []string) ([]LivePart, error) {
	var out []LivePart
	err := queryIn(ctx, l.rdb, entryIDs, func(in string) string {
		return `SELECT e.entry_id, p.id, p.batch_id, p.company_id, p.state, coalesce(p.payroll_id, ''),
				b.replay_of IS NOT NULL OR coalesce(s.kind, '') = 'replay'
			FROM entries e JOIN pay_part_entries pe ON pe.entry_id = e.id JOIN pay_parts p ON p.id = pe.pay_part_id
			JOIN batches b ON b.id = p.batch_id LEFT JOIN sources s ON s.id = b.source_id
			WHERE e.entry_id IN (` + in + `)
				AND (p.state = 'created' OR (p.state = 'pending' AND b.state IN ('pending', 'sending', 'failed')))
			ORDER BY e.entry_id, p.id`
	}, func(rows *sql.Rows) error {
		var lp LivePart
		if err := rows.Scan(&lp.EntryID, &lp.PayPartID, &lp.BatchID, &lp.CompanyID, &lp.State, &lp.PayrollID, &lp.Replay); err != nil {
			return err
		}
		out = append(out, lp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: live pay parts: %w", err)
	}
	return out, nil
}

// ReplayIntent is a replay about to be committed.
type ReplayIntent struct {
	Of        int64  // the import replayed (0: none known)
	Batch     int64  // the batch replayed (0: a whole import)
	Name      string // what the replay is, for `paysync imports`
	Entries   int    // how many entries it took
	PayParts  []paysync.PlannedPayPart
	BatchSize int
}

// CommitReplay stores a replay in one transaction: a source of kind
// replay (replay_of: in.Of) with the pending pay parts in its batches
// (replay_of: in.Batch), linked to the entries they come from; those
// entries become mapped, so that no later import takes them again.
func (l *Ledger) CommitReplay(ctx context.Context, in ReplayIntent) (Committed, error) {
	var out Committed
	err := l.tx(ctx, "commit replay", func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		now := l.ts()
		res, err := st.exec(`INSERT INTO sources (kind, name, content_hash, format, size, status, entries, replay_of, received_at)
			VALUES ('replay', ?, '', '', 0, 'committed', ?, ?, ?)`, in.Name, in.Entries, nullID(in.Of), now)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if out, err = commitIntent(st, ImportIntent{SourceID: id, ReplayOf: in.Batch, PayParts: in.PayParts, BatchSize: in.BatchSize}, now, nil); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE entries SET status = 'mapped', note = '' WHERE status <> 'mapped' AND id IN (
			SELECT pe.entry_id FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id JOIN batches b ON b.id = p.batch_id WHERE b.source_id = ?)`, id)
		return err
	})
	return out, err
}

// SourceReplayOf returns the source that source id replays or re-drives
// (sources.replay_of), 0 for none.
func (l *Ledger) SourceReplayOf(ctx context.Context, id int64) (int64, error) {
	var of sql.NullInt64
	err := l.rdb.QueryRowContext(ctx, `SELECT replay_of FROM sources WHERE id = ?`, id).Scan(&of)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("ledger: import %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: import %d: %w", id, err)
	}
	return of.Int64, nil
}

// LinkReplay records that source id re-drives source of, unless it
// already names a source it replays.
func (l *Ledger) LinkReplay(ctx context.Context, id, of int64) error {
	return l.tx(ctx, "link re-drive", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sources SET replay_of = ? WHERE id = ? AND id <> ? AND replay_of IS NULL`, of, id, of)
		return err
	})
}

// BatchesOfImport lists an import's batches and those of every source
// that replays or re-drives it, and so on, in order of id.
// AnySuperseded reports whether a pay part of the batches was replaced by
// a correction unit (a correction, a merge, a cutoff): its entries are
// then paid through pay parts of other batches.
func (l *Ledger) AnySuperseded(ctx context.Context, batchIDs []int64) (bool, error) {
	for _, id := range batchIDs {
		var n int
		if err := l.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pay_parts WHERE batch_id = ? AND superseded_by IS NOT NULL)`, id).Scan(&n); err != nil {
			return false, fmt.Errorf("ledger: superseded pay parts of batch %d: %w", id, err)
		}
		if n != 0 {
			return true, nil
		}
	}
	return false, nil
}

func (l *Ledger) BatchesOfImport(ctx context.Context, sourceID int64) ([]Batch, error) {
	return l.queryBatches(ctx, `WHERE b.source_id IN (
		WITH RECURSIVE fam(id) AS (SELECT ? UNION SELECT s.id FROM sources s JOIN fam ON s.replay_of = fam.id)
		SELECT id FROM fam) ORDER BY b.id`, sourceID)
}

// SealBatches seals open batches now (the sending loop would once they
// waited PAYSYNC_BATCH_LINGER): an operator command sends them at once.
func (l *Ledger) SealBatches(ctx context.Context, ids []int64) error {
	return l.tx(ctx, "seal batches", func(tx *sql.Tx) error {
		now := l.ts()
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE batches SET sealed = 1, updated_at = ? WHERE id = ? AND sealed = 0`, now, id); err != nil {
				return err
			}
		}
		return nil
	})
}
