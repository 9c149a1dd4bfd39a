package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestCLI_CamelDialect: against the camelCase sandbox, paysync imports a
// Toggl export, applies a correction (delete, then create) and reverts
// the import, with the probe choosing the dialect; doctor names it.
// Without a delete mutation, a correction that raises a total is sent as
// the difference, and a revert (a decrease) says that it waits and why,
// while payroll keeps what was created.
func TestCLI_CamelDialect(t *testing.T) {
	const (
		export    = "../../deploy/examples/toggl.csv"
		corrected = "testdata/corrections/toggl-corrected.csv"
		lars      = "MV8xXzI="
	)
	for _, tc := range []struct {
		name     string
		noDelete bool
	}{{"with delete", false}, {"no delete", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSandbox(t, sandbox.Options{Dialect: sandbox.CamelCase, NoDelete: tc.noDelete})
			env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
			step := func(wantCode int, args ...string) result {
				t.Helper()
				r := runInProcess(t, env, args...)
				if r.code != wantCode {
					t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, wantCode, r.stdout, r.stderr)
				}
				return r
			}
			step(0, "import", export)
			created := payrollByPart(s.sb)
			if len(created) != 7 {
				t.Fatalf("import: payroll holds %v, want 7 pay parts", created)
			}
			if !tc.noDelete {
				step(0, "import", corrected)
				if after := payrollByPart(s.sb); len(after) != 7 || after[lars+"|SYG|8.5"] == "" {
					t.Fatalf("correction: payroll holds %v, want 7 with SYG 8.5", after)
				}
				step(0, "revert", "--import", "1", "--yes")
				step(0, "revert", "--import", "2", "--yes") // the correction's pay part
				if left := payrollByPart(s.sb); len(left) != 0 {
					t.Fatalf("revert: payroll holds %v", left)
				}
				return
			}
			r := runInProcess(t, env, "doctor")
			if !strings.Contains(r.stdout, "dialect camelCase") || !strings.Contains(r.stdout, "delete: not offered by this server") {
				t.Errorf("doctor does not name the dialect and the missing delete:\n%s", r.stdout)
			}
			// An increase (Lars's sick day 8 → 8.5) needs no delete: the
			// difference is created beside what payroll holds.
			r = runInProcess(t, env, "import", corrected)
			if r.code != 0 {
				t.Errorf("correction: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
			}
			after := payrollByPart(s.sb)
			if len(after) != 8 || after[lars+"|SYG|8"] != created[lars+"|SYG|8"] || after[lars+"|SYG|0.5"] == "" {
				t.Errorf("correction: payroll holds %v, want the 7 pay parts of the import and SYG 0.5 beside SYG 8", after)
			}
			// A revert of the batch is a decrease of each of its groups: it
			// cannot be sent; the command says why (each group waits), and
			// payroll keeps what it holds.
			r = runInProcess(t, env, "revert", "1", "--yes")
			if strings.Count(r.stdout, "waiting: a decrease: this payroll server offers no delete mutation") != len(created) {
				t.Errorf("revert: exit %d\n%s%s\nwant each of its %d groups said to wait: the server offers no delete mutation", r.code, r.stdout, r.stderr, len(created))
			}
			if got := payrollByPart(s.sb); len(got) != len(after) {
				t.Errorf("payroll holds %v after the revert, want %v", got, after)
			}
			if r := runInProcess(t, env, "plan"); !strings.Contains(r.stdout, "offers no delete mutation") {
				t.Errorf("plan after the revert does not list what waits for a delete:\n%s%s", r.stdout, r.stderr)
			}
			if n := s.sb.State().Counters.Requests["delete_pay_parts"]; n != 0 {
				t.Errorf("%d delete requests", n)
			}
		})
	}
}
