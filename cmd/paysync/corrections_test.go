package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// payrollByPart is the sandbox's pay parts of Nordlys as
// "employee|code|units" → payroll id.
func payrollByPart(sb *sandbox.Server) map[string]string {
	out := map[string]string{}
	for _, c := range sb.State().Companies {
		if c.ID != sandbox.CompanyNordlys {
			continue
		}
		for _, p := range c.PayParts {
			out[p.EmployeeID+"|"+p.Code+"|"+p.Units.Decimal.String()] = p.ID
		}
	}
	return out
}

// TestCLI_Corrections: a Toggl export imported, then a re-export with
// Lars Nielsen's sick day at 8:30 instead of 8:00. Every plan the
// reconciler applies is a correction unit an operator sees (the first
// import's too: 7 pay parts created); the correction is the unit of import
// 2: `corrections` lists it, `corrections show` gives the delta (SYG 8 →
// 8.5, one pay part replaced by one, the others untouched), `imports
// show` names it, and the same corrected rows again change nothing.
func TestCLI_Corrections(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	step := func(wantCode int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != wantCode {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, wantCode, r.stdout, r.stderr)
		}
		return r
	}
	const (
		export    = "../../deploy/examples/toggl.csv"
		corrected = "testdata/corrections/toggl-corrected.csv"
		reordered = "testdata/corrections/toggl-corrected-reordered.csv" // the same rows, another order
		lars      = "MV8xXzI="
	)
	if r := step(0, "corrections"); !strings.Contains(r.stdout, "(no corrections)") {
		t.Fatalf("corrections before any import: %s", r.stdout)
	}
	step(0, "import", export)
	if r := step(0, "corrections"); !strings.Contains(r.stdout, "toggl.csv") || strings.Count(strings.TrimSpace(r.stdout), "\n") != 1 {
		t.Fatalf("corrections after the first import (its plan: one unit): %s", r.stdout)
	}
	before := payrollByPart(s.sb)
	step(0, "import", corrected)
	after := payrollByPart(s.sb)

	t.Run("payroll", func(t *testing.T) {
		if _, ok := after[lars+"|SYG|8.5"]; !ok || len(after) != 7 {
			t.Fatalf("payroll holds %v, want 7 pay parts with SYG 8.5", after)
		}
		for k, id := range before {
			if k != lars+"|SYG|8" && after[k] != id {
				t.Errorf("%s: payroll id %s became %q: a pay part the correction does not touch was replaced", k, id, after[k])
			}
		}
	})

	type unit struct {
		ID       int64   `json:"id"`
		ImportID int64   `json:"import_id"`
		Entries  int     `json:"entries"`
		Replaced int     `json:"replaced"`
		New      int     `json:"new"`
		Batches  []int64 `json:"batches"`
		State    string  `json:"state"`
	}
	units := func(args ...string) []unit {
		t.Helper()
		r := step(0, append([]string{"corrections", "--json"}, args...)...)
		var us []unit
		if err := json.Unmarshal([]byte(r.stdout), &us); err != nil {
			t.Fatalf("corrections --json %v: %v\n%s", args, err, r.stdout)
		}
		return us
	}

	t.Run("list", func(t *testing.T) {
		r := step(0, "corrections")
		for _, want := range []string{"UNIT", "toggl-corrected.csv", "toggl.csv", "done"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("corrections lacks %q:\n%s", want, r.stdout)
			}
		}
		if n := strings.Count(strings.TrimSpace(r.stdout), "\n"); n != 2 {
			t.Errorf("corrections lists %d units, want 2 (the import's plan, the correction's):\n%s", n, r.stdout)
		}
		// The first import's plan: 7 pay parts created, none replaced.
		us := units("--import", "1")
		if len(us) != 1 || us[0].ImportID != 1 || us[0].Replaced != 0 || us[0].New != 7 || !slices.Equal(us[0].Batches, []int64{1}) || us[0].State != "done" {
			t.Errorf("corrections --import 1: %+v, want one unit of 7 pay parts created in batch 1", us)
		}
		for _, tc := range []struct {
			args []string
			want []int64 // newest first
		}{
			{nil, []int64{2, 1}},
			{[]string{"--import", "2"}, []int64{2}},
			{[]string{"--company", "MV8x"}, []int64{2, 1}},
			{[]string{"--company", "MV8y"}, nil},
			{[]string{"--since", "2000-01-01"}, []int64{2, 1}},
		} {
			var ids []int64
			for _, u := range units(tc.args...) {
				ids = append(ids, u.ID)
				if u.ID == 2 && (u.ImportID != 2 || u.Entries != 1 || u.Replaced != 1 || u.New != 1 || !slices.Equal(u.Batches, []int64{2}) || u.State != "done") {
					t.Errorf("corrections %v: unit %+v", tc.args, u)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("corrections %v = units %v, want %v", tc.args, ids, tc.want)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		r := step(0, "corrections", "show", "2")
		for _, want := range []string{
			"correction 2: import 2",
			"1 entry changed, 1 pay part replaced (batch 2): done",
			"Lars Nielsen  SYG   8 → 8.5",
			"deleted", "created",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("corrections show 2 lacks %q:\n%s", want, r.stdout)
			}
		}
		r = step(0, "corrections", "show", "2", "--json")
		var d struct {
			ID       int64 `json:"id"`
			Replaced []struct {
				PayrollID string `json:"payroll_id"`
				Status    string `json:"status"`
			} `json:"replaced_pay_parts"`
			New []struct {
				BatchID   int64  `json:"batch_id"`
				PayrollID string `json:"payroll_id"`
				State     string `json:"state"`
			} `json:"new_pay_parts"`
			Delta []struct {
				EmployeeID string `json:"employee_id"`
				Code       string `json:"code"`
				Before     string `json:"units_before"`
				After      string `json:"units_after"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("corrections show --json: %v\n%s", err, r.stdout)
		}
		if len(d.Replaced) != 1 || d.Replaced[0].Status != "deleted" || d.Replaced[0].PayrollID != before[lars+"|SYG|8"] {
			t.Errorf("replaced: %+v", d.Replaced)
		}
		if len(d.New) != 1 || d.New[0].BatchID != 2 || d.New[0].State != "created" || d.New[0].PayrollID != after[lars+"|SYG|8.5"] {
			t.Errorf("new: %+v", d.New)
		}
		if len(d.Delta) != 1 || d.Delta[0].EmployeeID != lars || d.Delta[0].Code != "SYG" || d.Delta[0].Before != "8" || d.Delta[0].After != "8.5" {
			t.Errorf("delta: %+v", d.Delta)
		}
	})

	t.Run("imports show", func(t *testing.T) {
		r := step(0, "imports", "show", "2")
		if !strings.Contains(r.stdout, "correction 2: 1 entry changed, 1 pay part replaced (batch 2): done") {
			t.Errorf("imports show 2:\n%s", r.stdout)
		}
		if r := step(0, "imports", "show", "1"); !strings.Contains(r.stdout, "correction 1: ") || !strings.Contains(r.stdout, "7 pay parts created (batch 1): done") ||
			strings.Contains(r.stdout, "correction 2") {
			t.Errorf("imports show 1 (its own plan only):\n%s", r.stdout)
		}
		r = step(0, "imports", "show", "2", "--json")
		var d struct {
			Corrections []struct {
				ID int64 `json:"id"`
			} `json:"corrections"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Corrections) != 1 || d.Corrections[0].ID != 2 {
			t.Errorf("imports show 2 --json (%v):\n%s", err, r.stdout)
		}
	})

	t.Run("the same corrected rows again", func(t *testing.T) {
		writes := func() int {
			n := s.sb.State().Counters.Requests
			return n["create_pay_parts"] + n["delete_pay_parts"]
		}
		calls := writes()
		step(0, "import", reordered)
		if n := writes() - calls; n != 0 {
			t.Errorf("%d calls to payroll, want none", n)
		}
		if us := units(); len(us) != 2 {
			t.Errorf("corrections after the same rows again: %d units, want 2 (no plan applied)", len(us))
		}
	})

	t.Run("a period statement without a row", func(t *testing.T) {
		const without = "testdata/corrections/toggl-november-without-sofie.csv"
		step(0, "import", "--period", "2026-11", without)
		us := units("--import", "4")
		if len(us) != 1 || us[0].Replaced != 2 || us[0].New != 0 || us[0].State != "done" {
			t.Fatalf("corrections --import 4: %+v, want one unit deleting Sofie's 2 pay parts", us)
		}
		r := step(0, "corrections", "show", fmt.Sprint(us[0].ID))
		for _, want := range []string{
			"2 pay parts deleted (batch ",
			"Sofie Jensen  TILLAEG  3.33 → -",
			"Sofie Jensen  T1       3.33 → -",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("corrections show %d lacks %q:\n%s", us[0].ID, want, r.stdout)
			}
		}
		if n := len(payrollByPart(s.sb)); n != 5 {
			t.Errorf("payroll holds %d pay parts, want 5", n)
		}
	})

	t.Run("usage", func(t *testing.T) {
		step(2, "corrections", "show")
		step(2, "corrections", "show", "x")
		step(2, "corrections", "list")
		if r := step(1, "corrections", "show", "9"); !strings.Contains(r.stderr, "correction 9") {
			t.Errorf("corrections show 9: %s", r.stderr)
		}
	})
}
