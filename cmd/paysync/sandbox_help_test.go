package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// Issue 16: PUT /_sandbox/faults's body was undocumented. `paysync sandbox
// --help` and the README describe it, with an example body the sandbox
// accepts as it is.
func TestSandbox_FaultsBodyDocumented(t *testing.T) {
	r := runBinary(t, nil, "sandbox", "--help")
	if r.code != 0 {
		t.Fatalf("sandbox --help: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	help := r.stdout + r.stderr
	for _, want := range []string{"PUT /_sandbox/faults", "GET /_sandbox/faults", `"kind"`, `"op"`, `"times"`, `"delay"`, `"status"`, `"retry_after"`, `"probability"`,
		"create_pay_parts", "delete_pay_parts", sandboxFaultsExample} {
		if !strings.Contains(help, want) {
			t.Errorf("sandbox --help lacks %q:\n%s", want, help)
		}
	}
	for _, k := range []sandbox.FaultKind{sandbox.FaultLatency, sandbox.FaultErrorBefore, sandbox.FaultRateLimit, sandbox.FaultUnauthorized,
		sandbox.FaultDropAfterCommit, sandbox.FaultBadGatewayAfterCommit, sandbox.FaultTimeoutAfterCommit} {
		if !strings.Contains(help, string(k)) {
			t.Errorf("sandbox --help does not name fault kind %s", k)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte(sandboxFaultsExample)) {
		t.Errorf("README lacks the example fault body %s", sandboxFaultsExample)
	}

	// The example is a body the sandbox takes.
	s := startSandbox(t, sandbox.Options{})
	req, err := http.NewRequest(http.MethodPut, s.env["PAYSYNC_PAYROLL_URL"]+"/_sandbox/faults", strings.NewReader(sandboxFaultsExample))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("PUT the example: %d %s", resp.StatusCode, body)
	}
	if got := s.sb.Faults(); len(got) != 2 || got[0].Kind != sandbox.FaultRateLimit || got[1].Kind != sandbox.FaultLatency {
		t.Errorf("faults after the example: %v", got)
	}
}
