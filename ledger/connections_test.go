package ledger

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Connections: a connect stores its token with the companies it serves; a
// newer connect of a company takes it over, and a connection left serving
// nothing is removed with its token (returned, to be revoked); a token
// rotated after disconnect is not kept.
func TestConnections(t *testing.T) {
	ctx := context.Background()
	l, clk := newLedger(t)
	a, replaced, err := l.AddConnection(ctx, []ConnectionCompany{{"A", "Alfa"}}, "rt-a", "at-a", clk.Now(), clk.Now().Add(5*time.Minute))
	if err != nil || len(replaced) != 0 {
		t.Fatalf("add A = %v, %v", replaced, err)
	}
	b, _, err := l.AddConnection(ctx, []ConnectionCompany{{"B", "Beta"}, {"C", "Gamma"}}, "rt-b", "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := l.Connections(ctx)
	if err != nil || len(cs) != 2 || !cs[0].Serves("A") || !cs[1].Serves("B") || !cs[1].Serves("C") || cs[1].Serves("A") {
		t.Fatalf("connections = %+v, %v", cs, err)
	}
	if rt, _, _, err := l.Credentials(ctx, a.Credential); err != nil || rt != "rt-a" {
		t.Fatalf("A's token = %q, %v", rt, err)
	}

	// Reconnecting A replaces its connection; its old token is returned.
	clk.Advance(time.Minute)
	a2, replaced, err := l.AddConnection(ctx, []ConnectionCompany{{"A", "Alfa"}}, "rt-a2", "", time.Time{}, time.Time{})
	if err != nil || !slices.Equal(replaced, []string{"rt-a"}) {
		t.Fatalf("reconnect A = %v, %v; want rt-a replaced", replaced, err)
	}
	if _, _, _, err := l.Credentials(ctx, a.Credential); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("the replaced connection's token is still stored: %v", err)
	}
	// Connecting B alone leaves the old connection serving C.
	if _, replaced, err = l.AddConnection(ctx, []ConnectionCompany{{"B", "Beta"}}, "rt-b2", "", time.Time{}, time.Time{}); err != nil || len(replaced) != 0 {
		t.Fatalf("reconnect B = %v, %v", replaced, err)
	}
	cs, _ = l.Connections(ctx)
	if len(cs) != 3 || cs[0].ID != b.ID || !cs[0].Serves("C") || cs[0].Serves("B") || cs[1].ID != a2.ID {
		t.Fatalf("connections = %+v", cs)
	}

	if err := l.SetConnectionState(ctx, a2.ID, ConnectionRevoked, "invalid_grant"); err != nil {
		t.Fatal(err)
	}
	cs, _ = l.Connections(ctx)
	if cs[1].State != ConnectionRevoked || cs[1].Reason != "invalid_grant" {
		t.Fatalf("state = %+v", cs[1])
	}
	if err := l.SaveConnectionToken(ctx, a2.Credential, "rt-a3", "", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveConnection(ctx, a2.ID); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveConnectionToken(ctx, a2.Credential, "rt-a4", "", time.Time{}, time.Time{}); !errors.Is(err, ErrNoConnection) {
		t.Fatalf("saving a removed connection's token = %v, want ErrNoConnection", err)
	}
	if _, _, _, err := l.Credentials(ctx, a2.Credential); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("a removed connection's token is stored: %v", err)
	}
	if err := l.RemoveConnection(ctx, a2.ID); !errors.Is(err, ErrNoConnection) {
		t.Fatalf("removing it again = %v", err)
	}
}
