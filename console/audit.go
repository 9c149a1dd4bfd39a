package console

import (
	"net/http"

	"github.com/paysync/paysync/ledger"
)

// The audit log: every action taken, by whom, from where, and how it
// ended.

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request, c who) {
	entries, err := s.cfg.Ledger.AuditLog(r.Context(), 500)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "audit", c, struct{ Entries []ledger.AuditEntry }{entries})
}
