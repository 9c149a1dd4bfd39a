package ledger

import (
	"context"
	"database/sql"
)

// LinkReplay records that source id re-drives source of, unless it
// already names a source it replays.
func (l *Ledger) LinkReplay(ctx context.Context, id, of int64) error {
	return l.tx(ctx, "link re-drive", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sources SET replay_of = ? WHERE id = ? AND id <> ? AND replay_of IS NULL`, of, id, of)
		return err
	})
}
