package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/shopspring/decimal"
)

// Reconciler is the one place that plans: payroll must hold, for every
// group (company × employee × code × rate × period) of an open period, the
// exact total of the lines of the entries that count (the desired state,
// kept by the ledger); the pay parts paysync has live there are the actual
// state. The reconciler takes what intake recorded into the desired state
// (Absorb: each new version mapped to its lines), plans the difference for
// the groups that changed (Plan) and records it ledger first (Apply); the
// Deliverer sends what it recorded, deletes before creates.
type Reconciler struct {
	L         ReconcileLedger
	Mapper    *mapping.Mapper // nil: nothing new is absorbed (a command without payroll's people)
	Rules     *mapping.Rules
	Wire      mapping.WireChecker
	BatchSize int
	// Linger, in the daemon, lets a plan's part-full batch of a company wait
	// for more, up to Linger after its oldest group changed (a command
	// records everything at once: 0).
	Linger time.Duration
	Now    func() time.Time // default time.Now
	Log    *slog.Logger
}

// ReconcileLedger is what the reconciler needs of the ledger.
type ReconcileLedger interface {
	UnabsorbedAfter(ctx context.Context, after ledger.Cursor, limit int) ([]ledger.Unabsorbed, error)
	Absorb(ctx context.Context, as []ledger.Absorbed) error
	Waiting(ctx context.Context) (int, error)
	Untied(ctx context.Context) (int, error)
	Groups(ctx context.Context, f ledger.GroupFilter) ([]ledger.Group, error)
	ApplyPlan(ctx context.Context, company string, source int64, changes []ledger.GroupChange, batchSize int) ([]int64, int, error)
	Relinings(ctx context.Context, t ledger.Target, after int64, limit int) ([]ledger.Unabsorbed, error)
	Reline(ctx context.Context, as []ledger.Absorbed) error
	ClosedPeriods(ctx context.Context) ([]ledger.ClosedPeriod, error)
}

var _ ReconcileLedger = (*ledger.Ledger)(nil)

type deleteSupport interface{ DeleteSupport() error }

// absorbChunk is how many versions one transaction takes in: a
// reconcile's memory does not grow with the backlog.
const absorbChunk = 500

// Absorb maps what intake recorded and takes it into the desired state,
// a chunk at a time, until nothing is left. An entry the rules refuse is
// recorded as refused (a reject) and never blocks the others. A company
// payroll cannot be read for now (an outage, a revoked connection, a
// company this process's connection does not see) leaves its entries held
// and the others go on: a *PausedError says which, after the rest is done.
func (r *Reconciler) Absorb(ctx context.Context) (int, error) {
	if r.Mapper == nil {
		return 0, nil
	}
	total := 0
	var after ledger.Cursor
	paused := map[string]error{}
	for {
		us, err := r.L.UnabsorbedAfter(ctx, after, absorbChunk)
		if err != nil {
			return total, err
		}
		if len(us) == 0 {
			break
		}
		after = after.Next(us)
		as := make([]ledger.Absorbed, 0, len(us))
		for _, u := range us {
			company := r.companyOf(u)
			if paused[company] != nil {
				continue
			}
			a, err := r.mapOne(ctx, u)
			if err == nil && a.Reject != nil && a.Reject.Field == "company_id" {
				// Intake saw the company (it checks it): a company this
				// process cannot see now is not a fault of the entry.
				err = errors.New(a.Reject.Message)
			}
			if err != nil {
				paused[company] = err
				continue
			}
			as = append(as, a)
		}
		if err := r.L.Absorb(ctx, as); err != nil {
			return total, err
		}
		total += len(as)
	}
	if len(paused) > 0 {
		return total, &PausedError{Companies: paused}
	}
	return total, nil
}

// Paused reports whether err is only a *PausedError: the other
// companies' entries were taken in.
func Paused(err error) bool {
	var p *PausedError
	return errors.As(err, &p)
}

// PausedError: the entries of these companies stay held, for now.
type PausedError struct {
	Companies map[string]error
}

func (e *PausedError) Error() string {
	var parts []string
	for _, co := range sortedKeys(e.Companies) {
		parts = append(parts, fmt.Sprintf("company %s: %v", co, e.Companies[co]))
	}
	return "entries held until payroll can be read: " + strings.Join(parts, "; ")
}

// companyOf is the company of what u holds, as stored (the default one
// when it names none).
func (r *Reconciler) companyOf(u ledger.Unabsorbed) string {
	var e struct {
		CompanyID string `json:"company_id"`
	}
	_ = json.Unmarshal(u.Data, &e)
	if e.CompanyID == "" && r.Mapper != nil {
		return r.Mapper.Company()
	}
	return e.CompanyID
}

// Reline maps the versions of t again under the current rules (a replay).
// A version the rules refuse keeps what it was mapped to before: its
// refusal is returned (a *RefusedError, after the others are mapped), never
// a reason to drop hours from payroll.
func (r *Reconciler) Reline(ctx context.Context, t ledger.Target) (int, error) {
	if r.Mapper == nil {
		return 0, errors.New("replay: the rules need payroll's employees, and none were read")
	}
	var after int64
	total := 0
	refused := &RefusedError{}
	for {
		us, err := r.L.Relinings(ctx, t, after, absorbChunk)
		if err != nil || len(us) == 0 {
			if err == nil && refused.N > 0 {
				err = refused
			}
			return total, err
		}
		as, err := r.mapAll(ctx, us)
		if err != nil {
			return total, err
		}
		keep := as[:0]
		for _, a := range as {
			if a.Reject != nil {
				refused.add(a)
				continue
			}
			keep = append(keep, a)
		}
		if err := r.L.Reline(ctx, keep); err != nil {
			return total, err
		}
		after = us[len(us)-1].Version
		total += len(keep)
	}
}

// RefusedError: the current rules refuse entries a replay maps again; they
// keep what they were mapped to before.
type RefusedError struct {
	N       int
	First   []string // the first few, each "source:line: entry: message"
	Entries []int64  // the entries (entries.id)
}

func (e *RefusedError) add(a ledger.Absorbed) {
	e.N++
	e.Entries = append(e.Entries, a.Entry)
	if len(e.First) < 10 {
		r := a.Reject
		e.First = append(e.First, fmt.Sprintf("%s:%d: entry %s: %s: %s", a.Source, a.Line, r.EntryID, r.Field, r.Message))
	}
}

func (e *RefusedError) Error() string {
	noun := "problems: the current rules refuse these entries"
	if e.N == 1 {
		noun = "problem: the current rules refuse this entry"
	}
	return fmt.Sprintf("%d %s (they stay as they were; fix the rules and replay again): %s", e.N, noun, strings.Join(e.First, "; "))
}

func (r *Reconciler) mapAll(ctx context.Context, us []ledger.Unabsorbed) ([]ledger.Absorbed, error) {
	as := make([]ledger.Absorbed, len(us))
	for i, u := range us {
		a, err := r.mapOne(ctx, u)
		if err != nil {
			return nil, err
		}
		as[i] = a
	}
	return as, nil
}

// mapOne is what the rules make of one version: its lines, a skip, or a
// refusal. Only a failure to map (payroll unreadable) is an error.
func (r *Reconciler) mapOne(ctx context.Context, u ledger.Unabsorbed) (ledger.Absorbed, error) {
	a := ledger.Absorbed{Unabsorbed: u}
	var e paysync.Entry
	if err := json.Unmarshal(u.Data, &e); err != nil {
		a.Status, a.Reject = paysync.EntryRejected, &ledger.NewReject{Line: u.Line, Message: "stored entry unreadable: " + err.Error()}
		return a, nil
	}
	e.Source, e.Line = u.Source, u.Line
	a.Date = e.Date
	if e.Deleted {
		a.Status, a.Note = paysync.EntrySkipped, "deleted"
		return a, nil
	}
	out, err := mapEntry(ctx, r.Mapper, e)
	if err != nil {
		return a, err
	}
	a.Status, a.Note = out.row.Status, out.row.Note
	if out.problem != nil {
		rj := rejectOf(mapping.Flatten(out.problem)[0])
		a.Reject = &rj
		return a, nil
	}
	rules := r.rules()
	for i, l := range out.lines {
		p, err := rules.PeriodOf(l.Date)
		if err != nil {
			a.Status, a.Reject = paysync.EntryRejected, &ledger.NewReject{EntryID: e.ID, Line: u.Line, Field: "date", Message: err.Error()}
			a.Lines = nil
			return a, nil
		}
		// A group's lines share its amount product (the rule's name does
		// not matter: two rules that pay the same way are one group).
		shape := l.Shape()
		nl := ledger.NewLine{Group: ledger.GroupKey{Company: l.CompanyID, Employee: l.EmployeeID, Code: l.Code, Rate: "-", Period: p, Own: shape},
			Units: l.Units, Amount: l.Amount, EmployeeName: l.EmployeeName, Description: l.Description, Rule: shape}
		if l.Rate.Valid {
			nl.Group.Rate = l.Rate.Decimal.String()
		}
		if !rules.Aggregate {
			nl.Group.Own = e.Key()
			if shape != "" {
				nl.Group.Own = shape + "\x1f" + e.Key()
			}
			if len(out.lines) > 1 {
				nl.Group.Own += fmt.Sprintf("#%d", i)
			}
		}
		if l.UnitsFromHours {
			nl.Seconds = decimal.NewNullDecimal(l.Hours.Seconds)
		}
		a.Lines = append(a.Lines, nl)
	}
	return a, nil
}

func (r *Reconciler) rules() *mapping.Rules {
	switch {
	case r.Rules != nil:
		return r.Rules
	case r.Mapper != nil:
		return r.Mapper.Rules()
	}
	return mapping.DefaultRules()
}

// Change is one group's line of a plan: what payroll holds for it (before)
// and what it must hold (after), and what the reconciler does about it.
type Change struct {
	Group   ledger.Group
	Before  paysync.Numbers // the sum of its live pay parts
	After   paysync.Numbers // desired (zero Numbers: nothing)
	Desired *paysync.PlannedPayPart
	Kind    ChangeKind
	Why     string // Late, Waiting, Problem
	change  ledger.GroupChange
}

// ChangeKind says what a plan does with a group.
type ChangeKind string

// The kinds of change.
const (
	ChangeNone    ChangeKind = "unchanged" // payroll holds what it must
	ChangeCreate  ChangeKind = "create"
	ChangeReplace ChangeKind = "replace" // delete what it holds, create the new total
	ChangeDelete  ChangeKind = "delete"
	ChangeLate    ChangeKind = "late"    // its period is closed: never sent there
	ChangeWaiting ChangeKind = "waiting" // a decrease on a server without delete, or a call in flight
	ChangeProblem ChangeKind = "problem" // the total cannot be sent (a value the wire cannot carry)
)

// Plan is what the reconciler would do now.
type Plan struct {
	Changes []Change
	// Legacy counts entries from before the desired state not yet mapped:
	// nothing is planned until they are.
	Legacy int
	// Refused, in a replay's simulation, are the entries the current rules
	// refuse (they keep what they were mapped to before).
	Refused *RefusedError
}

// Sorted is the plan's changes in the order paysync plan and the console
// show them: company, period, employee, code.
func (p Plan) Sorted() []Change {
	cs := append([]Change(nil), p.Changes...)
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i].Group.Key, cs[j].Group.Key
		if a.Company != b.Company {
			return a.Company < b.Company
		}
		if a.Period.String() != b.Period.String() {
			return a.Period.String() < b.Period.String()
		}
		if cs[i].Group.EmployeeName != cs[j].Group.EmployeeName {
			return cs[i].Group.EmployeeName < cs[j].Group.EmployeeName
		}
		return a.Code < b.Code
	})
	return cs
}

// Sends says whether the plan creates or deletes anything.
func (p Plan) Sends() bool {
	for _, c := range p.Changes {
		if c.Kind == ChangeCreate || c.Kind == ChangeReplace || c.Kind == ChangeDelete {
			return true
		}
	}
	return false
}

// PlanFilter narrows a plan.
type PlanFilter struct {
	Company string
	Period  *paysync.Period
	All     bool // every group, not only those that changed since planned
}

// planPage is how many groups one read plans.
const planPage = 500

// Plan computes what the reconciler would send now, group by group, with
// the same code Apply uses; it records nothing.
func (r *Reconciler) Plan(ctx context.Context, f PlanFilter) (Plan, error) {
	var out Plan
	var err error
	if out.Legacy, err = r.L.Waiting(ctx); err != nil {
		return out, err
	}
	var after int64
	for {
		gs, err := r.L.Groups(ctx, ledger.GroupFilter{Company: f.Company, Period: f.Period, Dirty: !f.All, Frozen: true, After: after, Limit: planPage})
		if err != nil {
			return out, err
		}
		for _, g := range gs {
			c := r.decide(ctx, g)
			if c.Kind != ChangeNone || f.All {
				out.Changes = append(out.Changes, c)
			}
		}
		if len(gs) < planPage {
			break
		}
		after = gs[len(gs)-1].ID
	}
	return out, nil
}

// decide is the one decision: what a group needs.
func (r *Reconciler) decide(ctx context.Context, g ledger.Group) Change {
	c := Change{Group: g}
	var ids []int64
	busy := false
	for _, lp := range g.Live {
		ids = append(ids, lp.ID)
		c.Before.Units = addNull(c.Before.Units, lp.Units)
		c.Before.Amount = addNull(c.Before.Amount, lp.Amount)
		c.Before.Rate = lp.Rate
		busy = busy || lp.BatchState == paysync.BatchSending
	}
	c.change = ledger.GroupChange{Group: g.ID, Version: g.Version, Replace: ids}
	if g.Lines > 0 {
		rate := decimal.NullDecimal{}
		if g.Key.Rate != "-" {
			rate = paysync.Dec(g.Key.Rate)
		}
		pp, probs := mapping.Finish(r.rules(), r.Wire, mapping.GroupTotals{CompanyID: g.Key.Company, EmployeeID: g.Key.Employee, EmployeeName: g.EmployeeName,
			Code: g.Key.Code, Description: g.Description, Product: g.Rule, Rate: rate, Seconds: g.Seconds, Units: g.Units, Amount: g.Amount, Lines: g.Lines})
		if len(probs) > 0 {
			c.Kind, c.Why = ChangeProblem, errors.Join(probs...).Error()
			return c
		}
		if !zeroPart(pp) {
			c.Desired = &pp
			c.After = pp.Numbers
		}
	}
	same := false
	switch {
	case c.Desired == nil:
		same = len(g.Live) == 0
	case len(g.Live) == 1:
		lp := g.Live[0]
		same = sameDec(lp.Units, c.Desired.Units) && sameDec(lp.Rate, c.Desired.Rate) && sameDec(lp.Amount, c.Desired.Amount)
	case len(g.Live) > 1:
		// Pay parts from before (one per rule) that sum to the total are
		// left as they are: no call for nothing.
		same = sameDec(c.Before.Units, c.Desired.Units) && sameDec(c.Before.Amount, c.Desired.Amount) && sameDec(c.Before.Rate, c.Desired.Rate)
	}
	switch {
	case same:
		c.Kind, c.change.Clean = ChangeNone, true
		return c
	case g.Frozen:
		c.Kind, c.Why = ChangeLate, "its period is closed: never sent there"
		return c
	case busy:
		c.Kind, c.Why = ChangeWaiting, "a call for it is in flight"
		return c
	}
	if len(g.Live) > 0 && r.cannotDelete() {
		diff, ok := difference(c)
		if !ok {
			c.Kind, c.Why = ChangeWaiting, "a decrease: this payroll server offers no delete mutation (delete by hand in payroll)"
			return c
		}
		c.Kind, c.change.Beside = ChangeCreate, true
		c.change.Create = []paysync.PlannedPayPart{diff}
		return c
	}
	switch {
	case c.Desired == nil:
		c.Kind = ChangeDelete
	case len(g.Live) == 0:
		c.Kind = ChangeCreate
		c.change.Create = []paysync.PlannedPayPart{*c.Desired}
	default:
		c.Kind = ChangeReplace
		c.change.Create = []paysync.PlannedPayPart{*c.Desired}
	}
	return c
}

// difference is the pay part that brings a group up to its total beside
// what it holds, when the total grew (units and amount alike).
func difference(c Change) (paysync.PlannedPayPart, bool) {
	if c.Desired == nil {
		return paysync.PlannedPayPart{}, false
	}
	d := *c.Desired
	sub := func(a, b decimal.NullDecimal) (decimal.NullDecimal, bool) {
		switch {
		case !a.Valid && !b.Valid:
			return a, true
		case !a.Valid:
			return a, false
		case !b.Valid:
			return a, a.Decimal.IsPositive()
		}
		x := a.Decimal.Sub(b.Decimal)
		return decimal.NewNullDecimal(x), !x.IsNegative()
	}
	var ok1, ok2 bool
	d.Units, ok1 = sub(c.Desired.Units, c.Before.Units)
	d.Amount, ok2 = sub(c.Desired.Amount, c.Before.Amount)
	return d, ok1 && ok2 && !zeroPart(d)
}

func zeroPart(pp paysync.PlannedPayPart) bool {
	zero := func(v decimal.NullDecimal) bool { return !v.Valid || v.Decimal.IsZero() }
	return zero(pp.Units) && zero(pp.Amount)
}

func addNull(a, b decimal.NullDecimal) decimal.NullDecimal {
	switch {
	case !b.Valid:
		return a
	case !a.Valid:
		return b
	}
	return decimal.NewNullDecimal(a.Decimal.Add(b.Decimal))
}

func sameDec(a, b decimal.NullDecimal) bool {
	return a.Valid == b.Valid && (!a.Valid || a.Decimal.Equal(b.Decimal))
}

// maxStale is how many times Apply plans a company again when groups
// changed under it before it leaves them for the next reconcile.
const maxStale = 5

// Apply absorbs what intake recorded, plans the groups that changed and
// records the plan, ledger first, company by company; it returns the
// batches to send (the Deliverer sends them: deletes first). source is
// the import the reconcile is for (0: none in particular).
func (r *Reconciler) Apply(ctx context.Context, source int64) ([]int64, error) {
	_, aerr := r.Absorb(ctx)
	var paused *PausedError
	if aerr != nil && !errors.As(aerr, &paused) {
		return nil, aerr
	}
	// A paused company's entries wait; the others are planned now.
	bs, err := r.Reconcile(ctx, source)
	if err == nil {
		err = aerr
	}
	return bs, err
}

// Reconcile is Apply without absorbing: the groups whose desired state
// changed (an operation, a period opened) are planned and recorded; held
// entries wait for their trigger (the daemon's debounced Apply).
func (r *Reconciler) Reconcile(ctx context.Context, source int64) ([]int64, error) {
	if n, err := r.L.Waiting(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		return nil, fmt.Errorf("reconcile: %d entries from before this version of paysync are not mapped yet (paysync run or import maps them with the rules)", n)
	}
	if n, err := r.L.Untied(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		return nil, fmt.Errorf("reconcile: %d pay parts from before this version of paysync are not what the current rules make of their entries (a rate or a rule changed since they were paid): nothing is sent until they match; map them with the rules they were paid with (paysync replay --period PERIOD --rules OLD.yaml), or revert their batches", n)
	}
	var batches []int64
	size := r.BatchSize
	if size <= 0 {
		size = 100
	}
	for try := 0; try < maxStale; try++ {
		stale := 0
		// A page of dirty groups at a time, in order of id: the plan's
		// memory does not grow with the backlog. A company's changes are
		// recorded a whole number of batches at a time (the rest waits for
		// the next page), so batches go out full. Groups that need nothing
		// only lose their mark; those that changed meanwhile stay dirty
		// (stale) and are planned again.
		pending := map[string][]ledger.GroupChange{}
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		oldest := map[string]time.Time{} // per company, the oldest change waiting
		record := func(co string, all bool) error {
			cs := pending[co]
			if all && r.Linger > 0 && now().Sub(oldest[co]) < r.Linger {
				all = false // the rest waits for more, up to the linger
			}
			if !all {
				// Up to the last change that completes a batch.
				cut, n := 0, 0
				for i, c := range cs {
					if n += len(c.Create); n%size == 0 {
						cut = i + 1
					}
				}
				cs = cs[:cut]
			}
			if len(cs) == 0 {
				return nil
			}
			pending[co] = pending[co][len(cs):]
			if len(pending[co]) == 0 {
				delete(oldest, co)
			}
			bs, n, err := r.L.ApplyPlan(ctx, co, source, cs, size)
			batches, stale = append(batches, bs...), stale+n
			return err
		}
		for after := int64(0); ; {
			gs, err := r.L.Groups(ctx, ledger.GroupFilter{Dirty: true, Frozen: true, After: after, Limit: planPage})
			if err != nil {
				return batches, err
			}
			for _, g := range gs {
				c := r.decide(ctx, g)
				switch c.Kind {
				case ChangeLate, ChangeWaiting, ChangeProblem:
					continue
				}
				pending[g.Key.Company] = append(pending[g.Key.Company], c.change)
				if o, ok := oldest[g.Key.Company]; !ok || g.DirtyAt.Before(o) {
					oldest[g.Key.Company] = g.DirtyAt
				}
			}
			for _, co := range sortedKeys(pending) {
				if err := record(co, len(gs) < planPage); err != nil {
					return batches, err
				}
			}
			if len(gs) < planPage {
				break
			}
			after = gs[len(gs)-1].ID
		}
		if stale == 0 {
			return batches, nil
		}
	}
	return batches, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cannotDelete reports whether the payroll server offers no delete
// mutation: a group then only grows (a pay part of the difference).
func (r *Reconciler) cannotDelete() bool {
	ds, ok := r.Wire.(deleteSupport)
	return ok && ds.DeleteSupport() != nil
}
