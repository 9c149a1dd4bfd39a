package worker

import (
	"context"
	"fmt"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// An operator's revert of a batch or an import, as `paysync revert` and
// the console both do it: resolve what it deletes, show what payroll
// still holds of it (PreviewRevert), then Deliverer.Recover and
// Deliverer.Revert.

// RevertLedger is what resolving and previewing a revert reads
// (*ledger.Ledger).
type RevertLedger interface {
	Source(ctx context.Context, id int64) (ledger.Source, error)
	Batch(ctx context.Context, id int64) (ledger.Batch, error)
	Family(ctx context.Context, id int64) ([]ledger.Batch, error)
	BatchesOfImport(ctx context.Context, importID int64) ([]ledger.Batch, error)
	AnySuperseded(ctx context.Context, batchIDs []int64) (bool, error)
	Items(ctx context.Context, batchID int64) ([]ledger.Item, error)
}

var _ RevertLedger = (*ledger.Ledger)(nil)

// RevertTarget is what reverting a batch or an import deletes: batches
// (with those split from them, and an import's replays), or, for a NATS
// message, whose pay parts share batches with other messages', the pay
// parts of its entries (Scope, for Corrector.RevertScope).
type RevertTarget struct {
	Batches []ledger.Batch
	Scope   *ledger.Scope
}

// RevertTargetOf resolves batch batchID, or import importID (batchID 0).
func RevertTargetOf(ctx context.Context, l RevertLedger, batchID, importID int64) (RevertTarget, error) {
	if importID != 0 {
		src, err := l.Source(ctx, importID)
		if err != nil {
			return RevertTarget{}, err
		}
		if src.Kind == paysync.SourceNATS {
			return RevertTarget{Scope: &ledger.Scope{SourceID: importID}}, nil
		}
		// Its replays (and re-drives) are recorded as imports of their
		// own: reverting the import reverts them too.
		bs, err := l.BatchesOfImport(ctx, importID)
		if err != nil {
			return RevertTarget{}, err
		}
		// A pay part of it replaced by a correction unit (a correction,
		// a merge or a cutoff that joined its aggregate with other
		// entries): its entries are paid through other batches now, so
		// they are reverted wherever they are, as a message's are.
		ids := make([]int64, len(bs))
		for i, b := range bs {
			ids[i] = b.ID
		}
		if moved, err := l.AnySuperseded(ctx, ids); err != nil || moved {
			return RevertTarget{Scope: &ledger.Scope{SourceID: importID}}, err
		}
		return RevertTarget{Batches: bs}, nil
	}
	if _, err := l.Batch(ctx, batchID); err != nil {
		return RevertTarget{}, err
	}
	bs, err := l.Family(ctx, batchID)
	return RevertTarget{Batches: bs}, err
}

// RevertRow is one created pay part of a revert's batches, and whether
// payroll still holds it (then the revert deletes it).
type RevertRow struct {
	ledger.Item
	InPayroll bool
}

// Status says what the revert does with the pay part.
func (r RevertRow) Status() string {
	switch {
	case r.InPayroll:
		return "yes: will be deleted"
	case r.DeleteAttempt != 0:
		return "gone (deleted by an interrupted revert)"
	}
	return "gone (deleted by hand)"
}

// RevertPreview is what reverting batches would delete.
type RevertPreview struct {
	Batches  []int64 // the batches reverted (split ones are their children)
	Rows     []RevertRow
	ToDelete int // rows payroll still holds
}

// PayPartsReader reads what payroll holds of a company (*payroll.Client).
type PayPartsReader interface {
	PayParts(ctx context.Context, companyID string) ([]paysync.PayPart, error)
}

// PreviewRevert reads the created pay parts of bs and, through w (one read
// per company), which of them payroll still holds. It changes nothing.
func PreviewRevert(ctx context.Context, l RevertLedger, w *payroll.Waiter, p PayPartsReader, bs []ledger.Batch) (RevertPreview, error) {
	var pv RevertPreview
	var items []ledger.Item
	for _, b := range bs {
		if b.State == paysync.BatchSplit {
			continue
		}
		pv.Batches = append(pv.Batches, b.ID)
		its, err := l.Items(ctx, b.ID)
		if err != nil {
			return pv, err
		}
		for _, it := range its {
			if it.State == paysync.PartCreated {
				items = append(items, it)
			}
		}
	}
	exists := map[string]bool{}
	companies := map[string]bool{}
	for _, it := range items {
		if companies[it.CompanyID] {
			continue
		}
		companies[it.CompanyID] = true
		var pps []paysync.PayPart
		err := w.Do(ctx, "the pay parts of company "+it.CompanyID, func(ctx context.Context) (err error) {
			pps, err = p.PayParts(ctx, it.CompanyID)
			return err
		})
		if err != nil {
			return pv, err
		}
		for _, pp := range pps {
			exists[pp.ID] = true
		}
	}
	for _, it := range items {
		r := RevertRow{Item: it, InPayroll: exists[it.PayrollID]}
		if r.InPayroll {
			pv.ToDelete++
		}
		pv.Rows = append(pv.Rows, r)
	}
	return pv, nil
}

// Summary is the preview's closing line.
func (pv RevertPreview) Summary() string {
	n := len(pv.Rows)
	noun := "pay parts"
	if n == 1 {
		noun = "pay part"
	}
	return fmt.Sprintf("%d %s of batches %v: %d to delete, %d already gone", n, noun, pv.Batches, pv.ToDelete, n-pv.ToDelete)
}

// An operator's replay of a batch or an import, as `paysync replay` and
// the console both do it: NewReplayer, Replayer.Plan shown, then
// (confirmed) Deliverer.Recover and Replayer.Resume before Replayer.Run.

// NewReplayer is a replay's Replayer: the payroll schema and the default
// company read through w, then a mapper over p with rules.
func NewReplayer(ctx context.Context, w *payroll.Waiter, p StartupPayroll, l ReplayLedger, d *Deliverer, rules *mapping.Rules, company string, batchSize int) (*Replayer, error) {
	schema, company, err := StartupReads(ctx, w, p, rules, company, nil)
	if err != nil {
		return nil, err
	}
	mapper := mapping.NewMapper(rules, mapping.NewCache(p), schema, company)
	return &Replayer{L: l, D: d, Mapper: mapper, Rules: rules, Wire: schema, BatchSize: batchSize}, nil
}

// Notes says which entries a replay plan leaves out because an earlier
// replay has them in payroll (or on their way), and which it pays again
// (forced), one line each.
func (p ReplayPlan) Notes() []string {
	var out []string
	for _, s := range p.InPayroll {
		if s.Pending {
			out = append(out, fmt.Sprintf("%s on their way to payroll through batch %d (an earlier replay, not yet sent): not replayed; it is sent first", entries(s.Entries, "entry is", "entries are"), s.BatchID))
		} else {
			out = append(out, fmt.Sprintf("%s in payroll already through batch %d (an earlier replay): not replayed", entries(s.Entries, "entry is", "entries are"), s.BatchID))
		}
	}
	for _, s := range p.Forced {
		are := "are"
		if s.Entries == 1 {
			are = "is"
		}
		out = append(out, fmt.Sprintf("--force: %s in payroll already (or on their way) through batch %d %s paid again", entries(s.Entries, "entry", "entries"), s.BatchID, are))
	}
	return out
}

// entries is a count with its noun ("1 entry is", "2 entries are").
func entries(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
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
