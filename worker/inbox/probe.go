package inbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/paysync/paysync"
)

// Causes Probe reports, for the caller's hint. Check.Err wraps one in an
// *fs.PathError naming the folder concerned (ErrBadSchedule excepted).
var (
	ErrNoFolder    = errors.New("does not exist")
	ErrNotFolder   = errors.New("is not a directory")
	ErrNotWritable = errors.New("is not writable")
	ErrBadSchedule = errors.New("invalid schedule")
)

// Probe checks, without taking or creating anything, what New and the
// polls need: cfg.Dir is an existing folder this process can write (files
// move to processed/ and failed/, reports are written beside them),
// processed/ and failed/ are real writable folders where they exist, and
// cfg.Schedule parses. It writes and removes one hidden temporary file per
// folder, a name the inbox never takes.
func Probe(cfg Config) paysync.Check {
	fail := func(err error, format string, a ...any) paysync.Check {
		return paysync.Checked(paysync.CheckFail, err, fmt.Sprintf(format, a...))
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return fail(err, "%v", err)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(&fs.PathError{Op: "inbox", Path: dir, Err: ErrNoFolder}, "%s does not exist", dir)
	case err != nil:
		return fail(err, "%v", err)
	case !fi.IsDir():
		return fail(&fs.PathError{Op: "inbox", Path: dir, Err: ErrNotFolder}, "%s is not a directory (it is a %s)", dir, fileKind(fi))
	}
	if err := probeWritable(dir); err != nil {
		return fail(&fs.PathError{Op: "inbox", Path: dir, Err: fmt.Errorf("%w: %w", ErrNotWritable, err)}, "%s is not writable: %v", dir, err)
	}
	var subs []string
	for _, sub := range []string{ProcessedDir, FailedDir} {
		p := filepath.Join(dir, sub)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			subs = append(subs, sub+"/ created on first use")
			continue
		case err != nil:
			return fail(err, "%s: %v", p, err)
		case !fi.IsDir():
			return fail(&fs.PathError{Op: "inbox", Path: p, Err: ErrNotFolder}, "%s is not a directory (it is a %s)", p, fileKind(fi))
		}
		if err := probeWritable(p); err != nil {
			return fail(&fs.PathError{Op: "inbox", Path: p, Err: fmt.Errorf("%w: %w", ErrNotWritable, err)}, "%s is not writable: %v", p, err)
		}
		subs = append(subs, sub+"/ writable")
	}
	spec := strings.TrimSpace(cfg.Schedule)
	if spec == "" {
		spec = DefaultSchedule
	}
	if _, err := parseSchedule(spec); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrBadSchedule, err), "schedule %q: %v", spec, err)
	}
	return paysync.Checked(paysync.CheckOK, nil, fmt.Sprintf("%s: writable; %s; schedule %s", dir, strings.Join(subs, ", "), spec))
}

// probeWritable creates and removes a hidden temporary file in dir.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".paysync-probe-*.tmp")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func fileKind(fi fs.FileInfo) string {
	switch {
	case fi.Mode().IsRegular():
		return "file"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symbolic link"
	case fi.IsDir():
		return "directory"
	}
	return "special file"
}

// Probe is Probe of the inbox's folder and schedule, for a readiness
// check while it runs.
func (in *Inbox) Probe() paysync.Check { return Probe(Config{Dir: in.dir, Schedule: in.spec}) }
