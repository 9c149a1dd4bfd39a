package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestCorrections_ShowsWaiting: a correction recorded but not applied (here
// because the server cannot delete what it replaces) is listed by
// `paysync corrections` with its entry, its import and why it waits, so an
// operator sees it without reading the daemon's log.
func TestCorrections_ShowsWaiting(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Dialect: sandbox.CamelCase, NoDelete: true})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	if r := runInProcess(t, env, "import", "../../deploy/examples/toggl.csv"); r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runInProcess(t, env, "import", "testdata/corrections/toggl-corrected.csv"); r.code == 0 {
		t.Fatalf("the correction went through a server without delete:\n%s", r.stdout)
	}
	r := runInProcess(t, env, "corrections")
	if r.code != 0 {
		t.Fatalf("corrections: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"waiting: 1 correction not applied yet", "toggl-4af61a70797b1053", "import 2", "offers no delete mutation"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("corrections does not say %q:\n%s", want, r.stdout)
		}
	}
}
