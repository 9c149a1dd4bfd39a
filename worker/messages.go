package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	Payload []byte
	// Received is when the message entered the system (NATS: when the
	// stream stored it); a batch's linger counts from its first entry's.
	Received time.Time
}

// msgPlan is one message on its way through PlanMessages.
type msgPlan struct {
	hash    string
	entries []paysync.Entry
	intent  ledger.ImportIntent
	skip    bool // a duplicate source: nothing to commit
}

// Plan reads, dedupes (against the ledger and within the group), maps and
// validates every message and commits them in one transaction. reps[i]
// is message i's outcome; errs[i] is set when the ledger refused to commit
// it (retry it later). A non-nil error means nothing was committed.
func (mi *MessageImporter) Plan(ctx context.Context, msgs []Message) (reps []Report, errs []error, err error) {
	reps, errs = make([]Report, len(msgs)), make([]error, len(msgs))
	plans := make([]msgPlan, len(msgs))
	hashes := make([]string, len(msgs))
	for i, m := range msgs {
		reps[i] = Report{Source: m.Name, Skipped: map[string]int{}}
		hashes[i] = ledger.HashPayload(m.Payload)
		plans[i].hash = hashes[i]
	}
	known, err := mi.L.SourcesByHash(ctx, hashes)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	inGroup := map[string]bool{}
	for i, m := range msgs {
		p := &plans[i]
		if src, ok := known[p.hash]; ok {
			reps[i].ImportID, reps[i].Duplicate, reps[i].Entries, reps[i].Duplicates = src.ID, true, src.Entries, src.Entries
			p.skip = true
			continue
		}
		if inGroup[p.hash] { // the same message twice in one group
			reps[i].Duplicate = true
			p.skip = true
			continue
		}
		inGroup[p.hash] = true
		p.entries, reps[i].Entries, reps[i].Problems = readMessage(m)
		for _, e := range p.entries {
			ids = append(ids, e.ID)
		}
	}
	seen, err := mi.L.LookupEntries(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var intents []ledger.ImportIntent
	var which []int // intents[k] is message which[k]
	for i, m := range msgs {
		p := &plans[i]
		if p.skip {
			continue
		}
		if err := mi.plan(ctx, m, p, &reps[i], seen); err != nil {
			// Not the message's fault (payroll could not be read): it
			// is retried later, and the rest of the group goes on.
			errs[i] = err
			continue
		}
		intents = append(intents, p.intent)
		which = append(which, i)
	}
	if len(intents) == 0 {
		return reps, errs, nil
	}
	done, ierrs, err := mi.L.CommitImports(ctx, intents)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range which {
		switch {
		case errors.Is(ierrs[k], ledger.ErrDuplicateSource):
			reps[i].Duplicate = true
		case ierrs[k] != nil:
			errs[i] = ierrs[k]
		case plans[i].intent.Rejected:
			reps[i].RejectedAs = done[k].SourceID
		default:
			reps[i].ImportID, reps[i].Batches = done[k].SourceID, done[k].BatchIDs
		}
	}
	return reps, errs, nil
}

// readMessage reads a message's entries (JSON: one entry, an array, or
// {"entries": [...]}).
func readMessage(m Message) (entries []paysync.Entry, n int, problems []error) {
	rd, _, err := mapping.NewReader(m.Name, bytes.NewReader(m.Payload), mapping.ReadOptions{Format: mapping.FormatJSON})
	if err != nil {
		return nil, 0, []error{err}
	}
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return entries, n, problems
		}
		var p *mapping.Problem
		if errors.As(err, &p) {
			n++
			problems = append(problems, err)
			continue
		}
		if err != nil {
			return entries, n, append(problems, err)
		}
		n++
		entries = append(entries, e)
	}
}

// plan dedupes, maps and validates one message's entries into its intent;
// seen holds the entries known to the ledger and gains those of valid
// messages planned before in the group (they commit first, in order).
func (mi *MessageImporter) plan(ctx context.Context, m Message, p *msgPlan, rep *Report, seen map[string]ledger.KnownEntry) error {
	planner := mapping.NewPlanner(mi.Rules, mi.Wire)
	p.intent = ledger.ImportIntent{
		Source:     &ledger.NewSource{Kind: m.Kind, Name: m.Name, Format: string(mapping.FormatJSON), Hash: p.hash, Payload: m.Payload},
		BatchSize:  mi.BatchSize,
		Accumulate: true,
		Received:   m.Received,
	}
	mine := map[string]string{} // entry id → hash, within this message
	for _, e := range p.entries {
		// An entry that took the subject's company is the same entry as
		// the one without it: stored before the subject decided (or sent
		// once with and once without company_id), it is a duplicate.
		asSent := ""
		if m.Company != "" && e.CompanyID == "" {
			var err error
			if asSent, _, err = ledger.EntryHash(e); err != nil {
				return err
			}
		}
		if m.Company != "" {
			if e.CompanyID != "" && e.CompanyID != m.Company {
				rep.Problems = append(rep.Problems, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "company_id",
					Msg:  fmt.Sprintf("is %s, but the message was published for company %s (%s)", e.CompanyID, m.Company, m.Name),
					Hint: "publish the entry on its company's subject, or fix company_id"})
				continue
			}
			// Stored with the entry, so a replay maps it to the same company.
			e.CompanyID = m.Company
		}
		h, data, err := ledger.EntryHash(e)
		if err != nil {
			return err
		}
		if _, dup := mine[e.ID]; dup {
			rep.Problems = append(rep.Problems, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
				Msg: "duplicate entry id in this message", Hint: "entry ids must be unique; fix the publisher"})
			continue
		}
		mine[e.ID] = h
		if k, ok := seen[e.ID]; ok && k.Status != paysync.EntryRejected {
			if k.Hash == h || (asSent != "" && k.Hash == asSent) {
				rep.Duplicates++
				continue
			}
			if k.Status == paysync.EntryMapped {
				rep.Problems = append(rep.Problems, changedEntry(e, k))
				continue
			}
		}
		ne := ledger.NewEntry{Entry: e, Hash: h, Status: paysync.EntryMapped, Data: data}
		lines, err := mi.Mapper.Map(ctx, e)
		switch {
		case err != nil && !mapping.OnlyProblems(err):
			return err
		case err != nil:
			ne.Status = paysync.EntryRejected
			rep.Problems = append(rep.Problems, err)
		case len(lines) == 0:
			ne.Status, ne.Note = paysync.EntrySkipped, "no pay part"
		case lines[0].Skip != "":
			ne.Status, ne.Note = paysync.EntrySkipped, lines[0].Skip
			rep.Skipped[lines[0].Skip]++
		default:
			for _, l := range lines {
				if err := planner.Add(l); err != nil {
					rep.Problems = append(rep.Problems, err)
				}
			}
		}
		p.intent.Entries = append(p.intent.Entries, ne)
	}
	planned, probs := planner.PayParts()
	rep.Problems = append(rep.Problems, probs...)
	if len(rep.Problems) > 0 {
		// Refused as a whole: the source and its rejects stay for the
		// audit trail (paysync imports); its entries are not taken.
		p.intent.Rejected = true
		p.intent.Rejects = rejectsOf(rep.Problems)
		return nil
	}
	for _, ne := range p.intent.Entries {
		seen[ne.Entry.ID] = ledger.KnownEntry{Status: ne.Status, Hash: ne.Hash, SourceName: m.Name}
	}
	p.intent.Duplicates = rep.Duplicates
	p.intent.PayParts = planned
	rep.PayParts = len(planned)
	return nil
}

// changedEntry is the problem of an entry id paid before with other content.
func changedEntry(e paysync.Entry, k ledger.KnownEntry) *mapping.Problem {
	if k.SourceID == 0 { // earlier in the same group
		return &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
			Msg:  fmt.Sprintf("was received just before in %s with different content", k.SourceName),
			Hint: "give the changed entry a new id, or revert the earlier import and replay it"}
	}
	return &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
		Msg:  fmt.Sprintf("was imported on %s from %s (import %d) with different content", k.ImportedAt.Format("2006-01-02 15:04"), k.SourceName, k.SourceID),
		Hint: fmt.Sprintf("to change it, revert that import (paysync revert --import %d) and replay it, or give the changed entry a new id", k.SourceID)}
}

// rejectsOf turns problems into ledger rejects.
func rejectsOf(problems []error) []ledger.NewReject {
	var out []ledger.NewReject
	for _, p := range mapping.Flatten(problems...) {
		var mp *mapping.Problem
		if errors.As(p, &mp) {
			out = append(out, ledger.NewReject{EntryID: mp.EntryID, Line: mp.Line, Field: mp.Field, Message: mp.Msg, Hint: mp.Hint})
		} else {
			out = append(out, ledger.NewReject{Message: p.Error()})
		}
	}
	return out
}
