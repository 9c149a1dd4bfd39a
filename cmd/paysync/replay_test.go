package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/payroll/sandbox"
)

// replaySteps runs paysync commands in process over one sandbox and ledger,
// failing the test on an unexpected exit code.
type replaySteps struct {
	t   *testing.T
	s   sandboxEnv
	env map[string]string
}

func newReplaySteps(t *testing.T, kv ...string) *replaySteps {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, append([]string{"PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml"}, kv...)...)
	return &replaySteps{t: t, s: s, env: env}
}

func (rs *replaySteps) step(wantCode int, args ...string) result {
	rs.t.Helper()
	r := runInProcess(rs.t, rs.env, args...)
	if r.code != wantCode {
		rs.t.Fatalf("paysync %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
	}
	assertClean(rs.t, r, rs.env["PAYSYNC_CLIENT_SECRET"])
	return r
}

// payroll returns the pay parts in payroll as a sorted multiset.
func (rs *replaySteps) payroll() []string { return payrollKeys(rs.s.sb) }

func (rs *replaySteps) wantPayroll(what string, want []string) {
	rs.t.Helper()
	if got := rs.payroll(); !slices.Equal(got, want) {
		rs.t.Fatalf("%s: payroll holds %d pay parts, want %d (each once):\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
}

// writes counts payroll's create and delete calls so far.
func (rs *replaySteps) writes() int {
	n := rs.s.sb.State().Counters.Requests
	return n["create_pay_parts"] + n["delete_pay_parts"]
}

// TestReplay_NeverPaysTwice: whatever is named (a batch, the import) and
// however often, a replay after a revert puts every pay part into payroll
// once (replay is redo: the entries count again, once); a replay run again
// changes nothing (no call to payroll: "0 deleted, 0 created") and exits
// 0, its dry run sends nothing, and the same file imported again is a
// duplicate that exits 0.
func TestReplay_NeverPaysTwice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replays [][]string
	}{
		{"batch twice", [][]string{{"1"}, {"1"}}},
		{"import, then batch twice", [][]string{{"--import", "1"}, {"1"}, {"1"}}},
		{"batch, then import", [][]string{{"1"}, {"--import", "1"}}},
		{"import twice", [][]string{{"--import", "1"}, {"--import", "1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newReplaySteps(t)
			rs.step(0, "import", "../../deploy/examples/toggl.csv")
			imported := rs.payroll()
			if len(imported) != 7 {
				t.Fatalf("import: payroll holds %d, want 7", len(imported))
			}
			rs.step(0, "revert", "1", "--yes")
			rs.wantPayroll("after the revert", nil)
			for i, target := range tc.replays {
				calls := rs.writes()
				r := rs.step(0, append([]string{"replay"}, append(target, "--yes")...)...)
				rs.wantPayroll("after "+strings.Join(append([]string{"replay"}, target...), " "), imported)
				if i == 0 {
					if !strings.Contains(r.stdout, "0 deleted, 7 created, 0 rejected") {
						t.Fatalf("replay %v: want the 7 pay parts created:\n%s", target, r.stdout)
					}
					continue
				}
				if !strings.Contains(r.stdout, "0 deleted, 0 created, 0 rejected") || rs.writes() != calls {
					t.Fatalf("replay %v again: %d create/delete calls, want none and the output to say so:\n%s", target, rs.writes()-calls, r.stdout)
				}
				dry := rs.step(0, append([]string{"replay"}, append(target, "--dry-run")...)...)
				if strings.Contains(dry.stdout, "not yet sent") || rs.writes() != calls {
					t.Fatalf("replay %v --dry-run: want nothing planned and nothing sent:\n%s", target, dry.stdout)
				}
				rs.wantPayroll("after the dry run", imported)
			}
			r := rs.step(0, "import", "../../deploy/examples/toggl.csv")
			if !strings.Contains(r.stdout, "already imported as import 1") {
				t.Fatalf("the same file again: %s", r.stdout)
			}
			rs.wantPayroll("after importing the same file again", imported)
		})
	}
}

// TestReplay_NoForce: replay has no --force to pay entries a second time
// (no sequence of commands puts an entry into payroll twice): the flag is
// refused as a usage error and payroll keeps each pay part once.
func TestReplay_NoForce(t *testing.T) {
	rs := newReplaySteps(t)
	rs.step(0, "import", "../../deploy/examples/toggl.csv")
	imported := rs.payroll()
	rs.step(0, "revert", "1", "--yes")
	rs.step(0, "replay", "1", "--yes")
	r := rs.step(2, "replay", "1", "--yes", "--force")
	if !strings.Contains(r.stderr, "flag provided but not defined: -force") {
		t.Fatalf("replay --force: want a usage error:\n%s", r.stderr)
	}
	rs.wantPayroll("after replay --force", imported)
}

// TestReplay_InterruptedResumes: a replay interrupted after it committed
// its batches, with its first create sent and its outcome unknown, is
// finished by running the same command again: every pay part once, exit
// 0, and the file imported again is a duplicate that exits 0.
func TestReplay_InterruptedResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revert []string
		target []string
	}{
		{"batch", []string{"1"}, []string{"1"}},
		{"import", []string{"--import", "1"}, []string{"--import", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newReplaySteps(t, "PAYSYNC_BATCH_SIZE", "3")
			rs.step(0, "import", "../../deploy/examples/toggl.csv")
			imported := rs.payroll()
			rs.step(0, append([]string{"revert", "--yes"}, tc.revert...)...)
			left := rs.payroll()

			// The first create is executed and its answer held back; the
			// replay is interrupted while it waits.
			rs.s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultTimeoutAfterCommit, Op: "create_pay_parts", Times: 1, Delay: time.Minute})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan result, 1)
			go func() {
				var out, errb bytes.Buffer
				lookup := func(k string) (string, bool) { v, ok := rs.env[k]; return v, ok }
				args := append([]string{"replay", "--yes"}, tc.target...)
				code := run(ctx, args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup)
				done <- result{code, out.String(), errb.String()}
			}()
			deadline := time.Now().Add(30 * time.Second)
			for rs.s.sb.PayPartCount() == len(left) {
				if time.Now().After(deadline) {
					t.Fatal("the replay sent nothing in 30 s")
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			r := <-done
			if r.code == 0 {
				t.Fatalf("the interrupted replay exited 0:\n%s%s", r.stdout, r.stderr)
			}
			rs.s.sb.SetFaults()

			// Run again, it finishes what the interrupted run left (the
			// create whose outcome it did not see is found, not sent twice).
			rs.step(0, append([]string{"replay", "--yes"}, tc.target...)...)
			rs.wantPayroll("after the replay ran again", imported)
			calls := rs.writes()
			r = rs.step(0, append([]string{"replay", "--yes"}, tc.target...)...)
			rs.wantPayroll("after a third run", imported)
			if !strings.Contains(r.stdout, "0 deleted, 0 created, 0 rejected") || rs.writes() != calls {
				t.Fatalf("a third run: %d create/delete calls, want none:\n%s", rs.writes()-calls, r.stdout)
			}
			r = rs.step(0, "import", "../../deploy/examples/toggl.csv")
			if !strings.Contains(r.stdout, "already imported as import 1") {
				t.Fatalf("the same file again: %s", r.stdout)
			}
			rs.wantPayroll("after importing the same file again", imported)
		})
	}
}

// TestReplay_RedrivesRejectedSource: a file the inbox refused as a whole
// (its rules could not place anyone) is re-driven by `replay --import ID`
// once the rules are fixed: its stored input is imported again as a new
// import, and its pay parts land once; running it again, or importing the
// same file, changes nothing and exits 0.
func TestReplay_RedrivesRejectedSource(t *testing.T) {
	rs := newReplaySteps(t)
	in := filepath.Join(t.TempDir(), "inbox")
	if err := os.Mkdir(in, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../deploy/examples/toggl.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "toggl.csv"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Wrong rules: the default ones, which know nobody's email.
	daemon := with(rs.env, "PAYSYNC_INBOX", in)
	delete(daemon, "PAYSYNC_MAPPING")
	r := runInProcess(t, daemon, "run", "--once")
	if r.code != 0 || !strings.Contains(r.stdout, "1 failed") {
		t.Fatalf("run --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	type source struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	var srcs []source
	r = rs.step(0, "imports", "--json")
	err = json.Unmarshal([]byte(r.stdout), &srcs)
	// Import 0 is the ledger's own "reconcile" source (the reconciler's
	// plans no import caused), not an import.
	srcs = slices.DeleteFunc(srcs, func(s source) bool { return s.ID == 0 })
	if err != nil || len(srcs) != 1 || srcs[0].Status != "rejected" {
		t.Fatalf("imports --json = %s (%v), want one rejected source", r.stdout, err)
	}
	rs.wantPayroll("after the refused file", nil)

	dry := rs.step(0, "replay", "--import", "1", "--dry-run")
	if !strings.Contains(dry.stdout, "pay parts that would be created") {
		t.Fatalf("replay --dry-run of the rejected source:\n%s", dry.stdout)
	}
	rs.wantPayroll("after the dry run", nil)

	rs.step(0, "replay", "--import", "1", "--yes")
	want := rs.payroll()
	if len(want) != 7 {
		t.Fatalf("re-drive: payroll holds %d, want the 7 of toggl.csv", len(want))
	}
	rs.step(0, "replay", "--import", "1", "--yes")
	rs.wantPayroll("after the re-drive ran again", want)
	r = rs.step(0, "import", "../../deploy/examples/toggl.csv")
	if !strings.Contains(r.stdout, "already imported") {
		t.Fatalf("the same file again: %s", r.stdout)
	}
	rs.wantPayroll("after importing the same file", want)
}
