package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// RedriveLedger is what a re-drive needs from the ledger beyond an import.
type RedriveLedger interface {
	CopySourcePayload(ctx context.Context, id int64, w io.Writer) (int64, error)
	LinkReplay(ctx context.Context, id, of int64) error
}

// Redrive imports the stored input of a source refused as a whole again
// through im (with its kind, name and format, all or nothing as before):
// once its cause is fixed, it becomes a new import, linked to the refused
// one (replay_of), reconciled and delivered. Run again, the same content
// is found imported and only what it left open is delivered. With preview
// set, nothing is committed or sent (Importer.PreviewFrom).
func Redrive(ctx context.Context, l RedriveLedger, im *Importer, src ledger.Source, preview func(paysync.PlannedPayPart) error) (Report, error) {
	f, err := os.CreateTemp("", "paysync-redrive-*")
	if err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := l.CopySourcePayload(ctx, src.ID, f); err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	again := *im
	again.Read.Format = mapping.Format(src.Format)
	again.AllOrNothing, again.Accumulate = true, false
	if preview != nil {
		return again.PreviewFrom(ctx, src.Kind, src.Name, f, preview)
	}
	rep, err := again.PlanFrom(ctx, src.Kind, src.Name, f)
	if err != nil {
		return rep, err
	}
	if err := linkRedrive(ctx, l, rep, src.ID); err != nil || rep.ImportID == 0 {
		return rep, err
	}
	if err := im.applyCorrections(ctx, &rep); err != nil {
		return rep, err
	}
	n, err := im.deliverOpen(ctx, rep.ImportID)
	if rep.Duplicate {
		rep.Resumed = n
	}
	return rep, err
}

// linkRedrive records that what a re-drive became (an import, or a source
// refused again) re-drives source of.
func linkRedrive(ctx context.Context, l RedriveLedger, rep Report, of int64) error {
	for _, id := range []int64{rep.ImportID, rep.RejectedAs} {
		if id != 0 {
			if err := l.LinkReplay(ctx, id, of); err != nil {
				return err
			}
		}
	}
	return nil
}

// RedriveMessage takes a streaming message refused as a whole (or dead
// lettered and recorded so) again through mi, exactly as the daemon takes
// messages: addressed to company (NATS: the subject's), all or nothing; the
// reconciler then plans it and d sends what it planned. With preview set,
// the message is planned on its own and its pay parts handed to preview;
// nothing is committed or sent.
func RedriveMessage(ctx context.Context, l RedriveLedger, mi *MessageImporter, r *Reconciler, d *Deliverer, src ledger.Source, company string, preview func(paysync.PlannedPayPart) error) (Report, error) {
	var payload bytes.Buffer
	if _, err := l.CopySourcePayload(ctx, src.ID, &payload); err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	m := Message{Kind: src.Kind, Name: src.Name, Company: company, Payload: payload.Bytes(), Received: time.Now()}
	again := *mi
	if preview != nil {
		again.L = previewLedger{MessageLedger: mi.L, fn: preview}
	}
	reps, errs, err := again.Plan(ctx, []Message{m})
	if err != nil {
		return Report{}, err
	}
	rep := reps[0]
	if errs[0] != nil || preview != nil {
		return rep, errs[0]
	}
	if err := linkRedrive(ctx, l, rep, src.ID); err != nil || rep.ImportID == 0 {
		return rep, err
	}
	batches, err := r.Apply(ctx, rep.ImportID)
	if err != nil {
		return rep, err
	}
	rep.Batches = batches
	return rep, d.Deliver(ctx, batches)
}

// previewLedger commits nothing: it hands the pay parts of the intents
// that would be committed to fn.
type previewLedger struct {
	MessageLedger
	fn func(paysync.PlannedPayPart) error
}

func (p previewLedger) CommitImports(ctx context.Context, ins []ledger.ImportIntent) ([]ledger.Committed, []error, error) {
	for _, in := range ins {
		if in.Rejected {
			continue
		}
		for _, pp := range in.PayParts {
			if err := p.fn(pp); err != nil {
				return nil, nil, err
			}
		}
	}
	return make([]ledger.Committed, len(ins)), make([]error, len(ins)), nil
}
