package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

func TestZZScratch(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	for _, a := range [][]string{
		{"import", "../../deploy/examples/toggl.csv"},
		{"import", "../../deploy/examples/harvest.csv"},
	} {
		r := runInProcess(t, env, a...)
		t.Logf("$ %s -> %d\n%s\n%s", strings.Join(a, " "), r.code, r.stdout, r.stderr)
		t.Logf("payroll: %v %v", payrollKeys(s.sb), s.sb.State().Counters.Requests)
	}
}
