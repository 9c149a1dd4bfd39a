package loadtest

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// A copy of the shape of ../shared/bench/benthos/benthos.yaml: the test
// must not need the shared directory.
const benthosTemplate = `# comment
logger:
  level: ${PB_LOG_LEVEL:warn}
input:
  broker:
    inputs:
      - broker:
          inputs:
            - nats_jetstream: { urls: [ "${NATS_URL}" ], subject: "timesheets.MV8x.>", durable: benthos_MV8x, deliver: all }
          batching: { count: ${PB_BATCH:100}, period: "${PB_PERIOD:200ms}" }
      - broker:
          inputs:
            - nats_jetstream: { urls: [ "${NATS_URL}" ], subject: "timesheets.MV8y.>", durable: benthos_MV8y, deliver: all }
          batching: { count: ${PB_BATCH:100}, period: "${PB_PERIOD:200ms}" }
pipeline:
  processors:
    - archive:
        format: json_array
output:
  http_client:
    max_in_flight: ${PB_IN_FLIGHT:4}
`

func TestBenthosConfig(t *testing.T) {
	companies := []string{sandbox.LoadCompanyID(1), sandbox.LoadCompanyID(2), sandbox.LoadCompanyID(10), "a.b/c+d="}
	got, err := benthosConfig([]byte(benthosTemplate), companies)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{
		`subject: "timesheets.Ml8x.>", durable: benthos_Ml8x, deliver: all }`,
		`subject: "timesheets.Ml8y.>", durable: benthos_Ml8y,`,
		`subject: "timesheets.Ml8xMA==.>", durable: benthos_Ml8xMA__,`, // "2_10": base64 padding
		`subject: "timesheets.a_b/c+d=.>", durable: benthos_a_b_c_d_,`, // as stream.Subject writes the token
	} {
		if !strings.Contains(s, want) {
			t.Errorf("generated config lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "MV8") {
		t.Errorf("the template's companies are left in:\n%s", s)
	}
	if n := strings.Count(s, "nats_jetstream"); n != len(companies) {
		t.Errorf("%d inputs, want %d", n, len(companies))
	}
	if n := strings.Count(s, "batching: { count: ${PB_BATCH:100}"); n != len(companies) {
		t.Errorf("%d batching policies, want %d", n, len(companies))
	}
	// Everything around the inputs is kept as it was.
	if !strings.HasPrefix(s, "# comment\nlogger:\n") || !strings.HasSuffix(s, "pipeline:\n  processors:\n    - archive:\n        format: json_array\noutput:\n  http_client:\n    max_in_flight: ${PB_IN_FLIGHT:4}\n") {
		t.Errorf("the rest of the template changed:\n%s", s)
	}

	for name, tmpl := range map[string]string{
		"no inputs":     "input:\n  stdin: {}\n",
		"not together":  strings.Replace(benthosTemplate, "      - broker:\n          inputs:\n            - nats_jetstream: { urls: [ \"${NATS_URL}\" ], subject: \"timesheets.MV8y", "      - generate: {}\n      - broker:\n          inputs:\n            - nats_jetstream: { urls: [ \"${NATS_URL}\" ], subject: \"timesheets.MV8y", 1),
		"no companies ": benthosTemplate,
	} {
		cs := companies
		if strings.HasPrefix(name, "no companies") {
			cs = nil
		}
		if _, err := benthosConfig([]byte(tmpl), cs); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestBenthosConfig_Shared generates from the real benthos.yaml when the
// shared directory is there: one input per company, nothing else changed.
func TestBenthosConfig_Shared(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "shared", "bench", "benthos", "benthos.yaml"))
	if err != nil {
		t.Skip("no ../shared/bench/benthos/benthos.yaml:", err)
	}
	cs := []string{sandbox.LoadCompanyID(1), sandbox.LoadCompanyID(2), sandbox.LoadCompanyID(3), sandbox.LoadCompanyID(4)}
	got, err := benthosConfig(tmpl, cs)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := strings.Count(string(tmpl), "\n"), strings.Count(string(got), "\n"); a != b {
		t.Errorf("%d lines from %d: with 4 companies only the ids change", b, a)
	}
	for _, c := range cs {
		if !strings.Contains(string(got), `subject: "timesheets.`+c+`.>", durable: benthos_`+c+",") {
			t.Errorf("no input for %s:\n%s", c, got)
		}
	}
}

func TestCompare(t *testing.T) {
	// The figures: 100,000 entries each (paysync aggregated into
	// 16 pay parts, Benthos one per entry); 13.6 s and 2.1 s of CPU.
	var a, b Result
	a.Entries, a.PayParts, a.Seconds, a.CPUSeconds = 100000, 16, 100000/7243.0, 13.6
	b.Entries, b.PayParts, b.Seconds, b.CPUSeconds = 100000, 100000, 100000/40129.0, 2.1
	a.derive()
	b.derive()
	c := compare(a, b)
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"paysync/s", c.PaysyncPerSec, 7243},
		{"benthos/s", c.BenthosPerSec, 40129},
		{"ratio", c.Ratio, 7243.0 / 40129},
		{"paysync µs/entry", c.PaysyncCPUMicros, 136},
		{"benthos µs/entry", c.BenthosCPUMicros, 21},
		{"cpu ratio", c.CPURatio, 136.0 / 21},
	} {
		if math.Abs(f.got-f.want) > 1e-9*max(1, f.want) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if z := compare(a, Result{}); z.Ratio != 0 || z.CPURatio != 0 {
		t.Errorf("against nothing measured: %+v", z)
	}
}

func TestBenthosBinary(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := BenthosBinary("/cache", src)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := BenthosBinary("/cache", src); again != a || !strings.HasPrefix(a, "/cache/paysync-load/benthos-") || filepath.Base(a) != "benthos" {
		t.Errorf("binary %q, then %q", a, again)
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := BenthosBinary("/cache", src); b == a {
		t.Errorf("a changed go.sum keeps the build %q", b)
	}
	if _, err := BenthosBinary("/cache", t.TempDir()); err == nil {
		t.Error("no error for a directory without the source")
	}
}
