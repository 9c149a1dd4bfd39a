package worker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"slices"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// ImportLedger is what an import needs from the ledger beyond delivery.
type ImportLedger interface {
	SourceByHash(ctx context.Context, hash string) (ledger.Source, bool, error)
	BeginImport(ctx context.Context, in ledger.StreamImport) (*ledger.StagedImport, error)
	OpenBatches(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
	Items(ctx context.Context, batchID int64) ([]ledger.Item, error)
	ReconcileLedger
}

var _ ImportLedger = (*ledger.Ledger)(nil)

// Reconciler is the reconciler of the importer's ledger (same mapper and
// rules).
func (im *Importer) Reconciler() *Reconciler {
	return &Reconciler{L: im.L, Mapper: im.Mapper, Rules: im.Rules, Wire: im.Wire, BatchSize: im.BatchSize}
}

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
	// Origin is the source the entries are a statement of (paysync import
	// --source); empty: the format or preset name.
	Origin string
	// Statement, when set, makes each input the complete statement of its
	// origin's entries for a period (paysync import --period).
	Statement *PeriodStatement
	// Accumulate adds the pay parts to each company's open batch (sealed
	// by size or linger) instead of new batches: streaming sources.
	Accumulate bool
	// Defer leaves the reconcile to the caller: an import commits and its
	// entries are held (a dry run on a copy of the ledger plans them all
	// at once, and sends nothing).
	Defer bool
	// MaxProblems bounds the problems a Report lists (default
	// DefaultMaxProblems); every one is recorded as a reject all the same.
	MaxProblems int
}

// Report is what one import did.
type Report struct {
	ImportID  int64  `json:"import_id"`
	Source    string `json:"source"`
	Duplicate bool   `json:"duplicate_import"` // the same content was imported before
	// RetryOf is the import of the same content this one takes again: that
	// one had rejects (refused rows, refused corrections), which get
	// another chance now; what landed then is counted as duplicates.
	RetryOf    int64 `json:"retry_of,omitempty"`
	Entries    int   `json:"entries"`
	Mapped     int   `json:"mapped"` // entries that went into pay parts (or would, in a preview)
	Duplicates int   `json:"duplicate_entries"`
	// Corrections counts entries paid before that came with other content
	// (or as a tombstone): each supersedes its earlier version.
	Corrections int `json:"corrections,omitempty"`
	// Removed counts the entries a period statement removes (no longer
	// in it); Outside the rows it does not import (dated outside its
	// period), Warnings says which (the first DefaultMaxProblems).
	Removed  int      `json:"removed,omitempty"`
	Outside  int      `json:"outside_period,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Notes say how the input was read where that was detected, not
	// declared (an encoding): mapping.Noter.
	Notes    []string       `json:"notes,omitempty"`
	Skipped  map[string]int `json:"skipped"`
	Problems []error        `json:"-"`
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
	if err := im.applyCorrections(ctx, &rep); err != nil {
		return rep, err
	}
	_, err = im.deliverOpen(ctx, rep.ImportID)
	return rep, err
}

// applyCorrections takes what the import (and an earlier run that died
// before this step) recorded into the desired state and records the
// reconciler's plan, ledger first: nothing is sent yet. The import's
// report counts the pay parts planned. With nothing new it is a few
// indexed reads.
func (im *Importer) applyCorrections(ctx context.Context, rep *Report) error {
	if rep.ImportID == 0 || im.Mapper == nil || im.Defer {
		return nil
	}
	bs, err := im.Reconciler().Apply(ctx, rep.ImportID)
	if err != nil && !Paused(err) {
		return err
	}
	for _, b := range bs {
		items, err := im.L.Items(ctx, b)
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.State == paysync.PartPending {
				rep.PayParts++
			}
		}
		if !slices.Contains(rep.Batches, b) {
			rep.Batches = append(rep.Batches, b)
		}
	}
	return nil
}

// deliverOpen delivers an import's batches still open (also those an
// earlier run of the same content left) and returns how many there were.
func (im *Importer) deliverOpen(ctx context.Context, importID int64) (int, error) {
	open, err := im.L.OpenBatches(ctx, importID)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, len(open))
	for i, b := range open {
		ids[i] = b.ID
	}
	return len(ids), im.D.Deliver(ctx, ids)
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
	var sum paysync.PayloadDigest
	if _, err := io.Copy(&sum, rs); err != nil {
		return Report{Source: name, Skipped: map[string]int{}}, true, &InputError{name, err}
	}
	if rep, dup, err := im.duplicate(ctx, name, sum.Sum()); dup || err != nil {
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

// duplicate reports the source committed before with this hash, if any,
// unless it is to be taken again (ledger.Source.Retry).
func (im *Importer) duplicate(ctx context.Context, name, hash string) (Report, bool, error) {
	rep := Report{Source: name, Skipped: map[string]int{}}
	src, ok, err := im.L.SourceByHash(ctx, hash)
	if err != nil || !ok || src.Retry() {
		return rep, false, err
	}
	rep.ImportID, rep.Duplicate, rep.Entries, rep.Duplicates = src.ID, true, src.Entries, src.Entries
	rep.ImportedAt = src.ReceivedAt.UTC().Format("2006-01-02 15:04 UTC")
	return rep, true, nil
}

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
	closed, err := im.L.ClosedPeriods(ctx)
	if err != nil {
		return rep, err
	}
	s := newSourceIntake(entryStep{mapper: im.Mapper, name: name, unit: "file", fix: "the export", closed: closed}, st,
		im.Rules, im.Wire, &rep, im.AllOrNothing, im.MaxProblems)
	// Committed entries are held: the reconciler takes them into the
	// desired state and plans their groups. A dry run plans them here.
	s.hold = preview == nil
	in := &teeInput{r: r, w: st}
	rd, format, err := mapping.NewReader(name, in, im.Read)
	if err := in.failed(name); err != nil {
		return rep, err
	}
	s.step.origin, s.period = cmp.Or(im.Origin, string(format)), im.Statement
	if err != nil {
		// Nothing to import: not even a rejected source is recorded.
		rep.Problems = []error{err}
		return rep, nil
	}
	if n, ok := rd.(mapping.Noter); ok {
		rep.Notes = n.Notes()
	}
	if err := stageEntries(ctx, s, st, rd); err != nil {
		return rep, cmp.Or(in.failed(name), err)
	}
	// The whole input is the source, also what the reader left unread.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return rep, cmp.Or(in.failed(name), err)
	}
	if err := in.failed(name); err != nil {
		return rep, err
	}
	s.finish()
	// All or nothing: a source with a problem is recorded as rejected, with
	// its rejects, and nothing else; ImportID stays 0.
	rejected := s.rejected()
	if preview != nil {
		// Input that cannot seek is recognised by its hash only now (for a
		// file this repeats seenBefore's one indexed lookup).
		if dup, isDup, err := im.duplicate(ctx, name, in.sum.Sum()); isDup || err != nil {
			return dup, err
		}
		if rejected {
			return rep, nil
		}
		return rep, st.PayParts(preview)
	}
	st.SetStatement(s.statement())
	c, err := st.Commit(string(format), in.sum.Sum(), rep.Duplicates, rejected)
	if errors.Is(err, ledger.ErrDuplicateSource) {
		// Committed meanwhile (or, for input that cannot seek, before).
		dup, _, err := im.duplicate(ctx, name, in.sum.Sum())
		return dup, err
	}
	if err != nil {
		return rep, err
	}
	if rejected {
		rep.RejectedAs = c.SourceID
		return rep, nil
	}
	rep.ImportID, rep.Batches, rep.Removed, rep.RetryOf = c.SourceID, c.BatchIDs, c.Removed, c.RetryOf
	return rep, im.applyCorrections(ctx, &rep)
}

// stageEntries reads a file in chunks, in memory that does not grow with
// it: each chunk's keys are looked up in the ledger at once (with those
// seen before in this source, kept in the staging), then every entry goes
// through intake, and the chunk is flushed to the ledger.
func stageEntries(ctx context.Context, s *sourceIntake, st *ledger.StagedImport, rd mapping.Reader) error {
	chunk := make([]paysync.Entry, 0, chunkEntries)
	keys := make([]string, 0, chunkEntries)
	for done := false; !done; {
		var err error
		if chunk, done, err = s.read(ctx, rd, chunk[:0], chunkEntries); err != nil {
			return err
		}
		keys = keys[:0]
		for _, e := range chunk {
			keys = append(keys, e.Key())
		}
		known, seen, err := st.Lookup(keys)
		if err != nil {
			return err
		}
		seenBefore := func(key string) bool {
			if seen[key] {
				return true
			}
			seen[key] = true
			st.See(key)
			return false
		}
		for i := range chunk {
			if err := s.entry(ctx, chunk[i], known, seenBefore); err != nil {
				return err
			}
			chunk[i] = paysync.Entry{}
		}
		if err := st.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// teeInput hands what it reads to the ledger (the source's raw input),
// hashes it (sum: the source's content hash) and remembers the first
// failure reading the input (err) or storing it (stored), which must not
// pass for the end of the input.
type teeInput struct {
	r      io.Reader
	w      io.Writer
	sum    paysync.PayloadDigest
	err    error
	stored error
}

func (t *teeInput) Read(p []byte) (int, error) {
	if t.stored != nil {
		return 0, t.stored
	}
	n, err := t.r.Read(p)
	if n > 0 {
		t.sum.Write(p[:n])
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
