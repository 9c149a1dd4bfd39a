package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

// runInProcess runs a command line in this process with exactly env.
func runInProcess(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup)
	return result{code, out.String(), errb.String()}
}

func golden(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/paysync -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestImport_DryRunSamples: golden table and JSON for every sample export.
func TestImport_DryRunSamples(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	samples := []struct {
		file  string
		rules bool
	}{
		{"toggl.csv", true}, {"clockify.csv", true}, {"harvest.csv", true}, {"entries.ndjson", false},
	}
	for _, sm := range samples {
		t.Run(sm.file, func(t *testing.T) {
			args := []string{"import", "--dry-run"}
			if sm.rules {
				args = append(args, "--rules", "../../deploy/examples/rules.yaml")
			}
			args = append(args, "../../deploy/examples/"+sm.file)
			r := runInProcess(t, s.env, args...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			golden(t, sm.file+".txt", r.stdout)
			r = runInProcess(t, s.env, append(args[:2:2], append([]string{"--json"}, args[2:]...)...)...)
			if r.code != 0 {
				t.Fatalf("--json: exit %d\n%s", r.code, r.stderr)
			}
			golden(t, sm.file+".json", r.stdout)
		})
	}
	if n := s.sb.State().Counters.Requests["create_pay_parts"]; n != 0 {
		t.Fatalf("a dry run sent %d create_pay_parts", n)
	}
}

// TestImport_BadInput: each bad entry gives one line naming the file,
// line, entry id, field and what to do; exit 1.
func TestImport_BadInput(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Allowed: sandbox.AllowedEnum})
	r := runInProcess(t, s.env, "import", "--dry-run", "--rules", "testdata/import/bad-rules.yaml", "testdata/import/bad.csv")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	golden(t, "bad.txt", r.stdout)
	want := []*regexp.Regexp{
		regexp.MustCompile(`testdata/import/bad.csv:2: entry b-1: code: unknown pay code "T9".*\(fix the code of rule "typo" in .*bad-rules.yaml:8`),
		regexp.MustCompile(`testdata/import/bad.csv:3: entry b-2: amount: code T1 does not take amount.*\(remove amount`),
		regexp.MustCompile(`testdata/import/bad.csv:4: entry b-3: email: no payroll employee for "nobody@nordlys.dk" \(add nobody@nordlys.dk to employees.by_email`),
		regexp.MustCompile(`testdata/import/bad.csv:5: entry b-4: name: "Peter Madsen" matches 2 employees of company MV8y: MV8yXzM=, MV8yXzQ= \(map this person`),
		regexp.MustCompile(`testdata/import/bad.csv:6: entry b-5: date: .*\(`),
	}
	for _, re := range want {
		if !re.MatchString(r.stdout) {
			t.Errorf("output lacks %s:\n%s", re, r.stdout)
		}
	}
	// Meta once, each company's employees once, however many entries.
	c := s.sb.State().Counters.Requests
	if c["pay_parts_meta"] != 1 || c["companies"] != 2 {
		t.Errorf("requests: pay_parts_meta %d (want 1), companies %d (want 2: MV8x, MV8y)", c["pay_parts_meta"], c["companies"])
	}
	if !strings.Contains(r.stdout, "Lars Nielsen") {
		t.Error("good input must still be planned next to bad input")
	}
	if !strings.Contains(r.stderr, "problem(s); nothing was sent") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestImport_BrokenRules(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	r := runInProcess(t, s.env, "import", "--dry-run", "--rules", "testdata/import/broken-key.yaml", "../../deploy/examples/toggl.csv")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
	}
	want := `testdata/import/broken-key.yaml:6: unit: unknown key "unit" (check the spelling`
	if !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("stderr = %q, want one line containing %q", r.stderr, want)
	}
}

func TestImport_Stdin(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := s.env[k]; return v, ok }
	in := `{"id":"x1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"7:30","code":"T1"}` + "\n"
	code := run(context.Background(), []string{"import", "--dry-run", "--json", "-"}, stdio{in: strings.NewReader(in), out: &out, err: &errb}, lookup)
	if code != 0 || !strings.Contains(out.String(), `"units": "7.5"`) || !strings.Contains(out.String(), `"source": "stdin"`) {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}
