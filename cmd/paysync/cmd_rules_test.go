package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
)

// confirmGuesses does what the operator does with a draft once its guesses
// are checked: uncomment the guessed read: lines and delete the markers.
func confirmGuesses(draft string) string {
	draft = strings.ReplaceAll(draft, "#"+mapping.GuessMarker+" ", "")
	return strings.ReplaceAll(draft, mapping.GuessMarker, "")
}

// markedGuesses counts the guessed values of a draft: GUESS: in a value,
// or a read: line commented out as #GUESS:.
func markedGuesses(draft string) int {
	n := 0
	for _, l := range strings.Split(draft, "\n") {
		value, _, _ := strings.Cut(l, "# ")
		if strings.Contains(value, mapping.GuessMarker) || strings.HasPrefix(strings.TrimSpace(l), "#"+mapping.GuessMarker) {
			n++
		}
	}
	return n
}

// TestRulesInit_Samples: rules init drafts a rules file from each sample
// export against the sandbox (golden), reading payroll only; the draft as
// it is is refused for its guesses, and once they are confirmed,
// import --dry-run accepts the export: exit 0, no problems.
func TestRulesInit_Samples(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	samples := []struct {
		file    string
		guesses int // markers in the draft
	}{
		{"toggl.csv", 3},       // two codes and a rate: the overtime tag's T2 needs one
		{"clockify.csv", 2},    // MM/DD/YYYY detected from 11/13/2026
		{"harvest.csv", 2},     // Support → T1, Sick leave → SYG
		{"windows1252.csv", 2}, // Normal → T1, Kørsel → KM
		{"generic.csv", 2},     // by project: Website, Internal
	}
	for _, tt := range samples {
		t.Run(tt.file, func(t *testing.T) {
			export := filepath.Join("testdata", "rules_init", tt.file)
			before := s.sb.State().Counters.Requests
			r := runInProcess(t, s.env, "rules", "init", export)
			if r.code != 0 {
				t.Fatalf("rules init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			golden(t, "rules_init_"+strings.TrimSuffix(tt.file, ".csv")+".golden", r.stdout)
			after := s.sb.State().Counters.Requests
			for _, write := range []string{"create_pay_parts", "delete_pay_parts"} {
				if after[write] != before[write] {
					t.Errorf("rules init called %s %d times, want none", write, after[write]-before[write])
				}
			}
			if n := markedGuesses(r.stdout); n != tt.guesses {
				t.Errorf("%d guesses marked, want %d", n, tt.guesses)
			}

			dir := t.TempDir()
			env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(dir, "ledger.db"))
			draft := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(draft, []byte(r.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := runInProcess(t, env, "import", "--dry-run", "--rules", draft, export); r.code != 2 ||
				!strings.Contains(r.stderr, "is a guess of paysync rules init, not confirmed") {
				t.Errorf("import --dry-run with the unconfirmed draft: exit %d, want 2 and the guesses named\n%s%s", r.code, r.stdout, r.stderr)
			}
			if err := os.WriteFile(draft, []byte(confirmGuesses(r.stdout)), 0o600); err != nil {
				t.Fatal(err)
			}
			r = runInProcess(t, env, "import", "--dry-run", "--rules", draft, export)
			if r.code != 0 || strings.Contains(r.stdout, "problems (") {
				t.Errorf("import --dry-run with the confirmed draft: exit %d, want 0 and no problems\n%s%s", r.code, r.stdout, r.stderr)
			}
			if after := s.sb.State().Counters.Requests; after["create_pay_parts"] != before["create_pay_parts"] {
				t.Errorf("the dry run created pay parts")
			}
		})
	}
}

// TestRulesInit_Out: --out writes the file and says what is next; an
// existing file is kept unless --force.
func TestRulesInit_Out(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	export := filepath.Join("testdata", "rules_init", "generic.csv")
	out := filepath.Join(t.TempDir(), "rules.yaml")
	r := runInProcess(t, s.env, "rules", "init", "--out", out, export)
	if r.code != 0 || !strings.Contains(r.stdout, "next: paysync import --dry-run --rules "+out+" "+export) {
		t.Fatalf("rules init --out: exit %d, want 0 and the next step\n%s%s", r.code, r.stdout, r.stderr)
	}
	first, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(first), "paysync import --dry-run --rules "+out) {
		t.Fatalf("the draft (%v) does not end with the next step:\n%s", err, first)
	}
	if err := os.WriteFile(out, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runInProcess(t, s.env, "rules", "init", "--out", out, export)
	if b, _ := os.ReadFile(out); r.code != 2 || !strings.Contains(r.stderr, "add --force") || string(b) != "mine\n" {
		t.Errorf("rules init onto an existing file: exit %d, file %q, want 2, --force named and the file kept\n%s", r.code, b, r.stderr)
	}
	r = runInProcess(t, s.env, "rules", "init", "--force", "--out", out, export)
	if b, _ := os.ReadFile(out); r.code != 0 || string(b) != string(first) {
		t.Errorf("rules init --force: exit %d, want 0 and the draft written\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"rules"}, {"rules", "nope"}, {"rules", "init"}} {
		if r := runInProcess(t, s.env, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
}
