package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
)

// Revert deletes exactly the pay parts paysync created for the batches that
// still exist in payroll; ones deleted by hand become gone. It is
// idempotent and safe to run again after a crash.
func (d *Deliverer) Revert(ctx context.Context, batchIDs []int64) error {
	d.init()
	for _, id := range batchIDs {
		if err := d.revertBatch(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func (d *Deliverer) revertBatch(ctx context.Context, id int64) error {
	b, err := d.L.Batch(ctx, id)
	if err != nil {
		return err
	}
	switch b.State {
	case paysync.BatchReverted:
		return nil
	case paysync.BatchSending:
		// Settle the unknown first: a pay part created by the lost attempt
		// must be reverted too.
		if err := d.reconcile(ctx, id, b.CompanyID); err != nil {
			return err
		}
	case paysync.BatchPending, paysync.BatchFailed:
		if b.Created == 0 {
			// Nothing was created: there is nothing to delete, and the
			// pending items must not be sent later.
			return d.L.SetBatchState(ctx, id, paysync.BatchReverted, "reverted before it was sent")
		}
	}
	for try := 0; ; try++ {
		items, err := d.L.Items(ctx, id)
		if err != nil {
			return err
		}
		var created []ledger.Item
		for _, it := range items {
			if it.State == paysync.PartCreated {
				created = append(created, it)
			}
		}
		att, err := d.L.BeginAttempt(ctx, id, paysync.AttemptDelete, len(created))
		if err != nil {
			return err
		}
		current, err := d.P.PayParts(ctx, b.CompanyID)
		if err != nil {
			_ = d.L.EndAttempt(context.WithoutCancel(ctx), att, paysync.AttemptFailed, 0, err.Error(), "")
			return fmt.Errorf("revert batch %d: read pay parts of company %s: %w", id, b.CompanyID, err)
		}
		exists := map[string]bool{}
		for _, p := range current {
			exists[p.ID] = true
		}
		var gone, deleted, present []int64
		var presentIDs []string
		for _, it := range created {
			switch {
			case exists[it.PayrollID]:
				present = append(present, it.ID)
				presentIDs = append(presentIDs, it.PayrollID)
			case it.DeleteAttempt != 0:
				// Sent in a delete (this run or one that died): ours.
				deleted = append(deleted, it.ID)
			default:
				gone = append(gone, it.ID)
			}
		}
		if len(gone)+len(deleted) > 0 {
			if err := d.L.MarkRemoved(ctx, id, 0, deleted, gone); err != nil {
				return err
			}
			d.Stats.Gone += len(gone)
			d.Stats.Deleted += len(deleted)
		}
		var failure error
		for start := 0; start < len(present); start += d.DeleteChunk {
			end := min(start+d.DeleteChunk, len(present))
			d.Stats.Attempts++
			if d.Limiter != nil {
				if err := d.Limiter.Wait(ctx); err != nil {
					return err
				}
			}
			// Ledger first: record what this delete is about to remove.
			if err := d.L.MarkDeleting(ctx, att, present[start:end]); err != nil {
				return err
			}
			if _, err := d.P.DeletePayParts(ctx, b.CompanyID, presentIDs[start:end]); err != nil {
				failure = err
				break
			}
			if err := d.L.MarkRemoved(ctx, id, 0, present[start:end], nil); err != nil {
				return err
			}
			d.Stats.Deleted += end - start
			d.observe("deleted", end-start)
		}
		if failure == nil {
			return d.L.MarkRemoved(ctx, id, att, nil, nil)
		}
		var pe *payroll.Error
		if !errors.As(failure, &pe) || pe.Class == paysync.Revoked || try+1 >= d.MaxAttempts {
			_ = d.L.EndAttempt(context.WithoutCancel(ctx), att, paysync.AttemptFailed, 0, failure.Error(), "")
			return fmt.Errorf("revert batch %d: %w", id, failure)
		}
		// Not applied, rejected (e.g. one was deleted meanwhile) or
		// ambiguous: read again and delete what is still there. The
		// outcome is the class's name ("not applied", with a space).
		if err := d.L.EndAttempt(ctx, att, paysync.AttemptOutcome(pe.Class.String()), pe.StatusCode, pe.Error(), ""); err != nil {
			return err
		}
		if err := d.Sleep(ctx, backoff(try, pe.RetryAfter)); err != nil {
			return err
		}
	}
}
