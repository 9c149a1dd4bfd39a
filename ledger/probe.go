package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/paysync/paysync"
)

// Causes a probe reports (besides ErrCorrupt, ErrNewerSchema and
// ErrLocked), for the caller's hint. They come wrapped in an
// *fs.PathError naming the file or directory concerned.
var (
	ErrNoDirectory = errors.New("does not exist")
	ErrNotPrivate  = errors.New("not private to its owner")
	ErrNotWritable = errors.New("not writable")
)

// CheckPath checks, before Open, what Open needs of path without changing
// anything but a temporary file: its directory exists and can be written
// (SQLite keeps its journal beside the ledger), and the ledger, when it
// exists, is a file readable and writable by its owner only (it holds
// payroll credentials). It returns nil, or an *fs.PathError wrapping
// ErrNoDirectory, ErrNotPrivate or ErrNotWritable.
func CheckPath(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return &fs.PathError{Op: "ledger directory", Path: dir, Err: ErrNoDirectory}
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("ledger: %w", err)
	case fi.IsDir():
		return &fs.PathError{Op: "ledger", Path: path, Err: errors.New("is a directory")}
	case fi.Mode().Perm()&0o077 != 0 || fi.Mode().Perm()&0o600 != 0o600:
		return &fs.PathError{Op: "ledger", Path: path,
			Err: fmt.Errorf("%w: mode %04o; it must be readable and writable by its owner only (it holds payroll credentials)", ErrNotPrivate, fi.Mode().Perm())}
	}
	if err := checkWritableDir(dir); err != nil {
		return &fs.PathError{Op: "ledger directory", Path: dir, Err: fmt.Errorf("%w: %w", ErrNotWritable, unwrapPath(errors.Unwrap(err)))}
	}
	return nil
}

// Probe checks an open ledger: its schema version, its file mode, and that
// it can be written now (the write lock is free). With full it also runs
// the integrity check, which reads every page: for a pre-flight (paysync
// doctor), too slow for a readiness probe. Err of a failure wraps
// ErrCorrupt, ErrLocked, ErrNotPrivate or ErrNotWritable where one is the
// cause.
func (l *Ledger) Probe(ctx context.Context, full bool) paysync.Check {
	fail := func(err error, format string, a ...any) paysync.Check {
		return paysync.Checked(paysync.CheckFail, err, fmt.Sprintf(format, a...))
	}
	v, err := l.SchemaVersion(ctx)
	if err != nil {
		err = l.classifyOpen("read schema version", err)
		return fail(err, "%s: read schema version: %v", l.path, err)
	}
	detail := fmt.Sprintf("%s: schema version %d", l.path, v)
	if full {
		ic, err := l.IntegrityCheck(ctx)
		if err != nil {
			return fail(err, "%s: integrity check: %v", l.path, err)
		}
		if ic != "ok" {
			return fail(ErrCorrupt, "%s: integrity check found: %s", l.path, ic)
		}
		detail += ", integrity ok"
	}
	fi, err := os.Stat(l.path)
	if err != nil {
		return fail(err, "%v", err)
	}
	mode := fi.Mode().Perm()
	if mode&0o077 != 0 || mode&0o600 != 0o600 {
		return fail(&fs.PathError{Op: "ledger", Path: l.path, Err: ErrNotPrivate},
			"%s has mode %04o; it must be readable and writable by its owner only (it holds payroll credentials)", l.path, mode)
	}
	if werr := l.CheckWritable(ctx); werr != nil {
		cause := werr
		if !errors.Is(werr, ErrLocked) && !errors.Is(werr, ErrCorrupt) {
			cause = &fs.PathError{Op: "ledger", Path: l.path, Err: fmt.Errorf("%w: %w", ErrNotWritable, werr)}
		}
		return fail(cause, "%v", werr)
	}
	return paysync.Checked(paysync.CheckOK, nil, fmt.Sprintf("%s, mode %04o, writable", detail, mode))
}

// Backlog is the work a ledger holds that has not settled.
type Backlog struct {
	Failed    []Batch // batches whose retries ran out (their items stay pending), as ListBatches orders them
	Pending   int     // pay parts committed and not yet created
	Unsettled int     // batches left sending or reverting: a crash, or a paysync at work
}

// Backlog reads what is left to do, for a pre-flight check.
func (l *Ledger) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var err error
	if b.Failed, err = l.ListBatches(ctx, BatchFilter{State: paysync.BatchFailed}); err != nil {
		return b, fmt.Errorf("ledger: backlog: %w", err)
	}
	if b.Pending, err = l.PendingPayParts(ctx); err != nil {
		return b, fmt.Errorf("ledger: backlog: %w", err)
	}
	for _, st := range []paysync.BatchState{paysync.BatchSending, paysync.BatchReverting} {
		bs, err := l.ListBatches(ctx, BatchFilter{State: st})
		if err != nil {
			return b, fmt.Errorf("ledger: backlog: %w", err)
		}
		b.Unsettled += len(bs)
	}
	return b, nil
}
