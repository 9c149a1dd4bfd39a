package ledger

import (
	"context"
	"fmt"

	"github.com/paysync/paysync"
)

// CompaniesWithWork returns, sorted, the companies this ledger may still
// call payroll for on its own: those of batches not settled yet (pending,
// sending, failed, reverting; open batches are pending) and of pay parts
// still pending. A replica that no longer consumes a company's subjects
// must hold none of its work, or two processes with different ledgers
// would write to that company (see docs/scaling.md).
//
// Settled history (created, split, reverted batches) does not count: it is
// only ever touched again by an operator's revert or replay.
func (l *Ledger) CompaniesWithWork(ctx context.Context) ([]string, error) {
	rows, err := l.rdb.QueryContext(ctx, `
		SELECT company_id FROM batches WHERE state IN (?, ?, ?, ?)
		UNION
		SELECT company_id FROM pay_parts WHERE state = ?
		ORDER BY company_id`,
		paysync.BatchPending, paysync.BatchSending, paysync.BatchFailed, paysync.BatchReverting, paysync.PartPending)
	if err != nil {
		return nil, fmt.Errorf("ledger: companies with work: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("ledger: companies with work: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: companies with work: %w", err)
	}
	return out, nil
}
