package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestCorrections_ShowsWaiting: a change payroll cannot take (here a
// decrease, on a server that cannot delete what it would replace) is
// listed by `paysync plan` with its group and why it waits, so an
// operator sees it without reading the daemon's log; payroll keeps what it
// held, and nothing is deleted.
func TestCorrections_ShowsWaiting(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Dialect: sandbox.CamelCase, NoDelete: true})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	if r := runInProcess(t, env, "import", "../../deploy/examples/toggl.csv"); r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	before := payrollKeys(s.sb)
	// Sofie's row is no longer in the statement of November: her two
	// groups go to nothing (a decrease: it waits). Lars's sick day grows
	// from 8 to 8.5 h: the difference is a pay part of its own.
	runInProcess(t, env, "import", "--period", "2026-11", "testdata/corrections/toggl-november-without-sofie.csv")
	want := append(slices.Clone(before), "MV8x|MV8xXzI=|SYG|units=0.5")
	slices.Sort(want)
	if got := payrollKeys(s.sb); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("payroll holds %v, want what the first import created and Lars's 0.5 h more %v", got, want)
	}
	if n := s.sb.State().Counters.Requests["delete_pay_parts"]; n != 0 {
		t.Errorf("%d delete requests to a server without delete", n)
	}
	r := runInProcess(t, env, "plan")
	if r.code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waiting := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "Sofie Jensen") && strings.Contains(l, "3.33 → -") && strings.Contains(l, "waiting: a decrease: this payroll server offers no delete mutation") {
			waiting++
		}
	}
	if waiting != 2 {
		t.Errorf("plan does not list Sofie's two groups as waiting for a delete the server does not offer:\n%s", r.stdout)
	}
}
