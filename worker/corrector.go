package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/shopspring/decimal"
)

// CorrectionLedger is what a Corrector needs from the ledger.
type CorrectionLedger interface {
	PendingCorrections(ctx context.Context, limit int) ([]ledger.PendingCorrection, error)
	PartsOfEntries(ctx context.Context, entries []int64) ([]ledger.SupersedablePart, error)
	ApplyCorrection(ctx context.Context, c ledger.Correction) (int64, []int64, error)
	SkipCorrection(ctx context.Context, p ledger.PendingCorrection) error
	RejectCorrection(ctx context.Context, p ledger.PendingCorrection, r ledger.NewReject) error
	NoteCorrectionsWaiting(ctx context.Context, ids []int64, why string) error
	ClosedPeriods(ctx context.Context) ([]ledger.ClosedPeriod, error)
	EntriesIn(ctx context.Context, sc ledger.Scope) ([]ledger.LiveEntry, error)
	HeldDates(ctx context.Context) ([]string, error)
	CutoffEntries(ctx context.Context, p paysync.Period, withPaid bool) ([]ledger.LiveEntry, error)
	HeldEntries(ctx context.Context, limit int) ([]ledger.LiveEntry, error)
	LivePartsOfGroups(ctx context.Context, groups []ledger.PartGroup, maxEntries int) ([]ledger.SupersedablePart, error)
}

var _ CorrectionLedger = (*ledger.Ledger)(nil)

// Corrector applies the corrections intake recorded: an entry paid before
// that came again with other content (or as a tombstone) supersedes its
// earlier version. The pay parts that version is in are replaced: their
// entries, with the new versions, are mapped and planned again, and a pay
// part that comes out the same is kept (its payroll id too). The rest is
// one unit per import: the pay parts replaced are deleted in
// payroll before the unit's new ones are created (Deliverer).
type Corrector struct {
	L         CorrectionLedger
	Mapper    *mapping.Mapper
	Rules     *mapping.Rules
	Wire      mapping.WireChecker
	BatchSize int
	// MergeChunk is how many held entries one Merge plans at most
	// (default DefaultMergeChunk); MergeCap how many entries a pay part
	// sums before a merge stops planning it again and starts another
	// beside it (default DefaultMergeCap). Together they bound a merge's
	// memory and work, whatever the backlog.
	MergeChunk int
	MergeCap   int
}

// correctionLimit is how many pending corrections one Run reads.
const correctionLimit = 500

// Run applies the pending corrections and returns how many units it
// recorded (batches to send). A unit whose pay parts are in a call right
// now, or changed while it was planned, waits for the next Run.
func (c *Corrector) Run(ctx context.Context) (units int, err error) {
	pcs, err := c.L.PendingCorrections(ctx, correctionLimit)
	if err != nil || len(pcs) == 0 {
		return 0, err
	}
	var order []int64
	groups := map[int64][]ledger.PendingCorrection{}
	for _, pc := range pcs {
		if _, ok := groups[pc.SourceID]; !ok {
			order = append(order, pc.SourceID)
		}
		groups[pc.SourceID] = append(groups[pc.SourceID], pc)
	}
	var errs []error
	for _, source := range order {
		// One import's failure (payroll out of reach while mapping) does
		// not hold up the others'.
		applied, err := c.apply(ctx, source, groups[source])
		if err != nil {
			errs = append(errs, fmt.Errorf("corrections of import %d: %w", source, err))
			continue
		}
		if applied {
			units++
		}
	}
	return units, errors.Join(errs...)
}

// apply plans and records one unit.
func (c *Corrector) apply(ctx context.Context, source int64, pcs []ledger.PendingCorrection) (bool, error) {
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return false, err
	}
	p, err := c.plan(ctx, source, pcs, closed, nil)
	if err != nil {
		return false, err
	}
	for _, pc := range p.unchanged {
		if err := c.L.SkipCorrection(ctx, pc); err != nil {
			return false, err
		}
	}
	for _, r := range p.refused {
		if err := c.L.RejectCorrection(ctx, r.pc, r.reject); err != nil {
			return false, err
		}
	}
	if p.wait || len(p.unit.Pending) == 0 {
		return false, nil
	}
	if err := c.refuseNoDelete(p.unit); err != nil {
		// The corrections stay pending, and say why (paysync corrections).
		var ids []int64
		for _, pc := range p.unit.Pending {
			if pc.ID != 0 {
				ids = append(ids, pc.ID)
			}
		}
		if nerr := c.L.NoteCorrectionsWaiting(ctx, ids, err.Error()); nerr != nil {
			return false, errors.Join(err, nerr)
		}
		return false, err
	}
	_, _, err = c.L.ApplyCorrection(ctx, p.unit)
	if errors.Is(err, ledger.ErrCorrectionStale) {
		return false, nil
	}
	return err == nil, err
}

// Preview plans pending corrections (committed or, for a dry run, staged)
// without recording anything: the unit that would be applied, and the
// corrections that would be refused (their problems).
func (c *Corrector) Preview(ctx context.Context, pcs []ledger.PendingCorrection) (ledger.Correction, []error, error) {
	closed, err := c.L.ClosedPeriods(ctx)
	if err != nil {
		return ledger.Correction{}, nil, err
	}
	p, err := c.plan(ctx, 0, pcs, closed, nil)
	if err != nil {
		return ledger.Correction{}, nil, err
	}
	var probs []error
	for _, r := range p.refused {
		probs = append(probs, r.problem)
	}
	return p.unit, probs, nil
}

// correctionPlan is what one unit would do.
type correctionPlan struct {
	unit      ledger.Correction
	unchanged []ledger.PendingCorrection // back to the content paid: nothing to do
	refused   []refusedCorrection        // a problem of the new version: the version paid stays
	wait      bool                       // a pay part it replaces is in a call now: the next Run
}

type refusedCorrection struct {
	pc      ledger.PendingCorrection
	problem error
	reject  ledger.NewReject
}

// refuseAll refuses every correction of a unit that cannot be planned
// (what it says and hints, for each), and plans nothing.
func refuseAll(out *correctionPlan, pcs []ledger.PendingCorrection, msg, hint string) *correctionPlan {
	for _, pc := range pcs {
		p := &mapping.Problem{Source: pc.New.Source, Line: pc.New.Line, EntryID: pc.New.ID, Msg: msg, Hint: hint}
		out.refused = append(out.refused, refusedCorrection{pc: pc, problem: p, reject: rejectOf(p)})
	}
	out.unit = ledger.Correction{}
	return out
}

// plan maps the new versions and the other entries of the pay parts they
// are in (but those in exclude: a revert's), and plans the unit.
func (c *Corrector) plan(ctx context.Context, source int64, pcs []ledger.PendingCorrection, closed []ledger.ClosedPeriod, exclude map[int64]bool) (*correctionPlan, error) {
	return c.planWith(ctx, source, pcs, closed, exclude, nil)
}

// planWith is plan; known, when set, are the live pay parts of pcs's
// entries as the caller read them (Merge: read once, not twice), used
// unless an entry maps to more than one line (its other pay parts are
// then read).
func (c *Corrector) planWith(ctx context.Context, source int64, pcs []ledger.PendingCorrection, closed []ledger.ClosedPeriod, exclude map[int64]bool, known []ledger.SupersedablePart) (*correctionPlan, error) {
	out := &correctionPlan{}
	refuse := func(pc ledger.PendingCorrection, p error) {
		out.refused = append(out.refused, refusedCorrection{pc: pc, problem: p, reject: rejectOf(p)})
	}
	var ok []ledger.PendingCorrection
	lines := map[int64][]mapping.Line{} // by entry row
	status := map[int64]ledger.NewEntryStatus{}
	for _, pc := range pcs {
		if pc.Hash == pc.OldHash {
			out.unchanged = append(out.unchanged, pc)
			continue
		}
		if p := closedCorrection(closed, pc.New, pc.Old.Date); p != nil {
			// Closed since it was recorded: the version paid stays.
			refuse(pc, p)
			continue
		}
		if pc.New.Deleted {
			status[pc.Entry] = ledger.NewEntryStatus{Status: paysync.EntrySkipped, Note: "deleted"}
			ok = append(ok, pc)
			continue
		}
		ls, err := c.Mapper.Map(ctx, pc.New)
		switch {
		case err != nil && !mapping.OnlyProblems(err):
			return nil, err // transient: the next Run
		case err != nil:
			refuse(pc, mapping.Flatten(err)[0])
			continue
		case len(ls) == 0:
			status[pc.Entry] = ledger.NewEntryStatus{Status: paysync.EntrySkipped, Note: "no pay part"}
		case ls[0].Skip != "":
			status[pc.Entry] = ledger.NewEntryStatus{Status: paysync.EntrySkipped, Note: ls[0].Skip}
		default:
			status[pc.Entry] = ledger.NewEntryStatus{Status: paysync.EntryMapped}
			lines[pc.Entry] = ls
		}
		ok = append(ok, pc)
	}
	if len(ok) == 0 {
		return out, nil
	}
	rows := make([]int64, len(ok))
	for i, pc := range ok {
		rows[i] = pc.Entry
	}
	parts := known
	if known == nil || slices.ContainsFunc(ok, func(pc ledger.PendingCorrection) bool { return len(lines[pc.Entry]) > 1 }) {
		var err error
		if parts, err = c.L.PartsOfEntries(ctx, rows); err != nil {
			return nil, err
		}
	}
	for _, p := range parts {
		if p.BatchState == paysync.BatchSending || p.BatchState == paysync.BatchReverting {
			out.wait = true
		}
	}
	// The other entries of the replaced pay parts are planned again as
	// they are stored; the corrected ones with their new lines.
	planner := mapping.NewPlanner(c.Rules, c.Wire)
	links := map[int][]int64{}
	placed := map[int64]bool{}
	refs := map[int64]paysync.EntryRef{} // the entries behind each new pay part, for previews
	for _, pc := range ok {
		refs[pc.Entry] = pc.New.Ref()
	}
	place := func(row int64, ls []mapping.Line) {
		for _, l := range ls {
			if l.Skip != "" {
				continue
			}
			i := planner.Place(l)
			// An entry's lines are placed together: a repeat is the last one
			// (an aggregate of thousands of entries is not searched).
			if n := len(links[i]); n == 0 || links[i][n-1] != row {
				links[i] = append(links[i], row)
			}
		}
		placed[row] = true
	}
	for _, p := range parts {
		for _, le := range p.Entries {
			if placed[le.Row] || exclude[le.Row] {
				continue
			}
			if _, ok := refs[le.Row]; !ok {
				refs[le.Row] = le.Entry.Ref()
			}
			if _, corrected := status[le.Row]; corrected {
				place(le.Row, lines[le.Row])
				continue
			}
			ls, err := c.Mapper.Map(ctx, le.Entry)
			if err != nil && !mapping.OnlyProblems(err) {
				return nil, err
			}
			if err != nil {
				// The aggregate cannot be planned again: the corrections are
				// refused (kept, visible), and the version paid stays.
				return refuseAll(out, ok, fmt.Sprintf("the pay part it is in also sums entry %s (%s), which no longer maps under the current rules: %v",
					le.Entry.ID, le.Entry.Where(), mapping.Flatten(err)[0]), "fix the rules (or correct that entry too), then send the correction again"), nil
			}
			place(le.Row, ls)
		}
	}
	for _, pc := range ok {
		if !placed[pc.Entry] {
			place(pc.Entry, lines[pc.Entry])
		}
	}
	// A pay part it would replace that sums hours of a closed period is
	// left as paid: the corrections are refused, naming the period.
	for _, p := range parts {
		for _, le := range p.Entries {
			if cp, isClosed := ledger.ClosedOn(closed, le.Entry.Date); isClosed {
				return refuseAll(out, ok, fmt.Sprintf("the pay part it is in also sums entry %s dated %s, in period %s, closed on %s: a correction to a closed period is refused",
					le.Entry.ID, le.Entry.Date, cp.Period, cp.ClosedAt.UTC().Format("2006-01-02 15:04 UTC")),
					fmt.Sprintf("send the difference as a new entry in an open period, or reopen it (paysync periods open %s)", cp.Period)), nil
			}
		}
	}
	// A pay part that comes out as one replaced is kept as it is.
	var newParts []paysync.PlannedPayPart
	var newRows [][]int64
	supersede := slices.Clone(parts)
	for _, pl := range planner.Take(true) {
		if len(pl.Problems) > 0 {
			return refuseAll(out, ok, fmt.Sprintf("the pay part it would make cannot be sent: %v", errors.Join(pl.Problems...)),
				"round it in the source, or set rounding.places in the rules file"), nil
		}
		if j := sameAs(supersede, pl.PayPart, links[pl.Index]); j >= 0 {
			supersede = slices.Delete(supersede, j, j+1)
			continue
		}
		pp := pl.PayPart
		for _, row := range links[pl.Index] {
			pp.Entries = append(pp.Entries, refs[row])
		}
		newParts = append(newParts, pp)
		newRows = append(newRows, links[pl.Index])
	}
	company := ""
	switch {
	case len(supersede) > 0:
		company = supersede[0].CompanyID
	case len(newParts) > 0:
		company = newParts[0].CompanyID
	}
	out.unit = ledger.Correction{SourceID: source, CompanyID: company, Pending: ok, Status: status,
		Supersede: supersede, PayParts: newParts, PayPartRows: newRows, BatchSize: c.BatchSize}
	return out, nil
}

// sameAs returns the index of the part among parts that pp (of the entry
// rows) would replace with the same content, or -1.
func sameAs(parts []ledger.SupersedablePart, pp paysync.PlannedPayPart, rows []int64) int {
	for j, p := range parts {
		if p.CompanyID != pp.CompanyID || p.EmployeeID != pp.EmployeeID || p.Code != pp.Code || p.Rule != pp.Rule ||
			!sameDec(p.Units, pp.Units) || !sameDec(p.Rate, pp.Rate) || !sameDec(p.Amount, pp.Amount) || len(p.Entries) != len(rows) {
			continue
		}
		same := true
		for _, le := range p.Entries {
			if !slices.Contains(rows, le.Row) {
				same = false
				break
			}
		}
		if same {
			return j
		}
	}
	return -1
}

// sameDec reports whether two optional decimals are equal (exactly).
func sameDec(a, b decimal.NullDecimal) bool {
	return a.Valid == b.Valid && (!a.Valid || a.Decimal.Equal(b.Decimal))
}

// deleteSupport is a Wire that knows whether the payroll server deletes
// pay parts (payroll.Schema): an error wraps payroll.ErrNoDelete when it
// does not.
type deleteSupport interface{ DeleteSupport() error }

// cannotDelete reports whether the payroll server offers no delete
// mutation: what it holds stays as it is.
func (c *Corrector) cannotDelete() bool {
	ds, ok := c.Wire.(deleteSupport)
	return ok && ds.DeleteSupport() != nil
}

// refuseNoDelete returns why unit cannot be applied when it replaces pay
// parts created in payroll and the server cannot delete them; nothing is
// recorded, so its corrections stay pending.
func (c *Corrector) refuseNoDelete(unit ledger.Correction) error {
	ds, ok := c.Wire.(deleteSupport)
	if !ok {
		return nil
	}
	for _, p := range unit.Supersede {
		if p.State == paysync.PartCreated || p.PayrollID != "" {
			if err := ds.DeleteSupport(); err != nil {
				return fmt.Errorf("%d pay parts of company %s would be replaced: %w", len(unit.Supersede), unit.CompanyID, err)
			}
			return nil
		}
	}
	return nil
}
