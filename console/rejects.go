package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/worker/stream"
)

// Rejects: the entries and inputs paysync refused, with their reasons and
// what to do; and the NATS dead letters, read-only, each with the entry
// and field the ledger recorded for it and the command that re-drives it.

type rejectGroup struct {
	Import  ledger.Source
	Rejects []ledger.Reject
	More    int // rejects beyond those listed
}

// deadLetter is one NATS dead letter as the page lists it.
type deadLetter struct {
	stream.DeadLetter
	// Import is the ledger's record of the message (refused as a whole,
	// with its rejects: entry, field, why); ID 0: none.
	Import  ledger.Source
	Rejects []ledger.Reject
}

type rejectsData struct {
	Groups []rejectGroup
	// NATS: configured; then the dead letters of Stream, or NATSError.
	NATS        bool
	NATSError   string
	Stream      string
	DeadLetters []deadLetter
	More        int // dead letters beyond those listed
}

const (
	rejectsPerImport = 50
	deadLettersShown = 200
	// deadLettersWait bounds reading the dead letters: a NATS outage
	// slows the page, never stops it.
	deadLettersWait = 8 * time.Second
)

func (s *Server) rejects(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	f := parseFilter(r)
	all, err := s.cfg.Ledger.ListSources(ctx, time.Time{})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := rejectsData{}
	for _, src := range all {
		if src.Rejects == 0 && src.Status != paysync.SourceRejected || src.ReceivedAt.Before(f.since) {
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
	if s.cfg.NATS != nil {
		if err := s.deadLetters(ctx, &d, all); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err.Error())
			return
		}
	}
	s.render(w, r, http.StatusOK, "rejects", c, d)
}

// deadLetters lists the dead-letter stream into d, each dead letter with
// the ledger's record of its message (by content: the source refused as a
// whole with the same payload). NATS failing is shown, not returned.
func (s *Server) deadLetters(ctx context.Context, d *rejectsData, sources []ledger.Source) error {
	d.NATS = true
	lctx, cancel := context.WithTimeout(ctx, deadLettersWait)
	defer cancel()
	res, err := stream.Redrive(lctx, *s.cfg.NATS, stream.RedriveOptions{List: true})
	d.Stream = res.Stream
	if err != nil {
		d.NATSError = natsError(err)
	}
	byHash := map[string]ledger.Source{} // the newest refused record of each message
	for _, src := range sources {
		if src.Kind == paysync.SourceNATS && src.Status == paysync.SourceRejected && src.ID > byHash[src.Hash].ID {
			byHash[src.Hash] = src
		}
	}
	for i, m := range res.Matched {
		if i == deadLettersShown {
			d.More = len(res.Matched) - i
			break
		}
		dl := deadLetter{DeadLetter: m}
		if src, ok := byHash[paysync.PayloadHash(m.Data)]; ok {
			dl.Import = src
			if dl.Rejects, err = s.cfg.Ledger.Rejects(ctx, src.ID); err != nil {
				return err
			}
		}
		d.DeadLetters = append(d.DeadLetters, dl)
	}
	return nil
}

// natsError says why the dead letters could not be read (stream's errors
// name no credentials).
func natsError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "stream: dead letters: ")
	if strings.Contains(msg, "cannot reach NATS") || strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "connect") {
		return "NATS unreachable: " + msg
	}
	return "The dead letters could not be read: " + msg
}
