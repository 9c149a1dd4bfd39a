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
	if len(d.Imports) > 10 {
		d.Imports = d.Imports[:10]
	}
	s.render(w, r, http.StatusOK, "overview", c, d)
}
