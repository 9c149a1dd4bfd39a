package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestImport_SameFileAfterFix: rows of a file refused for a fault the
// operator fixes outside the file (the rules, a closed period opened) land
// when the same file is imported again: the command is resumable by
// running it again, and the rows paid the first time are not paid twice.
func TestImport_SameFileAfterFix(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	dir := t.TempDir()
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(dir, "ledger.db"))
	file := writeLines(t, "nov.ndjson",
		`{"id":"r1","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-02","hours":"6","code":"T1"}`,
		`{"id":"r2","email":"someone@else.dk","date":"2026-11-03","hours":"4","code":"T1"}`)
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("employees:\n  match_names: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runInProcess(t, env, "import", "--rules", rules, file)
	if r.code != 1 {
		t.Fatalf("first import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := len(s.sb.State().Companies[0].PayParts); got != 1 {
		t.Fatalf("payroll holds %d pay parts after the first import, want 1", got)
	}
	if err := os.WriteFile(rules, []byte("employees:\n  match_names: true\n  by_email:\n    someone@else.dk: "+sandbox.EmpLarsNielsen+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r = runInProcess(t, env, "import", "--rules", rules, file)
		if r.code != 0 {
			t.Fatalf("import %d after the fix: exit %d\n%s%s", i+2, r.code, r.stdout, r.stderr)
		}
		n := 0
		for _, c := range s.sb.State().Companies {
			n += len(c.PayParts)
		}
		if n != 2 {
			t.Fatalf("import %d after the fix: payroll holds %d pay parts, want 2\n%s", i+2, n, r.stdout)
		}
	}
}
