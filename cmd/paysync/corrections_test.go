package main

import (
	"encoding/json"
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
// Lars Nielsen's sick day at 8:30 instead of 8:00. The correction is one
// unit an operator sees: `corrections` lists it, `corrections show` gives
// the delta (SYG 8 → 8.5, one pay part replaced by one), `imports show`
// names it, and the same corrected rows again change nothing.
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
	step(0, "import", export)
	if r := step(0, "corrections"); !strings.Contains(r.stdout, "(no corrections)") {
		t.Fatalf("corrections before any: %s", r.stdout)
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

	t.Run("list", func(t *testing.T) {
		r := step(0, "corrections")
		for _, want := range []string{"UNIT", "toggl-corrected.csv", "done"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("corrections lacks %q:\n%s", want, r.stdout)
			}
		}
		if n := strings.Count(strings.TrimSpace(r.stdout), "\n"); n != 1 {
			t.Errorf("corrections lists %d units, want 1:\n%s", n, r.stdout)
		}
		for _, tc := range []struct {
			args []string
			want []int64
		}{
			{[]string{"--json"}, []int64{1}},
			{[]string{"--json", "--import", "2"}, []int64{1}},
			{[]string{"--json", "--import", "1"}, nil},
			{[]string{"--json", "--company", "MV8x"}, []int64{1}},
			{[]string{"--json", "--company", "MV8y"}, nil},
			{[]string{"--json", "--since", "2000-01-01"}, []int64{1}},
		} {
			r := step(0, append([]string{"corrections"}, tc.args...)...)
			var us []struct {
				ID       int64   `json:"id"`
				ImportID int64   `json:"import_id"`
				Entries  int     `json:"entries"`
				Replaced int     `json:"replaced"`
				New      int     `json:"new"`
				Batches  []int64 `json:"batches"`
				State    string  `json:"state"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &us); err != nil {
				t.Fatalf("corrections %v: %v\n%s", tc.args, err, r.stdout)
			}
			var ids []int64
			for _, u := range us {
				ids = append(ids, u.ID)
				if u.ImportID != 2 || u.Entries != 1 || u.Replaced != 1 || u.New != 1 || !slices.Equal(u.Batches, []int64{2}) || u.State != "done" {
					t.Errorf("corrections %v: unit %+v", tc.args, u)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("corrections %v = units %v, want %v", tc.args, ids, tc.want)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		r := step(0, "corrections", "show", "1")
		for _, want := range []string{
			"correction 1: import 2",
			"1 entry changed, 1 pay part replaced (batch 2): done",
			"Lars Nielsen  SYG   8 → 8.5",
			export + ":7 → " + corrected + ":7: hours 8 → 8.5",
			"deleted", "created",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("corrections show 1 lacks %q:\n%s", want, r.stdout)
			}
		}
		r = step(0, "corrections", "show", "1", "--json")
		var d struct {
			ID        int64 `json:"id"`
			Corrected []struct {
				Before struct {
					Entry struct {
						Hours string `json:"hours"`
					} `json:"entry"`
				} `json:"before"`
				After struct {
					Entry struct {
						Hours string `json:"hours"`
					} `json:"entry"`
				} `json:"after"`
			} `json:"corrected_entries"`
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
		if len(d.Corrected) != 1 || d.Corrected[0].Before.Entry.Hours != "8" || d.Corrected[0].After.Entry.Hours != "8.5" {
			t.Errorf("corrected entries: %+v", d.Corrected)
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
		if !strings.Contains(r.stdout, "correction 1: 1 entry changed, 1 pay part replaced (batch 2): done") {
			t.Errorf("imports show 2:\n%s", r.stdout)
		}
		if r := step(0, "imports", "show", "1"); strings.Contains(r.stdout, "correction") {
			t.Errorf("imports show 1 names a correction:\n%s", r.stdout)
		}
		r = step(0, "imports", "show", "2", "--json")
		var d struct {
			Corrections []struct {
				ID int64 `json:"id"`
			} `json:"corrections"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Corrections) != 1 || d.Corrections[0].ID != 1 {
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
		var us []json.RawMessage
		if err := json.Unmarshal([]byte(step(0, "corrections", "--json").stdout), &us); err != nil || len(us) != 1 {
			t.Errorf("corrections after the same rows again: %d units (%v), want 1", len(us), err)
		}
	})

	t.Run("a period statement without a row", func(t *testing.T) {
		const without = "testdata/corrections/toggl-november-without-sofie.csv"
		step(0, "import", "--period", "2026-11", without)
		r := step(0, "corrections", "show", "2")
		for _, want := range []string{
			"1 entry changed, 2 pay parts deleted (batch ",
			export + ":8 → " + without + ": no longer in its period statement",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("corrections show 2 lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, without+":0") {
			t.Errorf("corrections show 2 names line 0:\n%s", r.stdout)
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
