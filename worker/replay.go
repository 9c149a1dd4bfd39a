package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// ReplayLedger is what a replay needs from the ledger.
type ReplayLedger interface {
	Batch(ctx context.Context, id int64) (ledger.Batch, error)
	Items(ctx context.Context, batchID int64) ([]ledger.Item, error)
	BatchesOfSource(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
	EntriesOfBatch(ctx context.Context, batchID int64) ([]paysync.Entry, error)
	EntriesOfSource(ctx context.Context, sourceID int64) ([]paysync.Entry, error)
	CommitImport(ctx context.Context, in ledger.ImportIntent) (ledger.Committed, error)
}

// ErrStillInPayroll refuses a replay that would pay twice.
var ErrStillInPayroll = errors.New("the original's pay parts still exist in payroll")

// Replayer runs stored entries through the current rules into new batches.
type Replayer struct {
	L         ReplayLedger
	D         *Deliverer
	Mapper    *mapping.Mapper
	Rules     *mapping.Rules
	Wire      mapping.WireChecker
	BatchSize int
}

// ReplayPlan is what a replay would do.
type ReplayPlan struct {
	SourceID  int64
	ReplayOf  int64 // the batch replayed (0 for a whole import)
	Originals []int64
	PayParts  []paysync.PlannedPayPart
	Problems  []error
	Skipped   map[string]int
}

// Plan maps the stored entries of a batch (batchID) or of a whole import
// (sourceID) with the current rules. It refuses while any pay part of the
// originals still exists in payroll, unless force.
func (r *Replayer) Plan(ctx context.Context, batchID, sourceID int64, force bool) (ReplayPlan, error) {
	plan := ReplayPlan{ReplayOf: batchID, SourceID: sourceID, Skipped: map[string]int{}}
	var originals []ledger.Batch
	var entries []paysync.Entry
	var err error
	if batchID != 0 {
		b, err := r.L.Batch(ctx, batchID)
		if err != nil {
			return plan, err
		}
		plan.SourceID = b.SourceID
		originals = []ledger.Batch{b}
		if entries, err = r.L.EntriesOfBatch(ctx, batchID); err != nil {
			return plan, err
		}
	} else {
		if originals, err = r.L.BatchesOfSource(ctx, sourceID); err != nil {
			return plan, err
		}
		if entries, err = r.L.EntriesOfSource(ctx, sourceID); err != nil {
			return plan, err
		}
	}
	for _, b := range originals {
		plan.Originals = append(plan.Originals, b.ID)
		switch b.State {
		case ledger.BatchPending, ledger.BatchSending, ledger.BatchFailed, ledger.BatchReverting:
			if !force {
				return plan, fmt.Errorf("batch %d is %s: let it finish (or revert it) before replaying", b.ID, b.State)
			}
		}
		if force {
			continue
		}
		still, err := r.stillInPayroll(ctx, b)
		if err != nil {
			return plan, err
		}
		if still > 0 {
			return plan, fmt.Errorf("batch %d: %d of its pay parts: %w; revert it first (paysync revert %d), or replay with --force to pay again", b.ID, still, ErrStillInPayroll, b.ID)
		}
	}
	planner := mapping.NewPlanner(r.Rules, r.Wire)
	for _, e := range entries {
		lines, err := r.Mapper.Map(ctx, e)
		switch {
		case err != nil && !mapping.OnlyProblems(err):
			return plan, err
		case err != nil:
			plan.Problems = append(plan.Problems, err)
		case len(lines) > 0 && lines[0].Skip != "":
			plan.Skipped[lines[0].Skip]++
		default:
			for _, l := range lines {
				if err := planner.Add(l); err != nil {
					plan.Problems = append(plan.Problems, err)
				}
			}
		}
	}
	pps, probs := planner.PayParts()
	plan.PayParts = pps
	plan.Problems = mapping.Flatten(append(plan.Problems, probs...)...)
	return plan, nil
}

// stillInPayroll counts a batch's created pay parts that payroll still has.
func (r *Replayer) stillInPayroll(ctx context.Context, b ledger.Batch) (int, error) {
	items, err := r.L.Items(ctx, b.ID)
	if err != nil {
		return 0, err
	}
	ours := map[string]bool{}
	for _, it := range items {
		if it.State == ledger.PartCreated {
			ours[it.PayrollID] = true
		}
	}
	if len(ours) == 0 {
		return 0, nil
	}
	current, err := r.D.P.PayParts(ctx, b.CompanyID)
	if err != nil {
		return 0, fmt.Errorf("read pay parts of company %s: %w", b.CompanyID, err)
	}
	n := 0
	for _, p := range current {
		if ours[p.ID] {
			n++
		}
	}
	return n, nil
}

// Run commits a plan as new batches linked to the original and delivers them.
func (r *Replayer) Run(ctx context.Context, plan ReplayPlan) ([]int64, error) {
	if len(plan.PayParts) == 0 {
		return nil, nil
	}
	c, err := r.L.CommitImport(ctx, ledger.ImportIntent{SourceID: plan.SourceID, ReplayOf: plan.ReplayOf, PayParts: plan.PayParts, BatchSize: r.BatchSize})
	if err != nil {
		return nil, err
	}
	return c.BatchIDs, r.D.Deliver(ctx, c.BatchIDs)
}
