package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
		regexp.MustCompile(`testdata/import/bad.csv:4: entry b-3: email: no payroll employee for "nobody@nordlys.dk": tried employees.by_email, payroll's e-mails \(none is nobody@nordlys.dk\).* \(add nobody@nordlys.dk to employees.by_email`),
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
	if !strings.Contains(r.stderr, "problems; nothing was sent") {
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

// TestImport_Stdin: "-" reads standard input, for a dry run and for an
// import, which records it as the import "stdin".
func TestImport_Stdin(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
	in := `{"id":"x1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"7:30","code":"T1"}` + "\n"
	runStdin := func(args ...string) result {
		var out, errb bytes.Buffer
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		code := run(context.Background(), args, stdio{in: strings.NewReader(in), out: &out, err: &errb}, lookup)
		return result{code, out.String(), errb.String()}
	}
	r := runStdin("import", "--dry-run", "--json", "-")
	if r.code != 0 || !strings.Contains(r.stdout, `"units": "7.5"`) || !strings.Contains(r.stdout, `"change": "create"`) {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runStdin("import", "-"); r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runInProcess(t, env, "imports", "--json")
	var srcs []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &srcs); err != nil || !slices.ContainsFunc(srcs, func(s struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}) bool {
		return s.ID == 1 && s.Name == "stdin"
	}) {
		t.Fatalf("imports --json (%v): want import 1 named stdin\n%s", err, r.stdout)
	}
	if got := payrollKeys(s.sb); !slices.Equal(got, []string{"MV8x|MV8xXzE=|T1|units=7.5"}) {
		t.Errorf("payroll holds %v, want the 7.5 of stdin", got)
	}
}

// A dry run plans against the ledger as the real import would: a file
// imported before is named as such with nothing to create, entries already
// imported are skipped (or refused when changed), only new entries make
// pay parts; and a dry run never creates a ledger or sends anything.
func TestImport_DryRunAgainstTheLedger(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	ledgerPath := filepath.Join(t.TempDir(), "ledger.db")
	env := with(s.env, "PAYSYNC_LEDGER", ledgerPath)
	step := func(wantCode int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != wantCode {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, wantCode, r.stdout, r.stderr)
		}
		return r
	}
	const sample = "../../deploy/examples/entries.ndjson"
	r := step(0, "import", "--dry-run", sample)
	if !strings.Contains(r.stdout, "; 5 pay parts") {
		t.Fatalf("dry run before any import: %s", r.stdout)
	}
	if _, err := os.Stat(ledgerPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run created the ledger (%v)", err)
	}
	step(0, "import", sample)
	created := s.sb.State().Counters.Requests["create_pay_parts"]

	r = step(0, "import", "--dry-run", sample)
	if !strings.Contains(r.stdout, "no pay parts would be created") ||
		!regexp.MustCompile(`entries.ndjson: the same content was imported before on \S+ \S+ UTC \(import 1\): nothing of it would be imported again`).MatchString(r.stdout) {
		t.Errorf("dry run of the imported file:\n%s", r.stdout)
	}
	r = step(0, "import", "--dry-run", "--json", sample)
	var rep struct {
		PayParts       []json.RawMessage `json:"pay_parts"`
		ImportedBefore []struct {
			ImportID int64 `json:"import_id"`
		} `json:"imported_before"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.PayParts) != 0 || len(rep.ImportedBefore) != 1 || rep.ImportedBefore[0].ImportID != 1 {
		t.Errorf("--json of the imported file (%v):\n%s", err, r.stdout)
	}

	// One entry as imported, one changed since, one new.
	mixed := filepath.Join(t.TempDir(), "mixed.ndjson")
	lines := strings.SplitAfter(string(must(os.ReadFile(sample))), "\n")
	changed := strings.Replace(lines[1], `"4:20"`, `"5:00"`, 1)
	fresh := `{"id":"tt-2001","company_id":"MV8y","employee_id":"MV8yXzE=","date":"2026-11-05","hours":"3","code":"T1","rate":"215.75"}` + "\n"
	if err := os.WriteFile(mixed, []byte(lines[0]+changed+fresh), 0o600); err != nil {
		t.Fatal(err)
	}
	r = step(0, "import", "--dry-run", mixed)
	for _, want := range []string{
		// tt-1002 changed (Mette's T1 11.83 → 12.5) and the new entry in
		// Jonas's existing group (8 → 11): two groups replaced.
		"3 entries in 1 file: 1 mapped, 0 skipped, 0 with problems; 2 pay parts\n",
		"1 entry is in the ledger already with the same content",
		"1 entry is paid before with other content: a correction",
		"what payroll would hold, per group (before → after):",
		"MV8x     2026-11  Mette Hansen  T1            11.83 → 12.5",
		"MV8y     2026-11  Jonas Larsen  T1    215.75  8 → 11",
		"replace",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run of a changed file lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := s.sb.State().Counters.Requests["create_pay_parts"]; n != created {
		t.Fatalf("dry runs sent %d create_pay_parts", n-created)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCLI_ImportBatchesRevertReplay walks the operator's commands over one
// ledger: import, list and show, refused replay, revert, replay.
func TestCLI_ImportBatchesRevertReplay(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	step := func(wantCode int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != wantCode {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, wantCode, r.stdout, r.stderr)
		}
		return r
	}
	r := step(0, "import", "../../deploy/examples/toggl.csv")
	if !strings.Contains(r.stdout, "7 pay parts created") {
		t.Fatalf("import: %s", r.stdout)
	}
	r = step(0, "batches", "--json")
	var bs []struct {
		ID      int64  `json:"id"`
		State   string `json:"state"`
		Created int    `json:"created"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &bs); err != nil || len(bs) != 1 || bs[0].State != "created" || bs[0].Created != 7 {
		t.Fatalf("batches --json = %s (%v)", r.stdout, err)
	}
	r = step(0, "batches", "show", "1")
	// (The reconciler's pay parts are per group: the batch no longer
	// lists the source lines behind each.)
	if !strings.Contains(r.stdout, "cHBfMQ==") || !strings.Contains(r.stdout, "Mette Hansen") {
		t.Fatalf("batches show: %s", r.stdout)
	}
	step(0, "imports", "show", "1", "--json")
	creates := func() int { return s.sb.State().Counters.Requests["create_pay_parts"] }
	held := func() int { return len(s.sb.State().Companies[0].PayParts) }
	// A replay of what payroll holds already pays nothing twice.
	calls := creates()
	r = step(0, "replay", "1", "--yes")
	if !strings.Contains(r.stdout, "0 deleted, 0 created") || creates() != calls || held() != 7 {
		t.Fatalf("replay before revert: %d create calls, payroll holds %d\n%s", creates()-calls, held(), r.stdout)
	}
	step(2, "revert", "1") // not a terminal and no --yes: refused
	r = step(0, "revert", "1", "--dry-run")
	if !strings.Contains(r.stdout, "revert batch 1: 6 entries") || held() != 7 {
		t.Fatalf("revert --dry-run: %s", r.stdout)
	}
	if r = step(0, "revert", "1", "--yes"); !strings.Contains(r.stdout, "7 deleted, 0 created") {
		t.Errorf("revert: %s", r.stdout)
	}
	if n := held(); n != 0 {
		t.Fatalf("after revert payroll holds %d", n)
	}
	if r = step(0, "revert", "1", "--yes"); !strings.Contains(r.stdout, "0 deleted, 0 created") { // twice: nothing to do
		t.Errorf("revert twice: %s", r.stdout)
	}
	r = step(0, "replay", "1", "--yes")
	if !strings.Contains(r.stdout, "0 deleted, 7 created") || held() != 7 {
		t.Fatalf("replay: %s", r.stdout)
	}
	// The batch keeps its history: its 7 pay parts deleted by the revert.
	var after []struct {
		ID      int64 `json:"id"`
		Created int   `json:"created"`
		Deleted int   `json:"deleted"`
	}
	r = step(0, "batches", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &after); err != nil {
		t.Fatalf("batches --json: %v\n%s", err, r.stdout)
	}
	created := 0
	for _, b := range after {
		created += b.Created
		if b.ID == 1 && b.Deleted != 7 {
			t.Errorf("batch 1 after revert and replay: %+v, want its 7 pay parts deleted", b)
		}
	}
	if created != 7 {
		t.Errorf("batches record %d pay parts created (live), want 7:\n%s", created, r.stdout)
	}
}
