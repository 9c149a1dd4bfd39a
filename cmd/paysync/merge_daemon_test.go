package main

// Issue 15 item 5 with PAYSYNC_SEND=immediate: entries streamed one per
// NATS message aggregate per employee × code × period (held at intake,
// merged soon after), kept right as messages, corrections and tombstones
// arrive, through SIGKILLs at random moments. The harness and the
// scenario's helpers are the daemon suite's (daemon_test.go) and
// corrections_daemon_test.go's.
//
//	go test -run 'TestMergeDaemon' ./cmd/paysync/ -v

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

var (
	mergeSeed   = flag.Int64("merge.seed", 0, "TestMergeDaemon_SIGKILL: the seed of the first trial (0: from the clock)")
	mergeTrials = flag.Int("merge.trials", 2, "TestMergeDaemon_SIGKILL: trials, each with its own seed")
)

// newMergeHarness is a NATS daemon harness whose rules aggregate
// (testdata/corrections_daemon/rules.yaml).
func newMergeHarness(t *testing.T) *daemonHarness {
	t.Helper()
	h := newDaemonHarness(t, newNATSDriver(t), "merge")
	rules, err := filepath.Abs("testdata/corrections_daemon/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h.env["PAYSYNC_MAPPING"] = rules
	return h
}

// noAggregateRules writes rules with aggregate: false (one pay part per
// entry, no merge) and returns the file.
func noAggregateRules(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte("version: 1\naggregate: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// payrollUnits sums the units of every pay part payroll holds.
func payrollUnits(sb *sandbox.Server) decimal.Decimal {
	sum := decimal.Zero
	for _, c := range sb.State().Companies {
		for _, p := range c.PayParts {
			if p.Units.Valid {
				sum = sum.Add(p.Units.Decimal)
			}
		}
	}
	return sum
}

// mergeOnePerGroup says which groups payroll holds as more than one pay
// part ("" when each is one).
func mergeOnePerGroup(got map[string][]cdPart) string {
	var bad []string
	for g, ps := range got {
		if len(ps) != 1 {
			bad = append(bad, fmt.Sprintf("%s as %d pay parts %v", g, len(ps), ps))
		}
	}
	slices.Sort(bad)
	return strings.Join(bad, "; ")
}

// mergeWait waits until the stream drained and payroll holds want, one pay
// part per group, with no call under way; it returns payroll's pay parts.
func mergeWait(t *testing.T, h *daemonHarness, step string, want map[string]string) map[string][]cdPart {
	t.Helper()
	got := cdWaitTotals(t, h, &cdNATS{d: h.drv.(*natsDriver)}, step, want)
	if bad := mergeOnePerGroup(got); bad != "" {
		t.Fatalf("%s: want one pay part per employee × code of the period; payroll holds %s", step, bad)
	}
	return got
}

// TestMergeDaemon: NATS, one message per entry, two employees and two
// codes over several messages of one period: payroll holds one pay part
// per group with the exact total. A later message replaces its group's
// aggregate (a delete and a create); the others keep their payroll ids.
// The same messages again make no call. A correction and a tombstone by
// message keep the totals right. Held entries left by a graceful stop are
// merged by the next run.
func TestMergeDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	h := newMergeHarness(t)
	drv := h.drv.(*natsDriver)
	d := h.start(t)
	first := []paysync.Entry{
		cdEntry("m1", cdMette, "2026-11-02", "8", false),
		cdEntry("m2", cdMette, "2026-11-03", "2", false),
		cdEntry("m3", cdMette, "2026-11-04", "1.25", false),
		cdEntry("m4", cdLars, "2026-11-02", "5", false),
		cdEntry("m5", cdLars, "2026-11-05", "2.5", false),
		cdEntry("m6", cdMette, "2026-11-06", "3", true),
		cdEntry("m7", cdMette, "2026-11-09", "0.5", true),
	}
	drv.publish(t, first)
	before := mergeWait(t, h, "the first messages", map[string]string{cdMette + "|T1": "11.25", cdLars + "|T1": "7.5", cdMette + "|SYG": "3.5"})

	c0, d0 := cdWrites(h.sb)
	drv.publish(t, []paysync.Entry{cdEntry("m8", cdLars, "2026-11-10", "1", false)})
	after := mergeWait(t, h, "a later message", map[string]string{cdMette + "|T1": "11.25", cdLars + "|T1": "8.5", cdMette + "|SYG": "3.5"})
	for _, g := range []string{cdMette + "|T1", cdMette + "|SYG"} {
		if !slices.Equal(before[g], after[g]) {
			t.Errorf("%s, which the later message does not touch: %v became %v (want the same payroll id)", g, before[g], after[g])
		}
	}
	if c, d := cdWrites(h.sb); c-c0 != 1 || d-d0 != 1 {
		t.Errorf("a later message: %d create_pay_parts and %d delete_pay_parts calls, want 1 and 1", c-c0, d-d0)
	}

	c0, d0 = cdWrites(h.sb)
	drv.feedDuplicates(t, first)
	mergeWait(t, h, "the same messages again", map[string]string{cdMette + "|T1": "11.25", cdLars + "|T1": "8.5", cdMette + "|SYG": "3.5"})
	if c, d := cdWrites(h.sb); c != c0 || d != d0 {
		t.Errorf("the same messages again: %d create_pay_parts and %d delete_pay_parts calls, want none", c-c0, d-d0)
	}

	// m4 5 → 6 hours, m6 deleted.
	drv.publish(t, []paysync.Entry{cdEntry("m4", cdLars, "2026-11-02", "6", false), {ID: "m6", Deleted: true}})
	mergeWait(t, h, "a correction and a tombstone", map[string]string{cdMette + "|T1": "11.25", cdLars + "|T1": "9.5", cdMette + "|SYG": "0.5"})

	// Held when the graceful stop came: merged by the next run.
	drv.publish(t, []paysync.Entry{cdEntry("m9", cdMette, "2026-11-11", "2", false)})
	waitFor(t, "the stream drained", 30*time.Second, func() bool { return drv.drained(t) })
	d.stop(t)
	d = h.start(t)
	mergeWait(t, h, "after a restart", map[string]string{cdMette + "|T1": "13.25", cdLars + "|T1": "9.5", cdMette + "|SYG": "0.5"})
	d.stop(t)
	cdCorrectionUnits(t, h)
	if p := drv.parked(t); len(p) > 0 {
		t.Errorf("dead letters: %v", p)
	}
}

// TestMergeDaemon_SIGKILL: messages flow (one entry each, then corrections
// and tombstones of some) while merges run, and `paysync run` is killed
// with SIGKILL at random moments and started again; some create and
// delete replies are lost after payroll committed. In the end payroll
// holds exactly the totals, one pay part per employee × code, every
// trial.
func TestMergeDaemon_SIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	seed := *mergeSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	for trial := range *mergeTrials {
		s := seed + int64(trial)
		t.Run(fmt.Sprintf("seed_%d", s), func(t *testing.T) {
			t.Logf("rerun: go test -run 'TestMergeDaemon_SIGKILL' ./cmd/paysync/ -merge.seed %d -merge.trials 1 -v", s)
			mergeKillTrial(t, newRand(s))
		})
	}
}

func mergeKillTrial(t *testing.T, rng *rand.Rand) {
	h := newMergeHarness(t)
	h.env["PAYSYNC_BATCH_LINGER"] = "50ms"
	drv := h.drv.(*natsDriver)
	h.sb.SetFaults(
		sandbox.Fault{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 20 * time.Millisecond},
		sandbox.Fault{Kind: sandbox.FaultLatency, Op: "delete_pay_parts", Delay: 20 * time.Millisecond},
		sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts", Probability: 0.1},
		sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "delete_pay_parts", Probability: 0.1},
	)
	// 160 entries over 4 employees × 2 codes of November, then a
	// correction of every 7th and a tombstone of every 11th.
	emps := []string{cdMette, cdLars, cdSofie, cdAnders}
	var msgs []paysync.Entry
	want := map[string]decimal.Decimal{}
	latest := map[string]paysync.Entry{}
	hours := func(i int) string { return fmt.Sprintf("%d.%02d", 1+i%5, 25*(i%4)) }
	for i := range 160 {
		e := cdEntry(fmt.Sprintf("k%03d", i), emps[i%4], fmt.Sprintf("2026-11-%02d", 1+i%28), hours(i), i%3 == 0)
		msgs, latest[e.ID] = append(msgs, e), e
	}
	for i := 0; i < 160; i += 7 {
		e := latest[fmt.Sprintf("k%03d", i)]
		e.Hours = paysync.HoursFromSeconds(e.Hours.Seconds.IntPart() + 900)
		msgs, latest[e.ID] = append(msgs, e), e
	}
	for i := 3; i < 160; i += 11 {
		id := fmt.Sprintf("k%03d", i)
		msgs = append(msgs, paysync.Entry{ID: id, Deleted: true})
		delete(latest, id)
	}
	for _, e := range latest {
		code := "T1"
		if len(e.Tags) > 0 {
			code = "SYG"
		}
		k := e.EmployeeID + "|" + code
		want[k] = want[k].Add(e.Hours.Seconds.Div(decimal.NewFromInt(3600)))
	}
	wantS := map[string]string{}
	for k, v := range want {
		wantS[k] = v.String()
	}

	d := h.start(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		// In small groups with pauses between them, so that kills land
		// while messages still arrive and merges run.
		for start := 0; start < len(msgs); {
			n := 1 + rand.IntN(12)
			drv.publish(t, msgs[start:min(start+n, len(msgs))])
			start += n
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		}
	})
	kills := 2 + rng.IntN(3)
	for k := range kills {
		time.Sleep(time.Duration(150+rng.IntN(700)) * time.Millisecond)
		c, dl := cdWrites(h.sb)
		d.signal(t, syscall.SIGKILL)
		if !d.waitExit(10 * time.Second) {
			t.Fatal("paysync run did not die of SIGKILL")
		}
		t.Logf("kill %d: %d creates, %d deletes in payroll so far", k+1, c, dl)
		// A request the dead process sent may still be executed.
		time.Sleep(100 * time.Millisecond)
		drv.afterHardStop(t)
		d = h.start(t)
	}
	wg.Wait()
	h.sb.SetFaults()
	mergeWait(t, h, "after the kills", wantS)
	d.stop(t)
	cdCorrectionUnits(t, h)
	if p := drv.parked(t); len(p) > 0 {
		t.Errorf("dead letters: %v", p)
	}
}
