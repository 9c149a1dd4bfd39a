package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestImport_PeriodStatement: `import --period` takes the file as the
// complete statement of its source for the period: a row outside it is a
// warning naming file:line and the period (not imported, exit 0), a row
// dropped from a later statement is removed from payroll, and a bad
// --period is a usage error.
func TestImport_PeriodStatement(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
	row := func(id, date, hours string) string {
		return `{"id":"` + id + `","employee_id":"MV8xXzE=","date":"` + date + `","hours":"` + hours + `","code":"T1"}`
	}
	units := func() []string {
		var out []string
		for _, c := range s.sb.State().Companies {
			for _, p := range c.PayParts {
				out = append(out, p.Numbers.Units.Decimal.String())
			}
		}
		return out
	}
	first := writeLines(t, "nov.ndjson", row("p1", "2026-11-02", "8"), row("p2", "2026-11-03", "2"), row("p0", "2026-10-31", "4"))
	r := runInProcess(t, env, "import", "--period", "2026-11", first)
	if r.code != 0 || !strings.Contains(r.stdout, "warning: "+first+":3: entry p0: dated 2026-10-31, outside 2026-11: not imported") {
		t.Fatalf("first statement: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := units(); len(got) != 1 || got[0] != "10" {
		t.Fatalf("payroll holds %v, want one pay part of 10 (p1 + p2, not p0)", got)
	}
	second := writeLines(t, "nov2.ndjson", row("p1", "2026-11-02", "8"))
	r = runInProcess(t, env, "import", "--period", "2026-11", second)
	if r.code != 0 || !strings.Contains(r.stdout, "1 entry no longer in the statement") {
		t.Fatalf("second statement: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := units(); len(got) != 1 || got[0] != "8" {
		t.Fatalf("payroll holds %v, want p1's 8 alone", got)
	}
	if r := runInProcess(t, env, "import", "--period", "2026-13", second); r.code != 2 || !strings.Contains(r.stderr, "--period") {
		t.Errorf("bad --period: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPeriods_CloseFreezesCorrections: `periods` shows per company,
// source and month totals equal to what payroll holds; a closed period is
// frozen: a correction of an entry dated in it is recorded (exit 0) and
// payroll keeps what it held (`paysync plan` lists the change as late);
// once the period is opened again, the next reconcile sends it, once.
func TestPeriods_CloseFreezesCorrections(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
	row := func(id, emp, date, hours string) string {
		return `{"id":"` + id + `","employee_id":"` + emp + `","date":"` + date + `","hours":"` + hours + `","code":"T1"}`
	}
	payrollUnits := func() string {
		sum := paysync.Dec("0").Decimal
		for _, c := range s.sb.State().Companies {
			for _, p := range c.PayParts {
				sum = sum.Add(p.Numbers.Units.Decimal)
			}
		}
		return sum.String()
	}
	writes := func() int {
		n := s.sb.State().Counters.Requests
		return n["create_pay_parts"] + n["delete_pay_parts"]
	}
	must := func(code int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != code {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, code, r.stdout, r.stderr)
		}
		return r
	}
	must(0, "import", writeLines(t, "oct-nov.ndjson",
		row("c1", sandbox.EmpMetteHansen, "2026-10-30", "8"), row("c2", sandbox.EmpMetteHansen, "2026-11-02", "6"),
		row("c3", sandbox.EmpLarsNielsen, "2026-11-03", "4.5")))
	var list struct {
		Periods []struct {
			Period, Status string
			Units          string `json:"units"`
			PayParts       int    `json:"pay_parts"`
		} `json:"periods"`
	}
	r := must(0, "periods", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Periods) != 2 {
		t.Errorf("periods --json (%v):\n%s", err, r.stdout)
	} else {
		total := paysync.Dec("0").Decimal
		for _, p := range list.Periods {
			total = total.Add(paysync.Dec(p.Units).Decimal)
		}
		if total.String() != payrollUnits() || list.Periods[0].Period != "2026-11" || list.Periods[0].Units != "10.5" || list.Periods[1].Units != "8" {
			t.Errorf("periods %+v: total %s, payroll holds %s", list.Periods, total, payrollUnits())
		}
	}

	must(0, "periods", "close", "2026-10", "--note", "October payroll run")
	r = must(0, "periods")
	if !strings.Contains(r.stdout, "closed: 2026-10 (2026-10-01..2026-10-31)") || !strings.Contains(r.stdout, "October payroll run") {
		t.Errorf("periods after close:\n%s", r.stdout)
	}
	fixed := writeLines(t, "oct-fix.ndjson", row("c1", sandbox.EmpMetteHansen, "2026-10-30", "7"))
	calls := writes()
	must(0, "import", fixed)
	if got := payrollUnits(); got != "18.5" || writes() != calls {
		t.Fatalf("payroll holds %s units after a correction to the closed period (%d calls), want 18.5 (none)", got, writes()-calls)
	}
	r = must(0, "plan")
	if !strings.Contains(r.stdout, "2026-10") || !strings.Contains(r.stdout, "8 → 7") || !strings.Contains(r.stdout, "late: its period is closed") {
		t.Errorf("plan after a correction to the closed period:\n%s", r.stdout)
	}
	must(0, "periods", "open", "2026-10")
	if got := payrollUnits(); got != "18.5" {
		t.Fatalf("payroll holds %s units after periods open (nothing sent yet), want 18.5", got)
	}
	r = must(0, "plan")
	if !strings.Contains(r.stdout, "8 → 7") || !strings.Contains(r.stdout, "replace") {
		t.Errorf("plan after the period was opened again:\n%s", r.stdout)
	}
	// The next reconcile (here the same file again: a duplicate) catches
	// up, and once more changes nothing.
	must(0, "import", fixed)
	if got := payrollUnits(); got != "17.5" {
		t.Fatalf("payroll holds %s units after the period was opened again, want 17.5", got)
	}
	calls = writes()
	r = must(0, "import", fixed)
	if !strings.Contains(r.stdout, "nothing sent (duplicate)") || payrollUnits() != "17.5" || writes() != calls {
		t.Fatalf("the same file a third time: payroll holds %s units, %d calls\n%s", payrollUnits(), writes()-calls, r.stdout)
	}
}

// TestRevertReplay_Period: revert --period deletes exactly what payroll
// holds for the period (after a dry run that shows it and changes
// nothing), replay --period pays it again, and each run twice changes
// nothing the second time.
func TestRevertReplay_Period(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
	must := func(code int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != code {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, code, r.stdout, r.stderr)
		}
		return r
	}
	units := func() []string {
		var out []string
		for _, c := range s.sb.State().Companies {
			for _, p := range c.PayParts {
				out = append(out, p.EmployeeID+" "+p.Numbers.Units.Decimal.String())
			}
		}
		slices.Sort(out)
		return out
	}
	p := filepath.Join(t.TempDir(), "oct-nov.ndjson")
	rows := `{"id":"v1","employee_id":"MV8xXzE=","date":"2026-10-30","hours":"8","code":"T1"}
{"id":"v2","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"6","code":"T1"}
{"id":"v3","employee_id":"MV8xXzI=","date":"2026-11-03","hours":"4","code":"T1"}
`
	if err := os.WriteFile(p, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	must(0, "import", p)
	all := units()
	writes := func() int {
		n := s.sb.State().Counters.Requests
		return n["create_pay_parts"] + n["delete_pay_parts"]
	}
	r := must(0, "revert", "--period", "2026-11", "--dry-run")
	if !strings.Contains(r.stdout, "revert period 2026-11: 2 entries") || len(units()) != 3 {
		t.Fatalf("revert --dry-run:\n%s\npayroll %v", r.stdout, units())
	}
	if r := must(0, "revert", "--period", "2026-11", "--yes"); !strings.Contains(r.stdout, "2 entries changed; 2 deleted, 0 created") {
		t.Errorf("revert --period 2026-11:\n%s", r.stdout)
	}
	if got := units(); !slices.Equal(got, []string{"MV8xXzE= 8"}) {
		t.Fatalf("after revert --period 2026-11 payroll holds %v", got)
	}
	calls := writes()
	if r := must(0, "revert", "--period", "2026-11", "--yes"); !strings.Contains(r.stdout, "0 deleted, 0 created") || writes() != calls {
		t.Errorf("revert twice (%d calls):\n%s", writes()-calls, r.stdout)
	}
	if r := must(0, "replay", "--period", "2026-11", "--yes"); !strings.Contains(r.stdout, "2 entries changed; 0 deleted, 2 created") {
		t.Errorf("replay --period 2026-11:\n%s", r.stdout)
	}
	if got := units(); !slices.Equal(got, all) {
		t.Fatalf("after replay --period 2026-11 payroll holds %v, want %v", got, all)
	}
	calls = writes()
	if r := must(0, "replay", "--period", "2026-11", "--yes"); !strings.Contains(r.stdout, "0 deleted, 0 created") || writes() != calls {
		t.Errorf("replay twice (%d calls):\n%s", writes()-calls, r.stdout)
	}
	if got := units(); !slices.Equal(got, all) {
		t.Fatalf("after replay --period 2026-11 twice payroll holds %v, want %v", got, all)
	}
	must(2, "replay", "--period", "2026-11", "--force") // no such flag: nothing is paid twice
}

// TestCutoff_Config: PAYSYNC_SEND is immediate or cutoff, and cutoff needs
// a valid PAYSYNC_CUTOFF; `paysync cutoff` with nothing held says so.
func TestCutoff_Config(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_INBOX", t.TempDir())
	for _, tc := range []struct {
		send, cutoff, want string
	}{
		{"soon", "", "PAYSYNC_SEND: \"soon\" is not immediate or cutoff"},
		{"cutoff", "", "PAYSYNC_SEND=cutoff needs PAYSYNC_CUTOFF"},
		{"cutoff", "every day", "PAYSYNC_CUTOFF"},
	} {
		r := runInProcess(t, with(env, "PAYSYNC_SEND", tc.send, "PAYSYNC_CUTOFF", tc.cutoff), "run", "--once")
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("PAYSYNC_SEND=%q PAYSYNC_CUTOFF=%q: exit %d, want 2 and %q\n%s", tc.send, tc.cutoff, r.code, tc.want, r.stderr)
		}
	}
	if r := runInProcess(t, env, "cutoff", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "cutoff: nothing to send") {
		t.Errorf("cutoff with nothing held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// writeLines writes lines (each ended by a line break) to a file name in a
// new temporary directory and returns its path.
func writeLines(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
