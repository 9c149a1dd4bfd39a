package worker

import (
	"context"
	"io"
	"strings"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/worker/stream"
)

// FileSink is what the daemon gives its inbox: a file is committed to the
// ledger as intent without sending (the pipeline sends, so only one
// goroutine ever talks create_pay_parts), then the pipeline is woken.
// The inbox takes it through InboxSink (its own Sink and StreamSink).
type FileSink struct {
	im      *Importer
	wake    func()
	observe func(kind paysync.SourceKind, rep Report)
}

// Import commits one file's content.
func (s *FileSink) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (Report, error) {
	rep, err := s.im.Plan(ctx, kind, name, payload)
	s.done(kind, rep, err)
	return rep, err
}

// ImportFrom streams a file into the ledger: a file is never whole in
// memory.
func (s *FileSink) ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Report, error) {
	rep, err := s.im.PlanFrom(ctx, kind, name, r)
	s.done(kind, rep, err)
	return rep, err
}

func (s *FileSink) done(kind paysync.SourceKind, rep Report, err error) {
	if err != nil {
		return
	}
	s.observe(kind, rep)
	s.wake()
}

// MessageSink is what the daemon gives its NATS source: messages (each
// one entry, or {"entries": [...]}) are committed a group at a time in one
// ledger transaction, then the pipeline is woken.
type MessageSink struct {
	mi      *MessageImporter
	wake    func(held int) // held: the entries the group held for the reconciler
	observe func(kind paysync.SourceKind, rep Report)
}

var _ stream.PipelinedSink = (*MessageSink)(nil)

// Commit commits one message.
func (s *MessageSink) Commit(ctx context.Context, m stream.Message) (stream.Outcome, error) {
	r := s.CommitBatch(ctx, []stream.Message{m})[0]
	return r.Outcome, r.Err
}

// CommitBatch commits a group of messages; each gets its own outcome.
func (s *MessageSink) CommitBatch(ctx context.Context, ms []stream.Message) []stream.Result {
	return s.PrepareBatch(ctx, ms)(ctx)
}

// PrepareBatch reads, looks up and maps a group without writing, and
// returns the step that commits it: the stream prepares the next group
// while this one commits.
func (s *MessageSink) PrepareBatch(ctx context.Context, ms []stream.Message) func(context.Context) []stream.Result {
	in := make([]Message, len(ms))
	for i, m := range ms {
		in[i] = Message{Kind: paysync.SourceNATS, Name: m.Subject, Company: stream.CompanyOf(m.Subject), Origin: stream.SourceOf(m.Subject), Payload: m.Data, Received: m.Stored}
	}
	g, err := s.mi.Prepare(ctx, in)
	return func(ctx context.Context) []stream.Result {
		out := make([]stream.Result, len(ms))
		var reps []Report
		var errs []error
		if err == nil {
			reps, errs, err = s.mi.Commit(ctx, g)
		}
		if err != nil {
			for i := range out {
				out[i].Err = err
			}
			return out
		}
		held := 0
		for i, rep := range reps {
			if errs[i] != nil {
				out[i].Err = errs[i]
				continue
			}
			s.observe(paysync.SourceNATS, rep)
			out[i].Outcome, out[i].Err = MessageOutcome(rep)
			held += rep.Mapped + rep.Corrections + rep.Duplicates
		}
		s.wake(held)
		return out
	}
}

// MessageOutcome is what a committed message's report means to its
// source: a problem is an invalid message (parked), a message that added
// nothing new a duplicate, anything else committed.
func MessageOutcome(rep Report) (stream.Outcome, error) {
	if probs := rep.ProblemList(); len(probs) > 0 {
		reasons := make([]string, len(probs))
		for i, p := range probs {
			reasons[i] = p.Error()
		}
		return 0, &stream.Invalid{Reason: strings.Join(reasons, "; ")}
	}
	if rep.Duplicate || (rep.PayParts == 0 && rep.Duplicates > 0) {
		return stream.Duplicate, nil
	}
	return stream.Committed, nil
}
