package worker

import (
	"context"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// Begin is the start of a command that sends (paysync import, run
// --once), in the daemon's order: the schema and the default company read
// through w, then what an earlier run left in flight settled (d.Recover)
// before any new work. It returns the mapper and the wire checker new
// work is planned with.
func Begin(ctx context.Context, w *payroll.Waiter, p StartupPayroll, rules *mapping.Rules, company string, d *Deliverer) (*mapping.Mapper, payroll.Schema, error) {
	schema, company, err := StartupReads(ctx, w, p, rules, company, nil)
	if err != nil {
		return nil, schema, err
	}
	if err := w.Do(ctx, WaitRecovery, d.Recover); err != nil {
		return nil, schema, err
	}
	return mapping.NewMapper(rules, mapping.NewCache(p), schema, company), schema, nil
}

// DeliverOpen delivers the batches of a source still open (sourceID 0:
// of every source), each company's in order, and returns how many there
// were; found, when set, is told of them first (a progress bar's total).
func (d *Deliverer) DeliverOpen(ctx context.Context, sourceID int64, found func([]ledger.Batch)) (int, error) {
	open, err := d.L.OpenBatches(ctx, sourceID)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	if found != nil {
		found(open)
	}
	ids := make([]int64, len(open))
	for i, b := range open {
		ids[i] = b.ID
	}
	return len(open), d.Deliver(ctx, ids)
}
