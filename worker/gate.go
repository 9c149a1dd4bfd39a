package worker

import (
	"context"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
)

// callGate bounds the payroll calls in flight across a pipeline's company
// workers (PAYSYNC_IN_FLIGHT). A call holds its slot only while it is on
// the wire: while one company records its last call's result and begins
// the next (the ledger-first transactions between two of its calls),
// another company's call can go out.
type callGate struct {
	Payroll
	slots chan struct{}
}

func newCallGate(p Payroll, n int) *callGate {
	return &callGate{Payroll: p, slots: make(chan struct{}, n)}
}

// companyPauser is a Payroll that serves companies through separate
// connections (*payroll.Router): Paused says why a company's calls wait
// (its connection was revoked, or none serves it); nil: they go.
type companyPauser interface {
	Paused(ctx context.Context, company string) error
}

var _ companyPauser = (*payroll.Router)(nil)

// paused reports whether the company waits for its connection: the
// pipeline then passes over its batches (they stay pending, no attempt is
// recorded) while the other companies' go on.
func (g *callGate) paused(ctx context.Context, company string) bool {
	cp, ok := g.Payroll.(companyPauser)
	return ok && cp.Paused(ctx, company) != nil
}

// enter waits for a slot. A context that ends first is returned as the
// call's error: the Deliverer leaves the batch sending, and it is
// reconciled, as for any call that may have gone out.
func (g *callGate) enter(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *callGate) leave() { <-g.slots }

func (g *callGate) CreatePayParts(ctx context.Context, companyID string, items []paysync.PayPartInput) ([]paysync.PayPart, error) {
	if err := g.enter(ctx); err != nil {
		return nil, err
	}
	defer g.leave()
	return g.Payroll.CreatePayParts(ctx, companyID, items)
}

func (g *callGate) DeletePayParts(ctx context.Context, companyID string, ids []string) (payroll.DeleteResult, error) {
	if err := g.enter(ctx); err != nil {
		return payroll.DeleteResult{}, err
	}
	defer g.leave()
	return g.Payroll.DeletePayParts(ctx, companyID, ids)
}

func (g *callGate) PayParts(ctx context.Context, companyID string) ([]paysync.PayPart, error) {
	if err := g.enter(ctx); err != nil {
		return nil, err
	}
	defer g.leave()
	return g.Payroll.PayParts(ctx, companyID)
}
