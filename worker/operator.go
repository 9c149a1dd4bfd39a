package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// Operations are what an operator does to payroll's desired state, as
// `paysync revert`/`replay`, the console and the daemon all do it: each
// changes the desired state in one transaction, then the one reconciler
// plans and applies the difference. Revert is undo, replay is redo:
//
//   - an import (a file or a NATS message): its versions stop counting (each
//     entry falls back to its version before it) / count again, re-mapped
//     under the current rules;
//   - batches: the entries behind their pay parts are excluded until
//     replayed (re-mapped) or listed again by a later import;
//   - a period (of a company, or all): its entries likewise.
//
// Nothing of this changes a closed period.
type Operations struct {
	L OperationsLedger
	R *Reconciler
	// D sends what the reconcile recorded (nil: the daemon's sending loop
	// does, e.g. the console inside paysync run).
	D *Deliverer
}

// OperationsLedger is what operations need of the ledger.
type OperationsLedger interface {
	ReconcileLedger
	Revert(ctx context.Context, t ledger.Target) (int, error)
	Replay(ctx context.Context, t ledger.Target) (int, error)
	TargetEntries(ctx context.Context, t ledger.Target, replay bool) (int, error)
	Source(ctx context.Context, id int64) (ledger.Source, error)
	Batch(ctx context.Context, id int64) (ledger.Batch, error)
	Family(ctx context.Context, id int64) ([]ledger.Batch, error)
	CheckOpen(ctx context.Context, t ledger.Target) error
}

var _ OperationsLedger = (*ledger.Ledger)(nil)

// Operation is a revert or a replay of a target.
type Operation struct {
	Replay bool
	Target ledger.Target
}

func (op Operation) String() string {
	if op.Replay {
		return "replay " + op.Target.String()
	}
	return "revert " + op.Target.String()
}

// TargetOf resolves what batch batchID (with the batches split from it),
// import importID or period (of company) names; it checks they exist.
func TargetOf(ctx context.Context, l OperationsLedger, batchID, importID int64, period *paysync.Period, company string) (ledger.Target, error) {
	switch {
	case importID != 0:
		if _, err := l.Source(ctx, importID); err != nil {
			return ledger.Target{}, err
		}
		return ledger.Target{Import: importID}, nil
	case batchID != 0:
		if _, err := l.Batch(ctx, batchID); err != nil {
			return ledger.Target{}, err
		}
		fam, err := l.Family(ctx, batchID)
		if err != nil {
			return ledger.Target{}, err
		}
		t := ledger.Target{}
		for _, b := range fam {
			t.Batches = append(t.Batches, b.ID)
		}
		return t, nil
	case period != nil:
		return ledger.Target{Period: period, Company: company}, nil
	}
	return ledger.Target{}, fmt.Errorf("name one batch, one import or one period")
}

// Preview is what an operation touches and what it would send, exactly.
type Preview struct {
	Op      Operation
	Entries int  // entries it changes
	Plan    Plan // what the reconciler would send after it (simulated on a copy of the ledger)
}

// Preview shows op before it is run: op simulated on a copy of the ledger
// (OnCopy), the copy's plan. The ledger changes only in what intake
// recorded being taken in (Absorb: nothing is sent).
func (o *Operations) Preview(ctx context.Context, op Operation) (Preview, error) {
	pv := Preview{Op: op}
	if err := o.L.CheckOpen(ctx, op.Target); err != nil {
		return pv, err
	}
	l, ok := o.L.(*ledger.Ledger)
	if !ok {
		return pv, fmt.Errorf("preview: the ledger cannot be copied")
	}
	// Everything on the copy, what intake recorded taken in too (with the
	// command's rules: a draft's mapping never stays in the ledger).
	err := OnCopy(ctx, l, func(cp *ledger.Ledger) error {
		rc := *o.R
		rc.L = cp
		if _, err := rc.Absorb(ctx); err != nil && !Paused(err) {
			return err
		}
		var err error
		if pv.Entries, err = cp.TargetEntries(ctx, op.Target, op.Replay); err != nil {
			return err
		}
		pv.Plan, err = (&Operations{L: cp, R: &rc}).Simulate(ctx, op)
		return err
	})
	return pv, err
}

// OnCopy runs fn on a copy of l in a private temporary directory, removed
// after: a dry run or a preview changes the copy the way the real command
// would change the ledger, and its plan is what it would send.
func OnCopy(ctx context.Context, l *ledger.Ledger, fn func(cp *ledger.Ledger) error) error {
	dir, err := os.MkdirTemp("", "paysync-dry-run-") // 0700
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ledger.db")
	if err := l.CopyTo(ctx, path); err != nil {
		return err
	}
	cp, err := ledger.Open(ctx, path, ledger.Options{})
	if err != nil {
		return err
	}
	defer cp.Close()
	return fn(cp)
}

// Simulate runs op's change of desired state and returns the plan the
// reconciler would then apply: what op would send, exactly. Run it on a
// copy of the ledger (ledger.CopyTo): it changes the ledger it runs on.
func (o *Operations) Simulate(ctx context.Context, op Operation) (Plan, error) {
	var refused *RefusedError
	if err := o.change(ctx, op); err != nil && !errors.As(err, &refused) {
		return Plan{}, err
	}
	p, err := o.R.Plan(ctx, PlanFilter{})
	if refused != nil {
		p.Refused = refused
	}
	return p, err
}

// change is op's change of desired state (after what intake recorded is
// taken in).
func (o *Operations) change(ctx context.Context, op Operation) error {
	if err := o.L.CheckOpen(ctx, op.Target); err != nil {
		return err
	}
	if _, err := o.R.Absorb(ctx); err != nil {
		return err
	}
	if op.Replay {
		// Mapped again under the current rules first, while the target
		// still names what it excluded; then they count again. Entries
		// the rules refuse keep their lines: said after the rest is done.
		_, rerr := o.R.Reline(ctx, op.Target)
		var refused *RefusedError
		if rerr != nil && !errors.As(rerr, &refused) {
			return rerr
		}
		t := op.Target
		if refused != nil {
			t.Except = refused.Entries // they stay as they were: excluded too
		}
		if _, err := o.L.Replay(ctx, t); err != nil {
			return err
		}
		return rerr
	}
	_, err := o.L.Revert(ctx, op.Target)
	return err
}

// Run runs op: the desired state changed, the reconciler's plan applied
// and (with D) sent. Run again, it changes nothing more; after a crash it
// finishes what is left.
func (o *Operations) Run(ctx context.Context, op Operation) (entries int, batches []int64, err error) {
	if entries, err = o.L.TargetEntries(ctx, op.Target, op.Replay); err != nil {
		return 0, nil, err
	}
	var refused *RefusedError
	if cerr := o.change(ctx, op); errors.As(cerr, &refused) {
		defer func() { err = cmp.Or(err, error(refused)) }()
	} else if cerr != nil {
		return 0, nil, cerr
	}
	if batches, err = o.R.Apply(ctx, op.Target.Import); err != nil && !Paused(err) {
		return entries, nil, err
	} else if err != nil {
		paused := err
		defer func() { err = cmp.Or(err, paused) }()
	}
	if o.D != nil {
		if err := o.D.Recover(ctx); err != nil {
			return entries, batches, err
		}
		// Every batch still open: the plan's, and those of an earlier plan
		// it left to finish (a replaced pay part's delete).
		if _, err := o.D.DeliverOpen(ctx, 0, nil); err != nil {
			return entries, batches, err
		}
	}
	return entries, batches, nil
}

// NewReconciler is a command's reconciler: the payroll schema and the
// default company read through w, then a mapper over p with rules.
func NewReconciler(ctx context.Context, w *payroll.Waiter, p StartupPayroll, l ReconcileLedger, rules *mapping.Rules, company string, batchSize int) (*Reconciler, error) {
	schema, company, err := StartupReads(ctx, w, p, rules, company, nil)
	if err != nil {
		return nil, err
	}
	mapper := mapping.NewMapper(rules, mapping.NewCache(p), schema, company)
	return &Reconciler{L: l, Mapper: mapper, Rules: rules, Wire: schema, BatchSize: batchSize}, nil
}

// FamilyLedger reads a batch with the batches it was split into
// (*ledger.Ledger).
type FamilyLedger interface {
	Family(ctx context.Context, id int64) ([]ledger.Batch, error)
}

// Unfinished counts the batches among ids (and those they split into)
// that still owe work (pending, sending or failed): an operator's revert
// or replay that did not finish, to be run again.
func Unfinished(ctx context.Context, l FamilyLedger, ids []int64) (int, error) {
	n := 0
	for _, id := range ids {
		fam, err := l.Family(ctx, id)
		if err != nil {
			return 0, err
		}
		for _, b := range fam {
			switch b.State {
			case paysync.BatchPending, paysync.BatchSending, paysync.BatchFailed:
				n++
			}
		}
	}
	return n, nil
}
