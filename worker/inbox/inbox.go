package inbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/paysync/paysync"
)

// Policy says what becomes of a file with problems.
type Policy string

const (
	// AllOrNothing (the default): a file with any problem is refused as a
	// whole and goes to failed/. The sink must commit nothing of it
	// (PolicySink).
	AllOrNothing Policy = "all-or-nothing"
	// Partial: the good entries are imported, the file goes to processed/
	// with a report listing the rejects.
	Partial Policy = "partial"
)

// Outcomes of a file in one poll (FileResult.Outcome).
const (
	OutcomeProcessed = "processed" // imported; moved to processed/
	OutcomeFailed    = "failed"    // nothing imported (problems, too large); moved to failed/
	OutcomeDuplicate = "duplicate" // imported before; moved to processed/
	OutcomeWaiting   = "waiting"   // new or still changing; looked at again next poll
	OutcomeRefused   = "refused"   // a symbolic link leading outside the inbox; moved to failed/
	OutcomeError     = "error"     // reading or importing failed; left in place for the next poll
	// The file changed after its import read it (or was written to after
	// it was moved, and was moved back): the import holds what was read;
	// the file is in the inbox and is imported again, whole, once it
	// settles. Counted as Waiting.
	OutcomeChanged = "changed"
)

// Defaults of Config.
const (
	DefaultSchedule         = "@every 1m"
	DefaultMaxFileSize      = 4 << 30
	DefaultSettleIncomplete = 30 * time.Second
	// DefaultRunNowLook is how far apart the two looks of a poll asked
	// for by RunNow are, when SettleLook is not set.
	DefaultRunNowLook = time.Second
)

// maxInMemory bounds a file a sink that is not a StreamSink takes
// whole.
const maxInMemory = 256 << 20

// Folders inside the inbox.
const (
	ProcessedDir = "processed"
	FailedDir    = "failed"
)

const reportSuffix = ".report.txt"

var (
	defaultPatterns = []string{"*.csv", "*.json", "*.ndjson", "*.txt"}
	// Names of files still being written by common tools.
	partialSuffixes = []string{".part", ".tmp", ".partial", ".crdownload", "~"}
	// Seconds optional, so both "0 6 * * *" and "*/30 * * * * *" work.
	specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// Config configures an Inbox. Only Dir is required.
type Config struct {
	Dir         string        // the inbox folder (must exist): PAYSYNC_INBOX
	Patterns    []string      // glob patterns of file names to take, matched without regard to case (default *.csv, *.json, *.ndjson, *.txt)
	Schedule    string        // cron spec, seconds optional, descriptors and a CRON_TZ=Area/City prefix allowed (default "@every 1m"): PAYSYNC_SCHEDULE
	MaxFileSize int64         // larger files go to failed/ with a report (default 4 GiB; at most 256 MiB unless the sink is a StreamSink)
	Policy      Policy        // default AllOrNothing
	SettleLook  time.Duration // > 0: one poll looks twice this far apart instead of needing two polls (run --once)
	// A file whose last byte is not a line break may have been stopped in
	// the middle of its last line by a writer that flushes fixed-size
	// buffers (and "6" of "6.25" reads as a valid row): it is taken only
	// once it has been unchanged this long and over one more look than a
	// complete file (default DefaultSettleIncomplete).
	SettleIncomplete time.Duration
	Logger           *slog.Logger     // default: discard
	Now              func() time.Time // default time.Now: the settle times are measured with it
	// OnFile, when set, hears each file a poll finished with, once, by
	// its outcome: OutcomeProcessed, OutcomeFailed, OutcomeDuplicate or
	// OutcomeRefused (paysync_inbox_files_total). Files left in place
	// (waiting, changed, error) are no outcome yet.
	OnFile func(outcome string)
}

// Result is what one poll did.
type Result struct {
	Processed, Failed, Duplicates, Waiting int // Failed includes refused files
	Files                                  []FileResult
}

// FileResult is what one poll did with one file.
type FileResult struct {
	Name     string // the file's name in the inbox
	Outcome  string // OutcomeProcessed, OutcomeFailed, OutcomeDuplicate, OutcomeWaiting, OutcomeRefused or OutcomeError
	Moved    string // path the file was moved to, "" when it was not
	Report   string // path of the report, "" when none was written
	ImportID int64  // the import (of the earlier import for a duplicate), 0 when none
	Error    string // why, for OutcomeError and OutcomeChanged, and for OutcomeWaiting when the file's last line has no line break yet
}

func (r *Result) add(f FileResult) {
	switch f.Outcome {
	case OutcomeProcessed:
		r.Processed++
	case OutcomeFailed, OutcomeRefused:
		r.Failed++
	case OutcomeDuplicate:
		r.Duplicates++
	case OutcomeWaiting, OutcomeChanged:
		r.Waiting++
	}
	r.Files = append(r.Files, f)
}

// Inbox takes the files dropped into a folder. Polls are serialised.
type Inbox struct {
	dir      string // absolute
	root     string // dir with symbolic links resolved: "inside the inbox" is relative to it
	patterns []string
	spec     string
	schedule cron.Schedule
	max      int64
	policy   Policy
	settle   time.Duration
	// how long a file not ending in a line break must be unchanged
	incomplete time.Duration
	log        *slog.Logger
	now        func() time.Time
	onFile     func(outcome string)
	im         Sink

	sem  chan struct{}   // held by the poll in progress
	seen map[string]seen // guarded by sem: what the previous look found
	// guarded by sem: what happened to a file of this name before, for its
	// next report (an import that read it before it changed).
	earlier map[string][]string
	seed    maphash.Seed // hashes what an import read and the file afterwards

	mu     sync.Mutex
	cron   *cron.Cron
	now1   cron.Job // an asked poll (RunNow), wrapped in Recover
	cancel context.CancelFunc
	closed bool
	// asked: RunNow was called since the asked polls' goroutine last
	// began a poll; asking: that goroutine runs (it polls while asked).
	asked, asking bool
	running       sync.WaitGroup // RunNow's goroutine
}

// seen is a file as the previous look found it.
type seen struct {
	size  int64
	mtime time.Time
	first time.Time // when a look first found the file
	since time.Time // when a look first found it of this size and time
	looks int       // the looks since then that found it the same
	told  bool      // the log said it waits for its last line
}

// New checks cfg and creates processed/ and failed/ (mode 0700) inside the
// inbox. Errors name the variable to fix (PAYSYNC_INBOX, PAYSYNC_SCHEDULE).
//
// When im is a PolicySink, its AllOrNothing must match the policy.
func New(cfg Config, im Sink) (*Inbox, error) {
	if im == nil {
		return nil, errors.New("inbox: no importer")
	}
	if cfg.Dir == "" {
		return nil, errors.New("PAYSYNC_INBOX is not set: the inbox needs a folder")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("PAYSYNC_INBOX: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("PAYSYNC_INBOX: the inbox folder must exist: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("PAYSYNC_INBOX: %s is not a directory", dir)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("PAYSYNC_INBOX: %w", err)
	}

	spec := strings.TrimSpace(cfg.Schedule)
	if spec == "" {
		spec = DefaultSchedule
	}
	sched, err := parseSchedule(spec)
	if err != nil {
		return nil, fmt.Errorf("PAYSYNC_SCHEDULE: %q: %v (want a cron spec with optional seconds such as \"0 6 * * 1-5\" or \"*/30 * * * * *\", or a descriptor such as \"@every 1m\" or \"@hourly\", optionally after \"CRON_TZ=Europe/Copenhagen \")", spec, err)
	}

	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = defaultPatterns
	}
	lower := make([]string, len(patterns))
	for i, p := range patterns {
		if _, err := filepath.Match(p, ""); err != nil || p == "" || strings.ContainsRune(p, filepath.Separator) {
			return nil, fmt.Errorf("inbox: file pattern %q: want a glob of file names such as *.csv", p)
		}
		lower[i] = strings.ToLower(p)
	}

	policy := cfg.Policy
	if policy == "" {
		policy = AllOrNothing
	}
	if policy != AllOrNothing && policy != Partial {
		return nil, fmt.Errorf("inbox: policy %q: want %q or %q", cfg.Policy, AllOrNothing, Partial)
	}
	if ps, ok := im.(PolicySink); ok && ps.AllOrNothing() != (policy == AllOrNothing) {
		return nil, fmt.Errorf("inbox: policy %s needs the importer's AllOrNothing to be %v", policy, policy == AllOrNothing)
	}

	maxSize := cfg.MaxFileSize
	if maxSize == 0 {
		maxSize = DefaultMaxFileSize
	}
	if maxSize < 0 {
		return nil, fmt.Errorf("inbox: maximum file size %d: must be positive", maxSize)
	}
	if cfg.SettleLook < 0 {
		return nil, fmt.Errorf("inbox: settle look %s: must not be negative", cfg.SettleLook)
	}
	if cfg.SettleIncomplete < 0 {
		return nil, fmt.Errorf("inbox: settle time of a file without a final line break %s: must not be negative", cfg.SettleIncomplete)
	}

	for _, sub := range []string{ProcessedDir, FailedDir} {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("PAYSYNC_INBOX: create %s: %w", p, err)
		}
		// A real directory, so that moving into it is a rename within
		// the inbox's file system.
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("PAYSYNC_INBOX: %s must be a directory inside the inbox (not a file or a link)", p)
		}
	}

	in := &Inbox{
		dir:        dir,
		root:       root,
		patterns:   lower,
		spec:       spec,
		schedule:   sched,
		max:        maxSize,
		policy:     policy,
		settle:     cfg.SettleLook,
		incomplete: cmp.Or(cfg.SettleIncomplete, DefaultSettleIncomplete),
		log:        cfg.Logger,
		now:        cfg.Now,
		onFile:     cfg.OnFile,
		im:         im,
		sem:        make(chan struct{}, 1),
		seen:       map[string]seen{},
		earlier:    map[string][]string{},
		seed:       maphash.MakeSeed(),
	}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if in.now == nil {
		in.now = time.Now
	}
	return in, nil
}

// parseSchedule parses a cron spec, seconds optional. cron v3.0.1 panics on
// a lone "CRON_TZ=Zone" without a schedule after it.
func parseSchedule(spec string) (s cron.Schedule, err error) {
	if (strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=")) && !strings.Contains(spec, " ") {
		return nil, errors.New("a schedule must follow the time zone")
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return specParser.Parse(spec)
}

// Start schedules polls and returns at once. The polls run with ctx,
// which Close cancels; once ctx ends, ticks do nothing until Close.
func (in *Inbox) Start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return errors.New("inbox: start: closed")
	}
	if in.cron != nil {
		return errors.New("inbox: start: already started")
	}
	jobCtx, cancel := context.WithCancel(ctx)
	l := cronLogger{in.log}
	// SkipIfStillRunning must wrap Recover: the other way round, a panic
	// loses SkipIfStillRunning's token and no poll ever runs again (v3.0.1).
	c := cron.New(cron.WithChain(cron.SkipIfStillRunning(l), cron.Recover(l)), cron.WithLogger(l))
	c.Schedule(in.schedule, cron.FuncJob(func() { in.scheduledPoll(jobCtx, 0) }))
	// An asked poll is not skipped while another runs (Poll waits for it)
	// and looks twice, so that it takes a file no look has seen yet.
	look := cmp.Or(in.settle, DefaultRunNowLook)
	in.now1 = cron.Recover(l)(cron.FuncJob(func() { in.scheduledPoll(jobCtx, look) }))
	in.cron, in.cancel = c, cancel
	c.Start()
	in.log.Info("inbox started", "dir", in.dir, "schedule", in.spec, "next", in.schedule.Next(in.now()))
	return nil
}

// RunNow asks for a poll now (SIGHUP, SIGUSR1) and returns at once. The
// poll begins after the ask: after the poll in progress, if any, ends
// (asks that come meanwhile share one poll), and it looks twice,
// SettleLook (or DefaultRunNowLook) apart, so that it takes a file that
// arrived since the last look. It does nothing before Start or after
// Close.
func (in *Inbox) RunNow() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.now1 == nil || in.closed {
		in.log.Warn("inbox: run now ignored: the inbox is not running")
		return
	}
	in.asked = true
	if in.asking {
		return // the goroutine polls again before it ends
	}
	in.asking = true
	in.running.Add(1)
	go in.pollWhileAsked()
}

// pollWhileAsked polls until no ask is left unanswered: an ask that comes
// while a poll runs gets the next one.
func (in *Inbox) pollWhileAsked() {
	defer in.running.Done()
	for {
		in.mu.Lock()
		if !in.asked || in.closed {
			in.asking = false
			in.mu.Unlock()
			return
		}
		in.asked = false
		in.mu.Unlock()
		in.now1.Run()
	}
}

// Close stops scheduling and waits for a poll in progress. If ctx ends
// first, the poll's context is cancelled (it stops at its next look at the
// context, leaving the file it was importing in place) and Close returns
// ctx's error.
func (in *Inbox) Close(ctx context.Context) error {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return nil
	}
	in.closed = true
	c, cancel := in.cron, in.cancel
	in.mu.Unlock()
	if c == nil {
		return nil
	}
	stopped := c.Stop()
	done := make(chan struct{})
	go func() {
		<-stopped.Done()
		in.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		cancel()
		in.log.Info("inbox stopped")
		return nil
	case <-ctx.Done():
		cancel()
		return fmt.Errorf("inbox: close: %w (the poll in progress was cancelled)", ctx.Err())
	}
}

// scheduledPoll is a poll of the schedule (look 0) or an asked one.
func (in *Inbox) scheduledPoll(ctx context.Context, look time.Duration) {
	if ctx.Err() != nil {
		return
	}
	res, err := in.poll(ctx, look)
	if err != nil {
		in.log.Error("inbox poll", "err", err)
	}
	in.log.Debug("inbox poll done", "processed", res.Processed, "failed", res.Failed, "duplicates", res.Duplicates, "waiting", res.Waiting)
}

// Poll looks at the inbox once (twice, SettleLook apart, when that is set)
// and takes every file that has settled. The error joins those of files
// left in place; the poll stops early when ctx ends or the payroll
// connection is revoked.
//
// With SettleLook set, a file without a final line break that is
// otherwise settled is waited for within the poll: the poll looks a third
// time once it has been unchanged for SettleIncomplete, so that one poll
// (run --once) takes it, at most SettleIncomplete later.
func (in *Inbox) Poll(ctx context.Context) (Result, error) {
	return in.poll(ctx, in.settle)
}

// poll is Poll looking twice, settle apart, when settle > 0.
func (in *Inbox) poll(ctx context.Context, settle time.Duration) (Result, error) {
	var res Result
	select {
	case in.sem <- struct{}{}:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	defer func() { <-in.sem }()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	// Files moved earlier that a writer kept open and wrote on into come
	// back first, so that the looks below see them.
	returned := map[string]bool{}
	for _, fr := range in.checkMoved() {
		res.add(fr)
		returned[fr.Name] = true
	}
	if settle > 0 {
		if _, _, err := in.look(); err != nil {
			return res, err
		}
		if err := sleep(ctx, settle); err != nil {
			return res, err
		}
	}
	ready, waiting, err := in.look()
	if err != nil {
		return res, err
	}
	if settle > 0 {
		// One poll has to do: wait out the longer settle of the files
		// whose last line has no line break yet, then look again.
		var until time.Time
		for _, w := range waiting {
			if w.until.After(until) {
				until = w.until
			}
		}
		if !until.IsZero() {
			if err := sleep(ctx, max(settle, until.Sub(in.now()))); err != nil {
				return res, err
			}
			if ready, waiting, err = in.look(); err != nil {
				return res, err
			}
		}
	}
	for _, w := range waiting {
		if !returned[w.name] {
			res.add(FileResult{Name: w.name, Outcome: OutcomeWaiting, Error: w.why})
		}
	}
	var errs []error
	for _, c := range ready {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		fr, err := in.take(ctx, c)
		res.add(fr)
		in.observe(fr.Outcome)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil || errors.Is(err, ErrUnavailable) {
				break // the other files could not be imported either
			}
		}
	}
	sort.SliceStable(res.Files, func(i, j int) bool { return res.Files[i].Name < res.Files[j].Name })
	return res, errors.Join(errs...)
}

// observe tells OnFile a file's outcome, if the file is done with.
func (in *Inbox) observe(outcome string) {
	switch outcome {
	case OutcomeProcessed, OutcomeFailed, OutcomeDuplicate, OutcomeRefused:
		if in.onFile != nil {
			in.onFile(outcome)
		}
	}
}

// sleep waits for d or ctx.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// candidate is a file a look found ready to be taken.
type candidate struct {
	name   string
	path   string
	entry  fs.FileInfo // of the name in the inbox (os.Lstat): the link itself, for a link
	info   fs.FileInfo // of the file read: the target, for a link
	refuse string      // why the file is refused, for a link leading outside
	// its last byte is not a line break: the writer may have stopped in
	// the middle of its last line
	incomplete bool
}

// waitingFile is a file a look found not settled yet.
type waitingFile struct {
	name  string
	why   string    // "" for a file new or changed since the previous look
	until time.Time // for a file without a final line break: when it will have been unchanged long enough
}

// look lists the inbox, remembers what it found, and returns the files
// settled since the previous look (and links to refuse) and those that are
// not: new, changed, or without a final line break and not unchanged for
// long enough.
func (in *Inbox) look() (ready []candidate, waiting []waitingFile, err error) {
	entries, err := os.ReadDir(in.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox: %w", err)
	}
	present := map[string]bool{}
	for _, de := range entries {
		name := de.Name()
		if !in.wanted(name) {
			continue
		}
		c := candidate{name: name, path: filepath.Join(in.dir, name)}
		entry, err := de.Info()
		if err != nil {
			continue // gone meanwhile
		}
		c.entry = entry
		switch mode := de.Type(); {
		case mode.IsRegular():
			c.info = entry
		case mode&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(c.path)
			if err != nil {
				c.refuse = fmt.Sprintf("it is a symbolic link whose target cannot be found (%v)", err)
				ready = append(ready, c)
				continue
			}
			if !inside(in.root, target) {
				c.refuse = fmt.Sprintf("it is a symbolic link to %s, which is outside the inbox; paysync takes only files inside the inbox", target)
				ready = append(ready, c)
				continue
			}
			fi, err := os.Stat(target)
			if err != nil || !fi.Mode().IsRegular() {
				continue // a link to a directory or a special file: ignored
			}
			c.info = fi
		default:
			continue // directories (processed/, failed/), pipes, sockets, devices
		}
		present[name] = true
		now := in.now()
		prev, ok := in.seen[name]
		if ok && prev.size == c.info.Size() && prev.mtime.Equal(c.info.ModTime()) {
			prev.looks++
			c.incomplete = !endsInLineBreak(c.path, c.info.Size())
			// A complete file is taken at the first look that finds it
			// the same; one whose last line may be cut short must also
			// have been unchanged for the longer settle and over one
			// more look, so that the wait is longer than a poll interval.
			if until := prev.since.Add(in.incomplete); c.incomplete && (prev.looks < 2 || now.Before(until)) {
				if !prev.told {
					prev.told = true
					in.log.Debug("inbox: file does not end with a line break: it may still be being written, so it waits longer to settle",
						"file", name, "size", c.info.Size(), "unchanged_since", prev.since, "settle", in.incomplete)
				}
				in.seen[name] = prev
				waiting = append(waiting, waitingFile{name: name, until: until,
					why: fmt.Sprintf("its last line has no line break, so the program writing it may have stopped in the middle of it: it is taken once unchanged for %s", in.incomplete)})
				continue
			}
			in.seen[name] = prev
			ready = append(ready, c)
			continue
		}
		next := seen{size: c.info.Size(), mtime: c.info.ModTime(), first: now, since: now}
		if ok {
			next.first, next.told = prev.first, prev.told
		}
		in.seen[name] = next
		waiting = append(waiting, waitingFile{name: name})
		in.log.Debug("inbox: file waiting to settle", "file", name, "size", c.info.Size(), "first_seen", next.first)
	}
	for name := range in.seen {
		if !present[name] {
			delete(in.seen, name)
		}
	}
	for name := range in.earlier {
		if !present[name] {
			delete(in.earlier, name)
		}
	}
	return ready, waiting, nil
}

// endsInLineBreak reports whether the file at path, size bytes long, ends
// with a line break, or is empty (a file that cannot be read is left to
// the import to fail on).
func endsInLineBreak(path string, size int64) bool {
	if size == 0 {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, size-1); err != nil {
		return true
	}
	return b[0] == '\n'
}

// wanted reports whether name matches a pattern and is neither hidden nor a
// file still being written.
func (in *Inbox) wanted(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	lower := strings.ToLower(name)
	for _, s := range partialSuffixes {
		if strings.HasSuffix(lower, s) {
			return false
		}
	}
	for _, p := range in.patterns {
		if ok, _ := filepath.Match(p, lower); ok {
			return true
		}
	}
	return false
}

// inside reports whether path is below root.
func inside(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && rel != ".." && !filepath.IsAbs(rel) &&
		!strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

var (
	errChanged  = errors.New("changed while being read")
	errTooLarge = errors.New("too large")
	errReplaced = errors.New("replaced by another file while being moved")
)

// take imports one settled file and moves it. A file whose import did not
// commit is never moved, nor is one that is no longer what its import read.
func (in *Inbox) take(ctx context.Context, c candidate) (FileResult, error) {
	fr := FileResult{Name: c.name}
	if c.refuse != "" {
		r := report{file: c.name, outcome: "refused: " + c.refuse,
			next: fmt.Sprintf("copy the file itself into the inbox (write it as %s.part, then rename it to %s).", c.name, c.name)}
		return in.finish(fr, c, OutcomeRefused, FailedDir, "", r)
	}
	size := c.info.Size()
	rep, read, err := in.importFile(ctx, c)
	switch {
	case errors.Is(err, errChanged):
		delete(in.seen, c.name) // it settles again from the next look
		fr.Outcome = OutcomeWaiting
		return fr, nil
	case errors.Is(err, errTooLarge):
		r := report{file: c.name, size: size, sizeKnown: true,
			outcome: fmt.Sprintf("failed: the file is larger than the inbox's limit of %d bytes; nothing of it was read", in.limit()),
			next:    "split the export into smaller files and drop them into the inbox again (or raise the inbox's size limit)."}
		return in.finish(fr, c, OutcomeFailed, FailedDir, "", r)
	case errors.As(err, new(*ReadError)):
		fr.Outcome, fr.Error = OutcomeError, err.Error()
		return fr, fmt.Errorf("inbox: read %s (left in the inbox for the next poll): %w", c.name, err)
	case err != nil:
		fr.Outcome, fr.ImportID, fr.Error = OutcomeError, rep.ImportID, err.Error()
		in.log.Warn("inbox: import failed; the file stays in the inbox for the next poll", "file", c.name, "err", err)
		return fr, fmt.Errorf("inbox: import %s (left in the inbox for the next poll): %w", c.name, err)
	}
	// The import holds what it read. A writer that kept the file open may
	// have written on since: such a file is not moved (nor is one put in
	// its place) but imported again once it settles.
	if why, now := in.recheck(c, read); why != "" {
		return in.changed(fr, c, &rep, why, now), nil
	}
	fr.ImportID = rep.ImportID
	problems := slices.Clip(rep.Problems) // appended to below: never into the sink's array
	nProblems := rep.ProblemCount()
	if rep.ProblemsOmitted > 0 {
		// The report lists the first ones; the ledger holds them all.
		problems = append(problems, fmt.Errorf("… and %d more problems, not listed here: `paysync imports show %d` lists them all", rep.ProblemsOmitted, max(rep.ImportID, rep.RejectedAs)))
	}
	r := report{file: c.name, size: size, sizeKnown: true, rep: &rep, problems: problems, read: true}
	switch {
	case rep.Duplicate:
		when := ""
		if rep.ImportedAt != "" {
			when = " on " + rep.ImportedAt
		}
		r.outcome = fmt.Sprintf("duplicate of import %d: the same content was imported before%s, so it was not imported again (pay parts of that import still unsent, after an interruption, were sent now)", rep.ImportID, when)
		r.next = "nothing."
		return in.finish(fr, c, OutcomeDuplicate, ProcessedDir, ".duplicate", r)
	case rep.ImportID == 0 && rep.RejectedAs == 0 && rep.Entries == 0 && len(problems) > 0:
		// Not even a rejected source was recorded: the file is empty or not
		// a format paysync reads, whatever the policy.
		r.outcome = "failed: the file could not be read as timesheets, so nothing of it was imported"
		r.next = "check that it is a complete timesheet export (CSV with a header row, JSON or NDJSON; see the problem above), then drop it into the inbox again."
		return in.finish(fr, c, OutcomeFailed, FailedDir, "", r)
	case rep.ImportID == 0 && len(problems) > 0:
		r.outcome = fmt.Sprintf("failed: the file has %s, so nothing of it was imported (policy %s)", count(nProblems, "problem"), AllOrNothing)
		r.next = fixAndDropAgain
		if in.policy == Partial {
			in.log.Warn("inbox: policy partial, but the importer committed nothing of a file with problems; set the importer's AllOrNothing to false", "file", c.name)
		}
		return in.finish(fr, c, OutcomeFailed, FailedDir, "", r)
	case rep.ImportID == 0:
		r.outcome = "failed: the importer committed nothing and reported no problem"
		r.next = "look at paysync's log, then drop the file into the inbox again."
		return in.finish(fr, c, OutcomeFailed, FailedDir, "", r)
	case len(problems) > 0 && nothingGood(rep, nProblems):
		// Committed with its rejects, but there was nothing good to import.
		r.outcome = fmt.Sprintf("failed: nothing of the file could be imported; its %s are listed below (recorded as the rejects of import %d, policy %s)", count(nProblems, "problem"), rep.ImportID, in.policy)
		r.next = fixAndDropAgain
		if in.policy == AllOrNothing {
			in.log.Warn("inbox: policy all-or-nothing, but the importer committed a file with problems; set the importer's AllOrNothing", "file", c.name, "import", rep.ImportID)
		}
		return in.finish(fr, c, OutcomeFailed, FailedDir, "", r)
	case len(problems) > 0:
		were := "were"
		if nProblems == 1 {
			were = "was"
		}
		r.outcome = fmt.Sprintf("processed with rejects: the good entries were imported as import %d; the %s below %s rejected (policy %s)", rep.ImportID, count(nProblems, "line"), were, Partial)
		r.next = fixAndDropAgain
		if in.policy == AllOrNothing {
			in.log.Warn("inbox: policy all-or-nothing, but the importer committed part of a file with problems; set the importer's AllOrNothing", "file", c.name, "import", rep.ImportID)
		}
		return in.finish(fr, c, OutcomeProcessed, ProcessedDir, "", r)
	default:
		r.outcome = fmt.Sprintf("processed: imported as import %d", rep.ImportID)
		r.next = fmt.Sprintf("nothing. `paysync imports show %d` shows the import and its batches.", rep.ImportID)
		return in.finish(fr, c, OutcomeProcessed, ProcessedDir, "", r)
	}
}

// nothingGood reports whether a committed import with problems took
// nothing from its file: no entry was mapped, skipped or already imported,
// and every entry read has a problem.
func nothingGood(rep Imported, problems int) bool {
	return rep.Mapped == 0 && rep.Duplicates == 0 && rep.PayParts == 0 && len(rep.Skipped) == 0 && problems >= rep.Entries
}

const fixAndDropAgain = "fix the lines above and drop the corrected file into the inbox again; entries already paid are recognised as duplicates."

// limit is the largest file the inbox takes.
func (in *Inbox) limit() int64 {
	if _, ok := in.im.(StreamSink); ok {
		return in.max
	}
	return min(in.max, maxInMemory)
}

// readSum says what an import read of a file: whole is true when its
// last pass read the file from its start to its end, sum is a hash of
// those bytes.
type readSum struct {
	whole bool
	sum   uint64
}

// importFile imports the file c: read as it is imported when the sink is
// a StreamSink, read whole first otherwise. The error wraps
// errChanged when the file is not (or no longer) the one the look found
// (nothing of it was committed), errTooLarge when it is larger than the
// limit, a *ReadError when it cannot be read.
func (in *Inbox) importFile(ctx context.Context, c candidate) (Imported, readSum, error) {
	if c.info.Size() > in.limit() {
		return Imported{}, readSum{}, errTooLarge
	}
	f, err := os.Open(c.path)
	if err != nil {
		return Imported{}, readSum{}, &ReadError{err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Imported{}, readSum{}, &ReadError{err}
	}
	if !os.SameFile(fi, c.info) || fi.Size() != c.info.Size() || !fi.ModTime().Equal(c.info.ModTime()) {
		return Imported{}, readSum{}, errChanged
	}
	sf := &settledFile{f: f, info: c.info, max: in.limit(), fromStart: true}
	sf.h.SetSeed(in.seed)
	if si, ok := in.im.(StreamSink); ok {
		rep, err := si.ImportFrom(ctx, paysync.SourceFile, "inbox/"+c.name, sf)
		if errors.Is(err, errChanged) || errors.As(err, new(*ReadError)) {
			return rep, readSum{}, err
		}
		return rep, sf.sum(), err
	}
	b, err := io.ReadAll(sf)
	if errors.Is(err, errChanged) {
		return Imported{}, readSum{}, err
	}
	if err != nil {
		return Imported{}, readSum{}, &ReadError{err}
	}
	rep, err := in.im.Import(ctx, paysync.SourceFile, "inbox/"+c.name, b)
	return rep, sf.sum(), err
}

// settledFile reads a file the look found settled (and no larger than
// max): at its end, or past max, it fails with errChanged when the file has
// changed since the look. It hashes what it reads from the start, so that
// the file can be compared with what was read once the import is done.
type settledFile struct {
	f         *os.File
	info      fs.FileInfo
	max       int64
	n         int64        // the offset: read since the last seek to the start
	h         maphash.Hash // of what was read since the last seek to the start
	fromStart bool         // read in order from the start since the last seek
	whole     bool         // and up to the end, unchanged
}

func (s *settledFile) Read(p []byte) (int, error) {
	if int64(len(p)) > s.max+1-s.n {
		p = p[:max(0, s.max+1-s.n)]
	}
	n, err := s.f.Read(p)
	if s.fromStart {
		s.h.Write(p[:n])
	}
	s.n += int64(n)
	if s.n > s.max { // it was not when the look found it
		return n, errChanged
	}
	if errors.Is(err, io.EOF) {
		fi, serr := s.f.Stat()
		if serr != nil {
			return n, serr
		}
		if fi.Size() != s.info.Size() || !fi.ModTime().Equal(s.info.ModTime()) || s.n != fi.Size() {
			return n, errChanged
		}
		s.whole = s.fromStart
	}
	return n, err
}

func (s *settledFile) Seek(offset int64, whence int) (int64, error) {
	pos, err := s.f.Seek(offset, whence)
	if err != nil {
		return pos, err
	}
	switch {
	case pos == 0:
		s.h.Reset()
		s.fromStart, s.whole = true, false
	case pos != s.n:
		s.fromStart, s.whole = false, false
	}
	s.n = pos
	return pos, nil
}

func (s *settledFile) sum() readSum { return readSum{whole: s.whole, sum: s.h.Sum64()} }

// recheck returns why the file at c.path is no longer the one whose
// content the import read ("" when it still is), and what is there now
// (nil when nothing is). It runs once the import is done, just before the
// file is moved: a writer that kept the file open may have written on.
func (in *Inbox) recheck(c candidate, read readSum) (string, fs.FileInfo) {
	entry, err := os.Lstat(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "it was removed from the inbox", nil
	}
	if err != nil {
		return fmt.Sprintf("it could not be looked at again (%v)", err), nil
	}
	if !os.SameFile(entry, c.entry) {
		return "another file was put in its place", entry
	}
	fi := entry
	if entry.Mode()&fs.ModeSymlink != 0 {
		if fi, err = os.Stat(c.path); err != nil {
			return fmt.Sprintf("its target could not be looked at again (%v)", err), nil
		}
	}
	if !os.SameFile(fi, c.info) {
		return "its link leads to another file now", fi
	}
	if fi.Size() != c.info.Size() || !fi.ModTime().Equal(c.info.ModTime()) {
		return fmt.Sprintf("it changed after that (%s then, %d now)", count(int(c.info.Size()), "byte"), fi.Size()), fi
	}
	if !read.whole {
		return "", fi
	}
	// The same size and time can hide a change (a file system that keeps
	// coarse times): compare the content too.
	f, err := os.Open(c.path)
	if err != nil {
		return fmt.Sprintf("it could not be read again to check it (%v)", err), fi
	}
	defer f.Close()
	h := maphash.Hash{}
	h.SetSeed(in.seed)
	n, err := io.Copy(&h, io.LimitReader(f, fi.Size()+1))
	if err != nil {
		return fmt.Sprintf("it could not be read again to check it (%v)", err), fi
	}
	if n != fi.Size() || h.Sum64() != read.sum {
		return "its content changed after that, though not its size or time", fi
	}
	return "", fi
}

// changed leaves a file that is no longer what its import read in the
// inbox, and says so. The import holds what it read; the file is imported
// again, whole, once it has settled: the entries read before are then
// recognised as already imported (by id and content), the new ones are
// imported. rep is nil when nothing was imported.
func (in *Inbox) changed(fr FileResult, c candidate, rep *Imported, why string, now fs.FileInfo) FileResult {
	var id int64
	what := "paysync"
	if rep != nil {
		id = cmp.Or(rep.ImportID, rep.RejectedAs)
		switch {
		case rep.Duplicate:
			what = fmt.Sprintf("paysync (finding it the same as import %d)", rep.ImportID)
		case rep.ImportID != 0:
			what = fmt.Sprintf("import %d", rep.ImportID)
		case rep.RejectedAs != 0:
			what = fmt.Sprintf("import %d (refused)", rep.RejectedAs)
		}
		fr.ImportID = rep.ImportID
	}
	in.log.Warn("inbox: file changed after paysync read it; it stays in the inbox and is imported again, whole, once it settles (write files under a temporary name, then rename them into the inbox)",
		"file", c.name, "import", id, "why", why)
	note := fmt.Sprintf("%s read this file when it had %s, but %s; so it was left in the inbox and read again.", what, count(int(c.info.Size()), "byte"), why)
	if c.incomplete && now != nil && os.SameFile(now, c.info) && now.Size() > c.info.Size() {
		note += in.cutShort(c.name, c.path, c.info.Size(), what, id)
	}
	in.remember(c.name, note)
	if now != nil {
		// This is a look: the file is taken once the next one finds it the same.
		t := in.now()
		in.seen[c.name] = seen{size: now.Size(), mtime: now.ModTime(), first: t, since: t}
	} else {
		delete(in.seen, c.name)
	}
	fr.Outcome, fr.Error = OutcomeChanged, why
	return fr
}

// cutShort looks at a file read when it was size bytes long, its last
// line without a line break, and written to since. If the writer went on
// with that line, the import holds the entry of that line as it was cut
// short: this is logged at WARN and the note returned says so (with the
// line, for the report: the log gets no file content); "" otherwise.
// Settling waits long for such a file, but a writer can pause longer.
func (in *Inbox) cutShort(name, path string, size int64, what string, id int64) string {
	line, ok := continuedLine(path, size)
	if !ok {
		return ""
	}
	in.log.Warn("inbox: the last line paysync read of a file had no line break, and the program writing the file has since gone on with that line: the import holds the entry of that line as it was cut short; check it",
		"file", name, "import", id, "offset", size)
	return fmt.Sprintf(" Its last line had no line break then: the program writing the file had stopped in the middle of it, and has since gone on with it; it now reads %q. %s holds the entry of that line as it was cut short: check it in payroll.", line, strings.ToUpper(what[:1])+what[1:])
}

// continuedLine reports whether the file at path, once size bytes long
// and not ending in a line break, now goes on with its last line rather
// than starting a new one; and that line as it now reads (shortened).
func continuedLine(path string, size int64) (string, bool) {
	const window = 4096
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	from := max(0, size-window)
	b := make([]byte, size-from+window)
	n, err := f.ReadAt(b, from)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false
	}
	b = b[:n]
	at := size - from
	if int64(len(b)) <= at || b[at] == '\n' || b[at] == '\r' {
		return "", false // nothing after it, or the line was ended as it was
	}
	start := strings.LastIndexByte(string(b[:at]), '\n') + 1
	line := string(b[start:])
	if i := strings.IndexAny(line, "\r\n"); i >= 0 {
		line = line[:i]
	}
	if r := []rune(line); len(r) > 200 {
		line = string(r[:200]) + "…"
	}
	return line, true
}

// remember keeps a note for the next report of the file name (the last
// few).
func (in *Inbox) remember(name, note string) {
	notes := append(in.earlier[name], note)
	in.earlier[name] = notes[max(0, len(notes)-maxNotes):]
}

const maxNotes = 5

// finish moves the file into sub, writes its report and logs the outcome.
// A file whose content was read (r.read) is watched once moved.
func (in *Inbox) finish(fr FileResult, c candidate, outcome, sub, suffix string, r report) (FileResult, error) {
	now := in.now()
	var rec *moveRecord
	if r.read && c.entry.Mode().IsRegular() {
		rec = &moveRecord{Name: c.name, Size: c.info.Size(), ModTime: c.info.ModTime(), Import: cmp.Or(fr.ImportID, r.rep.RejectedAs), At: now, Incomplete: c.incomplete}
	}
	dst, err := in.move(c, sub, suffix, now, rec)
	if errors.Is(err, errReplaced) {
		return in.changed(fr, c, r.rep, "another file was put in its place as it was being moved (that file is in the inbox)", nil), nil
	}
	if err != nil {
		fr.Outcome, fr.Error = OutcomeError, err.Error()
		return fr, err
	}
	delete(in.seen, c.name)
	r.earlier = in.earlier[c.name]
	delete(in.earlier, c.name)
	fr.Outcome, fr.Moved = outcome, dst
	r.moved, r.at = filepath.Join(sub, filepath.Base(dst)), now
	attrs := []any{"file", c.name, "moved", fr.Moved, "import", fr.ImportID}
	if r.rep != nil {
		attrs = append(attrs, "entries", r.rep.Entries, "pay_parts", r.rep.PayParts, "problems", len(r.problems))
	}
	if err := writeReport(dst+reportSuffix, r.String()); err != nil {
		in.log.Error("inbox: write report", "file", c.name, "err", err)
		return fr, fmt.Errorf("inbox: %s moved to %s, but its report: %w", c.name, dst, err)
	}
	fr.Report = dst + reportSuffix
	attrs = append(attrs, "report", fr.Report)
	if outcome == OutcomeFailed || outcome == OutcomeRefused {
		in.log.Warn("inbox: file "+outcome, attrs...)
	} else {
		in.log.Info("inbox: file "+outcome, attrs...)
	}
	return fr, nil
}

// beforeRename, when set (by tests), runs just before a file is moved.
var beforeRename func(path string)

// move renames c into the folder sub as "<UTC time>-<stem><suffix>[-N]<ext>",
// never over an existing file or report. With rec set, the moved file is
// watched (the record is written before the move, so that a crash right
// after it leaves the file watched). It fails with errReplaced, having put
// the file back, when the file it moved is not c but one put in c's place
// since the look.
func (in *Inbox) move(c candidate, sub, suffix string, now time.Time, rec *moveRecord) (string, error) {
	dir := filepath.Join(in.dir, sub)
	ext := filepath.Ext(c.name)
	base := now.UTC().Format("20060102T150405Z") + "-" + strings.TrimSuffix(c.name, ext) + suffix
	for n := 1; n <= 10000; n++ {
		name := base
		if n > 1 {
			name += "-" + strconv.Itoa(n)
		}
		dst := filepath.Join(dir, name+ext)
		if exists(dst) || exists(dst+reportSuffix) {
			continue
		}
		recPath := ""
		if rec != nil {
			rec.Moved = filepath.Join(sub, name+ext)
			var err error
			if recPath, err = in.writeRecord(*rec); err != nil {
				in.log.Warn("inbox: cannot watch the moved file: a program still writing it would go unnoticed", "file", c.name, "err", err)
			}
		}
		if beforeRename != nil {
			beforeRename(c.path)
		}
		if err := os.Rename(c.path, dst); err != nil {
			removeRecord(recPath)
			return "", fmt.Errorf("inbox: move %s to %s/: %w", c.name, sub, err)
		}
		if moved, err := os.Lstat(dst); err == nil && !os.SameFile(moved, c.entry) {
			removeRecord(recPath)
			if err := renameNoReplace(dst, c.path); err != nil {
				return "", fmt.Errorf("inbox: %s was replaced by another file just as it was moved, so that file went to %s unread, and it could not be put back (%v): move it back into the inbox", c.name, dst, err)
			}
			in.log.Warn("inbox: file replaced by another one as it was being moved; the new one was put back into the inbox", "file", c.name)
			return "", errReplaced
		}
		return dst, nil
	}
	return "", fmt.Errorf("inbox: move %s: no free name in %s/", c.name, sub)
}

// renameNoReplace renames from to to unless something is at to
// (fs.ErrExist): through a hard link where the file system has them.
func renameNoReplace(from, to string) error {
	err := os.Link(from, to)
	if err == nil {
		return os.Remove(from)
	}
	if errors.Is(err, fs.ErrExist) {
		return err
	}
	if exists(to) {
		return fs.ErrExist
	}
	return os.Rename(from, to)
}

// exists reports whether anything (even a dangling link) is at path, or
// whether it cannot tell.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// writeReport writes text to path through a temporary file, so that a
// report is never seen half written.
func writeReport(path, text string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*.tmp")
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// WatchDir is the hidden folder inside the inbox that records the files
// moved to processed/ or failed/ after their content was read, for a day
// (watchFor): a program that kept such a file open and wrote on into it
// is noticed by a later poll, of this process or of the next one.
const WatchDir = ".paysync-watch"

const watchFor = 24 * time.Hour

// moveRecord is a file moved after its content was read, as it was then.
type moveRecord struct {
	Name    string    `json:"name"`  // in the inbox
	Moved   string    `json:"moved"` // where it went, relative to the inbox
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	Import  int64     `json:"import,omitempty"`
	At      time.Time `json:"at"` // when it was moved
	// its last line had no line break when it was read
	Incomplete bool `json:"incomplete,omitempty"`
}

func (in *Inbox) writeRecord(rec moveRecord) (string, error) {
	dir := filepath.Join(in.dir, WatchDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, strings.ReplaceAll(rec.Moved, string(filepath.Separator), "-")+".json")
	return path, writeReport(path, string(b))
}

func removeRecord(path string) {
	if path != "" {
		os.Remove(path)
	}
}

// checkMoved looks at the files moved in the last day: one written to
// since it was moved (by a program that still had it open) is moved back
// into the inbox, to be imported again, whole, once it settles; the
// entries imported before are then recognised as already imported.
// A record whose file is gone (moved away or removed by an operator), or
// older than a day, is dropped.
func (in *Inbox) checkMoved() []FileResult {
	dir := filepath.Join(in.dir, WatchDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			in.log.Warn("inbox: cannot check the files moved earlier", "err", err)
		}
		return nil
	}
	var out []FileResult
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".json") || !de.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, de.Name())
		var rec moveRecord
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err == nil && (!filepath.IsLocal(rec.Moved) || !filepath.IsLocal(rec.Name) || strings.ContainsRune(rec.Name, filepath.Separator)) {
			err = errors.New("not a file of the inbox")
		}
		if err != nil {
			in.log.Warn("inbox: dropping an unreadable record of a moved file", "record", path, "err", err)
			os.Remove(path)
			continue
		}
		moved := filepath.Join(in.dir, rec.Moved)
		fi, err := os.Lstat(moved)
		switch {
		case err != nil || !fi.Mode().IsRegular():
			os.Remove(path)
			continue
		case fi.Size() == rec.Size && fi.ModTime().Equal(rec.ModTime):
			if in.now().Sub(rec.At) >= watchFor {
				os.Remove(path)
			}
			continue
		}
		back := filepath.Join(in.dir, rec.Name)
		if err := renameNoReplace(moved, back); err != nil {
			// Most likely a new file of that name: it is moved back once
			// that one has been taken.
			in.log.Warn("inbox: a moved file was written to after it was moved, but it cannot be moved back into the inbox yet", "file", rec.Name, "moved", rec.Moved, "err", err)
			continue
		}
		why := fmt.Sprintf("it was written to after it was moved to %s (%d bytes now): the program writing it still had it open", rec.Moved, fi.Size())
		in.log.Warn("inbox: file written to after it was moved; moved back into the inbox to import the rest once it settles (write files under a temporary name, then rename them into the inbox)",
			"file", rec.Name, "moved", rec.Moved, "import", rec.Import, "size_read", rec.Size, "size", fi.Size())
		what := "paysync"
		if rec.Import != 0 {
			what = fmt.Sprintf("import %d", rec.Import)
		}
		cut := ""
		if rec.Incomplete && fi.Size() > rec.Size {
			cut = in.cutShort(rec.Name, back, rec.Size, what, rec.Import)
		}
		note := fmt.Sprintf("\nafterwards: at %s the file had grown to %d bytes (%d when it was read): the program writing it still had it open. It was moved back into the inbox as %s to import the rest; the entries imported already are recognised as duplicates.%s\n",
			in.now().UTC().Format("2006-01-02 15:04:05 UTC"), fi.Size(), rec.Size, rec.Name, cut)
		if err := appendReport(moved+reportSuffix, note); err != nil {
			in.log.Warn("inbox: write report", "file", rec.Name, "err", err)
		}
		in.remember(rec.Name, fmt.Sprintf("%s read this file when it had %s, but %s; so it was moved back into the inbox and read again.%s", what, count(int(rec.Size), "byte"), why, cut))
		os.Remove(path)
		out = append(out, FileResult{Name: rec.Name, Outcome: OutcomeChanged, Moved: back, ImportID: rec.Import, Error: why})
	}
	return out
}

// appendReport adds text to the report at path.
func appendReport(path, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return writeReport(path, string(old)+text)
}

// cronLogger adapts slog to cron's logger: cron's chatter at debug, the
// skips at info, errors (panics) at error.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" {
		c.l.Info("inbox: poll skipped: the previous one is still running")
		return
	}
	c.l.Debug("cron: "+msg, kv...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("inbox: cron: "+msg, append([]any{"err", err}, kv...)...)
}
