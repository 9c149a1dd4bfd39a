package console

import (
	"net/http"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// Rejects: the entries and inputs paysync refused, with their reasons and
// what to do; the NATS dead letters are where paysync deadletters looks.

type rejectGroup struct {
	Import  ledger.Source
	Rejects []ledger.Reject
	More    int // rejects beyond those listed
}

type rejectsData struct {
	Groups      []rejectGroup
	DeadLetters string // where the dead letters are, when NATS is configured
}

const rejectsPerImport = 50

func (s *Server) rejects(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	f := parseFilter(r)
	all, err := s.cfg.Ledger.ListSources(ctx, f.since)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := rejectsData{DeadLetters: s.cfg.DeadLetters}
	for _, src := range all {
		if src.Rejects == 0 && src.Status != paysync.SourceRejected {
			continue
		}
		rs, err := s.cfg.Ledger.Rejects(ctx, src.ID)
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		g := rejectGroup{Import: src, Rejects: rs}
		if len(rs) > rejectsPerImport {
			g.Rejects, g.More = rs[:rejectsPerImport], len(rs)-rejectsPerImport
		}
		d.Groups = append(d.Groups, g)
		if len(d.Groups) == 100 {
			break
		}
	}
	s.render(w, r, http.StatusOK, "rejects", c, d)
}
