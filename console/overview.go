package console

import (
	"context"
	"net/http"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/worker"
)

// The overview: is everything ready, what waits or failed, what went
// out last.

type checkRow struct {
	Name   string
	OK     bool
	Detail string
}

type overviewData struct {
	Checks         []checkRow
	PendingParts   int
	Pending        []ledger.Batch // batches still to send
	Failed         []ledger.Batch
	LastDeliveries []ledger.Attempt
	Imports        []ledger.Source
	ReadOnly       bool
	// Plan is what the reconciler would send now (paysync plan's rows);
	// PlanError says why it could not be planned.
	Plan      []planRow
	PlanNotes []string
	PlanError string
}

// readiness runs the configured checks (the daemon's), else probes the
// ledger (the quick probe: no integrity check).
func (s *Server) readiness(ctx context.Context) []checkRow {
	checks := s.cfg.Readiness
	if checks == nil {
		checks = []worker.Check{{Name: "ledger", Fn: func() error { return s.cfg.Ledger.Probe(ctx, false).Problem() }}}
	}
	out := make([]checkRow, len(checks))
	for i, c := range checks {
		out[i] = checkRow{Name: c.Name, OK: true, Detail: "ready"}
		if err := c.Fn(); err != nil {
			out[i].OK, out[i].Detail = false, err.Error()
		}
	}
	return out
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	l := s.cfg.Ledger
	d := overviewData{Checks: s.readiness(ctx), ReadOnly: s.cfg.Actions == nil}
	var err error
	if d.PendingParts, err = l.PendingPayParts(ctx); err == nil {
		if d.Pending, err = l.BatchesInState(ctx, paysync.BatchPending); err == nil {
			var sending []ledger.Batch
			if sending, err = l.BatchesInState(ctx, paysync.BatchSending); err == nil {
				d.Pending = append(d.Pending, sending...)
				if d.Failed, err = l.BatchesInState(ctx, paysync.BatchFailed); err == nil {
					if d.LastDeliveries, err = l.Attempts(ctx, 0, 10); err == nil {
						d.Imports, err = l.ListSources(ctx, s.now().AddDate(0, 0, -7))
					}
				}
			}
		}
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	for i, j := 0, len(d.LastDeliveries)-1; i < j; i, j = i+1, j-1 { // newest first
		d.LastDeliveries[i], d.LastDeliveries[j] = d.LastDeliveries[j], d.LastDeliveries[i]
	}
	imports := d.Imports[:0]
	for _, src := range d.Imports {
		if src.ID != 0 { // the reconciler's own source, not an import
			imports = append(imports, src)
		}
	}
	d.Imports = imports
	if len(d.Imports) > 10 {
		d.Imports = d.Imports[:10]
	}
	d.Plan, d.PlanNotes, d.PlanError = s.currentPlan(ctx)
	s.render(w, r, http.StatusOK, "overview", c, d)
}

// currentPlan is what the reconciler would send now, for every company
// and period (paysync plan): planned with payroll's schema, so only a
// console with a payroll connection has it. It records nothing.
func (s *Server) currentPlan(ctx context.Context) ([]planRow, []string, string) {
	a := s.cfg.Actions
	if a == nil {
		return nil, nil, "plan unavailable: this console has no payroll connection"
	}
	r, err := a.viewReconciler(ctx, s.cfg.Ledger)
	if err != nil {
		return nil, nil, "plan unavailable: " + s.actionError(err)
	}
	p, err := r.Plan(ctx, worker.PlanFilter{})
	if err != nil {
		return nil, nil, "plan unavailable: " + err.Error()
	}
	var notes []string
	if p.Legacy > 0 {
		notes = append(notes, legacyNote(p.Legacy))
	}
	return planRows(p), notes, ""
}
