package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestConfirm_NoTerminal: without a terminal to ask (a pipe, /dev/null,
// a test's buffer) and without --yes, confirm asks nothing and says to
// pass --yes.
func TestConfirm_NoTerminal(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	for _, tc := range []struct {
		name string
		in   stdio
	}{
		{"dev null", stdio{in: devNull}},
		{"buffer", stdio{in: strings.NewReader("y\n")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errb bytes.Buffer
			tc.in.out, tc.in.err = &bytes.Buffer{}, &errb
			err := confirm(tc.in, false, "delete 7 pay parts from payroll?")
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("confirm = %v, want a usage error", err)
			}
			for _, want := range []string{"no terminal", "pass --yes", "delete 7 pay parts from payroll", "nothing changed"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("confirm = %q, want it to say %q", err, want)
				}
			}
			if errb.Len() > 0 {
				t.Errorf("confirm asked without a terminal: %q", errb.String())
			}
			if err := confirm(tc.in, true, "delete?"); err != nil {
				t.Errorf("confirm with --yes = %v", err)
			}
		})
	}
}

// TestRevert_NoTerminalSaysPassYes: revert and replay run with standard
// input from /dev/null (cron, CI) refuse, say to pass --yes, exit 2 and
// change nothing.
func TestRevert_NoTerminalSaysPassYes(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	if r := runInProcess(t, env, "import", "../../deploy/examples/toggl.csv"); r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	check := func(args ...string) {
		t.Helper()
		before := len(s.sb.State().Companies[0].PayParts)
		r := runBinary(t, env, args...) // standard input is /dev/null
		if r.code != 2 || !strings.Contains(r.stderr, "pass --yes") || !strings.Contains(r.stderr, "no terminal") || strings.Contains(r.stderr, "[y/N]") {
			t.Errorf("%v without a terminal: exit %d, want 2 and 'pass --yes'\n%s", args, r.code, r.stderr)
		}
		if n := len(s.sb.State().Companies[0].PayParts); n != before {
			t.Errorf("%v without a terminal changed payroll: %d pay parts, were %d", args, n, before)
		}
	}
	check("revert", "1")
	if r := runInProcess(t, env, "revert", "1", "--yes"); r.code != 0 {
		t.Fatalf("revert --yes: exit %d\n%s", r.code, r.stderr)
	}
	check("replay", "1")
}

// TestReplay_ConfiguredRulesAndDryRunExit: replay maps the entries again
// with PAYSYNC_MAPPING unless --rules; its dry run says what it touches
// and sends nothing; a replay under rules that refuse the entries pays
// none of them and says so with exit 1 (the entries are problems, as
// import says of its own: a script can gate on it).
func TestReplay_ConfiguredRulesAndDryRunExit(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	ledgerEnv := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
	env := with(ledgerEnv, "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	step := func(env map[string]string, want int, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		if r.code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	holds := func() int { return len(s.sb.State().Companies[0].PayParts) }
	step(env, 0, "import", "../../deploy/examples/toggl.csv")
	step(env, 0, "revert", "1", "--yes")
	for _, e := range []map[string]string{env, ledgerEnv} {
		if r := step(e, 0, "replay", "1", "--dry-run"); !strings.Contains(r.stdout, "replay batch 1: 6 entries") {
			t.Errorf("replay --dry-run:\n%s", r.stdout)
		}
		step(e, 0, "replay", "1", "--dry-run", "--json")
	}
	if n := holds(); n != 0 {
		t.Fatalf("dry runs sent %d pay parts", n)
	}
	// Without rules the entries have no pay code: none is paid, and the
	// replay says so.
	r := runInProcess(t, ledgerEnv, "replay", "1", "--yes")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "problem") {
		t.Errorf("replay under rules that refuse every entry: exit %d, want 1 naming the problems\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := holds(); n != 0 {
		t.Fatalf("replay without rules: payroll holds %d pay parts, want 0", n)
	}
	// --rules maps them again (through their import: the batch's entries
	// were replayed already, and refused).
	step(ledgerEnv, 0, "replay", "--import", "1", "--yes", "--rules", "../../deploy/examples/rules.yaml")
	if n := holds(); n != 7 {
		t.Fatalf("replay --rules: payroll holds %d pay parts, want 7", n)
	}
	// And PAYSYNC_MAPPING, without --rules.
	step(env, 0, "revert", "--import", "1", "--yes")
	if n := holds(); n != 0 {
		t.Fatalf("revert --import 1: payroll holds %d pay parts, want 0", n)
	}
	step(env, 0, "replay", "--import", "1", "--yes")
	if n := holds(); n != 7 {
		t.Fatalf("replay with PAYSYNC_MAPPING: payroll holds %d pay parts, want 7", n)
	}
}

// TestRules_OneErrorPerLine: a rules file's problems are printed each on
// a line of its own.
func TestRules_OneErrorPerLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	body := "version: 7\nrules:\n  - name: a\n    default: true\n    code: T1\n    units: hours\n    rate: {field: nope, const: 1}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runInProcess(t, nil, "import", "--dry-run", "--rules", path, "../../deploy/examples/toggl.csv")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 2 || len(lines) < 2 {
		t.Fatalf("exit %d, %d line(s), want 2 and one line per error:\n%s", r.code, len(lines), r.stderr)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "paysync: rules: ") || strings.Count(l, path) != 1 {
			t.Errorf("line %q: want one error, starting with paysync: rules:", l)
		}
	}
}

// TestHelp_Synopsis: optional flags are shown as optional, and a command
// without flags shows no Flags section.
func TestHelp_Synopsis(t *testing.T) {
	r := runInProcess(t, nil, "import", "--help")
	if r.code != 0 || !strings.Contains(r.stderr, "Usage: paysync import [--dry-run]") {
		t.Errorf("import --help: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range []string{"demo", "version", "healthcheck"} {
		r := runInProcess(t, nil, c, "--help")
		if r.code != 0 || strings.Contains(r.stderr, "Flags:") || !strings.HasPrefix(r.stderr, "Usage: paysync "+c) {
			t.Errorf("%s --help: exit %d, want a usage line and no Flags section:\n%s", c, r.code, r.stderr)
		}
	}
	if r := runInProcess(t, nil, "revert", "--help"); !strings.Contains(r.stderr, "Flags:\n") || !strings.Contains(r.stderr, "-yes") {
		t.Errorf("revert --help lacks its flags:\n%s", r.stderr)
	}
}

// TestTimes_UTC: tables and messages print times in UTC with the zone.
func TestTimes_UTC(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	if r := runInProcess(t, env, "import", "../../deploy/examples/toggl.csv"); r.code != 0 {
		t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
	}
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d UTC`)
	for _, args := range [][]string{{"batches"}, {"imports"}, {"imports", "show", "1"}, {"periods"}} {
		r := runInProcess(t, env, args...)
		if r.code != 0 || !stamp.MatchString(r.stdout) {
			t.Errorf("%v: exit %d, want times as 2006-01-02 15:04 UTC:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	r := runInProcess(t, env, "batches", "show", "1")
	if !regexp.MustCompile(`\d\d:\d\d:\d\d\.\d{3} UTC`).MatchString(r.stdout) {
		t.Errorf("batches show: attempts' times lack the zone:\n%s", r.stdout)
	}
}

// TestPlural: counts are printed with the noun's number.
func TestPlural(t *testing.T) {
	var b bytes.Buffer
	writeSendSummary(&b, sendSummary{Created: 1, Batches: 1, APICalls: 1, Imports: nil})
	if got := b.String(); !strings.Contains(got, "1 pay part created") || !strings.Contains(got, "1 batch (") || !strings.Contains(got, "1 API call\n") {
		t.Errorf("send summary: %q", got)
	}
	b.Reset()
	if err := writeImportReport(&b, importReport{Summary: importSummary{Files: 1, Entries: 1, Mapped: 1, PayParts: 1, AlreadyImported: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "1 entry in 1 file: 1 mapped, 0 skipped, 0 with problems; 1 pay part\n") || !strings.Contains(got, "1 entry is in the ledger already") {
		t.Errorf("import report: %q", got)
	}
}
