package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	write := func(name string, lines ...string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
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
	first := write("nov.ndjson", row("p1", "2026-11-02", "8"), row("p2", "2026-11-03", "2"), row("p0", "2026-10-31", "4"))
	r := runInProcess(t, env, "import", "--period", "2026-11", first)
	if r.code != 0 || !strings.Contains(r.stdout, "warning: "+first+":3: entry p0: dated 2026-10-31, outside 2026-11: not imported") {
		t.Fatalf("first statement: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := units(); len(got) != 1 || got[0] != "10" {
		t.Fatalf("payroll holds %v, want one pay part of 10 (p1 + p2, not p0)", got)
	}
	second := write("nov2.ndjson", row("p1", "2026-11-02", "8"))
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
