package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/shopspring/decimal"
)

// ScopeResult is what a revert or replay of a period does (or would, dry).
type ScopeResult struct {
	// Unit holds the pay parts replaced (Supersede) and created instead
	// (PayParts); its Pending are the entries re-mapped.
	Unit ledger.Correction
	// Batches are the unit's batches to send (none for a dry run, or when
	// nothing changes).
	Batches []int64
	// Spanning counts pay parts with entries both in and out of the scope
	// (summed before pay parts were per period): left alone.
	Spanning int
	held     bool // a revert un-holds held entries: a change even without pay parts
}

// Changes reports whether payroll would change.
func (r ScopeResult) Changes() bool {
	return len(r.Unit.Supersede)+len(r.Unit.PayParts) > 0 || (r.held && len(r.Unit.Pending) > 0)
}

// ErrScopeBusy: a pay part in scope is in a call right now; try again.
var ErrScopeBusy = errors.New("a batch of the period is being sent or reverted right now; run it again in a moment")

// RevertScope removes from payroll what it holds for the entries in scope,
// as one unit: its pay parts are replaced by nothing (deleted, ledger
// first, by the unit's batches; one never sent is simply not sent). The
// entries stay in the ledger, no longer paid: importing or replaying them
// again pays them. Run twice, the second finds nothing.
func (c *Corrector) RevertScope(ctx context.Context, sc ledger.Scope, dryRun bool) (ScopeResult, error) {
	var res ScopeResult
	if err := c.refuseClosed(ctx, sc); err != nil {
		return res, err
	}
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return res, err
	}
	entries, err := c.scopeEntries(ctx, sc)
	if err != nil {
		return res, err
	}
	in := map[int64]bool{}
	rows := make([]int64, len(entries))
	for i, le := range entries {
		in[le.Row], rows[i] = true, le.Row
	}
	parts, err := c.L.PartsOfEntries(ctx, rows)
	if err != nil {
		return res, err
	}
	var spanning []ledger.PendingCorrection // the other entries of pay parts shared with entries out of scope
	for _, p := range parts {
		if sc.Company != "" && p.CompanyID != sc.Company {
			continue
		}
		if slices.ContainsFunc(p.Entries, func(le ledger.LiveEntry) bool { return !in[le.Row] }) {
			res.Spanning++
			for _, le := range p.Entries {
				if !in[le.Row] && !slices.ContainsFunc(spanning, func(pc ledger.PendingCorrection) bool { return pc.Entry == le.Row }) {
					spanning = append(spanning, ledger.PendingCorrection{Entry: le.Row, New: le.Entry, Old: le.Entry, Hash: "revert", OldHash: le.Hash, Held: le.Held})
				}
			}
			continue
		}
		if p.BatchState == paysync.BatchSending || p.BatchState == paysync.BatchReverting {
			return res, ErrScopeBusy
		}
		for _, le := range p.Entries {
			if cp, isClosed := ledger.ClosedOn(closed, le.Entry.Date); isClosed {
				return res, fmt.Errorf("%s: entry %s is dated %s, in period %s, closed on %s: reopen it first (paysync periods open %s)",
					sc, le.Entry.ID, le.Entry.Date, cp.Period, cp.ClosedAt.UTC().Format("2006-01-02 15:04 UTC"), cp.Period)
			}
		}
		res.Unit.Supersede = append(res.Unit.Supersede, p)
	}
	if len(spanning) > 0 {
		// Pay parts that sum entries in and out of scope (a cutoff's
		// aggregates): planned again without the scope's entries.
		p, err := c.plan(ctx, 0, spanning, closed, in)
		if err != nil {
			return res, err
		}
		if p.wait {
			return res, ErrScopeBusy
		}
		if len(p.refused) > 0 {
			return res, fmt.Errorf("revert %s: %w", sc, p.refused[0].problem)
		}
		res.Unit.Supersede = append(res.Unit.Supersede, p.unit.Supersede...)
		res.Unit.PayParts, res.Unit.PayPartRows = p.unit.PayParts, p.unit.PayPartRows
		res.Unit.Pending, res.Unit.Status = p.unit.Pending, p.unit.Status
		res.Spanning = 0
	}
	// Entries held for the cutoff are held no longer: reverted before
	// they were paid.
	for _, le := range entries {
		if le.Held {
			res.held = true
			if res.Unit.Status == nil {
				res.Unit.Status = map[int64]ledger.NewEntryStatus{}
			}
			res.Unit.Pending = append(res.Unit.Pending, ledger.PendingCorrection{Entry: le.Row, OldHash: le.Hash, Held: le.Held})
			res.Unit.Status[le.Row] = ledger.NewEntryStatus{Status: paysync.EntryMapped}
		}
	}
	if len(res.Unit.Supersede) > 0 {
		res.Unit.CompanyID = res.Unit.Supersede[0].CompanyID
	}
	return c.applyScope(ctx, "revert", sc, res, dryRun)
}

// ReplayScope maps the entries in scope again through the current rules
// and applies the delta as one unit: pay parts that come out the same stay
// (payroll ids too), changed ones are replaced, entries not paid (reverted,
// or skipped or refused under the old rules) are paid if they map now. Run
// twice, the second changes nothing.
func (c *Corrector) ReplayScope(ctx context.Context, sc ledger.Scope, dryRun bool) (ScopeResult, error) {
	var res ScopeResult
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return res, err
	}
	if err := c.refuseClosed(ctx, sc); err != nil {
		return res, err
	}
	entries, err := c.scopeEntries(ctx, sc)
	if err != nil {
		return res, err
	}
	pcs := make([]ledger.PendingCorrection, len(entries))
	for i, le := range entries {
		// As stored, mapped again: no correction row (ID 0).
		pcs[i] = ledger.PendingCorrection{Entry: le.Row, New: le.Entry, Old: le.Entry, Hash: "replay", OldHash: le.Hash, Held: le.Held}
	}
	p, err := c.plan(ctx, 0, pcs, closed, nil)
	if err != nil {
		return res, err
	}
	if p.wait {
		return res, ErrScopeBusy
	}
	if len(p.refused) > 0 {
		var probs []error
		for _, r := range p.refused {
			probs = append(probs, r.problem)
		}
		return res, fmt.Errorf("replay %s: %d entries do not map under the current rules: %w", sc, len(probs), errors.Join(probs...))
	}
	res.Unit = p.unit
	for _, pp := range res.Unit.Supersede {
		if pp.CompanyID != sc.Company && sc.Company != "" {
			return res, fmt.Errorf("replay %s: entries of the period are paid in company %s too; leave out the company", sc, pp.CompanyID)
		}
	}
	for _, pp := range res.Unit.PayParts {
		if pp.CompanyID != sc.Company && sc.Company != "" {
			return res, fmt.Errorf("replay %s: entries of the period map to company %s too; leave out the company", sc, pp.CompanyID)
		}
	}
	return c.applyScope(ctx, "replay", sc, res, dryRun)
}

// scopeEntries are the entries in scope.
func (c *Corrector) scopeEntries(ctx context.Context, sc ledger.Scope) ([]ledger.LiveEntry, error) {
	return c.L.EntriesIn(ctx, sc)
}

// refuseClosed refuses a scope that overlaps a closed period.
func (c *Corrector) refuseClosed(ctx context.Context, sc ledger.Scope) error {
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return err
	}
	for _, cp := range closed {
		if !sc.Period.IsZero() && cp.Period.Overlaps(sc.Period) {
			return fmt.Errorf("%s overlaps period %s, closed on %s: reopen it first (paysync periods open %s)",
				sc.Period, cp.Period, cp.ClosedAt.UTC().Format("2006-01-02 15:04 UTC"), cp.Period)
		}
	}
	return nil
}

// applyScope records res's unit (not for a dry run, nor when nothing
// changes), as a source of kind replay naming what was done.
func (c *Corrector) applyScope(ctx context.Context, op string, sc ledger.Scope, res ScopeResult, dryRun bool) (ScopeResult, error) {
	if dryRun || !res.Changes() {
		return res, nil
	}
	name := fmt.Sprintf("%s --period %s", op, sc)
	if sc.SourceID != 0 {
		name = fmt.Sprintf("%s --import %d", op, sc.SourceID)
	}
	res.Unit.Source = &ledger.NewSource{Kind: paysync.SourceReplay, Name: name, Hash: paysync.PayloadHash([]byte(name + "\x00" + fmt.Sprint(len(res.Unit.Supersede), len(res.Unit.PayParts))))}
	res.Unit.BatchSize = c.BatchSize
	if err := c.refuseNoDelete(res.Unit); err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	_, batches, err := c.L.ApplyCorrection(ctx, res.Unit)
	if errors.Is(err, ledger.ErrCorrectionStale) {
		return res, ErrScopeBusy
	}
	res.Batches = batches
	return res, err
}

// CutoffResult is what one cutoff did (or would, dry).
type CutoffResult struct {
	Periods []ScopeResult // one per period with held entries
	Entries int           // entries planned (held, and those of the aggregates planned again)
}

// Cutoff plans the entries held since the last cutoff (PAYSYNC_SEND=cutoff)
// into their periods' pay parts: per period (Rules.Period), the held
// entries and those of the period's live pay parts are planned together, so
// that each company × employee × code × rate has one pay part per period;
// an aggregate sent at an earlier cutoff that changes is replaced (delete
// first), one that comes out the same stays. In a closed period the held
// entries get pay parts of their own (late hours: the next payroll run pays
// them) and nothing sent is replaced; so too against a payroll server
// without a delete mutation. Run twice, the second finds nothing.
//
// Applied (not dry), the cutoff is made of merges (Merge) until nothing is
// held: each plans at most DefaultMergeChunk held entries with the
// aggregates they touch, so a cutoff's memory stays bounded however much
// was held. A dry run plans each period whole, as a preview.
func (c *Corrector) Cutoff(ctx context.Context, dryRun bool) (CutoffResult, error) {
	var out CutoffResult
	if !dryRun {
		return c.cutoffByMerges(ctx)
	}
	dates, err := c.L.HeldDates(ctx)
	if err != nil || len(dates) == 0 {
		return out, err
	}
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return out, err
	}
	kind := c.periodKind()
	var periods []paysync.Period
	for _, d := range dates {
		p, err := paysync.PeriodOf(kind, d)
		if err != nil {
			continue // not a date: mapping refused it already
		}
		if !slices.Contains(periods, p) {
			periods = append(periods, p)
		}
	}
	for _, p := range periods {
		isClosed := slices.ContainsFunc(closed, func(cp ledger.ClosedPeriod) bool { return cp.Period.Overlaps(p) })
		// A server that cannot delete keeps what it holds: the held
		// entries get pay parts of their own, as in a closed period.
		entries, err := c.L.CutoffEntries(ctx, p, !isClosed && !c.cannotDelete())
		if err != nil {
			return out, err
		}
		pcs := make([]ledger.PendingCorrection, len(entries))
		for i, le := range entries {
			pcs[i] = ledger.PendingCorrection{Entry: le.Row, New: le.Entry, Old: le.Entry, Hash: "cutoff", OldHash: le.Hash, Held: le.Held}
		}
		plan, err := c.plan(ctx, 0, pcs, nil, nil)
		if err != nil {
			return out, fmt.Errorf("cutoff %s: %w", p, err)
		}
		if plan.wait {
			return out, ErrScopeBusy
		}
		if len(plan.refused) > 0 {
			return out, fmt.Errorf("cutoff %s: %w", p, plan.refused[0].problem)
		}
		res := ScopeResult{Unit: plan.unit}
		out.Entries += len(entries)
		if !dryRun {
			// Applied even when payroll does not change: the held entries
			// are held no longer.
			name := "cutoff " + p.String()
			res.Unit.Source = &ledger.NewSource{Kind: paysync.SourceReplay, Name: name,
				Hash: paysync.PayloadHash([]byte(name + "\x00" + fmt.Sprint(len(entries))))}
			res.Unit.BatchSize = c.BatchSize
			_, batches, err := c.L.ApplyCorrection(ctx, res.Unit)
			if errors.Is(err, ledger.ErrCorrectionStale) {
				return out, ErrScopeBusy
			}
			if err != nil {
				return out, err
			}
			res.Batches = batches
		}
		out.Periods = append(out.Periods, res)
	}
	return out, nil
}

// MergeResult is what one merge did.
type MergeResult struct {
	Units []ScopeResult // one per company × period applied
	Held  int           // held entries planned
	// More: more entries were held than one merge takes (MergeChunk); the
	// next merge takes them.
	More bool
	// Busy: a unit waits, its pay parts being in a call (or changed while
	// it was planned); its held entries stay held for the next merge.
	Busy bool
	// Problems are units refused (an entry held, or summed with them, no
	// longer maps under the current rules): their entries stay held, and
	// the version paid stays, until the rules or the entry are fixed.
	Problems []error
}

// cutoffByMerges applies a cutoff as merges until nothing more is held, or
// a merge plans nothing (what is left is refused by the rules: it stays
// held, named in the error).
func (c *Corrector) cutoffByMerges(ctx context.Context) (CutoffResult, error) {
	var out CutoffResult
	for {
		res, err := c.Merge(ctx)
		out.Periods = append(out.Periods, res.Units...)
		out.Entries += res.Held
		switch {
		case err != nil:
			return out, err
		case res.Busy:
			return out, ErrScopeBusy
		case len(res.Problems) > 0:
			return out, fmt.Errorf("cutoff: %w", errors.Join(res.Problems...))
		case !res.More || res.Held == 0:
			return out, nil
		}
	}
}

// periodKind is the pay period the rules sum over (month by default).
func (c *Corrector) periodKind() paysync.PeriodKind {
	if c.Rules != nil && c.Rules.Period != "" {
		return c.Rules.Period
	}
	return paysync.PeriodMonth
}

// DefaultMergeChunk is how many held entries one merge plans at most, and
// DefaultMergeCap how many entries a pay part sums before merges leave it
// as it is and start another pay part of its group beside it (each
// exact): a merge re-plans the aggregates it adds to, so both bound its
// memory and work under any backlog (BENCHMARKS.md: 5,000 / 300 drained a
// 100,000-entry backlog fastest in about 80 MiB). A month of one person's
// entries of one code is far below the cap: it stays one pay part.
const (
	DefaultMergeChunk = 5000
	DefaultMergeCap   = 300
)

// Merge plans the entries intake held (PAYSYNC_SEND=immediate, rules that
// aggregate) into their aggregates, soon after they arrive: like Cutoff,
// but bounded to what the held entries touch. The held entries are mapped;
// the live pay parts of the groups (company × employee × code × rate ×
// rule × period) they fall in are read, and the held entries are planned
// with those pay parts' entries, one unit per company × period: a pay part
// whose total changes is replaced (delete first; one still pending is
// simply not sent), a group untouched keeps its pay part and payroll id.
// In a closed period the held entries get pay parts of their own. Run
// twice, the second finds nothing.
func (c *Corrector) Merge(ctx context.Context) (MergeResult, error) {
	var out MergeResult
	chunk := c.MergeChunk
	if chunk <= 0 {
		chunk = DefaultMergeChunk
	}
	held, err := c.L.HeldEntries(ctx, chunk+1)
	if err != nil || len(held) == 0 {
		return out, err
	}
	if len(held) > chunk {
		held, out.More = held[:chunk], true
	}
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return out, err
	}
	kind := c.periodKind()
	type unitKey struct {
		company string
		period  paysync.Period
	}
	type unit struct {
		held   []ledger.LiveEntry
		groups []ledger.PartGroup
		rates  map[string]bool // "employee|code|rule|rate" of the held entries' lines
	}
	var order []unitKey
	units := map[unitKey]*unit{}
	for _, le := range held {
		ls, err := c.Mapper.Map(ctx, le.Entry)
		if err != nil && !mapping.OnlyProblems(err) {
			return out, err // transient: the next merge
		}
		p, _ := paysync.PeriodOf(kind, le.Entry.Date) // not a date: refused at intake already
		k := unitKey{company: cmp.Or(le.Entry.CompanyID, c.Mapper.Company()), period: p}
		if err == nil {
			for _, l := range ls {
				if l.Skip == "" {
					k.company = l.CompanyID
					break
				}
			}
		}
		u := units[k]
		if u == nil {
			u = &unit{rates: map[string]bool{}}
			units[k] = u
			order = append(order, k)
		}
		u.held = append(u.held, le)
		isClosed := slices.ContainsFunc(closed, func(cp ledger.ClosedPeriod) bool { return cp.Period.Overlaps(p) })
		if err != nil || isClosed || p.IsZero() {
			continue // planned alone (a closed period's late hours), or refused by plan
		}
		for _, l := range ls {
			if l.Skip != "" {
				continue
			}
			g := ledger.PartGroup{Company: l.CompanyID, Employee: l.EmployeeID, Code: l.Code, Rule: l.Rule, Period: p}
			if !slices.Contains(u.groups, g) {
				u.groups = append(u.groups, g)
			}
			u.rates[rateKey(l.EmployeeID, l.Code, l.Rule, l.Rate)] = true
		}
	}
	var errs []error
	for _, k := range order {
		u := units[k]
		res, busy, err := c.mergeUnit(ctx, k.company, k.period, u.held, u.groups, u.rates)
		var prob *mergeProblem
		switch {
		case errors.As(err, &prob):
			out.Problems = append(out.Problems, fmt.Errorf("merge %s company %s: %w", k.period, k.company, prob.err))
			continue
		case err != nil:
			// One unit's failure does not hold up the others'.
			errs = append(errs, fmt.Errorf("merge %s company %s: %w", k.period, k.company, err))
			continue
		}
		if busy {
			out.Busy = true
			continue
		}
		out.Held += len(u.held)
		out.Units = append(out.Units, res)
	}
	return out, errors.Join(errs...)
}

// rateKey names a group within a company and period, its rate included.
func rateKey(employee, code, rule string, rate decimal.NullDecimal) string {
	r := "-"
	if rate.Valid {
		r = rate.Decimal.String()
	}
	return employee + "|" + code + "|" + rule + "|" + r
}

// mergeUnit plans and applies one company × period of a merge: its held
// entries with the entries of the live pay parts of groups.
func (c *Corrector) mergeUnit(ctx context.Context, company string, p paysync.Period, held []ledger.LiveEntry, groups []ledger.PartGroup, rates map[string]bool) (ScopeResult, bool, error) {
	var res ScopeResult
	var parts []ledger.SupersedablePart
	if len(groups) > 0 {
		all, err := c.L.LivePartsOfGroups(ctx, groups, cmp.Or(c.MergeCap, DefaultMergeCap))
		if err != nil {
			return res, false, err
		}
		// A server that cannot delete keeps what it holds: held entries
		// then join only aggregates not sent yet (else a pay part of their
		// own).
		noDelete := c.cannotDelete()
		for _, pp := range all {
			if noDelete && (pp.State == paysync.PartCreated || pp.PayrollID != "") {
				continue
			}
			if rates[rateKey(pp.EmployeeID, pp.Code, pp.Rule, pp.Rate)] {
				parts = append(parts, pp)
			}
		}
	}
	pcs := make([]ledger.PendingCorrection, 0, len(held))
	in := map[int64]bool{}
	add := func(le ledger.LiveEntry) {
		if !in[le.Row] {
			in[le.Row] = true
			// As stored, planned again: no correction row (ID 0).
			pcs = append(pcs, ledger.PendingCorrection{Entry: le.Row, New: le.Entry, Old: le.Entry, Hash: "merge", OldHash: le.Hash, Held: le.Held})
		}
	}
	heldRow := map[int64]bool{}
	for _, le := range held {
		add(le)
		heldRow[le.Row] = true
	}
	for _, pp := range parts {
		for _, le := range pp.Entries {
			add(le)
		}
	}
	known := parts
	if known == nil {
		known = []ledger.SupersedablePart{} // none: the held entries have no pay part
	}
	plan, err := c.planWith(ctx, 0, pcs, nil, nil, known)
	if err != nil {
		return res, false, err
	}
	if plan.wait {
		return res, true, nil
	}
	if len(plan.refused) > 0 {
		return res, false, &mergeProblem{plan.refused[0].problem}
	}
	if err := c.refuseNoDelete(plan.unit); err != nil {
		return res, false, &mergeProblem{err}
	}
	res.Unit = plan.unit
	// Only the held entries (and one whose status the current rules
	// change) are written: the others stay as they are, and a change to
	// them since (a correction) supersedes their pay part, which makes the
	// unit stale.
	res.Unit.Pending = slices.DeleteFunc(slices.Clone(res.Unit.Pending), func(pc ledger.PendingCorrection) bool {
		return !heldRow[pc.Entry] && res.Unit.Status[pc.Entry].Status == paysync.EntryMapped
	})
	// Applied even when payroll does not change: the held entries are held
	// no longer.
	name := fmt.Sprintf("merge %s company %s", p, company)
	res.Unit.Source = &ledger.NewSource{Kind: paysync.SourceReplay, Name: name,
		Hash: paysync.PayloadHash([]byte(name + "\x00" + fmt.Sprint(len(pcs))))}
	res.Unit.BatchSize = c.BatchSize
	_, batches, err := c.L.ApplyCorrection(ctx, res.Unit)
	if errors.Is(err, ledger.ErrCorrectionStale) {
		return res, true, nil
	}
	if err != nil {
		return res, false, err
	}
	res.Batches = batches
	return res, false, nil
}

// mergeProblem is a unit a merge cannot plan because of its input, not a
// failure to retry sooner.
type mergeProblem struct{ err error }

func (p *mergeProblem) Error() string { return p.err.Error() }
