package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// Imports and batches: lists with filters (company, state, since), an
// import with its batches and rejects, a batch with its pay parts, their
// payroll ids and the source lines behind each.

// filter is a list page's filters, as its form and query name them.
type filter struct {
	Company, State, Since string
	since                 time.Time
	Error                 string
}

func parseFilter(r *http.Request) filter {
	q := r.URL.Query()
	f := filter{Company: q.Get("company"), State: q.Get("state"), Since: q.Get("since")}
	if f.Since != "" {
		t, err := time.Parse(time.DateOnly, f.Since)
		if err != nil {
			f.Error = "since: want a date like 2026-11-01"
		}
		f.since = t
	}
	return f
}

func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

type importsData struct {
	Filter  filter
	Imports []ledger.Source
	States  []paysync.SourceStatus
}

func (s *Server) imports(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	f := parseFilter(r)
	all, err := s.cfg.Ledger.ListSources(ctx, f.since)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := importsData{Filter: f, States: []paysync.SourceStatus{paysync.SourceCommitted, paysync.SourceRejected, paysync.SourceReceived}}
	for _, src := range all {
		if src.ID == 0 { // the reconciler's own source (its batches of no import), not an import
			continue
		}
		if f.State != "" && string(src.Status) != f.State {
			continue
		}
		if f.Company != "" {
			bs, err := s.cfg.Ledger.BatchesOfSource(ctx, src.ID)
			if err != nil {
				s.fail(w, r, http.StatusInternalServerError, err.Error())
				return
			}
			found := false
			for _, b := range bs {
				found = found || b.CompanyID == f.Company
			}
			if !found {
				continue
			}
		}
		d.Imports = append(d.Imports, src)
		if len(d.Imports) == 500 {
			break
		}
	}
	s.render(w, r, http.StatusOK, "imports", c, d)
}

type importData struct {
	Import  ledger.Source
	Batches []ledger.Batch
	Rejects []ledger.Reject
	// CanReplay: its entries can count again, mapped with the current
	// rules (a replay is a redo: of what was reverted, or under rules
	// changed since); an import refused as a whole has none.
	CanReplay bool
}

func (s *Server) importPage(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	id, ok := pathID(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "no such import")
		return
	}
	l := s.cfg.Ledger
	src, err := l.Source(ctx, id)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "import "+r.PathValue("id")+": "+err.Error())
		return
	}
	d := importData{Import: src}
	if d.Batches, err = l.BatchesOfSource(ctx, id); err == nil {
		d.Rejects, err = l.Rejects(ctx, id)
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.CanReplay = s.cfg.Actions != nil && src.Status != paysync.SourceRejected
	s.render(w, r, http.StatusOK, "import", c, d)
}

type batchesData struct {
	Filter  filter
	Batches []ledger.Batch
	States  []paysync.BatchState
}

func (s *Server) batches(w http.ResponseWriter, r *http.Request, c who) {
	f := parseFilter(r)
	all, err := s.cfg.Ledger.ListBatches(r.Context(), ledger.BatchFilter{State: paysync.BatchState(f.State), Since: f.since})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := batchesData{Filter: f, States: []paysync.BatchState{paysync.BatchPending, paysync.BatchSending, paysync.BatchCreated, paysync.BatchFailed,
		paysync.BatchSplit, paysync.BatchReverting, paysync.BatchReverted}}
	for _, b := range all {
		if f.Company != "" && b.CompanyID != f.Company {
			continue
		}
		d.Batches = append(d.Batches, b)
		if len(d.Batches) == 500 {
			break
		}
	}
	s.render(w, r, http.StatusOK, "batches", c, d)
}

type batchData struct {
	ledger.BatchDetail
	Import    ledger.Source
	CanRevert bool
	// CanReplay: the entries behind its pay parts can count again, mapped
	// with the current rules (those a revert of it excluded, or under
	// rules changed since).
	CanReplay bool
}

func (s *Server) batchPage(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	id, ok := pathID(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "no such batch")
		return
	}
	bd, err := s.cfg.Ledger.BatchDetail(ctx, id)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "batch "+r.PathValue("id")+": "+err.Error())
		return
	}
	d := batchData{BatchDetail: bd, CanRevert: s.cfg.Actions != nil && bd.State != paysync.BatchReverted && bd.State != paysync.BatchSplit,
		CanReplay: s.cfg.Actions != nil && bd.State != paysync.BatchSplit}
	if bd.SourceID != 0 {
		if d.Import, err = s.cfg.Ledger.Source(ctx, bd.SourceID); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err.Error())
			return
		}
	}
	s.render(w, r, http.StatusOK, "batch", c, d)
}
