package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// The desired state, driven at the ledger level as intake and the
// reconciler (worker.Reconciler) drive it, with the test's own rules: an
// entry's hours (as exact seconds) go to its code (T1 without one) for its
// company and employee in its month, no rate; a tombstone is skipped. A
// group's units are its seconds in hours, rounded once to 2 decimals.

// month is the pay period (a month) of a date.
func month(t testing.TB, date string) paysync.Period {
	t.Helper()
	p, err := paysync.ParsePeriod(date[:7])
	if err != nil {
		t.Fatalf("period of %q: %v", date, err)
	}
	return p
}

// hold commits an import of name as intake does now: its mapped entries
// held (no pay part), new versions of entries known before as
// corrections. The entries' company, employee, date and code come from
// the entries.
func hold(t *testing.T, l *Ledger, name string, entries, corrections []paysync.Entry) Committed {
	t.Helper()
	in := ImportIntent{Source: src(name, name+" payload")}
	for _, e := range entries {
		ne := newEntry(t, e, paysync.EntryMapped)
		ne.Note = HeldNote
		if _, err := in.AddEntry(ne, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range corrections {
		in.AddCorrection(newEntry(t, e, paysync.EntryMapped), nil)
	}
	return commit(t, l, in)
}

// mapped is what the test's rules make of a version.
func mapped(t testing.TB, u Unabsorbed) Absorbed {
	t.Helper()
	a := Absorbed{Unabsorbed: u, Status: paysync.EntryMapped}
	var e paysync.Entry
	if err := json.Unmarshal(u.Data, &e); err != nil {
		t.Fatalf("stored entry: %v", err)
	}
	if e.Deleted {
		a.Status, a.Note = paysync.EntrySkipped, "deleted"
		return a
	}
	code := e.Code
	if code == "" {
		code = "T1"
	}
	a.Lines = []NewLine{{
		Group:        GroupKey{Company: e.CompanyID, Employee: e.EmployeeID, Code: code, Rate: "-", Period: month(t, e.Date)},
		Seconds:      decimal.NewNullDecimal(e.Hours.Seconds),
		EmployeeName: "Name of " + e.EmployeeID,
		Rule:         "rule-1",
	}}
	return a
}

// absorbAll takes everything intake recorded into the desired state, as
// the reconciler does, and returns how many versions it took.
func absorbAll(t *testing.T, l *Ledger) int {
	t.Helper()
	n := 0
	for range 100 {
		us, err := l.Unabsorbed(t.Context(), 3) // small chunks: several transactions
		if err != nil {
			t.Fatalf("Unabsorbed: %v", err)
		}
		if len(us) == 0 {
			return n
		}
		as := make([]Absorbed, len(us))
		for i, u := range us {
			as[i] = mapped(t, u)
		}
		if err := l.Absorb(t.Context(), as); err != nil {
			t.Fatalf("Absorb: %v", err)
		}
		n += len(us)
	}
	t.Fatal("Unabsorbed never ends")
	return n
}

// relineAll maps the versions of tg again (a replay), as the reconciler does.
func relineAll(t *testing.T, l *Ledger, tg Target) int {
	t.Helper()
	var after int64
	n := 0
	for {
		us, err := l.Relinings(t.Context(), tg, after, 2)
		if err != nil {
			t.Fatalf("Relinings(%s): %v", tg, err)
		}
		if len(us) == 0 {
			return n
		}
		as := make([]Absorbed, len(us))
		for i, u := range us {
			as[i] = mapped(t, u)
		}
		if err := l.Reline(t.Context(), as); err != nil {
			t.Fatalf("Reline: %v", err)
		}
		after = us[len(us)-1].Version
		n += len(us)
	}
}

// allGroups reads every group (closed periods too), with its live pay parts.
func allGroups(t *testing.T, l *Ledger, f GroupFilter) []Group {
	t.Helper()
	f.Frozen = true
	gs, err := l.Groups(t.Context(), f)
	if err != nil {
		t.Fatalf("Groups: %v", err)
	}
	return gs
}

// units is what a group must hold: its seconds in hours, rounded once
// (invalid: nothing).
func units(g Group) decimal.NullDecimal {
	if g.Lines <= 0 || !g.Seconds.Valid || g.Seconds.Decimal.IsZero() {
		return decimal.NullDecimal{}
	}
	return decimal.NewNullDecimal(g.Seconds.Decimal.Div(decimal.NewFromInt(3600)).Round(2))
}

// decide is the test's reconciler decision for a group (as
// worker.Reconciler.decide, without the wire's checks): one pay part of
// the group's units, replacing every live pay part, unless payroll holds
// exactly that.
func decide(g Group) GroupChange {
	c := GroupChange{Group: g.ID, Version: g.Version}
	for _, lp := range g.Live {
		c.Replace = append(c.Replace, lp.ID)
	}
	want := units(g)
	switch {
	case !want.Valid && len(g.Live) == 0,
		want.Valid && len(g.Live) == 1 && g.Live[0].Units.Valid && g.Live[0].Units.Decimal.Equal(want.Decimal):
		c.Clean = true
	case want.Valid:
		c.Create = []paysync.PlannedPayPart{{
			CompanyID:    g.Key.Company,
			PayPartInput: paysync.PayPartInput{EmployeeID: g.Key.Employee, Code: g.Key.Code, Numbers: paysync.Numbers{Units: want}},
			EmployeeName: g.EmployeeName,
			Rule:         g.Rule,
		}}
	}
	return c
}

// planOf decides every dirty group of an open period, by company.
func planOf(t *testing.T, l *Ledger) map[string][]GroupChange {
	t.Helper()
	gs, err := l.Groups(t.Context(), GroupFilter{Dirty: true})
	if err != nil {
		t.Fatalf("Groups: %v", err)
	}
	out := map[string][]GroupChange{}
	for _, g := range gs {
		out[g.Key.Company] = append(out[g.Key.Company], decide(g))
	}
	return out
}

// applyPlan records a plan company by company (in order), for the import
// source; it returns the new batches and how many groups were stale.
func applyPlan(t *testing.T, l *Ledger, source int64, plan map[string][]GroupChange) ([]int64, int) {
	t.Helper()
	companies := make([]string, 0, len(plan))
	for co := range plan {
		companies = append(companies, co)
	}
	sort.Strings(companies)
	var batches []int64
	stale := 0
	for _, co := range companies {
		bs, n, err := l.ApplyPlan(t.Context(), co, source, plan[co], 10)
		if err != nil {
			t.Fatalf("ApplyPlan(%s): %v", co, err)
		}
		batches, stale = append(batches, bs...), stale+n
	}
	return batches, stale
}

// reconcile absorbs, plans and records, as the reconciler's Apply; it
// returns the new batches.
func reconcile(t *testing.T, l *Ledger, source int64) []int64 {
	t.Helper()
	absorbAll(t, l)
	bs, stale := applyPlan(t, l, source, planOf(t, l))
	if stale != 0 {
		t.Fatalf("reconcile: %d stale groups, nothing changed meanwhile", stale)
	}
	return bs
}

// totals renders every group's desired state and what is live for it:
// "company|employee|code|period: seconds s (lines) live [units@batch:state ...]".
func totals(t *testing.T, l *Ledger) []string {
	t.Helper()
	var out []string
	for _, g := range allGroups(t, l, GroupFilter{}) {
		s := fmt.Sprintf("%s|%s|%s|%s: %s s (%d)", g.Key.Company, g.Key.Employee, g.Key.Code, g.Key.Period, dec(g.Seconds), g.Lines)
		var live []string
		for _, lp := range g.Live {
			live = append(live, fmt.Sprintf("%s@%d:%s", dec(lp.Units), lp.BatchID, lp.State))
		}
		out = append(out, s+" live ["+strings.Join(live, " ")+"]")
	}
	return out
}

func dec(d decimal.NullDecimal) string {
	if !d.Valid {
		return "-"
	}
	return d.Decimal.String()
}

// checkTotals compares totals with want.
func checkTotals(t *testing.T, l *Ledger, when string, want ...string) {
	t.Helper()
	if got := totals(t, l); !slices.Equal(got, want) {
		t.Errorf("%s: groups\n  %s\nwant\n  %s", when, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// checkPaid checks the invariant after a reconcile: every group of an
// open period holds its desired units as exactly one live pay part (none
// when nothing counts).
func checkPaid(t *testing.T, l *Ledger, when string) {
	t.Helper()
	gs, err := l.Groups(t.Context(), GroupFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		want := units(g)
		switch {
		case !want.Valid && len(g.Live) != 0:
			t.Errorf("%s: group %v wants nothing, has live %+v", when, g.Key, g.Live)
		case want.Valid && (len(g.Live) != 1 || !g.Live[0].Units.Decimal.Equal(want.Decimal)):
			t.Errorf("%s: group %v wants %s units as one pay part, has live %+v", when, g.Key, want.Decimal, g.Live)
		}
	}
}

// corr is an entry of the test's rules: company, employee, date, hours
// (a tombstone when hours is "deleted").
func corr(source string, line int, id, company, employee, date, hours string) paysync.Entry {
	e := corrEntry(source, line, id, company, employee, hours)
	if !e.Deleted {
		e.Date = date
	}
	return e
}

// settle sends what reconciles recorded, as the deliverer does: per unit,
// the pay parts it replaces deleted first, then its batches created.
func settle(t *testing.T, l *Ledger, batches []int64) {
	t.Helper()
	done := map[int64]bool{}
	for _, b := range batches {
		if u := mustBatch(t, l, b).Correction; u != 0 && !done[u] {
			done[u] = true
			deleteSuperseded(t, l, u)
		}
	}
	for _, b := range batches {
		sendAll(t, l, b)
	}
}

// replay is an operator's replay of tg: mapped again, then counting again.
func replay(t *testing.T, l *Ledger, tg Target) int {
	t.Helper()
	relineAll(t, l, tg)
	n, err := l.Replay(t.Context(), tg)
	if err != nil {
		t.Fatalf("Replay(%s): %v", tg, err)
	}
	return n
}

// revert is an operator's revert of tg.
func revert(t *testing.T, l *Ledger, tg Target) int {
	t.Helper()
	n, err := l.Revert(t.Context(), tg)
	if err != nil {
		t.Fatalf("Revert(%s): %v", tg, err)
	}
	return n
}
