package worker

import (
	"context"
	"errors"
	"io"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// Input is one input of a one-shot import (ImportAll, PreviewAll): a
// file, or standard input.
type Input struct {
	Kind paysync.SourceKind
	Name string // the source's name in the ledger and the reports
	// Open opens the input. Its error is the input's fault: the input is
	// reported unreadable and the others go on.
	Open func() (io.ReadCloser, error)
}

// InputResult is what became of one input.
type InputResult struct {
	Input  Input
	Report Report
	// Unreadable is why the input could not be opened (Open's error) or
	// read (an *InputError); nothing of it was committed.
	Unreadable error
}

// SourceBatches reads an import's batches (*ledger.Ledger).
type SourceBatches interface {
	BatchesOfSource(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
}

var _ SourceBatches = (*ledger.Ledger)(nil)

// ImportSummary is what ImportAll did.
type ImportSummary struct {
	// Inputs[i] is what became of inputs[i]. An error stops ImportAll
	// before the next input; the input it came from is listed when it was
	// imported (a delivery failed), not when its import failed.
	Inputs []InputResult
	// Batches counts the imports' batches (a split batch as its parts),
	// Unfinished those that still owe work (pending, sending or failed):
	// the next run retries them.
	Batches, Unfinished int
}

// ImportAll is a one-shot import of inputs (paysync import), one after the
// other: each is read, checked and committed (PlanFrom), then its batches
// still open are delivered by im.D (also those an earlier run of the same
// content left; found, when set, is told of them first: a progress bar's
// total), then its batches are listed in its Report and counted. An input
// that cannot be opened or read is reported and the others go on; any
// other error stops the run.
func (im *Importer) ImportAll(ctx context.Context, led SourceBatches, inputs []Input, found func([]ledger.Batch)) (ImportSummary, error) {
	var sum ImportSummary
	for _, in := range inputs {
		rep, unreadable, err := in.Take(ctx, im.PlanFrom)
		if unreadable != nil {
			sum.Inputs = append(sum.Inputs, InputResult{Input: in, Report: rep, Unreadable: unreadable})
			continue
		}
		if err != nil {
			return sum, err
		}
		var runErr error
		if err := im.applyCorrections(ctx, &rep); err != nil {
			return sum, err
		}
		if rep.ImportID != 0 {
			var n int
			n, runErr = im.D.DeliverOpen(ctx, rep.ImportID, found)
			if rep.Duplicate {
				rep.Resumed = n
			}
			sum.count(ctx, led, &rep)
		}
		sum.Inputs = append(sum.Inputs, InputResult{Input: in, Report: rep})
		if runErr != nil {
			return sum, runErr
		}
	}
	return sum, nil
}

// count lists the import's batches in rep as they are now (a split batch
// as its parts) and counts them. A failure to read them leaves the list
// the import made and counts nothing: the summary is a report, what was
// sent is in the ledger either way.
func (s *ImportSummary) count(ctx context.Context, led SourceBatches, rep *Report) {
	batches, err := led.BatchesOfSource(ctx, rep.ImportID)
	if err != nil {
		return
	}
	rep.Batches = rep.Batches[:0]
	for _, b := range batches {
		if b.State == paysync.BatchSplit {
			continue
		}
		rep.Batches = append(rep.Batches, b.ID)
		s.Batches++
		// Only what still owes work: a batch reverted (or replayed after a
		// revert) is finished.
		switch b.State {
		case paysync.BatchPending, paysync.BatchSending, paysync.BatchFailed:
			s.Unfinished++
		}
	}
}

// PreviewAll previews inputs one after the other (PreviewFrom), handing
// each pay part that would be created to fn: nothing is committed or sent.
// Results[i] is what became of inputs[i]; an input that cannot be opened or
// read is reported and the others go on, any other error stops it.
func (im *Importer) PreviewAll(ctx context.Context, inputs []Input, fn func(paysync.PlannedPayPart) error) ([]InputResult, error) {
	preview := func(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Report, error) {
		return im.PreviewFrom(ctx, kind, name, r, fn)
	}
	var out []InputResult
	for _, in := range inputs {
		rep, unreadable, err := in.Take(ctx, preview)
		if err != nil {
			return out, err
		}
		out = append(out, InputResult{Input: in, Report: rep, Unreadable: unreadable})
	}
	return out, nil
}

// take opens the input and hands it to plan (PlanFrom or a preview). An
// input that cannot be opened or read is unreadable, not an error.
func (in Input) Take(ctx context.Context, plan func(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Report, error)) (rep Report, unreadable, err error) {
	rc, oerr := in.Open()
	if oerr != nil {
		return rep, oerr, nil
	}
	defer rc.Close()
	rep, err = plan(ctx, in.Kind, in.Name, rc)
	var ie *InputError
	if errors.As(err, &ie) {
		return rep, err, nil
	}
	return rep, nil, err
}
