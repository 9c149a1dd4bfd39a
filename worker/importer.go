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

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// ImportLedger is what an import needs from the ledger beyond delivery.
type ImportLedger interface {
	SourceByHash(ctx context.Context, hash string) (ledger.Source, bool, error)
	BeginImport(ctx context.Context, in ledger.StreamImport) (*ledger.StagedImport, error)
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
	Mapped     int            `json:"mapped"` // entries that went into pay parts (or would, in a preview)
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
func (im *Importer) Plan(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (Report, error) {
	return im.PlanFrom(ctx, kind, name, bytes.NewReader(payload))
}

// Import plans payload and delivers its batches (also those of an earlier
// run of the same content that are still open).
func (im *Importer) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (Report, error) {
	return im.ImportFrom(ctx, kind, name, bytes.NewReader(payload))
}

// ImportFrom is Import for input read from r (see PlanFrom).
func (im *Importer) ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Report, error) {
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
// with its size: entries are read, checked and mapped a chunk at a time
// and staged in the ledger (each chunk a short transaction, so no
// transaction is held while the payroll API is called), then committed
// in one transaction.
//
// When r can seek (a file), it is read once to hash it, so that a source
// imported before is recognised before anything else, and then again to
// import it; otherwise the hash is checked at the end. An error reading r
// commits nothing (InputError).
func (im *Importer) PlanFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Report, error) {
	if rep, done, err := im.seenBefore(ctx, name, r); done || err != nil {
		return rep, err
	}
	return im.stream(ctx, kind, name, r, nil)
}

// seenBefore reads r once to hash it, when it can seek (a file), and
// reports a source of the same content committed before; r is then back
// where it was. done is true when there is nothing more to do: a
// duplicate, or an error.
func (im *Importer) seenBefore(ctx context.Context, name string, r io.Reader) (rep Report, done bool, err error) {
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		return Report{}, false, nil
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil { // a pipe
		return Report{}, false, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, rs); err != nil {
		return Report{Source: name, Skipped: map[string]int{}}, true, &InputError{name, err}
	}
	if rep, dup, err := im.duplicate(ctx, name, hex.EncodeToString(h.Sum(nil))); dup || err != nil {
		return rep, true, err
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return Report{Source: name, Skipped: map[string]int{}}, true, &InputError{name, err}
	}
	return Report{}, false, nil
}

// PreviewFrom runs an import of r exactly as PlanFrom would, against the
// ledger as it is (a source imported before is reported as a duplicate,
// entries already imported are counted as duplicates or refused, the same
// problems are found), hands each pay part that would be created to fn,
// and then abandons it: nothing is committed or sent. ImportID stays 0
// unless the source is a duplicate. fn must not call the ledger.
func (im *Importer) PreviewFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader, fn func(paysync.PlannedPayPart) error) (Report, error) {
	if fn == nil {
		fn = func(paysync.PlannedPayPart) error { return nil }
	}
	if rep, done, err := im.seenBefore(ctx, name, r); done || err != nil {
		return rep, err
	}
	return im.stream(ctx, kind, name, r, fn)
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

// chunkEntries is how many entries are read, looked up and stored at a time.
const chunkEntries = 1000

// stream reads, checks, maps and stages one source and commits it; with
// preview set, it hands the pay parts to preview instead (PreviewFrom).
func (im *Importer) stream(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader, preview func(paysync.PlannedPayPart) error) (Report, error) {
	rep := Report{Source: name, Skipped: map[string]int{}}
	st, err := im.L.BeginImport(ctx, ledger.StreamImport{Kind: kind, Name: name, BatchSize: im.BatchSize, Accumulate: im.Accumulate})
	if err != nil {
		return rep, err
	}
	defer st.Rollback()
	rules := im.Rules
	if rules == nil {
		rules = mapping.DefaultRules()
	}
	s := &importRun{im: im, ctx: ctx, st: st, rep: &rep, aggregate: rules.Aggregate,
		planner: mapping.NewStreamPlanner(rules, im.Wire), probs: newProblemLog(im.MaxProblems)}
	in := &teeInput{r: r, w: st}
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
	s.payParts()
	rep.Problems, rep.ProblemsOmitted = s.probs.list()
	// All or nothing: a source with a problem is recorded as rejected, with
	// its rejects, and nothing else; ImportID stays 0.
	rejected := im.AllOrNothing && s.probs.total > 0
	if preview != nil {
		// Input that cannot seek is recognised by its hash only now (for a
		// file this repeats seenBefore's one indexed lookup).
		if dup, isDup, err := im.duplicate(ctx, name, st.Hash()); isDup || err != nil {
			return dup, err
		}
		if rejected {
			rep.PayParts = 0
			return rep, nil
		}
		return rep, st.PayParts(preview)
	}
	c, err := st.Commit(string(format), rep.Duplicates, rejected)
	if errors.Is(err, ledger.ErrDuplicateSource) {
		// Committed meanwhile (or, for input that cannot seek, before).
		dup, _, err := im.duplicate(ctx, name, st.Hash())
		return dup, err
	}
	if err != nil {
		return rep, err
	}
	if rejected {
		rep.RejectedAs, rep.PayParts = c.SourceID, 0
		return rep, nil
	}
	rep.ImportID, rep.Batches = c.SourceID, c.BatchIDs
	return rep, nil
}

// importRun is stream's state.
type importRun struct {
	im        *Importer
	ctx       context.Context
	st        *ledger.StagedImport
	rep       *Report
	aggregate bool
	planner   *mapping.Planner
	probs     *problemLog
}

// problem records err (a Problem, several joined, or a fatal reader error)
// as rejects.
func (s *importRun) problem(phase int, err error) { s.probs.add(s.st, phase, err) }

// keep says whether entries and pay parts are still staged: an
// all-or-nothing source with a problem keeps none.
func (s *importRun) keep() bool { return !s.im.AllOrNothing || s.probs.total == 0 }

// entries reads the source in chunks: each chunk's ids are looked up in the
// ledger at once, then every entry is checked, mapped and staged, and the
// chunk is flushed to the ledger.
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
				s.problem(ledger.PhaseRead, err)
				continue
			}
			if err != nil {
				s.problem(ledger.PhaseRead, err)
				done = true
				break
			}
			s.rep.Entries++
			chunk = append(chunk, e)
			ids = append(ids, e.ID)
		}
		known, seen, err := s.st.Lookup(ids)
		if err != nil {
			return err
		}
		for i := range chunk {
			if err := s.entry(chunk[i], known, seen); err != nil {
				return err
			}
			chunk[i] = paysync.Entry{}
		}
		if err := s.st.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// entry dedupes, maps and stages one entry (and, without aggregation, its
// pay parts). seen holds the ids seen before in this source; it gets e's.
func (s *importRun) entry(e paysync.Entry, known map[string]ledger.KnownEntry, seen map[string]bool) error {
	h, data, err := ledger.EntryHash(e)
	if err != nil {
		return err
	}
	if seen[e.ID] {
		s.problem(ledger.PhaseEntry, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
			Msg: "duplicate entry id in this file", Hint: "entry ids must be unique; fix the export"})
		return nil
	}
	seen[e.ID] = true
	s.st.See(e.ID)
	if k, ok := known[e.ID]; ok && k.Status != paysync.EntryRejected {
		if k.Hash == h {
			s.rep.Duplicates++
			return nil
		}
		if k.Status == paysync.EntryMapped {
			s.problem(ledger.PhaseEntry, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
				Msg:  fmt.Sprintf("was imported on %s from %s (import %d) with different content", k.ImportedAt.Format("2006-01-02 15:04"), k.SourceName, k.SourceID),
				Hint: fmt.Sprintf("to change it, revert that import (paysync revert --import %d) and replay it, or give the changed entry a new id", k.SourceID)})
			return nil
		}
	}
	ne := ledger.NewEntry{Entry: e, Hash: h, Status: paysync.EntryMapped}
	lines, err := s.im.Mapper.Map(s.ctx, e)
	switch {
	case err != nil && !mapping.OnlyProblems(err):
		return err
	case err != nil:
		ne.Status = paysync.EntryRejected
		s.problem(ledger.PhaseEntry, err)
		lines = nil
	case len(lines) == 0:
		ne.Status, ne.Note = paysync.EntrySkipped, "no pay part"
	case lines[0].Skip != "":
		ne.Status, ne.Note = paysync.EntrySkipped, lines[0].Skip
		s.rep.Skipped[lines[0].Skip]++
		lines = nil
	}
	if ne.Status == paysync.EntryMapped {
		s.rep.Mapped++
	}
	var seq int64
	if s.keep() {
		if seq, err = s.st.AddEntry(ne, data); err != nil {
			return err
		}
	}
	for _, l := range lines {
		p := s.planner.Place(l)
		if s.keep() {
			s.st.Link(seq, p)
		}
	}
	// Without aggregation each pay part is complete at once.
	if !s.aggregate && len(lines) > 0 {
		s.add(s.planner.Take(false))
	}
	return nil
}

// payParts stages the aggregated pay parts, complete at the end.
func (s *importRun) payParts() { s.add(s.planner.Take(true)) }

// add stages complete pay parts; one with a problem is dropped (and so is
// an entry that went only into dropped ones).
func (s *importRun) add(placed []mapping.Placed) {
	for _, pl := range placed {
		switch {
		case len(pl.Problems) > 0:
			for _, p := range pl.Problems {
				s.problem(ledger.PhasePlan, p)
			}
			if s.keep() {
				s.st.DropPayPart(pl.Index)
			}
		case s.keep():
			s.st.AddPayPart(pl.Index, pl.PayPart)
			s.rep.PayParts++
		}
	}
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

func (pl *problemLog) add(st *ledger.StagedImport, phase int, err error) {
	for _, p := range mapping.Flatten(err) {
		var mp *mapping.Problem
		r := ledger.NewReject{Message: p.Error()}
		if errors.As(p, &mp) {
			r = ledger.NewReject{EntryID: mp.EntryID, Line: mp.Line, Field: mp.Field, Message: mp.Msg, Hint: mp.Hint}
		}
		st.AddReject(phase, r)
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
