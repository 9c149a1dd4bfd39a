package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// TestUpgrade_313bf20: a ledger written by 313bf20 (imports, a correction
// unit, NATS merges, a revert, a closed period) opens under the desired
// state and keeps its history, its pay-part ids and exactly-once:
//   - the first command with rules maps the old entries into their groups
//     and ties the old pay parts to them: nothing is sent (payroll holds
//     what the entries that count make of it), the same files again are
//     duplicates;
//   - a late change to the closed October is recorded and listed by plan,
//     never sent, until October is opened: then exactly its group changes;
//   - reverting the old correction import gives back the hours as they
//     stood before it (SYG 8.5 → 8), one delete and one create.
func TestUpgrade_313bf20(t *testing.T) {
	lp := loadLegacyPayroll(t)
	s := startSandbox(t, sandbox.Options{})
	seedLegacyPayroll(t, s.sb, lp)
	rules := filepath.Join(legacyFixtureDir, "rules.yaml")
	env := with(s.env, "PAYSYNC_LEDGER", copyLegacyLedger(t), "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys, "PAYSYNC_MAPPING", rules)
	delete(env, "PAYSYNC_TOKEN_FILE") // the ledger's stored token is another sandbox's: a new initial token starts over
	must := func(code int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != code {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, code, r.stdout, r.stderr)
		}
		return r
	}
	writes := func() int {
		r := s.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	groups := func() map[string]string {
		out := map[string]string{}
		for k, v := range upgradeGroups(s.sb) {
			out[k] = v.String()
		}
		return out
	}
	want := lp.LiveGroups
	ids := payrollKeys(s.sb)

	// The upgrade: the plan after mapping the old entries is empty.
	var plan []changeJSON
	if err := json.Unmarshal([]byte(must(0, "plan", "--json").stdout), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 0 {
		t.Fatalf("plan right after the upgrade: %+v, want nothing to send", plan)
	}
	for _, f := range []string{"toggl.csv", "toggl-corrected.csv", "october.ndjson"} {
		if r := must(0, "import", filepath.Join(legacyFixtureDir, "inputs", f)); !strings.Contains(r.stdout, "duplicate") {
			t.Errorf("%s again:\n%s", f, r.stdout)
		}
	}
	if n := writes(); n != 0 || !slices.Equal(payrollKeys(s.sb), ids) {
		t.Fatalf("%d payroll writes after the upgrade; payroll now\n%v\nwas\n%v", n, payrollKeys(s.sb), ids)
	}
	if got := groups(); !sameGroups(got, want) {
		t.Fatalf("payroll after the upgrade: %v, want %v", got, want)
	}

	// A late change to the closed October: recorded, listed, not sent.
	fix := filepath.Join(t.TempDir(), "october-fix.ndjson")
	if err := os.WriteFile(fix, []byte(`{"id":"oct-1","employee_id":"MV8xXzE=","date":"2026-10-26","hours":"7","type":"work"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(0, "import", fix)
	if n := writes(); n != 0 {
		t.Fatalf("a change to the closed October made %d payroll writes", n)
	}
	if r := must(0, "plan"); !strings.Contains(r.stdout, "late") || !strings.Contains(r.stdout, "15.5 → 15") {
		t.Errorf("plan does not list the late change to October:\n%s", r.stdout)
	}
	must(0, "periods", "open", "2026-10")
	must(0, "cutoff", "--yes")
	want = with(want, "MV8x|MV8xXzE=|T1|-|2026-10", "15")
	if got := groups(); !sameGroups(got, want) || writes() != 2 {
		t.Fatalf("after opening October: payroll %v (%d writes), want %v (one delete, one create)", got, writes(), want)
	}

	// Undo of the old correction import: Lars's sick day back to 8 h.
	before := writes()
	must(0, "revert", "--import", "2", "--yes")
	want = with(want, "MV8x|MV8xXzI=|SYG|-|2026-11", "8")
	if got := groups(); !sameGroups(got, want) || writes()-before != 2 {
		t.Fatalf("after revert --import 2: payroll %v (%d writes), want %v", got, writes()-before, want)
	}
}

// upgradeGroups sums the sandbox's pay parts (not the foreign BONUS) per
// company|employee|code|rate (pay parts carry no date: sameGroups sums
// want's months to compare).
func upgradeGroups(sb *sandbox.Server) map[string]decimal.Decimal {
	out := map[string]decimal.Decimal{}
	for _, c := range sb.State().Companies {
		for _, p := range c.PayParts {
			if p.Code == "BONUS" {
				continue
			}
			rate := "-"
			if p.Rate.Valid {
				rate = p.Rate.Decimal.String()
			}
			k := c.ID + "|" + p.EmployeeID + "|" + p.Code + "|" + rate
			out[k] = out[k].Add(p.Units.Decimal)
		}
	}
	return out
}

// sameGroups compares payroll's sums per company|employee|code|rate with
// want's per company|employee|code|rate|month, summed over the months.
func sameGroups(got, want map[string]string) bool {
	w := map[string]decimal.Decimal{}
	for k, v := range want {
		f := strings.Split(k, "|")
		key := strings.Join(f[:4], "|")
		w[key] = w[key].Add(decimal.RequireFromString(v))
	}
	if len(w) != len(got) {
		return false
	}
	for k, v := range w {
		g, ok := got[k]
		if !ok || !decimal.RequireFromString(g).Equal(v) {
			return false
		}
	}
	return true
}
