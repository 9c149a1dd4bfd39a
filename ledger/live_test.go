package ledger

import (
	"database/sql"
	"testing"

	"github.com/paysync/paysync"
)

// replayOf reads the source that source id re-drives (sources.replay_of),
// 0 for none.
func replayOf(t *testing.T, l *Ledger, id int64) int64 {
	t.Helper()
	var of sql.NullInt64
	if err := l.db.QueryRowContext(t.Context(), `SELECT replay_of FROM sources WHERE id = ?`, id).Scan(&of); err != nil {
		t.Fatalf("replay_of of source %d: %v", id, err)
	}
	return of.Int64
}

// TestLedger_LinkReplay: a re-drive is linked once, never to itself, and
// never overwrites a link.
func TestLedger_LinkReplay(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	refused := commit(t, l, ImportIntent{Source: src("f.csv", "f"), Rejected: true, Rejects: []NewReject{{Message: "bad"}}})
	e := ent("f.csv", 1, "e1", "1")
	again := commit(t, l, ImportIntent{Source: src("f.csv", "f"), Entries: []NewEntry{newEntry(t, e, paysync.EntryMapped)}})
	other := commit(t, l, ImportIntent{Source: src("g.csv", "g")})
	for range 2 {
		if err := l.LinkReplay(ctx, again.SourceID, refused.SourceID); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.LinkReplay(ctx, again.SourceID, other.SourceID); err != nil {
		t.Fatal(err)
	}
	if err := l.LinkReplay(ctx, refused.SourceID, refused.SourceID); err != nil {
		t.Fatal(err)
	}
	if of := replayOf(t, l, again.SourceID); of != refused.SourceID {
		t.Errorf("re-drive links to %d, want %d", of, refused.SourceID)
	}
	if of := replayOf(t, l, refused.SourceID); of != 0 {
		t.Errorf("the refused import links to %d, want none", of)
	}
	if of := replayOf(t, l, other.SourceID); of != 0 {
		t.Errorf("an unrelated import links to %d, want none", of)
	}
}
