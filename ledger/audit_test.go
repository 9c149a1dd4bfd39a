package ledger

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An action is recorded as started, then finished; its one-time token is
// refused the second time, with the entry that used it.
func TestAudit_OncePerToken(t *testing.T) {
	ctx := context.Background()
	l, clk := newLedger(t)
	id, _, err := l.BeginAudit(ctx, AuditEntry{Token: "tok-1", Actor: "console", Remote: "127.0.0.1", Action: "revert", Scope: "batch 3"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := l.FinishAudit(ctx, id, AuditDone, "reverted batches [3]: 2 deleted"); err != nil {
		t.Fatal(err)
	}
	_, used, err := l.BeginAudit(ctx, AuditEntry{Token: "tok-1", Actor: "console", Action: "revert", Scope: "batch 3"})
	if !errors.Is(err, ErrAuditTokenUsed) || used.ID != id || used.Result != AuditDone {
		t.Fatalf("second use of the token: %+v, %v", used, err)
	}
	// Without a token (the CLI), any number.
	for range 2 {
		if _, _, err := l.BeginAudit(ctx, AuditEntry{Actor: "cli", Action: "close", Scope: "period 2026-11"}); err != nil {
			t.Fatal(err)
		}
	}
	log, err := l.AuditLog(ctx, 0)
	if err != nil || len(log) != 3 {
		t.Fatalf("AuditLog = %d entries, %v", len(log), err)
	}
	first := log[2]
	if first.ID != id || first.Actor != "console" || first.Remote != "127.0.0.1" || first.Scope != "batch 3" || first.Result != AuditDone ||
		first.FinishedAt.Sub(first.StartedAt) != time.Second || first.StartedAt.Location() != time.UTC {
		t.Errorf("entry: %+v", first)
	}
	if log[0].Result != AuditStarted || !log[0].FinishedAt.IsZero() {
		t.Errorf("unfinished entry: %+v", log[0])
	}
}
