package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paysync/paysync/console"
	"github.com/paysync/paysync/ledger"
)

// TestCLI_ActionsAudited: the CLI's revert, replay and periods close|open
// write the ledger's audit log as the console's actions do (who: cli and
// the OS user; what; scope; result), so the console's audit page shows
// every change whichever way it was made. One refused (no terminal to
// confirm, a closed period) is there as failed, with why; a dry run and a
// listing write nothing.
func TestCLI_ActionsAudited(t *testing.T) {
	rs := newReplaySteps(t)
	rs.step(0, "import", "../../deploy/examples/toggl.csv")
	rs.step(0, "revert", "1", "--dry-run")
	rs.step(2, "revert", "1") // no terminal to confirm: nothing changed
	rs.step(0, "revert", "1", "--yes")
	rs.step(0, "replay", "1", "--yes")
	rs.step(0, "revert", "--period", "2026-11", "--yes")
	rs.step(0, "replay", "--import", "1", "--yes")
	rs.step(0, "periods", "close", "2026-11", "--note", "November payroll run")
	rs.step(0, "periods")
	rs.step(1, "revert", "--period", "2026-11", "--yes")
	rs.step(0, "periods", "open", "2026-11")

	ctx := context.Background()
	l, err := ledger.Open(ctx, rs.env["PAYSYNC_LEDGER"], ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	log, err := l.AuditLog(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		action, scope string
		result        ledger.AuditResult
		detail        string
	}{ // newest first
		{"open", "period 2026-11", ledger.AuditDone, "period 2026-11 reopened"},
		{"revert", "period 2026-11", ledger.AuditFailed, "reopen it first"},
		{"close", "period 2026-11", ledger.AuditDone, "period 2026-11 closed"},
		// What each did, as the command printed it: the entries it
		// changed and the reconciler's calls (the 7 pay parts of the
		// import deleted, then created again, once).
		{"replay", "import 1", ledger.AuditDone, "replay import 1: 6 entries changed; 0 deleted, 7 created, 0 rejected"},
		{"revert", "period 2026-11", ledger.AuditDone, "revert period 2026-11: 6 entries changed; 7 deleted, 0 created, 0 rejected"},
		{"replay", "batch 1", ledger.AuditDone, "replay batch 1: 6 entries changed; 0 deleted, 7 created, 0 rejected"},
		{"revert", "batch 1", ledger.AuditDone, "revert batch 1: 6 entries changed; 7 deleted, 0 created, 0 rejected"},
		{"revert", "batch 1", ledger.AuditFailed, "pass --yes"},
	}
	if len(log) != len(want) {
		t.Fatalf("audit log has %d rows, want %d: %+v", len(log), len(want), log)
	}
	for i, w := range want {
		a := log[i]
		if a.Action != w.action || a.Scope != w.scope || a.Result != w.result || !strings.HasPrefix(a.Actor, "cli:") || a.Actor == "cli:" ||
			!strings.Contains(a.Detail, w.detail) || a.Remote != "" || a.StartedAt.IsZero() || a.FinishedAt.IsZero() {
			t.Errorf("audit row %d: %+v, want %s %s %s (%q) by cli:USER", i, a, w.action, w.scope, w.result, w.detail)
		}
	}

	// The console's audit page shows them.
	srv, err := console.New(console.Config{Ledger: l, Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), "<td>"+log[0].Actor+"</td>") != len(want) {
		t.Errorf("the console's audit page: %d\n%s", resp.StatusCode, body)
	}
}
