package ledger

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// TestDesired_VersionsLinesTotals: intake holds mapped entries (no pay
// part); absorbing them gives each a version and its lines, and each group
// (company × employee × code × rate × period, not the entry) the exact sum
// of the lines that count: three thirds of an hour are one hour, rounded
// once. Absorbing the same thing twice (another process took it in
// meanwhile) counts it once; the reconciler plans one pay part per group,
// and planning again changes nothing.
func TestDesired_VersionsLinesTotals(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	third := func(line int, id, date string) paysync.Entry {
		return corr("a.ndjson", line, id, "A", "X", date, "0:20:00")
	}
	c := hold(t, l, "a.ndjson", []paysync.Entry{
		third(1, "x1", "2026-11-02"), third(2, "x2", "2026-11-15"), third(3, "x3", "2026-11-30"),
		third(4, "x4", "2026-12-01"), // another period: another group
		corr("a.ndjson", 5, "y1", "B", "Y", "2026-11-02", "5"),
	}, nil)
	if len(c.BatchIDs) != 0 {
		t.Fatalf("intake made batches %v", c.BatchIDs)
	}
	noPayParts(t, l, "held")
	if got := query(t, l, `SELECT count(*) FROM versions`); got != "0" {
		t.Errorf("%s versions before the reconciler took anything in", got)
	}

	us, err := l.Unabsorbed(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range us {
		var e paysync.Entry
		a := mapped(t, u)
		if err := json.Unmarshal(u.Data, &e); err != nil {
			t.Fatal(err)
		}
		if u.Version != 0 || u.Correction != 0 || u.SourceID != c.SourceID || u.Source != "a.ndjson" || len(a.Lines) != 1 {
			t.Errorf("unabsorbed %+v", u)
		}
		ids = append(ids, e.ID)
	}
	if want := []string{"x1", "x2", "x3", "x4", "y1"}; !slices.Equal(ids, want) {
		t.Fatalf("Unabsorbed = %v, want %v (in the order intake recorded them)", ids, want)
	}
	as := make([]Absorbed, len(us))
	for i, u := range us {
		as[i] = mapped(t, u)
	}
	for range 2 { // the second time, another process took it all in before
		if err := l.Absorb(ctx, as); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"A|X|T1|2026-11: 3600 s (3) live []",
		"A|X|T1|2026-12: 1200 s (1) live []",
		"B|Y|T1|2026-11: 18000 s (1) live []",
	}
	checkTotals(t, l, "absorbed (twice)", want...)
	if got := query(t, l, `SELECT count(*), sum(l.counts) FROM versions v JOIN lines l ON l.version = v.id`); got != "5 5" {
		t.Errorf("versions with lines, counting: %s, want 5 5", got)
	}
	if got := query(t, l, `SELECT count(*) FROM entries WHERE note = 'held' OR status <> 'mapped'`); got != "0" {
		t.Errorf("%s entries still held (or not mapped)", got)
	}
	if us, err := l.Unabsorbed(ctx, 100); err != nil || len(us) != 0 {
		t.Errorf("Unabsorbed after Absorb = %d, %v", len(us), err)
	}
	if n, err := l.Waiting(ctx); err != nil || n != 0 {
		t.Errorf("Waiting = %d, %v", n, err)
	}
	if gs := allGroups(t, l, GroupFilter{Dirty: true}); len(gs) != 3 || !gs[0].FromHours {
		t.Errorf("dirty groups %+v, want the 3, from hours", gs)
	}

	// One pay part per group: 3 × 1200 s is 1 hour (not 3 × 0.33).
	bs := reconcile(t, l, c.SourceID)
	if len(bs) != 2 {
		t.Fatalf("batches %v, want one per company", bs)
	}
	checkPaid(t, l, "reconciled")
	checkTotals(t, l, "reconciled",
		"A|X|T1|2026-11: 3600 s (3) live [1@1:pending]",
		"A|X|T1|2026-12: 1200 s (1) live [0.33@1:pending]",
		"B|Y|T1|2026-11: 18000 s (1) live [5@2:pending]")
	if gs := allGroups(t, l, GroupFilter{Dirty: true}); len(gs) != 0 {
		t.Errorf("dirty after the plan: %+v", gs)
	}
	// Nothing changed: nothing to plan, nothing recorded.
	if bs := reconcile(t, l, 0); len(bs) != 0 {
		t.Errorf("a second reconcile recorded batches %v", bs)
	}
	settle(t, l, bs)
	checkPaid(t, l, "sent")
}

// TestDesired_RevertReplayImport: reverting an import is an undo: its
// versions stop counting and each entry falls back to its version from an
// earlier import still counting (a reverted correction gives back the
// hours as they were); an entry a later import lists keeps counting in
// that version. Replaying it counts it again. The same command twice
// changes nothing; after each reconcile payroll holds the desired total
// as one pay part per group, whatever was sent before.
func TestDesired_RevertReplayImport(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	step := func(name string, source int64, want ...string) {
		t.Helper()
		settle(t, l, reconcile(t, l, source))
		checkPaid(t, l, name)
		checkTotals(t, l, name, want...)
	}
	e1 := corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8")
	e2 := corr("v1.ndjson", 2, "e2", "A", "X", "2026-11-03", "2")
	first := hold(t, l, "v1.ndjson", []paysync.Entry{e1, e2}, nil)
	step("first import", first.SourceID, "A|X|T1|2026-11: 36000 s (2) live [10@1:created]")
	second := hold(t, l, "v2.ndjson", nil, []paysync.Entry{corr("v2.ndjson", 1, "e1", "A", "X", "2026-11-02", "8.5")})
	step("a correction", second.SourceID, "A|X|T1|2026-11: 37800 s (2) live [10.5@2:created]")

	if n := revert(t, l, Target{Import: second.SourceID}); n != 1 {
		t.Errorf("revert of the correction touched %d entries, want 1", n)
	}
	step("the correction reverted", second.SourceID, "A|X|T1|2026-11: 36000 s (2) live [10@3:created]")
	before := allGroups(t, l, GroupFilter{})
	revert(t, l, Target{Import: second.SourceID})
	if after := allGroups(t, l, GroupFilter{}); after[0].Version != before[0].Version || len(allGroups(t, l, GroupFilter{Dirty: true})) != 0 {
		t.Errorf("reverting again changed the group: version %d -> %d", before[0].Version, after[0].Version)
	}
	if bs := reconcile(t, l, second.SourceID); len(bs) != 0 {
		t.Errorf("reverting again recorded batches %v", bs)
	}

	replay(t, l, Target{Import: second.SourceID})
	step("the correction replayed", second.SourceID, "A|X|T1|2026-11: 37800 s (2) live [10.5@4:created]")

	// The first import reverted: e1 counts in the correction's version
	// (a later import lists it), e2 no longer counts.
	revert(t, l, Target{Import: first.SourceID})
	step("the first import reverted", first.SourceID, "A|X|T1|2026-11: 30600 s (1) live [8.5@5:created]")
	replay(t, l, Target{Import: first.SourceID})
	step("the first import replayed", first.SourceID, "A|X|T1|2026-11: 37800 s (2) live [10.5@6:created]")

	// A tombstone, then its import reverted: the hours come back.
	third := hold(t, l, "v3.ndjson", nil, []paysync.Entry{corr("v3.ndjson", 1, "e2", "", "", "", "deleted")})
	step("e2 deleted", third.SourceID, "A|X|T1|2026-11: 30600 s (1) live [8.5@7:created]")
	revert(t, l, Target{Import: third.SourceID})
	step("the tombstone reverted", third.SourceID, "A|X|T1|2026-11: 37800 s (2) live [10.5@8:created]")
	// Every pay part replaced was deleted from payroll first: only the
	// last is held.
	if got := query(t, l, `SELECT count(*) FROM pay_parts WHERE state = 'created'`); got != "1" {
		t.Errorf("%s pay parts created in payroll, want 1", got)
	}
}

// TestDesired_ExcludeBatchAndPeriod: reverting a batch excludes the
// entries behind its pay parts (their groups' counting entries), reverting
// a period (of a company) those of the period; replaying them counts them
// again. A revert of a period that overlaps a closed one is refused and
// changes nothing.
func TestDesired_ExcludeBatchAndPeriod(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	step := func(name string, want ...string) {
		t.Helper()
		settle(t, l, reconcile(t, l, 0))
		checkPaid(t, l, name)
		checkTotals(t, l, name, want...)
	}
	first := hold(t, l, "v1.ndjson", []paysync.Entry{
		corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8"),
		corr("v1.ndjson", 2, "e2", "B", "Y", "2026-11-02", "5"),
		corr("v1.ndjson", 3, "e3", "A", "X", "2026-12-01", "4"),
	}, nil)
	bs := reconcile(t, l, first.SourceID)
	settle(t, l, bs)
	if len(bs) != 2 {
		t.Fatalf("batches %v, want A's and B's", bs)
	}
	bB := bs[1]
	checkTotals(t, l, "imported",
		"A|X|T1|2026-11: 28800 s (1) live [8@1:created]",
		"B|Y|T1|2026-11: 18000 s (1) live [5@2:created]",
		"A|X|T1|2026-12: 14400 s (1) live [4@1:created]")

	if n, err := l.TargetEntries(ctx, Target{Batches: []int64{bB}}, false); err != nil || n != 1 {
		t.Errorf("TargetEntries(batch %d) = %d, %v; want 1", bB, n, err)
	}
	if n := revert(t, l, Target{Batches: []int64{bB}}); n != 1 {
		t.Errorf("revert of batch %d touched %d entries, want 1", bB, n)
	}
	step("B's batch reverted",
		"A|X|T1|2026-11: 28800 s (1) live [8@1:created]",
		"B|Y|T1|2026-11: - s (0) live []",
		"A|X|T1|2026-12: 14400 s (1) live [4@1:created]")
	revert(t, l, Target{Batches: []int64{bB}})
	if gs := allGroups(t, l, GroupFilter{Dirty: true}); len(gs) != 0 {
		t.Errorf("reverting the batch again: dirty %+v", gs)
	}
	if n := replay(t, l, Target{Batches: []int64{bB}}); n != 1 {
		t.Errorf("replay of batch %d touched %d entries, want 1", bB, n)
	}
	step("B's batch replayed",
		"A|X|T1|2026-11: 28800 s (1) live [8@1:created]",
		"B|Y|T1|2026-11: 18000 s (1) live [5@4:created]",
		"A|X|T1|2026-12: 14400 s (1) live [4@1:created]")

	nov := month(t, "2026-11-01")
	revert(t, l, Target{Period: &nov})
	step("November reverted",
		"A|X|T1|2026-11: - s (0) live []",
		"B|Y|T1|2026-11: - s (0) live []",
		"A|X|T1|2026-12: 14400 s (1) live [4@1:created]")
	replay(t, l, Target{Period: &nov, Company: "A"})
	step("November replayed for A",
		"A|X|T1|2026-11: 28800 s (1) live [8@7:created]",
		"B|Y|T1|2026-11: - s (0) live []",
		"A|X|T1|2026-12: 14400 s (1) live [4@1:created]")
	replay(t, l, Target{Period: &nov})
	step("November replayed",
		"A|X|T1|2026-11: 28800 s (1) live [8@7:created]",
		"B|Y|T1|2026-11: 18000 s (1) live [5@8:created]",
		"A|X|T1|2026-12: 14400 s (1) live [4@1:created]")

	if _, err := l.ClosePeriod(ctx, nov, "payroll run"); err != nil {
		t.Fatal(err)
	}
	before := dump(t, l)
	if _, err := l.Revert(ctx, Target{Period: &nov}); !errors.Is(err, ErrClosedPeriod) {
		t.Errorf("revert of a closed period = %v, want ErrClosedPeriod", err)
	}
	if _, err := l.Replay(ctx, Target{Period: &nov, Company: "B"}); !errors.Is(err, ErrClosedPeriod) {
		t.Errorf("replay of a closed period = %v, want ErrClosedPeriod", err)
	}
	if after := dump(t, l); after != before {
		t.Errorf("a refused period operation changed the ledger:\n%s\nvs\n%s", before, after)
	}
}

// TestApplyPlan_Stale: a plan recorded against a group that changed since
// it was read (a new version counted, other live pay parts, a live pay
// part in a batch being sent, its period closed) is refused for that group
// (counted stale, left dirty, nothing recorded), so that what payroll gets
// always matches the desired state it was planned from.
func TestApplyPlan_Stale(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	first := hold(t, l, "v1.ndjson", []paysync.Entry{corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8")}, nil)
	absorbAll(t, l)
	plan := planOf(t, l)
	stale := func(name string, plan map[string][]GroupChange, want int) {
		t.Helper()
		before := dump(t, l)
		bs, n := applyPlan(t, l, first.SourceID, plan)
		if n != want || len(bs) != 0 {
			t.Errorf("%s: ApplyPlan = batches %v, %d stale; want none, %d stale", name, bs, n, want)
		}
		if after := dump(t, l); after != before {
			t.Errorf("%s: a stale plan changed the ledger:\n%s\nvs\n%s", name, before, after)
		}
		if gs := allGroups(t, l, GroupFilter{Dirty: true}); len(gs) != 1 {
			t.Errorf("%s: dirty groups %+v, want the group still dirty", name, gs)
		}
	}

	// A correction counted after the plan was read.
	hold(t, l, "v2.ndjson", nil, []paysync.Entry{corr("v2.ndjson", 1, "e1", "A", "X", "2026-11-02", "9")})
	absorbAll(t, l)
	stale("a new version", plan, 1)
	bs, n := applyPlan(t, l, first.SourceID, planOf(t, l))
	if n != 0 || len(bs) != 1 {
		t.Fatalf("planned again: batches %v, %d stale", bs, n)
	}
	checkPaid(t, l, "planned again")

	// Planned on other live pay parts than there are.
	hold(t, l, "v3.ndjson", nil, []paysync.Entry{corr("v3.ndjson", 1, "e1", "A", "X", "2026-11-02", "10")})
	absorbAll(t, l)
	plan = planOf(t, l)
	wrong := map[string][]GroupChange{"A": {plan["A"][0]}}
	wrong["A"][0].Replace = nil
	stale("other live pay parts", wrong, 1)

	// A live pay part in a batch being sent: its outcome is not known.
	att, err := l.BeginAttempt(ctx, bs[0], paysync.AttemptCreate, 1)
	if err != nil {
		t.Fatal(err)
	}
	stale("a batch being sent", plan, 1)
	items := mustItems(t, l, bs[0])
	if err := l.RecordCreated(ctx, bs[0], att, map[int64]string{items[0].ID: "p1"}, paysync.AttemptOK); err != nil {
		t.Fatal(err)
	}
	plan = planOf(t, l)

	// Its period closed after the plan was read.
	if _, err := l.ClosePeriod(ctx, month(t, "2026-11-01"), ""); err != nil {
		t.Fatal(err)
	}
	stale("a closed period", plan, 1)
	if _, err := l.ReopenPeriod(ctx, month(t, "2026-11-01")); err != nil {
		t.Fatal(err)
	}
	if bs, n := applyPlan(t, l, first.SourceID, plan); n != 0 || len(bs) != 1 {
		t.Errorf("reopened: batches %v, %d stale; want the plan recorded", bs, n)
	}
	checkPaid(t, l, "reopened")
}

// TestFreeze_ClosedPeriod: a period closed after a plan was recorded is
// frozen: before a unit's batches are sent (FreezeUnit, as the deliverer
// does) its new pay parts there are not sent and the pay parts it replaces
// there are not deleted (they stay live); other periods go on. Once opened
// again, the next reconcile catches up.
func TestFreeze_ClosedPeriod(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	nov := month(t, "2026-11-01")
	first := hold(t, l, "v1.ndjson", []paysync.Entry{
		corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8"),
		corr("v1.ndjson", 2, "e2", "A", "X", "2026-12-01", "3"),
	}, nil)
	bs := reconcile(t, l, first.SourceID)
	if _, err := l.ClosePeriod(ctx, nov, "payroll run"); err != nil {
		t.Fatal(err)
	}
	if err := l.FreezeUnit(ctx, mustBatch(t, l, bs[0]).Correction); err != nil {
		t.Fatal(err)
	}
	if got := query(t, l, `SELECT units, state, error FROM pay_parts ORDER BY id`); got != "8 deleted not sent: its period was closed after it was planned\n3 pending " {
		t.Errorf("pay parts:\n%s", got)
	}
	sendAll(t, l, bs[0]) // December only
	checkTotals(t, l, "November closed before its pay part was sent",
		"A|X|T1|2026-11: 28800 s (1) live []",
		"A|X|T1|2026-12: 10800 s (1) live [3@1:created]")
	if gs := allGroups(t, l, GroupFilter{}); !gs[0].Frozen || gs[1].Frozen {
		t.Errorf("frozen: %v %v, want November only", gs[0].Frozen, gs[1].Frozen)
	}
	if bs := reconcile(t, l, 0); len(bs) != 0 {
		t.Errorf("a closed period was planned: batches %v", bs)
	}

	if _, err := l.ReopenPeriod(ctx, nov); err != nil {
		t.Fatal(err)
	}
	settle(t, l, reconcile(t, l, 0))
	checkPaid(t, l, "reopened")
	checkTotals(t, l, "reopened",
		"A|X|T1|2026-11: 28800 s (1) live [8@2:created]",
		"A|X|T1|2026-12: 10800 s (1) live [3@1:created]")

	// A correction of both periods planned, then November closed: its
	// replaced pay part is not deleted (it stays live), its new one not
	// sent; December's change goes through.
	hold(t, l, "v2.ndjson", nil, []paysync.Entry{
		corr("v2.ndjson", 1, "e1", "A", "X", "2026-11-02", "9"),
		corr("v2.ndjson", 2, "e2", "A", "X", "2026-12-01", "4"),
	})
	bs = reconcile(t, l, 0)
	unit := mustBatch(t, l, bs[0]).Correction
	if _, err := l.ClosePeriod(ctx, nov, ""); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second changes nothing
		if err := l.FreezeUnit(ctx, unit); err != nil {
			t.Fatal(err)
		}
	}
	if _, order, err := l.SupersededBy(ctx, unit, "A"); err != nil || !slices.Equal(order, []int64{1}) {
		t.Errorf("SupersededBy = %v, %v; want only December's pay part (batch 1)", order, err)
	}
	settle(t, l, bs)
	checkTotals(t, l, "November closed before the correction was sent",
		"A|X|T1|2026-11: 32400 s (1) live [8@2:created]",
		"A|X|T1|2026-12: 14400 s (1) live [4@3:created]")
	if got := query(t, l, `SELECT count(*) FROM pay_parts WHERE state = 'created'`); got != "2" {
		t.Errorf("%s pay parts in payroll, want 2 (one per group)", got)
	}
	if _, err := l.ReopenPeriod(ctx, nov); err != nil {
		t.Fatal(err)
	}
	settle(t, l, reconcile(t, l, 0))
	checkPaid(t, l, "reopened again")
	checkTotals(t, l, "reopened again",
		"A|X|T1|2026-11: 32400 s (1) live [9@4:created]",
		"A|X|T1|2026-12: 14400 s (1) live [4@3:created]")
}

// TestFreeze_AtBegin: a period closed after FreezeUnit ran, just before a
// call: BeginAttempt (a create) and BeginSupersedeDelete refuse
// (ErrBatchChanged) and send nothing there; the sender reads the batch
// again and must find the freeze recorded (new pay part not sent, replaced
// one live again), or it is refused the same way for ever.
func TestFreeze_AtBegin(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := t.Context()
	nov := month(t, "2026-11-01")
	first := hold(t, l, "v1.ndjson", []paysync.Entry{
		corr("v1.ndjson", 1, "e1", "A", "X", "2026-11-02", "8"),
		corr("v1.ndjson", 2, "e2", "A", "X", "2026-12-01", "3"),
	}, nil)
	settle(t, l, reconcile(t, l, first.SourceID))
	hold(t, l, "v2.ndjson", nil, []paysync.Entry{
		corr("v2.ndjson", 1, "e1", "A", "X", "2026-11-02", "9"),
		corr("v2.ndjson", 2, "e2", "A", "X", "2026-12-01", "4"),
	})
	bs := reconcile(t, l, 0)
	unit := mustBatch(t, l, bs[0]).Correction
	if err := l.FreezeUnit(ctx, unit); err != nil { // nothing closed yet
		t.Fatal(err)
	}
	if _, err := l.ClosePeriod(ctx, nov, ""); err != nil {
		t.Fatal(err)
	}
	var bugs []string

	byBatch, order, err := l.SupersededBy(ctx, unit, "A")
	if err != nil || len(order) != 1 || len(byBatch[order[0]]) != 2 {
		t.Fatalf("SupersededBy = %v, %v", byBatch, err)
	}
	if _, err := l.BeginSupersedeDelete(ctx, order[0], 2); !errors.Is(err, ErrBatchChanged) {
		t.Fatalf("BeginSupersedeDelete with a pay part of a period closed since = %v, want ErrBatchChanged", err)
	}
	if got := query(t, l, `SELECT count(*) FROM attempts WHERE op = 'delete'`); got != "0" {
		t.Errorf("%s delete attempts recorded, want none", got)
	}
	byBatch, order, _ = l.SupersededBy(ctx, unit, "A")
	if n := len(byBatch[order[0]]); n != 1 {
		bugs = append(bugs, fmt.Sprintf("BeginSupersedeDelete: read again, %d pay parts to delete, want 1 (November's left live)", n))
	} else {
		deleteSuperseded(t, l, unit)
	}

	if _, err := l.BeginAttempt(ctx, bs[0], paysync.AttemptCreate, 2); !errors.Is(err, ErrBatchChanged) {
		t.Fatalf("BeginAttempt with a pay part of a period closed since = %v, want ErrBatchChanged", err)
	}
	if b := mustBatch(t, l, bs[0]); b.Attempts != 0 || b.State != paysync.BatchPending {
		t.Errorf("batch after the refused BeginAttempt = %+v, want pending, no attempt", b)
	}
	if b := mustBatch(t, l, bs[0]); b.Pending != 1 {
		bugs = append(bugs, fmt.Sprintf("BeginAttempt: read again, %d pay parts pending, want 1 (November's not sent)", b.Pending))
	}
	if len(bugs) > 0 {
		// The freeze commits before the attempt's transaction (a refusal
		// there rolled it back).
		t.Fatalf("the freeze did not hold: %s", strings.Join(bugs, "; "))
	}
	sendAll(t, l, bs[0])
	checkTotals(t, l, "frozen at the calls",
		"A|X|T1|2026-11: 32400 s (1) live [8@1:created]",
		"A|X|T1|2026-12: 14400 s (1) live [4@2:created]")
}

// legacyLedger copies the ledger paysync 313bf20 wrote (before the
// desired state, schema 12; see its README) into a temporary directory
// with mode 0600 (never opened in place: it would be migrated there).
func legacyLedger(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "cmd", "paysync", "testdata", "legacy-313bf20", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// legacyLines is what the rules made of a version from before the desired
// state, read back from the pay parts its entry was paid through: a line
// per pay part (the live ones; without one, those it had), in the pay
// part's group and the entry's month. The pay part's numbers go to its
// first entry, so that a group's total is what its pay parts hold.
func legacyLines(t *testing.T, l *Ledger, u Unabsorbed) []NewLine {
	t.Helper()
	var e struct {
		Date string `json:"date"`
	}
	if err := json.Unmarshal(u.Data, &e); err != nil {
		t.Fatal(err)
	}
	rows, err := l.db.QueryContext(t.Context(), `SELECT p.company_id, p.employee_id, p.employee_name, p.code, coalesce(p.rate, '-'), p.units, p.amount,
			(SELECT min(pe2.entry_id) FROM pay_part_entries pe2 WHERE pe2.pay_part_id = p.id) = ?,
			p.state = 'created' AND p.superseded_by IS NULL AND b.state NOT IN ('reverted', 'reverting')
		FROM pay_parts p JOIN pay_part_entries pe ON pe.pay_part_id = p.id JOIN batches b ON b.id = p.batch_id
		WHERE pe.entry_id = ? ORDER BY p.id`, u.Entry, u.Entry)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var live, all []NewLine
	for rows.Next() {
		var ln NewLine
		var units, amount sql.NullString
		var first, isLive bool
		if err := rows.Scan(&ln.Group.Company, &ln.Group.Employee, &ln.EmployeeName, &ln.Group.Code, &ln.Group.Rate, &units, &amount, &first, &isLive); err != nil {
			t.Fatal(err)
		}
		ln.Group.Period = month(t, e.Date)
		ln.Units, ln.Amount = textDec(units), textDec(amount)
		if !first {
			zero := func(d decimal.NullDecimal) decimal.NullDecimal {
				if d.Valid {
					d.Decimal = decimal.Zero
				}
				return d
			}
			ln.Units, ln.Amount = zero(ln.Units), zero(ln.Amount)
		}
		all = append(all, ln)
		if isLive {
			live = append(live, ln)
		}
	}
	if len(live) > 0 {
		return live
	}
	return all
}

// TestMigration0013_Legacy: migration 13 on a ledger from before the
// desired state (313bf20's fixture) keeps its history and adds the
// reconciler's source 0; its paid entries wait (Waiting, nothing planned)
// until the reconciler maps their versions (Unabsorbed: these first).
// Mapped, they count in their groups, their live pay parts are tied to
// those groups, and every group's desired total is what payroll holds for
// it: nothing is sent again, nothing lost.
func TestMigration0013_Legacy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := legacyLedger(t)
	before := rawCounts(t, path)
	l, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if v, err := l.SchemaVersion(ctx); err != nil || v != latestVersion {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, latestVersion)
	}
	if got := query(t, l, `SELECT id, kind, name, status FROM sources WHERE id = 0`); got != "0 replay reconcile committed" {
		t.Errorf("source 0 = %q", got)
	}
	for tb, n := range before {
		want := n
		if tb == "sources" {
			want++ // source 0
		}
		var got int
		if err := l.db.QueryRowContext(ctx, "SELECT count(*) FROM "+tb).Scan(&got); err != nil || got != want {
			t.Errorf("%s: %d rows, %v; want %d", tb, got, err, want)
		}
	}
	// The 18 mapped entries wait, with their 2 earlier versions (corrected).
	if got := query(t, l, `SELECT count(*) FROM entries WHERE legacy = 1`); got != "18" {
		t.Errorf("%s legacy entries, want the 18 mapped", got)
	}
	if n, err := l.Waiting(ctx); err != nil || n != 20 {
		t.Fatalf("Waiting = %d, %v; want 20 versions to map", n, err)
	}
	if gs := allGroups(t, l, GroupFilter{}); len(gs) != 0 {
		t.Errorf("groups before the versions are mapped: %+v", gs)
	}

	// The reconciler maps them, a few at a time.
	mappedVersions := 0
	for range 100 {
		us, err := l.Unabsorbed(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(us) == 0 {
			break
		}
		as := make([]Absorbed, len(us))
		for i, u := range us {
			if u.Version == 0 {
				t.Fatalf("Unabsorbed %+v: want versions from before first", u)
			}
			as[i] = Absorbed{Unabsorbed: u, Status: paysync.EntryMapped, Lines: legacyLines(t, l, u)}
		}
		if err := l.Absorb(ctx, as); err != nil {
			t.Fatal(err)
		}
		mappedVersions += len(us)
	}
	if n, err := l.Waiting(ctx); err != nil || n != 0 || mappedVersions != 20 {
		t.Fatalf("Waiting = %d, %v after mapping %d versions; want 0 after 20", n, err, mappedVersions)
	}
	if got := query(t, l, `SELECT count(*) FROM entries WHERE legacy = 1`); got != "0" {
		t.Errorf("%s entries still legacy", got)
	}
	// Every live pay part is tied to its group.
	if got := query(t, l, `SELECT group_concat(p.id) FROM pay_parts p JOIN batches b ON b.id = p.batch_id
		WHERE p.state = 'created' AND p.superseded_by IS NULL AND p.group_id IS NULL`); got != "<nil>" {
		t.Errorf("live pay parts %s tied to no group", got)
	}
	// Desired == actual, group by group.
	var late []string
	for _, g := range allGroups(t, l, GroupFilter{}) {
		var units, amount decimal.NullDecimal
		for _, lp := range g.Live {
			units, amount = addDec(units, lp.Units), addDec(amount, lp.Amount)
		}
		same := func(a, b decimal.NullDecimal) bool {
			return a.Valid == b.Valid && (!a.Valid || a.Decimal.Equal(b.Decimal))
		}
		if !same(units, g.Units) || !same(amount, g.Amount) {
			late = append(late, fmt.Sprintf("%s|%s|%s|%s|%s: desired %s/%s (%d lines), live %s/%s (%d pay parts)",
				g.Key.Company, g.Key.Employee, g.Key.Code, g.Key.Rate, g.Key.Period, dec(g.Units), dec(g.Amount), g.Lines, dec(units), dec(amount), len(g.Live)))
		}
		if g.Frozen != (g.Key.Period.String() == "2026-10") {
			t.Errorf("group %v frozen %v; only October (closed) is", g.Key, g.Frozen)
		}
	}
	if len(late) > 0 {
		t.Errorf("after the migration, groups whose desired total is not what payroll holds (the reconciler would send):\n  %s", strings.Join(late, "\n  "))
	}
	if res, err := l.IntegrityCheck(ctx); err != nil || res != "ok" {
		t.Errorf("IntegrityCheck = %q, %v", res, err)
	}
}

// rawCounts counts the rows of every table of the ledger at path, outside
// the ledger (before it is opened, and migrated).
func rawCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	db := rawDB(t, path)
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string]int{}
	for _, tb := range tables {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM " + tb).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[tb] = n
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
