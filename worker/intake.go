package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// Intake is one path for every source (a file, the inbox, a NATS message,
// a replay of stored entries): each entry goes through the same step,
// identity → dedupe → map → validate → plan, and what it decides is
// recorded through one writer (intakeWriter). Sources differ only in how
// they read, look up known entries (a chunk at a time, or a group of
// messages at once) and commit: a file through the ledger's staging
// (ledger.StagedImport, in flat memory), a message through an intent in
// memory (ledger.ImportIntent, many committed in one transaction).

// entryStep is the per-entry step: identity → dedupe → map → validate.
// It decides; the caller records (sourceIntake).
type entryStep struct {
	mapper *mapping.Mapper
	// company is the company the source was addressed to (NATS: the
	// subject's company token), "" when it names none: an entry without
	// company_id takes it, one that names another is a problem.
	company string
	name    string // the source's name, for problems
	unit    string // "file" or "message", for problems
	fix     string // who fixes a duplicate id: "the export", "the publisher"
	origin  string // the source the entries are a statement of (stored with each)
	// closed are the periods closed once payroll ran: a correction of an
	// entry dated in one is refused.
	closed []ledger.ClosedPeriod
}

// entryVerdict is what becomes of an entry.
type entryVerdict int

const (
	entryTake       entryVerdict = iota // recorded as row: mapped (its lines planned), skipped or rejected
	entryDuplicate                      // known with the same content: nothing to record
	entryRefused                        // a problem before it could be taken: only the problem is recorded
	entryCorrection                     // paid before with other content: recorded as a correction (row: the new version)
	entryAgain                          // known, counting no longer: listed again as it is (row: the version), it counts again
)

// entryOutcome is the step's decision for one entry.
type entryOutcome struct {
	verdict entryVerdict
	row     ledger.NewEntry // entryTake: the entry's ledger row
	lines   []mapping.Line  // entryTake, mapped: into the planner
	skip    string          // a skip reason to count
	problem error           // a fault of the input (a Problem, or several)
}

// take runs the step for e. known holds the entries the ledger knows
// among the source's (by Key); seenBefore reports whether an entry with
// e's key came earlier in this source, and remembers it. Only a fault of
// the input is an input problem: any other error (payroll could not be
// read while mapping) is returned, and the entry must be taken again
// later.
func (s *entryStep) take(ctx context.Context, e paysync.Entry, known map[string]ledger.KnownEntry, seenBefore func(key string) bool) (entryOutcome, error) {
	// An entry that took the source's company is the same entry as the
	// one without it: stored before the subject decided (or sent once
	// with and once without company_id), it is a duplicate.
	asSent := ""
	if s.company != "" {
		if e.CompanyID != "" && e.CompanyID != s.company {
			return refused(&mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "company_id",
				Msg:  fmt.Sprintf("is %s, but the message was published for company %s (%s)", e.CompanyID, s.company, s.name),
				Hint: "publish the entry on its company's subject, or fix company_id"}), nil
		}
		if e.CompanyID == "" {
			var err error
			if asSent, _, err = paysync.EntryHash(e); err != nil {
				return entryOutcome{}, err
			}
			// Stored with the entry, so a replay maps it to the same company.
			e.CompanyID = s.company
		}
	}
	h, data, err := paysync.EntryHash(e)
	if err != nil {
		return entryOutcome{}, err
	}
	key := e.Key()
	if seenBefore(key) {
		return refused(&mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
			Msg: "duplicate entry id in this " + s.unit, Hint: "entry ids must be unique; fix " + s.fix}), nil
	}
	// An entry known to the ledger gets a version of this import: the
	// same content listed again (a duplicate; reverting the import it came
	// from keeps it counting), or new content or a tombstone (a
	// correction). One that no longer counts (its batch or period
	// reverted) counts again, listed again. One dated in a closed period
	// is recorded all the same: its group there is frozen (a late change,
	// listed by paysync plan, never sent). An entry whose import was
	// reverted, or that was skipped or refused, is taken again.
	if k, ok := known[key]; ok && k.Status != paysync.EntryRejected {
		same := k.Hash == h || (asSent != "" && k.Hash == asSent)
		switch {
		case same && k.Live:
			return entryOutcome{verdict: entryDuplicate, row: ledger.NewEntry{Entry: e, Hash: k.Hash, Data: data, Status: paysync.EntryMapped, Origin: s.origin}}, nil
		case same && k.Status != paysync.EntryMapped:
			return entryOutcome{verdict: entryDuplicate}, nil
		case same:
			// It no longer counts (its batch or period reverted): listed
			// again, it counts again.
			return entryOutcome{verdict: entryAgain, row: ledger.NewEntry{Entry: e, Hash: h, Data: data, Status: paysync.EntryMapped, Origin: s.origin}}, nil
		case k.Status == paysync.EntryMapped:
			// A new version the rules refuse is a problem of this import:
			// the version that counts stays.
			if !e.Deleted {
				out, err := mapEntry(ctx, s.mapper, e)
				if err != nil {
					return entryOutcome{}, err
				}
				if out.problem != nil {
					return refused(out.problem), nil
				}
			}
			return entryOutcome{verdict: entryCorrection, row: ledger.NewEntry{Entry: e, Hash: h, Data: data, Status: paysync.EntryMapped, Origin: s.origin}}, nil
		}
	}
	if e.Deleted {
		// A tombstone of an entry never paid: nothing to remove. Stored
		// (skipped), so that the entry arriving later is taken.
		return entryOutcome{verdict: entryTake, skip: "deleted",
			row: ledger.NewEntry{Entry: e, Hash: h, Data: data, Status: paysync.EntrySkipped, Note: "deleted", Origin: s.origin}}, nil
	}
	out, err := mapEntry(ctx, s.mapper, e)
	out.row.Entry, out.row.Hash, out.row.Data, out.row.Origin = e, h, data, s.origin
	return out, err
}

func refused(p error) entryOutcome { return entryOutcome{verdict: entryRefused, problem: p} }

// mapEntry maps e: taken as mapped (with its lines), skipped (and why), or
// rejected (its problem); a transient failure is an error.
func mapEntry(ctx context.Context, m *mapping.Mapper, e paysync.Entry) (entryOutcome, error) {
	out := entryOutcome{verdict: entryTake, row: ledger.NewEntry{Entry: e, Status: paysync.EntryMapped}}
	lines, err := m.Map(ctx, e)
	switch {
	case err != nil && !mapping.OnlyProblems(err):
		return entryOutcome{}, err
	case err != nil:
		out.row.Status, out.problem = paysync.EntryRejected, err
	case len(lines) == 0:
		out.row.Status, out.row.Note = paysync.EntrySkipped, "no pay part"
	case lines[0].Skip != "":
		out.row.Status, out.row.Note, out.skip = paysync.EntrySkipped, lines[0].Skip, lines[0].Skip
	default:
		out.lines = lines
	}
	return out, nil
}

// intakeWriter records what intake decides for one source: the ledger's
// one write API for intake, staged in the ledger for files
// (*ledger.StagedImport) or kept in memory for small inputs such as one
// message (*ledger.ImportIntent, committed many at a time).
type intakeWriter interface {
	AddEntry(e ledger.NewEntry, data []byte) (int64, error)
	AddCorrection(e ledger.NewEntry, data []byte)
	Link(entry int64, part int)
	AddPayPart(part int, pp paysync.PlannedPayPart)
	DropPayPart(part int)
	AddReject(phase int, r ledger.NewReject)
}

var (
	_ intakeWriter = (*ledger.StagedImport)(nil)
	_ intakeWriter = (*ledger.ImportIntent)(nil)
)

// sourceIntake takes one source's entries through the step, plans their
// pay parts (one planner mode: lines placed, complete pay parts taken,
// each entry linked to its pay parts by the writer) and records it all.
type sourceIntake struct {
	step         entryStep
	w            intakeWriter
	planner      *mapping.Planner
	aggregate    bool
	allOrNothing bool
	rep          *Report
	probs        *problemLog
	// period, for a period statement: an entry dated outside it is not
	// taken (a warning); periods collects the statement's periods (the
	// fixed one, or each row's under a derived kind).
	period    *PeriodStatement
	periods   map[paysync.Period]bool
	companies []string // the statement's (addCompany)
	// hold records mapped entries as held, without pay parts: the
	// reconciler takes them into the desired state and plans their groups
	// (every commit; only a preview plans pay parts here).
	hold bool
}

func newSourceIntake(step entryStep, w intakeWriter, rules *mapping.Rules, wire mapping.WireChecker, rep *Report, allOrNothing bool, maxProblems int) *sourceIntake {
	if rules == nil {
		rules = mapping.DefaultRules()
	}
	return &sourceIntake{step: step, w: w, planner: mapping.NewPlanner(rules, wire), aggregate: rules.Aggregate,
		allOrNothing: allOrNothing, rep: rep, probs: newProblemLog(maxProblems)}
}

// problem records err (a Problem, several joined, or a fatal reader error)
// as rejects.
func (s *sourceIntake) problem(phase int, err error) { s.probs.add(s.w, phase, err) }

// keep says whether entries and pay parts are still recorded: an
// all-or-nothing source with a problem keeps none.
func (s *sourceIntake) keep() bool { return !s.allOrNothing || s.probs.total == 0 }

// rejected says whether the source is refused as a whole.
func (s *sourceIntake) rejected() bool { return s.allOrNothing && s.probs.total > 0 }

// read reads up to n entries from rd into chunk, counting them and
// recording the reader's problems; done is set at the end of the input
// (or a reader failure, recorded as a problem).
func (s *sourceIntake) read(ctx context.Context, rd mapping.Reader, chunk []paysync.Entry, n int) (_ []paysync.Entry, done bool, err error) {
	for len(chunk) < n {
		if err := ctx.Err(); err != nil {
			return chunk, true, err
		}
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return chunk, true, nil
		}
		var p *mapping.Problem
		if errors.As(err, &p) {
			s.rep.Entries++
			s.problem(ledger.PhaseRead, err)
			continue
		}
		if err != nil {
			s.problem(ledger.PhaseRead, err)
			return chunk, true, nil
		}
		s.rep.Entries++
		chunk = append(chunk, e)
	}
	return chunk, false, nil
}

// entry takes one entry through the step and records the outcome (and,
// without aggregation, its pay parts).
func (s *sourceIntake) entry(ctx context.Context, e paysync.Entry, known map[string]ledger.KnownEntry, seenBefore func(string) bool) error {
	if !s.inPeriod(e) {
		return nil
	}
	out, err := s.step.take(ctx, e, known, seenBefore)
	if err != nil {
		return err
	}
	return s.record(out)
}

// inPeriod reports whether a period statement takes e: an entry dated
// outside its period is a warning, not imported. A tombstone (no date)
// and an entry without a statement are always taken.
func (s *sourceIntake) inPeriod(e paysync.Entry) bool {
	if s.period == nil || e.Deleted {
		return true
	}
	p, ok := s.period.Period, !s.period.Period.IsZero()
	if !ok {
		var err error
		if p, err = paysync.PeriodOf(s.period.Kind, e.Date); err != nil {
			return true // not a date: the step says so
		}
	}
	if !p.Contains(e.Date) {
		s.rep.Outside++
		if len(s.rep.Warnings) < DefaultMaxProblems {
			s.rep.Warnings = append(s.rep.Warnings, fmt.Sprintf("%s: entry %s: dated %s, outside %s: not imported", e.Where(), e.ID, e.Date, p))
		}
		return false
	}
	if s.periods == nil {
		s.periods = map[paysync.Period]bool{}
	}
	s.periods[p] = true
	s.addCompany(e.CompanyID)
	return true
}

// addCompany notes a company the statement is of: an entry's, or (none
// given) the default company's.
func (s *sourceIntake) addCompany(c string) {
	if c == "" && s.step.mapper != nil {
		c = s.step.mapper.Company()
	}
	if c != "" && !slices.Contains(s.companies, c) {
		s.companies = append(s.companies, c)
	}
}

// statement is the ledger's statement of a period import (nil without).
func (s *sourceIntake) statement() *ledger.Statement {
	if s.period == nil {
		return nil
	}
	// The companies of its rows (an export of one company never removes
	// another's hours); one without a row is of the default company.
	if len(s.companies) == 0 {
		s.addCompany("")
	}
	st := &ledger.Statement{Origin: s.step.origin, Companies: slices.Clone(s.companies)}
	if !s.period.Period.IsZero() {
		st.Periods = []paysync.Period{s.period.Period}
		return st
	}
	for p := range s.periods {
		st.Periods = append(st.Periods, p)
	}
	slices.SortFunc(st.Periods, func(a, b paysync.Period) int { return a.First().Compare(b.First()) })
	return st
}

// PeriodStatement makes an import the complete statement of its origin's
// entries for a period: entries of that origin and period no longer in it
// are removed from payroll, rows dated outside it are warnings.
type PeriodStatement struct {
	Period paysync.Period     // a fixed period, or (zero)
	Kind   paysync.PeriodKind // each row's period (month, week): the statement covers those
}

// record records the step's outcome for one entry.
func (s *sourceIntake) record(out entryOutcome) error {
	switch out.verdict {
	case entryDuplicate:
		s.rep.Duplicates++
		if s.keep() && s.hold && out.row.Data != nil {
			s.w.AddCorrection(out.row, out.row.Data)
		}
		return nil
	case entryRefused:
		s.problem(ledger.PhaseEntry, out.problem)
		return nil
	case entryAgain:
		s.rep.Mapped++
		if s.keep() {
			s.w.AddCorrection(out.row, out.row.Data)
		}
		return nil
	case entryCorrection:
		s.rep.Corrections++
		if s.keep() {
			s.w.AddCorrection(out.row, out.row.Data)
		}
		return nil
	}
	if out.problem != nil {
		s.problem(ledger.PhaseEntry, out.problem)
	}
	if out.skip != "" {
		s.rep.Skipped[out.skip]++
	}
	if out.row.Status == paysync.EntryMapped {
		s.rep.Mapped++
		if s.hold {
			out.row.Note = ledger.HeldNote
		}
	}
	var seq int64
	if s.keep() {
		var err error
		if seq, err = s.w.AddEntry(out.row, out.row.Data); err != nil {
			return err
		}
	}
	for _, l := range out.lines {
		p := s.planner.Place(l)
		if s.keep() {
			s.w.Link(seq, p)
		}
	}
	// Without aggregation each pay part is complete at once.
	if !s.aggregate && len(out.lines) > 0 {
		s.add(s.planner.Take(false))
	}
	return nil
}

// finish records the pay parts complete at the end (aggregated) and
// fills in the report's problems.
func (s *sourceIntake) finish() {
	s.add(s.planner.Take(true))
	s.rep.Problems, s.rep.ProblemsOmitted = s.probs.list()
	if s.rejected() {
		s.rep.PayParts, s.rep.Corrections = 0, 0
	}
}

// add records complete pay parts; one with a problem is dropped (and so is
// an entry that went only into dropped ones).
func (s *sourceIntake) add(placed []mapping.Placed) {
	for _, pl := range placed {
		switch {
		case len(pl.Problems) > 0:
			for _, p := range pl.Problems {
				s.problem(ledger.PhasePlan, p)
			}
			if s.keep() {
				s.w.DropPayPart(pl.Index)
			}
		case s.hold:
			// Held for the reconciler: the pay parts it plans are the
			// group's; these only checked the entries' lines.
		case s.keep():
			s.w.AddPayPart(pl.Index, pl.PayPart)
			s.rep.PayParts++
		}
	}
}

// DefaultMaxProblems is how many problems a Report lists by default.
const DefaultMaxProblems = 1000

// InputError is a failure to read a source's input (not a problem in it,
// and not the ledger's): nothing of the source was committed.
type InputError struct {
	Source string
	Err    error
}

func (e *InputError) Error() string { return fmt.Sprintf("import %s: read: %v", e.Source, e.Err) }
func (e *InputError) Unwrap() error { return e.Err }

// problemLog records every problem as a reject and keeps the first few
// for the report, in the order the rejects are stored: the reader's, the
// entries', the pay parts'.
type problemLog struct {
	max    int
	phases [3][]error
	total  int
}

func newProblemLog(max int) *problemLog {
	if max <= 0 {
		max = DefaultMaxProblems
	}
	return &problemLog{max: max}
}

func (pl *problemLog) add(w intakeWriter, phase int, err error) {
	for _, p := range mapping.Flatten(err) {
		w.AddReject(phase, rejectOf(p))
		pl.total++
		if len(pl.phases[phase]) < pl.max {
			pl.phases[phase] = append(pl.phases[phase], p)
		}
	}
}

// list returns the problems to report and how many are left out.
func (pl *problemLog) list() ([]error, int) {
	var out []error
	for _, ps := range pl.phases {
		out = append(out, ps[:min(len(ps), pl.max-len(out))]...)
	}
	return out, pl.total - len(out)
}

// rejectOf is the ledger's record of one problem.
func rejectOf(p error) ledger.NewReject {
	var mp *mapping.Problem
	if errors.As(p, &mp) {
		return ledger.NewReject{EntryID: mp.EntryID, Line: mp.Line, Field: mp.Field, Message: mp.Msg, Hint: mp.Hint}
	}
	return ledger.NewReject{Message: p.Error()}
}
