package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/console"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
)

// The overview shows what the reconciler would send now, group by group,
// as paysync plan prints it: nothing while payroll holds what the entries
// make of it; once the desired state changed (an import's revert recorded
// in the ledger, not reconciled yet) the groups to delete, before → after.
// Showing it sends nothing; a revert's preview of the period shows the
// same plan.
func TestConsole_OverviewPlan(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	before := e.holds()
	r := e.get(t, c, "/")
	if r.code != http.StatusOK || !strings.Contains(r.body, "What the reconciler would send now") || !strings.Contains(r.body, "nothing to send: payroll holds what the entries that count make of it") {
		t.Fatalf("overview: %d\n%s", r.code, r.body)
	}
	if _, err := e.led.Revert(ctxOf(t), ledger.Target{Import: 1}); err != nil {
		t.Fatal(err)
	}
	r = e.get(t, c, "/")
	plan := tableOf(t, r.body, `id="plan"`)
	for _, want := range []string{"Mette Hansen", "T1", "11.83 → –", "2026-11", `<span class="op-delete">delete</span>`} {
		if !strings.Contains(plan, want) {
			t.Errorf("the overview's plan lacks %q:\n%s", want, plan)
		}
	}
	if n := strings.Count(plan, `<span class="op-delete">`); n != before {
		t.Errorf("the overview's plan deletes %d groups, want %d:\n%s", n, before, plan)
	}
	if e.holds() != before {
		t.Errorf("showing the plan changed payroll: the sandbox holds %d, want %d", e.holds(), before)
	}
	pv := e.get(t, c, "/actions/revert?period=2026-11")
	if got := tableOf(t, pv.body, `id="plan"`); got != plan {
		t.Errorf("the period revert's preview shows another plan than the overview:\n%s\nwant\n%s", got, plan)
	}
	// The next operation sends what was planned: the revert of the period
	// (its entries: the import's, reverted already) deletes them, once.
	if r := e.post(t, c, "/actions/revert", formOf(t, pv.body), nil); r.code != http.StatusOK || e.holds() != 0 {
		t.Errorf("revert: %d, the sandbox holds %d\n%s", r.code, e.holds(), r.body)
	}
	if r := e.get(t, c, "/"); strings.Contains(r.body, "op-delete") {
		t.Errorf("the overview still plans deletes:\n%s", r.body)
	}
}

// Without payroll, the overview says why it shows no plan.
func TestConsole_OverviewPlanUnavailable(t *testing.T) {
	e := setup(t, testPassword)
	e.serve(t, func(cfg *console.Config) { cfg.Actions = nil })
	c := e.client(t)
	e.login(t, c)
	if r := e.get(t, c, "/"); r.code != http.StatusOK || !strings.Contains(r.body, "plan unavailable: this console has no payroll connection") {
		t.Errorf("read-only overview: %d\n%s", r.code, r.body)
	}
	down, err := payroll.New(payroll.Config{URL: "http://127.0.0.1:1", Realm: "r", ClientID: "c", ClientSecret: "s", RefreshToken: "t", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.serve(t, func(cfg *console.Config) {
		cfg.Actions = &console.Actions{Payroll: down, Rules: e.rules, BatchSize: 100,
			Deliverer: func() *worker.Deliverer { return &worker.Deliverer{L: e.led, P: down, DeleteChunk: 100} },
			Waiter:    func() *payroll.Waiter { return &payroll.Waiter{Until: time.Now()} }}
	})
	e.login(t, c)
	if r := e.get(t, c, "/"); r.code != http.StatusOK || !strings.Contains(r.body, `id="plan-error"`) || !strings.Contains(r.body, "plan unavailable: payroll unavailable") {
		t.Errorf("overview with payroll down: %d\n%s", r.code, r.body)
	}
}

// Inside paysync run (Wake set) the console does not send: a revert
// records its batches and wakes the daemon's sending loop, which sends
// them; payroll then holds nothing of the batch, and nothing was sent
// twice.
func TestConsole_InDaemonRecordsAndWakes(t *testing.T) {
	e := setup(t, testPassword)
	woke := 0
	e.serve(t, func(cfg *console.Config) { cfg.Actions.Wake = func() { woke++ } })
	c := e.client(t)
	e.login(t, c)
	before := e.holds()
	r := e.post(t, c, "/actions/revert", formOf(t, e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch)).body), nil)
	if r.code != http.StatusOK || !strings.Contains(r.body, "paysync run sends them now") {
		t.Fatalf("revert inside paysync run: %d\n%s", r.code, r.body)
	}
	if woke != 1 || e.holds() != before {
		t.Fatalf("the console sent by itself: woke %d, the sandbox holds %d, want %d", woke, e.holds(), before)
	}
	pending, err := e.led.BatchesInState(ctxOf(t), paysync.BatchPending)
	if err != nil || len(pending) == 0 {
		t.Fatalf("no batch recorded for the daemon: %v, %v", pending, err)
	}
	ids := make([]int64, len(pending))
	for i, b := range pending {
		ids[i] = b.ID
	}
	// The daemon's loop sends them.
	d := &worker.Deliverer{L: e.led, P: e.cl, DeleteChunk: 100}
	if err := d.Deliver(ctxOf(t), ids); err != nil {
		t.Fatal(err)
	}
	if e.holds() != 0 || d.Stats.Deleted != before || d.Stats.Created != 0 {
		t.Errorf("after the daemon sent: the sandbox holds %d; %d deleted, %d created; want 0, %d, 0", e.holds(), d.Stats.Deleted, d.Stats.Created, before)
	}
}

// tableOf is the table marked by attr in body.
func tableOf(t testing.TB, body, attr string) string {
	t.Helper()
	i := strings.Index(body, attr)
	if i < 0 {
		t.Fatalf("no table %s in:\n%s", attr, body)
	}
	j := strings.Index(body[i:], "</table>")
	return body[i : i+j]
}
