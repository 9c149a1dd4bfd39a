package worker

import (
	"bytes"
	"context"
	"errors"
	"math"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// MessageLedger is what a MessageImporter needs from the ledger.
type MessageLedger interface {
	SourcesByHash(ctx context.Context, hashes []string) (map[string]ledger.Source, error)
	LookupEntries(ctx context.Context, ids []string) (map[string]ledger.KnownEntry, error)
	CommitImports(ctx context.Context, ins []ledger.ImportIntent) ([]ledger.Committed, []error, error)
	ClosedPeriods(ctx context.Context) ([]ledger.ClosedPeriod, error)
}

var _ MessageLedger = (*ledger.Ledger)(nil)

// MessageImporter commits streaming messages (each one JSON entry, or a
// few) many at a time: one ledger transaction for a whole group, each
// message still its own source with its own outcome. A message with any
// problem is refused as a whole (recorded with its rejects); the pay parts
// of the others join each company's open batch, sealed by size or linger.
type MessageImporter struct {
	L         MessageLedger
	Mapper    *mapping.Mapper
	Rules     *mapping.Rules
	Wire      mapping.WireChecker
	BatchSize int
	// Read are the reader settings (mapping.EffectiveReadOptions), read
	// with the format JSON: the time zone of "start" timestamps, the
	// encoding.
	Read mapping.ReadOptions
}

// Message is one streaming input.
type Message struct {
	Kind paysync.SourceKind // e.g. nats
	Name string             // e.g. the subject
	// Company is the company the message was addressed to (NATS: the
	// subject's company token), "" when it names none. It is the company
	// of every entry in the message: an entry without company_id takes it,
	// and one that names another company is a problem.
	Company string
	// Origin is the source the message's entries come from (NATS: the
	// subject's source token), stored with each entry.
	Origin  string
	Payload []byte
	// Received is when the message entered the system (NATS: when the
	// stream stored it); a batch's linger counts from its first entry's.
	Received time.Time
}

// Plan reads, dedupes (against the ledger and within the group), maps and
// validates every message and commits them in one transaction. reps[i]
// is message i's outcome; errs[i] is set when the ledger refused to commit
// it (retry it later). A non-nil error means nothing was committed.
func (mi *MessageImporter) Plan(ctx context.Context, msgs []Message) (reps []Report, errs []error, err error) {
	g, err := mi.Prepare(ctx, msgs)
	if err != nil {
		return nil, nil, err
	}
	return mi.Commit(ctx, g)
}

// Group is a group of messages read, looked up and planned by Prepare,
// with nothing written yet: Commit writes it.
type Group struct {
	reps    []Report
	errs    []error
	intents []ledger.ImportIntent
	which   []int // intents[k] is message which[k]
}

// Prepare does everything of Plan but the writing: reading, the look-ups
// (on the ledger's readers), mapping and validating. It may run while an
// earlier group commits (the stream prepares the next group meanwhile);
// what that group commits in between is caught by the ledger at Commit —
// a message stored since is a duplicate there, an entry stored since fails
// its message, which is retried and then found as stored.
func (mi *MessageImporter) Prepare(ctx context.Context, msgs []Message) (*Group, error) {
	g := &Group{reps: make([]Report, len(msgs)), errs: make([]error, len(msgs))}
	reps, errs := g.reps, g.errs
	hashes := make([]string, len(msgs))
	for i, m := range msgs {
		reps[i] = Report{Source: m.Name, Skipped: map[string]int{}}
		hashes[i] = paysync.PayloadHash(m.Payload)
	}
	known, err := mi.L.SourcesByHash(ctx, hashes)
	if err != nil {
		return nil, err
	}
	// Read every new message, then look all their entries up at once.
	runs := make([]*msgRun, len(msgs))
	var keys []string
	inGroup := map[string]bool{}
	for i, m := range msgs {
		if src, ok := known[hashes[i]]; ok {
			reps[i].ImportID, reps[i].Duplicate, reps[i].Entries, reps[i].Duplicates = src.ID, true, src.Entries, src.Entries
			continue
		}
		if inGroup[hashes[i]] { // the same message twice in one group
			reps[i].Duplicate = true
			continue
		}
		inGroup[hashes[i]] = true
		runs[i] = mi.read(ctx, m, &reps[i])
		for _, e := range runs[i].entries {
			keys = append(keys, e.Key())
		}
	}
	seen, err := mi.L.LookupEntries(ctx, keys)
	if err != nil {
		return nil, err
	}
	closed, err := mi.L.ClosedPeriods(ctx)
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		if runs[i] == nil {
			continue
		}
		runs[i].s.step.closed = closed
		in, err := mi.plan(ctx, m, hashes[i], runs[i], seen)
		if err != nil {
			// Not the message's fault (payroll could not be read): it
			// is retried later, and the rest of the group goes on.
			errs[i] = err
			continue
		}
		g.intents = append(g.intents, in)
		g.which = append(g.which, i)
	}
	return g, nil
}

// Commit writes a prepared group in one transaction and returns each
// message's outcome, as Plan does.
func (mi *MessageImporter) Commit(ctx context.Context, g *Group) (reps []Report, errs []error, err error) {
	reps, errs = g.reps, g.errs
	if len(g.intents) == 0 {
		return reps, errs, nil
	}
	done, ierrs, err := mi.L.CommitImports(ctx, g.intents)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range g.which {
		switch {
		case errors.Is(ierrs[k], ledger.ErrDuplicateSource):
			reps[i].Duplicate = true
		case ierrs[k] != nil:
			errs[i] = ierrs[k]
		case g.intents[k].Rejected:
			reps[i].RejectedAs = done[k].SourceID
		default:
			reps[i].ImportID, reps[i].Batches = done[k].SourceID, done[k].BatchIDs
		}
	}
	return reps, errs, nil
}

// msgRun is one message on its way through Plan: its intake, recorded in
// memory, and its entries.
type msgRun struct {
	s       *sourceIntake
	in      *ledger.ImportIntent
	entries []paysync.Entry
	err     error // reading was cancelled
}

// read reads a message's entries (JSON: one entry, an array, or
// {"entries": [...]}); a message that is not JSON at all is a problem.
func (mi *MessageImporter) read(ctx context.Context, m Message, rep *Report) *msgRun {
	r := &msgRun{in: &ledger.ImportIntent{}}
	step := entryStep{mapper: mi.Mapper, company: m.Company, name: m.Name, unit: "message", fix: "the publisher", origin: m.Origin}
	// A message is all or nothing: one with any problem is refused.
	r.s = newSourceIntake(step, r.in, mi.Rules, mi.Wire, rep, true, 0)
	_, preview := mi.L.(previewLedger)
	r.s.hold = !preview // committed entries are held for the reconciler; a preview plans them here
	opts := mi.Read
	opts.Format = mapping.FormatJSON // the rules' read: {json: ...} block applies
	rd, _, err := mapping.NewReader(m.Name, bytes.NewReader(m.Payload), opts)
	if err != nil {
		r.s.problem(ledger.PhaseRead, err)
		return r
	}
	// Cancelled is not the message's fault: plan returns it.
	r.entries, _, r.err = r.s.read(ctx, rd, nil, math.MaxInt)
	return r
}

// plan takes one message's entries through intake into its intent; seen
// holds the entries known to the ledger and gains those of valid messages
// planned before in the group (they commit first, in order).
func (mi *MessageImporter) plan(ctx context.Context, m Message, hash string, r *msgRun, seen map[string]ledger.KnownEntry) (ledger.ImportIntent, error) {
	if r.err != nil {
		return ledger.ImportIntent{}, r.err
	}
	mine := map[string]bool{} // keys within this message
	seenBefore := func(key string) bool {
		if mine[key] {
			return true
		}
		mine[key] = true
		return false
	}
	for _, e := range r.entries {
		if err := r.s.entry(ctx, e, seen, seenBefore); err != nil {
			return ledger.ImportIntent{}, err
		}
	}
	r.s.finish()
	in := *r.in
	in.Source = &ledger.NewSource{Kind: m.Kind, Name: m.Name, Format: string(mapping.FormatJSON), Hash: hash, Payload: m.Payload}
	in.BatchSize, in.Accumulate, in.Received = mi.BatchSize, true, m.Received
	if r.s.rejected() {
		// Refused as a whole: the source and its rejects stay for the
		// audit trail (paysync imports); its entries are not taken.
		in.Rejected = true
		return in, nil
	}
	for _, ne := range in.Entries {
		seen[ne.Entry.Key()] = ledger.KnownEntry{Status: ne.Status, Hash: ne.Hash, SourceName: m.Name, Live: ne.Status == paysync.EntryMapped && ne.Note != ledger.HeldNote}
	}
	for _, ne := range in.Corrections {
		seen[ne.Entry.Key()] = ledger.KnownEntry{Status: paysync.EntryMapped, Hash: ne.Hash, SourceName: m.Name, Live: true}
	}
	in.Duplicates = r.s.rep.Duplicates
	return in, nil
}
