package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
)

// revertBatch finishes a batch revert a paysync from before the desired
// state left half done (a batch in state reverting): it deletes exactly the
// pay parts of the batch that payroll still holds. Reverts are operations
// on the desired state now (Operations); no new batch becomes reverting.
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
	// A server that cannot delete: refused before the ledger is touched.
	if err := canDelete(ctx, d.P, b.CompanyID); err != nil {
		return fmt.Errorf("revert batch %d: %w", id, err)
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
		again, err := d.deleteCreated(ctx, fmt.Sprintf("revert batch %d", id), id, b.CompanyID, att, created, try, d.L.MarkRemoved, nil)
		if !again || err != nil {
			return err
		}
	}
}

// deleteCreated (op names it in errors) deletes from payroll the created pay parts of batch id
// (recording them with markRemoved: the revert's, or the correction's)
// that it still holds, in delete attempt att (recorded); ones deleted by
// hand become gone. again: the attempt failed in a way worth another try
// (after the backoff slept here): read and begin again.
func (d *Deliverer) deleteCreated(ctx context.Context, op string, id int64, company string, att int64, created []ledger.Item, try int,
	markRemoved func(ctx context.Context, batchID, attemptID int64, deleted, gone []int64) error, exists map[string]bool) (again bool, err error) {
	if exists == nil {
		if exists, err = d.inPayroll(ctx, company); err != nil {
			_ = d.L.EndAttempt(context.WithoutCancel(ctx), att, paysync.AttemptFailed, 0, err.Error(), "")
			return false, fmt.Errorf("%s: %w", op, err)
		}
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
		if err := markRemoved(ctx, id, 0, deleted, gone); err != nil {
			return false, err
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
				return false, err
			}
		}
		// Ledger first: record what this delete is about to remove.
		if err := d.L.MarkDeleting(ctx, att, present[start:end]); err != nil {
			return false, err
		}
		if _, err := d.P.DeletePayParts(ctx, company, presentIDs[start:end]); err != nil {
			failure = err
			break
		}
		if err := markRemoved(ctx, id, 0, present[start:end], nil); err != nil {
			return false, err
		}
		d.Stats.Deleted += end - start
		d.observe("deleted", end-start)
	}
	if failure == nil {
		return false, markRemoved(ctx, id, att, nil, nil)
	}
	var pe *payroll.Error
	if !errors.As(failure, &pe) || pe.Class == paysync.Revoked || try+1 >= d.MaxAttempts {
		_ = d.L.EndAttempt(context.WithoutCancel(ctx), att, paysync.AttemptFailed, 0, failure.Error(), "")
		return false, fmt.Errorf("%s: %w", op, failure)
	}
	// Not applied, rejected (e.g. one was deleted meanwhile) or
	// ambiguous: read again and delete what is still there. The
	// outcome is the class's name ("not applied", with a space).
	if err := d.L.EndAttempt(ctx, att, paysync.AttemptOutcome(pe.Class.String()), pe.StatusCode, pe.Error(), ""); err != nil {
		return false, err
	}
	return true, d.Sleep(ctx, backoff(try, pe.RetryAfter))
}

// inPayroll reads the payroll ids of company's pay parts.
func (d *Deliverer) inPayroll(ctx context.Context, company string) (map[string]bool, error) {
	current, err := d.P.PayParts(ctx, company)
	if err != nil {
		return nil, fmt.Errorf("read pay parts of company %s: %w", company, err)
	}
	exists := make(map[string]bool, len(current))
	for _, p := range current {
		exists[p.ID] = true
	}
	return exists, nil
}

// removeSuperseded deletes from payroll the pay parts of company that
// correction unit replaces, before the unit's own batches are sent. Run again after a
// crash, it deletes what is still there (a delete recorded and sent is
// found done).
func (d *Deliverer) removeSuperseded(ctx context.Context, unit int64, company string) error {
	// A period closed since the plan: its pay parts there stay, and the
	// plan's new ones there are not sent.
	if err := d.L.FreezeUnit(ctx, unit); err != nil {
		return err
	}
	for try := 0; ; try++ {
		byBatch, order, err := d.L.SupersededBy(ctx, unit, company)
		if err != nil || len(order) == 0 {
			return err
		}
		// One read of what payroll holds serves every batch of the unit
		// (their pay parts are not each other's).
		exists, err := d.inPayroll(ctx, company)
		if err != nil {
			return fmt.Errorf("correction %d: %w", unit, err)
		}
		// A period closed while a delete was in flight: what payroll still
		// holds there stays (its delete was not carried out).
		var keep []int64
		for _, bid := range order {
			for _, it := range byBatch[bid] {
				if it.Frozen && exists[it.PayrollID] {
					keep = append(keep, it.ID)
				}
			}
		}
		if len(keep) > 0 {
			if err := d.L.KeepFrozen(ctx, keep); err != nil {
				return err
			}
			continue
		}
		again := false
		for _, bid := range order {
			items := byBatch[bid]
			att, err := d.L.BeginSupersedeDelete(ctx, bid, len(items))
			if errors.Is(err, ledger.ErrBatchChanged) {
				again = true // a period closed meanwhile: read again
				continue
			}
			if err != nil {
				return err
			}
			a, err := d.deleteCreated(ctx, fmt.Sprintf("correction %d: delete from batch %d", unit, bid), bid, items[0].CompanyID, att, items, try, d.L.MarkSupersededRemoved, exists)
			if err != nil {
				return err
			}
			again = again || a
		}
		if !again {
			return nil
		}
	}
}

// deleteCapable is a Payroll that knows whether its server deletes pay
// parts (*payroll.Client, *payroll.Router): an error wraps
// payroll.ErrNoDelete when it does not.
type deleteCapable interface {
	CanDelete(ctx context.Context, companyID string) error
}

var (
	_ deleteCapable = (*payroll.Client)(nil)
	_ deleteCapable = (*payroll.Router)(nil)
)

// canDelete asks p (through a callGate) whether company's server deletes
// pay parts; a Payroll that cannot say is taken to.
func canDelete(ctx context.Context, p Payroll, company string) error {
	if g, ok := p.(*callGate); ok {
		p = g.Payroll
	}
	if dc, ok := p.(deleteCapable); ok {
		return dc.CanDelete(ctx, company)
	}
	return nil
}
