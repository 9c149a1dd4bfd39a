package ledger

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHeldEntries_Indexed: a merge's read of the oldest held entries goes
// through the partial index in id order, not a scan of the entries table
// from its first row (every entry ever paid) at each merge.
func TestHeldEntries_Indexed(t *testing.T) {
	ctx := t.Context()
	l, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rows, err := l.rdb.QueryContext(ctx, `EXPLAIN QUERY PLAN `+oldestHeld, HeldNote, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "USING INDEX entries_held_id") || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("the oldest held entries are read by %q, want the partial index entries_held_id in id order", got)
	}
}
