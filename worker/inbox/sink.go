package inbox

import (
	"context"
	"errors"
	"io"

	"github.com/paysync/paysync"
)

// Sink takes a file's content into the ledger (worker.InboxSink is one).
// The inbox knows nothing else of the importer: its report and its errors
// come in the inbox's terms (Imported, ReadError, ErrUnavailable).
//
// An error leaves the file in the inbox for the next poll: nothing of it
// may have been committed, or only what a later import of the same content
// recognises (a duplicate). A *ReadError says the file could not be read;
// an error wrapping ErrUnavailable that no file can be imported now, so
// the poll stops; any other error fails only this file's import, for now.
type Sink interface {
	Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (Imported, error)
}

// StreamSink is a sink that reads a file as it imports it instead of
// taking it whole: the inbox then hands it the open file, and a file's
// size is bounded only by Config.MaxFileSize. r can seek; reading it fails
// (and so must the import, committing nothing) when the file changes
// meanwhile.
type StreamSink interface {
	ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (Imported, error)
}

// PolicySink is a sink that says whether it commits nothing of a file
// with a problem: New refuses one that does not match the policy.
type PolicySink interface {
	AllOrNothing() bool
}

// Imported is what a sink did with a file, for the file's outcome and the
// report beside it.
type Imported struct {
	// ImportID is the import committed (for a duplicate, the earlier
	// import of the same content); 0 when nothing was committed.
	ImportID int64
	// RejectedAs is the import recorded as refused, with its problems,
	// when nothing was committed (all or nothing); 0 when none.
	RejectedAs int64
	Duplicate  bool   // the same content was imported before
	ImportedAt string // when the earlier import was, for a duplicate ("" unknown)
	// RetryOf is the import of the same content this one takes again:
	// that one had rejects, which get another chance (0: none).
	RetryOf int64

	Entries    int            // read from the file
	Mapped     int            // that went into pay parts
	Duplicates int            // imported before
	Skipped    map[string]int // by reason
	PayParts   int
	Batches    int
	// Corrections are entries paid before that came with other content
	// (or as tombstones), Removed those a period statement no longer has:
	// their pay parts are replaced. Outside counts rows dated outside the
	// statement's period (not imported); Warnings names them.
	Corrections int
	Removed     int
	Outside     int
	Warnings    []string
	// Notes say how the file was read where that was detected (an
	// encoding), for the report.
	Notes []string

	// Problems are the file's problems one by one, the first ones;
	// ProblemsOmitted counts those left out (the ledger holds them all).
	Problems        []error
	ProblemsOmitted int
}

// ProblemCount is the number of problems, those left out of the list
// included.
func (r Imported) ProblemCount() int { return len(r.Problems) + r.ProblemsOmitted }

// ErrUnavailable is wrapped by a sink's error when it can import no file
// now (the payroll connection was revoked): the poll stops there and
// leaves the other files for a later poll.
var ErrUnavailable = errors.New("inbox: the importer takes no file now")

// ReadError is a failure to read a file (not a problem in its content,
// nor a failure of the ledger or payroll): nothing of it was imported, it
// stays in the inbox. A sink returns one when reading the file it was
// handed failed.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }
