package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// ImportLedger is what an import needs from the ledger beyond delivery.
type ImportLedger interface {
	SourceByHash(ctx context.Context, hash string) (ledger.Source, bool, error)
	BeginImport(ctx context.Context, in ledger.StreamImport) (*ledger.ImportTx, error)
	OpenBatches(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
}

var _ ImportLedger = (*ledger.Ledger)(nil)

// DefaultMaxProblems is how many problems a Report lists by default.
const DefaultMaxProblems = 1000

// Importer turns a source's payload into committed intent and delivers it.
type Importer struct {
	L         ImportLedger
	D         *Deliverer
	Mapper    *mapping.Mapper
	Rules     *mapping.Rules
	Wire      mapping.WireChecker
	Read      mapping.ReadOptions
	BatchSize int
	// AllOrNothing commits nothing of a source that has any problem (the
	// inbox's default file policy); otherwise the good entries go ahead
	// and the problems are recorded as rejects.
	AllOrNothing bool
	// Accumulate adds the pay parts to each company's open batch (sealed
	// by size or linger) instead of new batches: streaming sources.
	Accumulate bool
	// MaxProblems bounds the problems a Report lists (default
	// DefaultMaxProblems); every one is recorded as a reject all the same.
	MaxProblems int
}

// Report is what one import did.
type Report struct {
	ImportID   int64          `json:"import_id"`
	Source     string         `json:"source"`
	Duplicate  bool           `json:"duplicate_import"` // the same content was imported before
	Entries    int            `json:"entries"`
	Duplicates int            `json:"duplicate_entries"`
	Skipped    map[string]int `json:"skipped"`
	Problems   []error        `json:"-"`
	// ProblemsOmitted counts the problems beyond Importer.MaxProblems that
	// Problems leaves out (the ledger's rejects hold them all).
	ProblemsOmitted int     `json:"problems_omitted,omitempty"`
	PayParts        int     `json:"pay_parts"`
	Batches         []int64 `json:"batches"`
	Resumed         int     `json:"resumed_batches,omitempty"` // open batches of an earlier run delivered now
	RejectedAs      int64   `json:"rejected_as,omitempty"`     // all-or-nothing: the source recorded as rejected, with its rejects
	ImportedAt      string  `json:"-"`
}

// ProblemList returns the report's problems one by one.
func (r Report) ProblemList() []error { return mapping.Flatten(r.Problems...) }

// ProblemCount is the number of problems, including those left out of
// the list.
func (r Report) ProblemCount() int { return len(r.ProblemList()) + r.ProblemsOmitted }

// Plan reads, dedupes, maps and validates payload, and commits the intent:
// nothing is sent. A payload committed before is reported as a duplicate.
func (im *Importer) Plan(ctx context.Context, kind, name string, payload []byte) (Report, error) {
	return im.PlanFrom(ctx, kind, name, bytes.NewReader(payload))
}

// Import plans payload and delivers its batches (also those of an earlier
// run of the same content that are still open).
func (im *Importer) Import(ctx context.Context, kind, name string, payload []byte) (Report, error) {
	return im.ImportFrom(ctx, kind, name, bytes.NewReader(payload))
}

// ImportFrom is Import for input read from r (see PlanFrom).
func (im *Importer) ImportFrom(ctx context.Context, kind, name string, r io.Reader) (Report, error) {
	rep, err := im.PlanFrom(ctx, kind, name, r)
	if err != nil || rep.ImportID == 0 {
		return rep, err
	}
	open, err := im.L.OpenBatches(ctx, rep.ImportID)
	if err != nil {
		return rep, err
	}
	ids := make([]int64, len(open))
	for i, b := range open {
		ids[i] = b.ID
	}
	return rep, im.D.Deliver(ctx, ids)
}

// PlanFrom is Plan for input read from r, in memory that does not grow
// with its size: entries are read, checked and committed in chunks within
// one ledger transaction (the ledger is locked for writing meanwhile).
//
// When r can seek (a file), it is read once to hash it, so that a source
// imported before is recognised before anything else, and then again to
// import it. Otherwise the hash is checked at the end. An error reading r
// commits nothing. An all-or-nothing source with a problem is read again
// from the start to record only its rejects (a reader that cannot seek is
// first copied to a temporary file).
func (im *Importer) PlanFrom(ctx context.Context, kind, name string, r io.Reader) (Report, error) {
	var start int64
	rs, seekable := r.(io.ReadSeeker)
	if seekable {
		var err error
		if start, err = rs.Seek(0, io.SeekCurrent); err != nil {
			seekable = false // a pipe
		}
	}
	if !seekable && im.AllOrNothing {
		f, err := spool(r)
		if err != nil {
			return Report{Source: name, Skipped: map[string]int{}}, &InputError{name, err}
		}
		defer func() {
			f.Close()
			os.Remove(f.Name())
		}()
		rs, seekable, start = f, true, 0
	}
	if seekable {
		h := sha256.New()
		if _, err := io.Copy(h, rs); err != nil {
			return Report{Source: name, Skipped: map[string]int{}}, &InputError{name, err}
		}
		if rep, dup, err := im.duplicate(ctx, name, hex.EncodeToString(h.Sum(nil))); dup || err != nil {
			return rep, err
		}
		if _, err := rs.Seek(start, io.SeekStart); err != nil {
			return Report{Source: name, Skipped: map[string]int{}}, fmt.Errorf("import %s: %w", name, err)
		}
		r = rs
	}
	// An all-or-nothing source with a problem is read again to record only
	// its rejects. Should that pass find none (an employee added in payroll
	// meanwhile), it is imported after all.
	for pass := 0; ; pass++ {
		if pass > 0 {
			if _, err := rs.Seek(start, io.SeekStart); err != nil {
				return Report{Source: name, Skipped: map[string]int{}}, fmt.Errorf("import %s: %w", name, err)
			}
			r = rs
		}
		rep, err := im.stream(ctx, kind, name, r, pass%2 == 1)
		switch {
		case !errors.Is(err, errRejectAll) && !errors.Is(err, errNoProblem):
			return rep, err
		case pass == 3:
			return Report{Source: name, Skipped: map[string]int{}}, fmt.Errorf("import %s: its problems changed while it was read again; import it again", name)
		}
	}
}

// spool copies r to a temporary file.
func spool(r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "paysync-import-*")
	if err != nil {
		return nil, fmt.Errorf("import: spool input: %w", err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// duplicate reports the source committed before with this hash, if any.
func (im *Importer) duplicate(ctx context.Context, name, hash string) (Report, bool, error) {
	rep := Report{Source: name, Skipped: map[string]int{}}
	src, ok, err := im.L.SourceByHash(ctx, hash)
	if err != nil || !ok {
		return rep, false, err
	}
	rep.ImportID, rep.Duplicate, rep.Entries, rep.Duplicates = src.ID, true, src.Entries, src.Entries
	rep.ImportedAt = src.ReceivedAt.Format("2006-01-02 15:04")
	return rep, true, nil
}

// InputError is a failure to read a source's input (not a problem in it):
// nothing of the source was committed.
type InputError struct {
	Source string
	Err    error
}

func (e *InputError) Error() string { return fmt.Sprintf("import %s: read: %v", e.Source, e.Err) }
func (e *InputError) Unwrap() error { return e.Err }

// errRejectAll stops an all-or-nothing import at its first problem: it is
// read again to record the source as rejected. errNoProblem is the reading
// again finding none.
var (
	errRejectAll = errors.New("the source has a problem")
	errNoProblem = errors.New("the source has no problem")
)

// chunkEntries is how many entries are read, looked up and stored at a time.
const chunkEntries = 1000

// stream reads, checks and commits one source in one ledger transaction.
// With rejectOnly it stores only the source and its rejects (all-or-nothing).
func (im *Importer) stream(ctx context.Context, kind, name string, r io.Reader, rejectOnly bool) (Report, error) {
	rep := Report{Source: name, Skipped: map[string]int{}}
	tx, err := im.L.BeginImport(ctx, ledger.StreamImport{Kind: kind, Name: name, BatchSize: im.BatchSize, Accumulate: im.Accumulate, Rejected: rejectOnly})
	if err != nil {
		return rep, err
	}
	defer tx.Rollback()
	rules := im.Rules
	if rules == nil {
		rules = mapping.DefaultRules()
	}
	s := &importRun{im: im, ctx: ctx, tx: tx, rep: &rep, rejectOnly: rejectOnly, aggregate: rules.Aggregate,
		planner: mapping.NewStreamPlanner(rules, im.Wire), probs: newProblemLog(im.MaxProblems)}
	in := &teeInput{r: r, w: tx}
	rd, format, err := mapping.NewReader(name, in, im.Read)
	if err := in.failed(name); err != nil {
		return rep, err
	}
	if err != nil {
		// Nothing to import: not even a rejected source is recorded.
		rep.Problems = []error{err}
		return rep, nil
	}
	if err := s.entries(rd); err != nil {
		return rep, cmp.Or(in.failed(name), err)
	}
	// The whole input is the source, also what the reader left unread.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return rep, cmp.Or(in.failed(name), err)
	}
	if err := in.failed(name); err != nil {
		return rep, err
	}
	if err := s.payParts(); err != nil {
		return rep, err
	}
	rep.Problems, rep.ProblemsOmitted = s.probs.list()
	switch {
	case im.AllOrNothing && !rejectOnly && s.probs.total > 0:
		return rep, errRejectAll
	case rejectOnly && s.probs.total == 0:
		return rep, errNoProblem
	}
	c, err := tx.Commit(string(format), rep.Duplicates)
	if errors.Is(err, ledger.ErrDuplicateSource) {
		// Committed meanwhile (or, for input that cannot seek, before).
		dup, _, err := im.duplicate(ctx, name, tx.Hash())
		return dup, err
	}
	if err != nil {
		return rep, err
	}
	if rejectOnly {
		// Nothing of it is taken: the source and its rejects are kept for
		// the audit trail (paysync imports); ImportID stays 0.
		rep.RejectedAs, rep.PayParts = c.SourceID, 0
		return rep, nil
	}
	rep.ImportID, rep.Batches = c.SourceID, c.BatchIDs
	return rep, nil
}

// importRun is one pass of stream over a source.
type importRun struct {
	im         *Importer
	ctx        context.Context
	tx         *ledger.ImportTx
	rep        *Report
	rejectOnly bool
	aggregate  bool
	planner    *mapping.Planner
	probs      *problemLog
}

// problem records err (a Problem, several joined, or a fatal reader error)
// as rejects. An all-or-nothing import stops at the first.
func (s *importRun) problem(phase int, err error) error {
	if err := s.probs.add(s.tx, phase, err); err != nil {
		return err
	}
	if s.im.AllOrNothing && !s.rejectOnly {
		return errRejectAll
	}
	return nil
}

// entries reads the source in chunks: each chunk's ids are looked up in the
// ledger at once, then every entry is checked, mapped and stored.
func (s *importRun) entries(rd mapping.Reader) error {
	chunk := make([]paysync.Entry, 0, chunkEntries)
	ids := make([]string, 0, chunkEntries)
	for done := false; !done; {
		chunk, ids = chunk[:0], ids[:0]
		for len(chunk) < chunkEntries {
			if err := s.ctx.Err(); err != nil {
				return err
			}
			e, err := rd.Next()
			if errors.Is(err, io.EOF) {
				done = true
				break
			}
			var p *mapping.Problem
			if errors.As(err, &p) {
				s.rep.Entries++
				if err := s.problem(ledger.PhaseRead, err); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				if err := s.problem(ledger.PhaseRead, err); err != nil {
					return err
				}
				done = true
				break
			}
			s.rep.Entries++
			chunk = append(chunk, e)
			ids = append(ids, e.ID)
		}
		if len(chunk) == 0 {
			continue
		}
		known, err := s.tx.Lookup(ids)
		if err != nil {
			return err
		}
		for i := range chunk {
			if err := s.entry(chunk[i], known); err != nil {
				return err
			}
			chunk[i] = paysync.Entry{}
		}
	}
	return nil
}

// entry dedupes, maps and stores one entry (and, without aggregation, its
// pay parts).
func (s *importRun) entry(e paysync.Entry, known map[string]ledger.KnownEntry) error {
	h, data, err := ledger.EntryHash(e)
	if err != nil {
		return err
	}
	if dup, err := s.tx.Seen(e.ID); err != nil {
		return err
	} else if dup {
		return s.problem(ledger.PhaseEntry, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
			Msg: "duplicate entry id in this file", Hint: "entry ids must be unique; fix the export"})
	}
	if k, ok := known[e.ID]; ok && k.Status != ledger.EntryRejected {
		if k.Hash == h {
			s.rep.Duplicates++
			return nil
		}
		if k.Status == ledger.EntryMapped {
			return s.problem(ledger.PhaseEntry, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
				Msg:  fmt.Sprintf("was imported on %s from %s (import %d) with different content", k.ImportedAt.Format("2006-01-02 15:04"), k.SourceName, k.SourceID),
				Hint: fmt.Sprintf("to change it, revert that import (paysync revert --import %d) and replay it, or give the changed entry a new id", k.SourceID)})
		}
	}
	ne := ledger.NewEntry{Entry: e, Hash: h, Status: ledger.EntryMapped}
	lines, err := s.im.Mapper.Map(s.ctx, e)
	switch {
	case err != nil && !mapping.OnlyProblems(err):
		return err
	case err != nil:
		ne.Status = ledger.EntryRejected
		if err := s.problem(ledger.PhaseEntry, err); err != nil {
			return err
		}
		lines = nil
	case len(lines) == 0:
		ne.Status, ne.Note = ledger.EntrySkipped, "no pay part"
	case lines[0].Skip != "":
		ne.Status, ne.Note = ledger.EntrySkipped, lines[0].Skip
		s.rep.Skipped[lines[0].Skip]++
		lines = nil
	}
	parts := make([]int, len(lines))
	for i, l := range lines {
		parts[i] = s.planner.Place(l)
	}
	// Without aggregation each pay part is complete at once.
	var ready []mapping.Placed
	if !s.aggregate && len(lines) > 0 {
		ready = s.planner.Take(false)
		kept := 0
		for _, pl := range ready {
			if len(pl.Problems) > 0 {
				for _, p := range pl.Problems {
					if err := s.problem(ledger.PhasePlan, p); err != nil {
						return err
					}
				}
				continue
			}
			kept++
		}
		// An entry whose pay parts were all dropped (e.g. a precision
		// problem) is rejected, so that a corrected file can bring it again.
		if kept == 0 {
			ne.Status = ledger.EntryRejected
		}
	}
	if s.rejectOnly {
		return nil
	}
	row, err := s.tx.AddEntry(ne, data)
	if err != nil {
		return err
	}
	if s.aggregate {
		for _, p := range parts {
			if err := s.tx.Link(row, p); err != nil {
				return err
			}
		}
		return nil
	}
	for _, pl := range ready {
		if len(pl.Problems) > 0 {
			continue
		}
		if err := s.tx.AddPayPart(pl.Index, pl.PayPart, row); err != nil {
			return err
		}
		s.rep.PayParts++
	}
	return nil
}

// payParts adds the aggregated pay parts, per company in order of first
// appearance (so batches are laid out as if the import had been planned
// whole); their entries were linked as they came.
func (s *importRun) payParts() error {
	ready := s.planner.Take(true)
	first := map[string]int{}
	for i, pl := range ready {
		if len(pl.Problems) > 0 {
			for _, p := range pl.Problems {
				if err := s.problem(ledger.PhasePlan, p); err != nil {
					return err
				}
			}
			continue
		}
		if _, ok := first[pl.PayPart.CompanyID]; !ok {
			first[pl.PayPart.CompanyID] = i
		}
	}
	if s.rejectOnly {
		return nil
	}
	slices.SortStableFunc(ready, func(a, b mapping.Placed) int {
		return cmp.Compare(first[a.PayPart.CompanyID], first[b.PayPart.CompanyID])
	})
	for _, pl := range ready {
		if len(pl.Problems) > 0 {
			continue
		}
		if err := s.tx.AddPayPart(pl.Index, pl.PayPart); err != nil {
			return err
		}
		s.rep.PayParts++
	}
	return nil
}

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

func (pl *problemLog) add(tx *ledger.ImportTx, phase int, err error) error {
	for _, p := range mapping.Flatten(err) {
		var mp *mapping.Problem
		r := ledger.NewReject{Message: p.Error()}
		if errors.As(p, &mp) {
			r = ledger.NewReject{EntryID: mp.EntryID, Line: mp.Line, Field: mp.Field, Message: mp.Msg, Hint: mp.Hint}
		}
		if err := tx.AddReject(phase, r); err != nil {
			return err
		}
		pl.total++
		if len(pl.phases[phase]) < pl.max {
			pl.phases[phase] = append(pl.phases[phase], p)
		}
	}
	return nil
}

// list returns the problems to report and how many are left out.
func (pl *problemLog) list() ([]error, int) {
	var out []error
	for _, ps := range pl.phases {
		out = append(out, ps[:min(len(ps), pl.max-len(out))]...)
	}
	return out, pl.total - len(out)
}

// teeInput hands what it reads to the ledger (the source's raw input) and
// remembers the first failure reading the input (err) or storing it
// (stored), which must not pass for the end of the input.
type teeInput struct {
	r      io.Reader
	w      io.Writer
	err    error
	stored error
}

func (t *teeInput) Read(p []byte) (int, error) {
	if t.stored != nil {
		return 0, t.stored
	}
	n, err := t.r.Read(p)
	if n > 0 {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.stored = werr
			return n, werr
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		t.err = cmp.Or(t.err, err)
	}
	return n, err
}

// failed returns the input's failure, if any: a ledger error as it is, a
// read error as an InputError.
func (t *teeInput) failed(name string) error {
	switch {
	case t.stored != nil:
		return t.stored
	case t.err != nil:
		return &InputError{name, t.err}
	}
	return nil
}
