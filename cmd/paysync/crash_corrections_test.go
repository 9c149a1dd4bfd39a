package main

// Kill tests of corrections: an export is imported, then a corrected one
// (entries with other hours, entries deleted by tombstones), and `paysync
// import` of the corrected export is killed with SIGKILL at random moments
// (during the deletes of the replaced pay parts, between them and the
// creates, during the creates) and run again until it finishes. Payroll
// must then hold exactly the corrected totals.
//
//	go test -run Crash_Corrections ./cmd/paysync/ -crash.seed 3 -v   # one trial again

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// correctedExport is a corrected export of entries: Mette's entries in changed
// go from their hours to 9, Lars's in deleted are tombstones. Sofie's and
// Anders's entries are not touched.
type correctedExport struct {
	changed, deleted map[string]bool
	live             []crashEntry // the entries of the corrected export, with their new hours
	path             string
}

// correctEntries draws the correction of entries: some of Mette's
// entries changed, some of Lars's deleted.
func correctEntries(t *testing.T, rng *rand.Rand, entries []crashEntry, changes, deletes int) correctedExport {
	t.Helper()
	c := correctedExport{changed: map[string]bool{}, deleted: map[string]bool{}}
	var mette, lars []string
	for _, e := range entries {
		switch e.employee {
		case sandbox.EmpMetteHansen:
			mette = append(mette, e.id)
		case sandbox.EmpLarsNielsen:
			lars = append(lars, e.id)
		}
	}
	for len(c.changed) < changes {
		c.changed[mette[rng.IntN(len(mette))]] = true
	}
	for len(c.deleted) < deletes {
		c.deleted[lars[rng.IntN(len(lars))]] = true
	}
	// The same entries in the same order (their dates follow their
	// place), then the deleted ones' lines replaced by tombstones.
	v2 := slices.Clone(entries)
	for i, e := range v2 {
		if c.changed[e.id] {
			v2[i].hours, v2[i].units = "9", "9" // more than any hours of crashEntries: every changed total changes
		}
		if !c.deleted[e.id] {
			c.live = append(c.live, v2[i])
		}
	}
	c.path = writeEntries(t, v2)
	b, err := os.ReadFile(c.path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, e := range v2 {
		if c.deleted[e.id] {
			lines[i] = fmt.Sprintf(`{"id":%q,"deleted":true}`, e.id)
		}
	}
	if err := os.WriteFile(c.path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// crashMinutes reads the hours of a crashEntry ("7.5" or "0:20") as minutes.
func crashMinutes(t *testing.T, h string) int64 {
	t.Helper()
	if hh, mm, ok := strings.Cut(h, ":"); ok {
		return decimal.RequireFromString(hh).IntPart()*60 + decimal.RequireFromString(mm).IntPart()
	}
	return decimal.RequireFromString(h).Mul(decimal.NewFromInt(60)).IntPart()
}

// crashPayParts returns the pay parts entries make, as crashEntries (only
// employee and units matter): one per entry, or aggregated one per
// employee (all are T1), their hours summed and then rounded.
func crashPayParts(t *testing.T, entries []crashEntry, aggregate bool) []crashEntry {
	t.Helper()
	if !aggregate {
		return entries
	}
	sums := map[string]int64{}
	for _, e := range entries {
		sums[e.employee] += crashMinutes(t, e.hours)
	}
	var out []crashEntry
	for _, emp := range crashEmployees {
		if m, ok := sums[emp]; ok {
			u := decimal.NewFromInt(m).Div(decimal.NewFromInt(60)).Round(2)
			out = append(out, crashEntry{id: emp, employee: emp, units: u.String()})
		}
	}
	return out
}

// payrollIDsOfGroups returns, from the ledger, the payroll id of the
// created pay part live for each group (by crashGroupKey).
func payrollIDsOfGroups(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range ledgerGroups(t, openLedger(t, path)) {
		for _, lp := range g.Live {
			if lp.State == paysync.PartCreated {
				out[crashGroupKey(g)] = lp.PayrollID
			}
		}
	}
	return out
}

// checkLedgerCorrected: everything the corrected import recorded is in the
// desired state and no group is left to plan; every batch is finished;
// every created pay part is in payroll once with its content, none a
// seeded one, and is the one live pay part of its group; every pay part of
// payroll that is not seeded is recorded; every group with an entry of the
// corrected export holds exactly one created pay part, a group of deleted
// entries only none; a group the correction did not touch kept its payroll
// id, one with a corrected or deleted entry has a new one; and the pay
// parts replaced are gone from payroll.
func (c *crashEnv) checkLedgerCorrected(t *testing.T, corr correctedExport, entries []crashEntry, aggregate bool, before map[string]string, seeded map[string]paysync.PayPartInput, pps []paysync.PayPart) {
	t.Helper()
	l := openLedger(t, c.ledger)
	pending, err := l.Unabsorbed(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) > 0 {
		t.Errorf("%d entry versions are still not in the desired state after the import finished (a run died after committing the corrected export and before taking them in, and the same file again does not)", len(pending))
		return // the rest follows from it
	}
	gs := ledgerGroups(t, l)
	for _, g := range gs {
		if len(g.Live) == 0 && g.Lines > 0 {
			t.Errorf("group %s: %d lines count, and no pay part is live for it", crashGroupKey(g), g.Lines)
		}
	}
	byPart := groupsByLivePart(t, gs)
	inPayroll := map[string]paysync.PayPart{}
	for _, p := range pps {
		inPayroll[p.ID] = p
	}
	oldIDs := map[string]bool{}
	for _, id := range before {
		oldIDs[id] = true
	}
	// The groups with an entry corrected or deleted: their pay part of the
	// first import is replaced.
	touched := map[string]bool{}
	for _, e := range entries {
		if corr.changed[e.id] || corr.deleted[e.id] {
			touched[entryGroupKey(e, aggregate)] = true
		}
	}
	live := map[string]bool{} // groups with an entry of the corrected export
	for _, e := range corr.live {
		live[entryGroupKey(e, aggregate)] = true
	}
	ours := map[string]bool{}
	behind := map[string]int{} // created pay parts per group
	for _, d := range ledgerItems(t, l) {
		created := 0
		for _, it := range d.Items {
			k := ppKey(it.EmployeeID, it.Code, it.Numbers)
			switch it.State {
			case paysync.PartCreated:
				created++
			case paysync.PartDeleted, paysync.PartGone:
				if _, ok := inPayroll[it.PayrollID]; ok && it.PayrollID != "" {
					t.Errorf("batch %d pay part %d (%s) is %s, but payroll still holds %s:%s", d.ID, it.ID, k, it.State, it.PayrollID, attemptLog(d))
				}
				if it.State == paysync.PartGone {
					// Nothing is deleted by hand here: paysync deleted it.
					t.Errorf("batch %d pay part %d (%s) was deleted by paysync, but the ledger records it as gone (deleted in payroll by someone else): "+
						"a run died after sending delete_pay_parts and before recording its outcome, and what it sent was not recorded first:%s", d.ID, it.ID, k, attemptLog(d))
				}
				continue
			default:
				t.Errorf("batch %d (%s) pay part %d (%s) is %s:%s", d.ID, d.State, it.ID, k, it.State, attemptLog(d))
				continue
			}
			if _, isSeeded := seeded[it.PayrollID]; isSeeded {
				t.Errorf("batch %d pay part %d claimed the pay part %s seeded by hand:%s", d.ID, it.ID, it.PayrollID, attemptLog(d))
			}
			switch p, ok := inPayroll[it.PayrollID]; {
			case !ok:
				t.Errorf("batch %d pay part %d (%s): payroll id %q is not in payroll:%s", d.ID, it.ID, k, it.PayrollID, attemptLog(d))
			case !p.Matches(it.PayPartInput):
				t.Errorf("batch %d pay part %d (%s) is recorded as payroll's %s, which is %s", d.ID, it.ID, k, it.PayrollID, ppKey(p.EmployeeID, p.Code, p.Numbers))
			case ours[it.PayrollID]:
				t.Errorf("payroll id %s is recorded for two pay parts", it.PayrollID)
			}
			ours[it.PayrollID] = true
			g, ok := byPart[it.ID]
			if !ok {
				t.Errorf("batch %d pay part %d (%s) is created but live in no group (replaced, and still in payroll):%s", d.ID, it.ID, k, attemptLog(d))
				continue
			}
			key := crashGroupKey(g)
			behind[key]++
			// A pay part of a group the correction did not touch is the one
			// the first import created; one that replaces is new.
			switch was := before[key]; {
			case !touched[key] && was != it.PayrollID:
				t.Errorf("pay part %d (%s) of group %s, which the correction does not touch, is payroll's %s, was %s", it.ID, k, key, it.PayrollID, was)
			case touched[key] && oldIDs[it.PayrollID]:
				t.Errorf("pay part %d (%s) replacing one of the first import in group %s is payroll's %s, of the first import", it.ID, k, key, it.PayrollID)
			}
		}
		if d.State != paysync.BatchCreated && !(d.State == paysync.BatchReverted && created == 0) {
			t.Errorf("batch %d is %s with %d pay parts created (last error %q):%s", d.ID, d.State, created, d.LastError, attemptLog(d))
		}
	}
	for _, e := range entries {
		key := entryGroupKey(e, aggregate)
		switch {
		case live[key] && behind[key] != 1:
			t.Errorf("group %s (entry %s) holds %d created pay parts, want 1", key, e.id, behind[key])
		case !live[key] && behind[key] != 0:
			t.Errorf("group %s of deleted entries only (entry %s) holds %d created pay parts, want none", key, e.id, behind[key])
		}
	}
	for key := range touched {
		if _, ok := inPayroll[before[key]]; ok {
			t.Errorf("the pay part %s of group %s, which the correction changed, is still in payroll", before[key], key)
		}
	}
	for _, p := range pps {
		if _, isSeeded := seeded[p.ID]; !isSeeded && !ours[p.ID] {
			t.Errorf("pay part %s (%s) in payroll is neither seeded nor recorded in the ledger (a duplicate or an orphan)", p.ID, ppKey(p.EmployeeID, p.Code, p.Numbers))
		}
	}
}

// correctionPhase says, from the ledger, where a run of the corrected
// export was killed: before its import was committed, after it with the
// plan not applied, during the deletes of the pay parts the plan replaces,
// between those and the creates, during the creates, or after.
func (c *crashEnv) correctionPhase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	l := openLedger(t, c.ledger)
	if len(importsOf(t, l)) < 2 {
		return "before the commit"
	}
	bs, err := l.ListBatches(ctx, ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// The corrected import's plan: its correction unit's batches.
	var unit []ledger.Batch
	for _, b := range bs {
		if b.Correction != 0 && b.SourceID == 2 {
			unit = append(unit, b)
		}
	}
	if len(unit) == 0 {
		return "committed, plan not applied"
	}
	left, _, err := l.SupersededBy(ctx, unit[0].Correction, unit[0].CompanyID)
	if err != nil {
		t.Fatal(err)
	}
	created, begun := 0, 0
	for _, b := range unit {
		if b.State == paysync.BatchCreated {
			created++
		}
		if b.Attempts > 0 {
			begun++
		}
	}
	switch {
	case len(left) > 0:
		return "deletes"
	case begun == 0:
		return "between the deletes and the creates"
	case created < len(unit):
		return "creates"
	}
	return "after the creates"
}

// TestCrash_Corrections imports an export, then kills `paysync import` of
// a corrected one (latency on the deletes, the creates and the reads,
// sometimes mutations dropped after payroll executed them) at random
// moments and runs it again until it finishes: payroll must hold exactly
// the corrected totals next to pay parts seeded by hand that are identical
// to ones the correction deletes and creates, the pay parts of groups the
// correction does not touch keep their payroll ids, and the ledger agrees.
// Odd seeds import one pay part per entry (many deletes and creates to
// land in), even ones aggregated (one pay part per employee replaced).
func TestCrash_Corrections(t *testing.T) {
	var stats crashStats
	stats.start(t)
	var mu sync.Mutex
	phases := map[string]int{}
	t.Cleanup(func() { t.Logf("kills by phase of the correction: %v", phases) })
	forEachCrashTrial(t, func(t *testing.T, seed int64) {
		rng := newRand(seed)
		c := newCrashEnv(t, sandbox.Options{Seed: seed})
		aggregate := seed%2 == 0
		flags := []string{"import"}
		if !aggregate {
			flags = append(flags, "--no-aggregate")
		}
		entries := crashEntries(120)
		c.finish(t, importRetryable, append(flags, writeEntries(t, entries))...)
		c.checkPayroll(t, crashPayParts(t, entries, aggregate), nil)
		before := payrollIDsOfGroups(t, c.ledger)
		if t.Failed() {
			t.FailNow()
		}

		corr := correctEntries(t, rng, entries, 6+rng.IntN(8), 3+rng.IntN(4))
		want := crashPayParts(t, corr.live, aggregate)
		// Pay parts typed in by hand, identical to ones the correction
		// creates and to one it deletes: never to be claimed or deleted.
		var lookalikes []crashEntry
		for _, p := range want {
			if p.employee == sandbox.EmpMetteHansen && (aggregate || p.units == "9") {
				lookalikes = append(lookalikes, p)
				break
			}
		}
		for _, p := range crashPayParts(t, entries, aggregate) {
			if p.employee == sandbox.EmpLarsNielsen && (aggregate || corr.deleted[p.id]) {
				lookalikes = append(lookalikes, p)
				break
			}
		}
		seeded := c.seedIdentical(t, rng, lookalikes, 3)

		// Slow enough for kills to land in the calls: a delete per batch
		// of the first import with a replaced pay part (a read before
		// each), a create per batch of new pay parts; aggregated, one of
		// each, slower.
		extra, window := 40*time.Millisecond, 600*time.Millisecond
		if aggregate {
			extra, window = 150*time.Millisecond, 500*time.Millisecond
		}
		drops := c.slowMutations(rng, "delete_pay_parts", extra, 10*time.Millisecond)
		createDrops := rng.IntN(2) == 0
		faults := append(c.sb.Faults(),
			sandbox.Fault{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 20 * time.Millisecond},
			sandbox.Fault{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: extra, Probability: 0.5})
		if createDrops {
			faults = append(faults, sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts", Probability: 0.2})
		}
		c.sb.SetFaults(faults...)
		args := append(slices.Clone(flags), corr.path)
		t.Logf("aggregate %v; %d entries changed, %d deleted; drops after commit: deletes %v, creates %v", aggregate, len(corr.changed), len(corr.deleted), drops, createDrops)
		stats.kills.Add(c.killRuns(t, rng, 2+rng.IntN(3), window, func(t *testing.T, r crashRun) {
			checkImportRun(t, r)
			if r.killed {
				ph := c.correctionPhase(t)
				t.Logf("killed: %s", ph)
				mu.Lock()
				phases[ph]++
				mu.Unlock()
			}
		}, args...))
		c.finish(t, importRetryable, args...)
		stats.windows.Add(c.windowHits)
		c.sb.SetFaults()

		pps := c.checkPayroll(t, want, seeded)
		c.checkLedgerCorrected(t, corr, entries, aggregate, before, seeded, pps)

		// The same corrected export again: nothing to do, no call.
		st := c.sb.State()
		r := c.finish(t, func(crashRun) bool { return false }, args...)
		after := c.sb.State()
		for _, op := range []string{"create_pay_parts", "delete_pay_parts"} {
			if n := after.Counters.Requests[op] - st.Counters.Requests[op]; n != 0 {
				t.Errorf("the corrected export again made %d %s calls:\n%s", n, op, r)
			}
		}
	})
}
