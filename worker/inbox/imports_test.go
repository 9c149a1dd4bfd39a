package inbox_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The inbox is an adapter with its own small sink (inbox.Sink): it knows
// nothing of the worker that implements it, nor of payroll. Its imports,
// direct or not (its tests aside), must stay so.
func TestInbox_ImportsNeitherWorkerNorPayroll(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the package's imports")
	}
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		switch p {
		case "github.com/paysync/paysync/worker", "github.com/paysync/paysync/payroll":
			t.Errorf("worker/inbox imports %s (directly or through another package); it has its own Sink instead", p)
		}
	}
}
