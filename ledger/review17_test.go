package ledger

import (
	"context"
	"testing"
	"time"
)

// Removing the newest connection (paysync disconnect) and connecting again
// does not hand the new connection the old one's id and credential name
// ("connection-<id>"; connections.id is AUTOINCREMENT): a running daemon
// keys its routes by that name, and would take the new connection for the
// old one (if that was revoked, the company would stay paused).
func TestConnections_IDNotReused(t *testing.T) {
	ctx := context.Background()
	l, _ := newLedger(t)
	if _, _, err := l.AddConnection(ctx, []ConnectionCompany{{ID: "A"}}, "rt-a", "", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	b, _, err := l.AddConnection(ctx, []ConnectionCompany{{ID: "B"}}, "rt-b", "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveConnection(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	b2, _, err := l.AddConnection(ctx, []ConnectionCompany{{ID: "B"}}, "rt-b2", "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if b2.Credential == b.Credential {
		t.Fatalf("the new connection of B reuses the removed one's id %d and credential %q", b2.ID, b2.Credential)
	}
}
