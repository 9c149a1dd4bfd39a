package ledger

import (
	"context"
	"strings"
)

// IntegrityCheck runs PRAGMA integrity_check (a full check of every page,
// index and constraint, unlike the quick check Open runs) and returns "ok",
// or the first problems SQLite found, joined by "; ".
func (l *Ledger) IntegrityCheck(ctx context.Context) (string, error) {
	rows, err := l.db.QueryContext(ctx, "PRAGMA integrity_check(10)")
	if err != nil {
		return "", l.classifyOpen("integrity check", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", l.classifyOpen("integrity check", err)
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return "", l.classifyOpen("integrity check", err)
	}
	return strings.Join(found, "; "), nil
}
