package worker

import (
	"context"
	"errors"
	"io"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/worker/inbox"
)

// InboxSink is an importer as the inbox needs it (inbox.Sink,
// StreamSink and PolicySink), its reports and errors in the inbox's
// terms: the inbox knows nothing of worker or payroll.
type InboxSink struct {
	imp fileImporter
	im  *Importer // whose AllOrNothing the inbox checks against its policy
}

// fileImporter is what InboxSink adapts: *Importer or *FileSink.
type fileImporter interface {
	Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (Report, error)
	ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Report, error)
}

var (
	_ inbox.Sink       = (*InboxSink)(nil)
	_ inbox.StreamSink = (*InboxSink)(nil)
	_ inbox.PolicySink = (*InboxSink)(nil)
)

// InboxSink gives the inbox the importer: a file is imported and its
// batches delivered before the next file.
func (im *Importer) InboxSink() *InboxSink { return &InboxSink{imp: im, im: im} }

// InboxSink gives the inbox the daemon's sink: a file is committed, the
// sending loop delivers it.
func (s *FileSink) InboxSink() *InboxSink { return &InboxSink{imp: s, im: s.im} }

// Import imports one file's content.
func (s *InboxSink) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (inbox.Imported, error) {
	rep, err := s.imp.Import(ctx, kind, name, payload)
	return inboxImported(rep), inboxErr(err)
}

// ImportFrom imports a file as it reads it.
func (s *InboxSink) ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (inbox.Imported, error) {
	rep, err := s.imp.ImportFrom(ctx, kind, name, r)
	return inboxImported(rep), inboxErr(err)
}

// AllOrNothing reports whether nothing of a file with a problem is
// committed.
func (s *InboxSink) AllOrNothing() bool { return s.im.AllOrNothing }

func inboxImported(rep Report) inbox.Imported {
	return inbox.Imported{
		ImportID: rep.ImportID, RejectedAs: rep.RejectedAs, Duplicate: rep.Duplicate, ImportedAt: rep.ImportedAt, RetryOf: rep.RetryOf,
		Entries: rep.Entries, Mapped: rep.Mapped, Duplicates: rep.Duplicates, Skipped: rep.Skipped,
		PayParts: rep.PayParts, Batches: len(rep.Batches),
		Corrections: rep.Corrections, Removed: rep.Removed, Outside: rep.Outside, Warnings: rep.Warnings, Notes: rep.Notes,
		Problems: rep.ProblemList(), ProblemsOmitted: rep.ProblemsOmitted,
	}
}

// inboxErr says in the inbox's terms what an import's error means: the
// file could not be read (*inbox.ReadError), or no file can be imported
// now (inbox.ErrUnavailable: the payroll connection was revoked). The
// message stays the importer's.
func inboxErr(err error) error {
	var ie *InputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ie):
		return &inbox.ReadError{Err: ie.Err}
	case errors.Is(err, ErrRevoked):
		return unavailable{err}
	}
	return err
}

// unavailable is an error that also wraps inbox.ErrUnavailable.
type unavailable struct{ error }

func (u unavailable) Unwrap() []error { return []error{u.error, inbox.ErrUnavailable} }
