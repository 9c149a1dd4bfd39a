package console

import (
	"net/http"

	"github.com/paysync/paysync/ledger"
)

// Corrections: the units that replaced pay parts, and one unit's delta
// per employee × code.

type correctionsData struct {
	Units []ledger.CorrectionUnit
}

func (s *Server) corrections(w http.ResponseWriter, r *http.Request, c who) {
	f := parseFilter(r)
	units, err := s.cfg.Ledger.ListCorrections(r.Context(), ledger.CorrectionFilter{CompanyID: f.Company, Since: f.since})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "corrections", c, correctionsData{Units: units})
}

func (s *Server) correctionPage(w http.ResponseWriter, r *http.Request, c who) {
	id, ok := pathID(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "no such correction")
		return
	}
	d, err := s.cfg.Ledger.CorrectionDetail(r.Context(), id)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "correction "+r.PathValue("id")+": "+err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "correction", c, d)
}
