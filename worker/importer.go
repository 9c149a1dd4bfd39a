package worker

import (
	"bytes"
	"context"
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
	LookupEntries(ctx context.Context, ids []string) (map[string]ledger.KnownEntry, error)
	CommitImport(ctx context.Context, in ledger.ImportIntent) (ledger.Committed, error)
	OpenBatches(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
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
	// Accumulate adds the pay parts to each company's open batch (sealed
	// by size or linger) instead of new batches: streaming sources.
	Accumulate bool
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
	PayParts   int            `json:"pay_parts"`
	Batches    []int64        `json:"batches"`
	Resumed    int            `json:"resumed_batches,omitempty"` // open batches of an earlier run delivered now
	RejectedAs int64          `json:"rejected_as,omitempty"`     // all-or-nothing: the source recorded as rejected, with its rejects
	ImportedAt string         `json:"-"`
}

// Plan reads, dedupes, maps and validates payload, and commits the intent:
// nothing is sent. A payload committed before is reported as a duplicate.
func (im *Importer) Plan(ctx context.Context, kind, name string, payload []byte) (Report, error) {
	rep := Report{Source: name, Skipped: map[string]int{}}
	hash := ledger.HashPayload(payload)
	if src, ok, err := im.L.SourceByHash(ctx, hash); err != nil {
		return rep, err
	} else if ok {
		rep.ImportID, rep.Duplicate, rep.Entries, rep.Duplicates = src.ID, true, src.Entries, src.Entries
		rep.ImportedAt = src.ReceivedAt.Format("2006-01-02 15:04")
		return rep, nil
	}
	rd, format, err := mapping.NewReader(name, bytes.NewReader(payload), im.Read)
	if err != nil {
		rep.Problems = append(rep.Problems, err)
		return rep, nil
	}
	var entries []paysync.Entry
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var p *mapping.Problem
		if errors.As(err, &p) {
			rep.Entries++
			rep.Problems = append(rep.Problems, err)
			continue
		}
		if err != nil {
			rep.Problems = append(rep.Problems, err)
			break
		}
		rep.Entries++
		entries = append(entries, e)
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	known, err := im.L.LookupEntries(ctx, ids)
	if err != nil {
		return rep, err
	}
	planner := mapping.NewPlanner(im.Rules, im.Wire)
	intent := ledger.ImportIntent{
		Source:     &ledger.NewSource{Kind: kind, Name: name, Format: string(format), Hash: hash, Payload: payload},
		BatchSize:  im.BatchSize,
		Accumulate: im.Accumulate,
	}
	seen := map[string]bool{}
	index := map[string]int{} // entry id → position in intent.Entries
	for _, e := range entries {
		h, _, err := ledger.EntryHash(e)
		if err != nil {
			return rep, err
		}
		if seen[e.ID] {
			rep.Problems = append(rep.Problems, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
				Msg: "duplicate entry id in this file", Hint: "entry ids must be unique; fix the export"})
			continue
		}
		seen[e.ID] = true
		if k, ok := known[e.ID]; ok && k.Status != ledger.EntryRejected {
			if k.Hash == h {
				rep.Duplicates++
				continue
			}
			if k.Status == ledger.EntryMapped {
				rep.Problems = append(rep.Problems, &mapping.Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: "id",
					Msg:  fmt.Sprintf("was imported on %s from %s (import %d) with different content", k.ImportedAt.Format("2006-01-02 15:04"), k.SourceName, k.SourceID),
					Hint: fmt.Sprintf("to change it, revert that import (paysync revert --import %d) and replay it, or give the changed entry a new id", k.SourceID)})
				continue
			}
		}
		ne := ledger.NewEntry{Entry: e, Hash: h, Status: ledger.EntryMapped}
		lines, err := im.Mapper.Map(ctx, e)
		switch {
		case err != nil && !mapping.OnlyProblems(err):
			return rep, err
		case err != nil:
			ne.Status = ledger.EntryRejected
			rep.Problems = append(rep.Problems, err)
		case len(lines) == 0:
			ne.Status, ne.Note = ledger.EntrySkipped, "no pay part"
		case lines[0].Skip != "":
			ne.Status, ne.Note = ledger.EntrySkipped, lines[0].Skip
			rep.Skipped[lines[0].Skip]++
		default:
			for _, l := range lines {
				if err := planner.Add(l); err != nil {
					rep.Problems = append(rep.Problems, err)
				}
			}
		}
		index[e.ID] = len(intent.Entries)
		intent.Entries = append(intent.Entries, ne)
	}
	planned, probs := planner.PayParts()
	rep.Problems = append(rep.Problems, probs...)
	// An entry whose pay part was dropped (e.g. a precision problem) is
	// rejected, so that a corrected file can bring it again.
	inPlan := map[string]bool{}
	for _, pp := range planned {
		for _, r := range pp.Entries {
			inPlan[r.ID] = true
		}
	}
	for i := range intent.Entries {
		if ne := &intent.Entries[i]; ne.Status == ledger.EntryMapped && !inPlan[ne.Entry.ID] {
			ne.Status = ledger.EntryRejected
		}
	}
	for _, p := range mapping.Flatten(rep.Problems...) {
		var mp *mapping.Problem
		if errors.As(p, &mp) {
			intent.Rejects = append(intent.Rejects, ledger.NewReject{EntryID: mp.EntryID, Line: mp.Line, Field: mp.Field, Message: mp.Msg, Hint: mp.Hint})
		} else {
			intent.Rejects = append(intent.Rejects, ledger.NewReject{Message: p.Error()})
		}
	}
	if im.AllOrNothing && len(rep.Problems) > 0 {
		// Nothing of it is taken: keep the source and its rejects for the
		// audit trail (paysync imports); ImportID stays 0.
		intent.Rejected = true
		c, err := im.L.CommitImport(ctx, intent)
		if err != nil {
			return rep, err
		}
		rep.RejectedAs = c.SourceID
		return rep, nil
	}
	intent.Duplicates = rep.Duplicates
	intent.PayParts = planned
	c, err := im.L.CommitImport(ctx, intent)
	if err != nil {
		return rep, err
	}
	rep.ImportID, rep.Batches, rep.PayParts = c.SourceID, c.BatchIDs, len(planned)
	return rep, nil
}

// Import plans payload and delivers its batches (also those of an earlier
// run of the same content that are still open).
func (im *Importer) Import(ctx context.Context, kind, name string, payload []byte) (Report, error) {
	rep, err := im.Plan(ctx, kind, name, payload)
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

// ProblemList returns the report's problems one by one.
func (r Report) ProblemList() []error { return mapping.Flatten(r.Problems...) }
