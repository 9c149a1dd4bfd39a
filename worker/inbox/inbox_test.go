package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "time/tzdata" // CRON_TZ zones even where the system has none

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker/inbox"
)

// fakeImporter records calls and answers with respond (default: a clean
// import numbered by call). A hand-written fake: the real importer needs a
// payroll sandbox and a ledger, and cannot be made to panic or fail on
// demand.
type fakeImporter struct {
	mu      sync.Mutex
	calls   []importCall
	respond func(ctx context.Context, n int, name string, payload []byte) (inbox.Imported, error)
}

type importCall struct {
	kind    paysync.SourceKind
	name    string
	payload string
}

func (f *fakeImporter) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (inbox.Imported, error) {
	f.mu.Lock()
	f.calls = append(f.calls, importCall{kind, name, string(payload)})
	n, respond := len(f.calls), f.respond
	f.mu.Unlock()
	if respond == nil {
		return inbox.Imported{ImportID: int64(n), Entries: 2, PayParts: 1, Batches: 1}, nil
	}
	return respond(ctx, n, name, payload)
}

// policySink is a sink that says whether it commits nothing of a file
// with a problem (inbox.PolicySink).
type policySink struct {
	*fakeImporter
	aon bool
}

func (p policySink) AllOrNothing() bool { return p.aon }

func allOrNothing(aon bool) policySink { return policySink{&fakeImporter{}, aon} }

func (f *fakeImporter) Calls() []importCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// ledgerLike answers like the real importer over a ledger: the same content
// a second time is a duplicate of the first import.
func ledgerLike() func(context.Context, int, string, []byte) (inbox.Imported, error) {
	var mu sync.Mutex
	imports := map[string]int64{}
	return func(_ context.Context, n int, name string, payload []byte) (inbox.Imported, error) {
		mu.Lock()
		defer mu.Unlock()
		if id, ok := imports[string(payload)]; ok {
			return inbox.Imported{ImportID: id, Duplicate: true, Entries: 2, Duplicates: 2, ImportedAt: "2025-03-01 09:00"}, nil
		}
		imports[string(payload)] = int64(n)
		return inbox.Imported{ImportID: int64(n), Entries: 2, PayParts: 1, Batches: 1}, nil
	}
}

var clock = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

const stamp = "20250301T100000Z"

func newInbox(t *testing.T, cfg inbox.Config, im inbox.Sink) *inbox.Inbox {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return clock }
	}
	in, err := inbox.New(cfg, im)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ls(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func poll(t *testing.T, in *inbox.Inbox) inbox.Result {
	t.Helper()
	res, err := in.Poll(context.Background())
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return res
}

func outcomes(res inbox.Result) map[string]string {
	m := map[string]string{}
	for _, f := range res.Files {
		m[f.Name] = f.Outcome
	}
	return m
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInbox_Poll_settling(t *testing.T) {
	t.Run("waiting on the first poll, taken on the second", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "hours.csv", "a,b\n1,2\n")
		if res := poll(t, in); res.Waiting != 1 || outcomes(res)["hours.csv"] != inbox.OutcomeWaiting {
			t.Fatalf("first poll: %+v", res)
		}
		if len(im.Calls()) != 0 {
			t.Fatal("a file seen for the first time was imported")
		}
		res := poll(t, in)
		if res.Processed != 1 || outcomes(res)["hours.csv"] != inbox.OutcomeProcessed {
			t.Fatalf("second poll: %+v", res)
		}
		calls := im.Calls()
		if len(calls) != 1 || calls[0] != (importCall{paysync.SourceFile, "inbox/hours.csv", "a,b\n1,2\n"}) {
			t.Fatalf("calls = %+v", calls)
		}
		if got := ls(t, filepath.Join(dir, "processed")); !slices.Equal(got, []string{stamp + "-hours.csv", stamp + "-hours.csv.report.txt"}) {
			t.Fatalf("processed/ = %v", got)
		}
		if got := ls(t, dir); !slices.Equal(got, []string{inbox.WatchDir, "failed", "processed"}) {
			t.Fatalf("inbox = %v", got)
		}
		if got := ls(t, filepath.Join(dir, inbox.WatchDir)); !slices.Equal(got, []string{"processed-" + stamp + "-hours.csv.json"}) {
			t.Fatalf("%s/ = %v", inbox.WatchDir, got)
		}
	})
	t.Run("a file still growing is not taken", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "hours.csv", "a,b\n")
		poll(t, in)
		write(t, dir, "hours.csv", "a,b\n1,2\n")
		if res := poll(t, in); outcomes(res)["hours.csv"] != inbox.OutcomeWaiting {
			t.Fatalf("after growing: %+v", res)
		}
		if len(im.Calls()) != 0 {
			t.Fatal("a file whose size changed was imported")
		}
		if res := poll(t, in); res.Processed != 1 {
			t.Fatalf("once settled: %+v", res)
		}
		if calls := im.Calls(); len(calls) != 1 || calls[0].payload != "a,b\n1,2\n" {
			t.Fatalf("calls = %+v", calls)
		}
	})
	t.Run("a file whose mtime changed is not taken", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "hours.csv", "a,b\n")
		poll(t, in)
		later := time.Now().Add(time.Minute)
		if err := os.Chtimes(filepath.Join(dir, "hours.csv"), later, later); err != nil {
			t.Fatal(err)
		}
		if res := poll(t, in); outcomes(res)["hours.csv"] != inbox.OutcomeWaiting || len(im.Calls()) != 0 {
			t.Fatalf("after touching: %+v", res)
		}
	})
	t.Run("SettleLook: one poll looks twice", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{}
		in := newInbox(t, inbox.Config{Dir: dir, SettleLook: 20 * time.Millisecond}, im)
		write(t, dir, "hours.csv", "a,b\n")
		start := time.Now()
		if res := poll(t, in); res.Processed != 1 {
			t.Fatalf("one poll with SettleLook: %+v", res)
		}
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Errorf("the poll took %s, less than SettleLook", d)
		}
	})
	t.Run("SettleLook respects the context", func(t *testing.T) {
		dir := t.TempDir()
		in := newInbox(t, inbox.Config{Dir: dir, SettleLook: time.Hour}, &fakeImporter{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := in.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestInbox_Poll_ignored(t *testing.T) {
	tests := []struct {
		name string
		dir  bool
	}{
		{name: ".hidden.csv"},
		{name: "hours.csv.part"},
		{name: "hours.csv.tmp"},
		{name: "hours.TMP"},
		{name: "hours.csv.partial"},
		{name: "hours.csv.crdownload"},
		{name: "hours.csv~"},
		{name: "hours.pdf"},
		{name: "hours.xlsx"},
		{name: "folder.csv", dir: true},
	}
	dir := t.TempDir()
	im := &fakeImporter{}
	in := newInbox(t, inbox.Config{Dir: dir}, im)
	for _, tt := range tests {
		if tt.dir {
			if err := os.Mkdir(filepath.Join(dir, tt.name), 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		write(t, dir, tt.name, "a,b\n1,2\n")
	}
	write(t, dir, "TAKEN.CSV", "x\n") // patterns match without regard to case
	for i := range 3 {
		res := poll(t, in)
		for _, tt := range tests {
			if o, ok := outcomes(res)[tt.name]; ok {
				t.Errorf("poll %d: %s: outcome %s, want never looked at", i+1, tt.name, o)
			}
		}
	}
	calls := im.Calls()
	if len(calls) != 1 || calls[0].name != "inbox/TAKEN.CSV" {
		t.Fatalf("calls = %+v", calls)
	}
	for _, tt := range tests {
		if _, err := os.Lstat(filepath.Join(dir, tt.name)); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestInbox_Poll_patterns(t *testing.T) {
	dir := t.TempDir()
	im := &fakeImporter{}
	in := newInbox(t, inbox.Config{Dir: dir, Patterns: []string{"toggl-*.csv"}}, im)
	write(t, dir, "toggl-march.csv", "x\n")
	write(t, dir, "harvest.csv", "x\n")
	poll(t, in)
	if res := poll(t, in); res.Processed != 1 || outcomes(res)["harvest.csv"] != "" {
		t.Fatalf("%+v", res)
	}
}

func TestInbox_Poll_outcomes(t *testing.T) {
	problems := []error{
		&mapping.Problem{Source: "inbox/hours.csv", Line: 3, EntryID: "e3", Field: "hours", Msg: "not a number", Hint: "write hours as 7.5 or 7:30"},
		&mapping.Problem{Source: "inbox/hours.csv", Line: 5, EntryID: "e5", Field: "code", Msg: "unknown pay code 9999", Hint: "use a code from paysync meta"},
	}
	const next = "what to do next: fix the lines above and drop the corrected file into the inbox again; entries already paid are recognised as duplicates."
	tests := []struct {
		name        string
		policy      inbox.Policy
		rep         inbox.Imported
		err         error
		outcome     string
		moved       string // "" = left in place
		importID    int64
		reportHas   []string
		reportLacks []string
	}{
		{
			name:        "good",
			rep:         inbox.Imported{ImportID: 7, Entries: 3, PayParts: 2, Batches: 1, Skipped: map[string]int{"unapproved": 1}},
			outcome:     inbox.OutcomeProcessed,
			moved:       "processed/" + stamp + "-hours.csv",
			importID:    7,
			reportHas:   []string{"outcome:   processed: imported as import 7", "import:    7", "entries:   3 read, 0 already imported, 0 problems", "pay parts: 2 in 1 batch", "skipped:   1 unapproved", "what to do next: nothing."},
			reportLacks: []string{"problems ("},
		},
		{
			name:    "problems, all or nothing",
			rep:     inbox.Imported{ImportID: 0, Entries: 5, Problems: problems},
			outcome: inbox.OutcomeFailed,
			moved:   "failed/" + stamp + "-hours.csv",
			reportHas: []string{
				"outcome:   failed: the file has 2 problems, so nothing of it was imported (policy all-or-nothing)",
				"import:    none",
				"problems (2):\n  " + problems[0].Error() + "\n  " + problems[1].Error() + "\n",
				next,
			},
		},
		{
			name:     "problems, partial",
			policy:   inbox.Partial,
			rep:      inbox.Imported{ImportID: 8, Entries: 5, PayParts: 3, Batches: 2, Problems: problems},
			outcome:  inbox.OutcomeProcessed,
			moved:    "processed/" + stamp + "-hours.csv",
			importID: 8,
			reportHas: []string{
				"processed with rejects: the good entries were imported as import 8; the 2 lines below were rejected (policy partial)",
				"pay parts: 3 in 2 batches",
				"  " + problems[0].Error() + "\n",
				"  " + problems[1].Error() + "\n",
				next,
			},
		},
		{
			// More problems than the report lists: the counts are the
			// totals, and the list says where the rest are.
			name:    "problems beyond the listed ones",
			rep:     inbox.Imported{ImportID: 0, RejectedAs: 12, Entries: 1500, Problems: problems, ProblemsOmitted: 1200},
			outcome: inbox.OutcomeFailed,
			moved:   "failed/" + stamp + "-hours.csv",
			reportHas: []string{
				"outcome:   failed: the file has 1202 problems, so nothing of it was imported (policy all-or-nothing)",
				"entries:   1500 read, 0 already imported, 1202 problems",
				"problems (1202):\n  " + problems[0].Error() + "\n  " + problems[1].Error() + "\n  … and 1200 more problems, not listed here: `paysync imports show 12` lists them all\n",
			},
		},
		{
			name:      "duplicate",
			rep:       inbox.Imported{ImportID: 4, Duplicate: true, Entries: 5, Duplicates: 5, ImportedAt: "2025-02-28 09:30"},
			outcome:   inbox.OutcomeDuplicate,
			moved:     "processed/" + stamp + "-hours.duplicate.csv",
			importID:  4,
			reportHas: []string{"duplicate of import 4: the same content was imported before on 2025-02-28 09:30", "import:    4"},
		},
		{
			name:    "import error",
			err:     fmt.Errorf("create pay parts: %w", errors.New("connection refused")),
			outcome: inbox.OutcomeError,
		},
		{
			name:     "committed, then the delivery stopped",
			rep:      inbox.Imported{ImportID: 9},
			err:      context.Canceled,
			outcome:  inbox.OutcomeError,
			importID: 9,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			im := &fakeImporter{respond: func(context.Context, int, string, []byte) (inbox.Imported, error) { return tt.rep, tt.err }}
			in := newInbox(t, inbox.Config{Dir: dir, Policy: tt.policy}, im)
			write(t, dir, "hours.csv", "a,b\n1,2\n")
			poll(t, in)
			res, err := in.Poll(context.Background())
			if (err != nil) != (tt.err != nil) {
				t.Fatalf("Poll err = %v, want %v", err, tt.err)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("Poll err = %v does not wrap %v", err, tt.err)
			}
			if len(res.Files) != 1 {
				t.Fatalf("files = %+v", res.Files)
			}
			f := res.Files[0]
			if f.Outcome != tt.outcome || f.ImportID != tt.importID {
				t.Errorf("file = %+v, want outcome %s, import %d", f, tt.outcome, tt.importID)
			}
			if tt.moved == "" {
				if f.Moved != "" || f.Report != "" {
					t.Errorf("moved = %q, report = %q, want left in place", f.Moved, f.Report)
				}
				if got := readFile(t, filepath.Join(dir, "hours.csv")); got != "a,b\n1,2\n" {
					t.Errorf("the file left in place reads %q", got)
				}
				if p, fl := ls(t, filepath.Join(dir, "processed")), ls(t, filepath.Join(dir, "failed")); len(p)+len(fl) != 0 {
					t.Errorf("processed/ = %v, failed/ = %v", p, fl)
				}
				if f.Error == "" {
					t.Error("no error text")
				}
				return
			}
			if want := filepath.Join(dir, tt.moved); f.Moved != want || f.Report != want+".report.txt" {
				t.Errorf("moved %q, report %q; want %q", f.Moved, f.Report, want)
			}
			if got := readFile(t, f.Moved); got != "a,b\n1,2\n" {
				t.Errorf("the moved file reads %q", got)
			}
			if _, err := os.Lstat(filepath.Join(dir, "hours.csv")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the file is still in the inbox: %v", err)
			}
			report := readFile(t, f.Report)
			for _, s := range append([]string{"file:      hours.csv (8 bytes)", "moved to:  " + tt.moved, "at:        2025-03-01 10:00:00 UTC"}, tt.reportHas...) {
				if !strings.Contains(report, s) {
					t.Errorf("the report lacks %q:\n%s", s, report)
				}
			}
			for _, s := range tt.reportLacks {
				if strings.Contains(report, s) {
					t.Errorf("the report has %q:\n%s", s, report)
				}
			}
		})
	}
}

func TestInbox_Poll_sameFileAgain(t *testing.T) {
	dir := t.TempDir()
	im := &fakeImporter{respond: ledgerLike()}
	now := clock
	in := newInbox(t, inbox.Config{Dir: dir, Now: func() time.Time { return now }}, im)
	write(t, dir, "hours.csv", "a,b\n1,2\n")
	poll(t, in)
	if res := poll(t, in); res.Processed != 1 {
		t.Fatalf("first drop: %+v", res)
	}
	now = now.Add(time.Hour)
	write(t, dir, "hours.csv", "a,b\n1,2\n")
	poll(t, in)
	res := poll(t, in)
	if res.Duplicates != 1 || res.Files[0].Outcome != inbox.OutcomeDuplicate || res.Files[0].ImportID != 1 {
		t.Fatalf("second drop: %+v", res)
	}
	if got := ls(t, filepath.Join(dir, "processed")); !slices.Equal(got, []string{
		stamp + "-hours.csv", stamp + "-hours.csv.report.txt",
		"20250301T110000Z-hours.duplicate.csv", "20250301T110000Z-hours.duplicate.csv.report.txt",
	}) {
		t.Fatalf("processed/ = %v", got)
	}
	if r := readFile(t, res.Files[0].Report); !strings.Contains(r, "duplicate of import 1") || !strings.Contains(r, "what to do next: nothing.") {
		t.Errorf("report:\n%s", r)
	}
}

// A crash after the import committed but before the move: the next poll
// imports the same content, which the ledger knows, and moves it as a
// duplicate.
func TestInbox_Poll_committedNotMoved(t *testing.T) {
	dir := t.TempDir()
	ledger := ledgerLike()
	im := &fakeImporter{respond: func(ctx context.Context, n int, name string, payload []byte) (inbox.Imported, error) {
		rep, _ := ledger(ctx, n, name, payload)
		if n == 1 {
			return rep, errors.New("killed after the commit")
		}
		return rep, nil
	}}
	in := newInbox(t, inbox.Config{Dir: dir}, im)
	write(t, dir, "hours.csv", "a,b\n1,2\n")
	poll(t, in)
	if _, err := in.Poll(context.Background()); err == nil {
		t.Fatal("no error from the interrupted import")
	}
	res := poll(t, in)
	if res.Duplicates != 1 || res.Files[0].ImportID != 1 {
		t.Fatalf("after the interruption: %+v", res)
	}
	if len(im.Calls()) != 2 {
		t.Fatalf("calls = %d", len(im.Calls()))
	}
}

func TestInbox_Poll_importErrors(t *testing.T) {
	t.Run("an error leaves the file and the next poll retries it", func(t *testing.T) {
		dir := t.TempDir()
		down := true
		im := &fakeImporter{respond: func(_ context.Context, n int, _ string, _ []byte) (inbox.Imported, error) {
			if down {
				return inbox.Imported{}, errors.New("payroll API: 503")
			}
			return inbox.Imported{ImportID: int64(n)}, nil
		}}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "a.csv", "a\n")
		write(t, dir, "b.csv", "b\n")
		poll(t, in)
		res, err := in.Poll(context.Background())
		if err == nil || !strings.Contains(err.Error(), "a.csv") || !strings.Contains(err.Error(), "b.csv") {
			t.Fatalf("err = %v", err)
		}
		if o := outcomes(res); o["a.csv"] != inbox.OutcomeError || o["b.csv"] != inbox.OutcomeError {
			t.Fatalf("%+v", res)
		}
		down = false
		if res := poll(t, in); res.Processed != 2 {
			t.Fatalf("once the API is back: %+v", res)
		}
	})
	t.Run("revocation stops the poll", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{respond: func(context.Context, int, string, []byte) (inbox.Imported, error) {
			return inbox.Imported{}, fmt.Errorf("refresh: connection revoked: %w", inbox.ErrUnavailable)
		}}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "a.csv", "a\n")
		write(t, dir, "b.csv", "b\n")
		poll(t, in)
		if _, err := in.Poll(context.Background()); !errors.Is(err, inbox.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
		if n := len(im.Calls()); n != 1 {
			t.Fatalf("%d imports after a revocation, want 1", n)
		}
		if got := ls(t, dir); !slices.Equal(got, []string{"a.csv", "b.csv", "failed", "processed"}) {
			t.Fatalf("inbox = %v", got)
		}
	})
	t.Run("a cancelled context", func(t *testing.T) {
		in := newInbox(t, inbox.Config{}, &fakeImporter{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := in.Poll(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestInbox_Poll_tooLarge(t *testing.T) {
	dir := t.TempDir()
	im := &fakeImporter{}
	in := newInbox(t, inbox.Config{Dir: dir, MaxFileSize: 10}, im)
	write(t, dir, "big.csv", "0123456789\n")
	write(t, dir, "fits.csv", "012345678\n")
	poll(t, in)
	res := poll(t, in)
	if o := outcomes(res); o["big.csv"] != inbox.OutcomeFailed || o["fits.csv"] != inbox.OutcomeProcessed {
		t.Fatalf("%+v", res)
	}
	if calls := im.Calls(); len(calls) != 1 || calls[0].name != "inbox/fits.csv" {
		t.Fatalf("calls = %+v", calls)
	}
	report := readFile(t, filepath.Join(dir, "failed", stamp+"-big.csv.report.txt"))
	for _, s := range []string{"file:      big.csv (11 bytes)", "larger than the inbox's limit of 10 bytes", "split the export into smaller files"} {
		if !strings.Contains(report, s) {
			t.Errorf("the report lacks %q:\n%s", s, report)
		}
	}
}

func TestInbox_Poll_symlinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.csv")
	if err := os.WriteFile(outside, []byte("salary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "data"), "real.dat", "inside\n")
	links := map[string]string{
		"out.csv":      outside,
		"in.csv":       filepath.Join("data", "real.dat"),
		"dangling.csv": filepath.Join(dir, "nowhere.csv"),
		"dir.csv":      "data",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Skipf("symbolic links: %v", err)
		}
	}
	im := &fakeImporter{}
	in := newInbox(t, inbox.Config{Dir: dir}, im)

	res := poll(t, in)
	o := outcomes(res)
	if o["out.csv"] != inbox.OutcomeRefused || o["dangling.csv"] != inbox.OutcomeRefused || o["in.csv"] != inbox.OutcomeWaiting || o["dir.csv"] != "" {
		t.Fatalf("first poll: %+v", res)
	}
	if res.Failed != 2 {
		t.Errorf("Failed = %d, want the 2 refused", res.Failed)
	}
	moved := filepath.Join(dir, "failed", stamp+"-out.csv")
	if fi, err := os.Lstat(moved); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link itself was not moved to failed/: %v", err)
	}
	if got := readFile(t, outside); got != "salary\n" {
		t.Errorf("the target outside was touched: %q", got)
	}
	if r := readFile(t, moved+".report.txt"); !strings.Contains(r, "outcome:   refused: it is a symbolic link to "+outside+", which is outside the inbox") ||
		!strings.Contains(r, "what to do next: copy the file itself into the inbox") {
		t.Errorf("report:\n%s", r)
	}

	res = poll(t, in)
	if outcomes(res)["in.csv"] != inbox.OutcomeProcessed {
		t.Fatalf("second poll: %+v", res)
	}
	if calls := im.Calls(); len(calls) != 1 || calls[0] != (importCall{paysync.SourceFile, "inbox/in.csv", "inside\n"}) {
		t.Fatalf("calls = %+v", calls)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "processed", stamp+"-in.csv")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was not moved to processed/: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "data", "real.dat")); got != "inside\n" {
		t.Errorf("the target was changed: %q", got)
	}
}

func TestInbox_Poll_nameClash(t *testing.T) {
	dir := t.TempDir()
	im := &fakeImporter{}
	in := newInbox(t, inbox.Config{Dir: dir}, im) // the clock stands still
	// A report with the name of the first choice blocks it too.
	write(t, filepath.Join(dir, "processed"), stamp+"-b.csv.report.txt", "someone else's\n")
	var moved []string
	for i := range 3 {
		write(t, dir, "a.csv", strings.Repeat("x", i+1)+"\n")
		poll(t, in)
		res := poll(t, in)
		if res.Processed != 1 {
			t.Fatalf("drop %d: %+v", i+1, res)
		}
		moved = append(moved, filepath.Base(res.Files[0].Moved))
	}
	if want := []string{stamp + "-a.csv", stamp + "-a-2.csv", stamp + "-a-3.csv"}; !slices.Equal(moved, want) {
		t.Fatalf("moved = %v, want %v", moved, want)
	}
	for i, name := range moved {
		if got := readFile(t, filepath.Join(dir, "processed", name)); got != strings.Repeat("x", i+1)+"\n" {
			t.Errorf("%s reads %q: overwritten", name, got)
		}
	}
	write(t, dir, "b.csv", "b\n")
	poll(t, in)
	if res := poll(t, in); filepath.Base(res.Files[0].Moved) != stamp+"-b-2.csv" {
		t.Fatalf("b moved to %q", res.Files[0].Moved)
	}
	if got := readFile(t, filepath.Join(dir, "processed", stamp+"-b.csv.report.txt")); got != "someone else's\n" {
		t.Errorf("a report was overwritten: %q", got)
	}
}

func TestNew(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	write(t, tmp, "file", "")
	tests := []struct {
		name    string
		cfg     inbox.Config
		im      inbox.Sink
		wantErr string // "" = no error
	}{
		{name: "no folder", cfg: inbox.Config{}, wantErr: "PAYSYNC_INBOX"},
		{name: "missing folder", cfg: inbox.Config{Dir: filepath.Join(tmp, "nope")}, wantErr: "PAYSYNC_INBOX"},
		{name: "not a folder", cfg: inbox.Config{Dir: file}, wantErr: "PAYSYNC_INBOX"},
		{name: "default schedule", cfg: inbox.Config{Dir: t.TempDir()}},
		{name: "five fields", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "0 6 * * 1-5"}},
		{name: "six fields", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "*/30 * * * * *"}},
		{name: "@hourly", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "@hourly"}},
		{name: "@every", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "@every 5m"}},
		{name: "CRON_TZ", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "CRON_TZ=Europe/Copenhagen 0 6 * * 1-5"}},
		{name: "CRON_TZ six fields", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "CRON_TZ=America/New_York 30 0 6 * * *"}},
		{name: "bad minute", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "61 * * * *"}, wantErr: "PAYSYNC_SCHEDULE"},
		{name: "seven fields", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "0 0 */5 * * * *"}, wantErr: "PAYSYNC_SCHEDULE"},
		{name: "four fields", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "* * * *"}, wantErr: "PAYSYNC_SCHEDULE"},
		{name: "bad duration", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "@every often"}, wantErr: "PAYSYNC_SCHEDULE"},
		{name: "bad zone", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "CRON_TZ=Nowhere/City 0 6 * * *"}, wantErr: "PAYSYNC_SCHEDULE"},
		{name: "zone alone", cfg: inbox.Config{Dir: t.TempDir(), Schedule: "CRON_TZ=Europe/Copenhagen"}, wantErr: "PAYSYNC_SCHEDULE"},
		{name: "bad pattern", cfg: inbox.Config{Dir: t.TempDir(), Patterns: []string{"[.csv"}}, wantErr: "pattern"},
		{name: "pattern with a folder", cfg: inbox.Config{Dir: t.TempDir(), Patterns: []string{"sub/*.csv"}}, wantErr: "pattern"},
		{name: "bad policy", cfg: inbox.Config{Dir: t.TempDir(), Policy: "some"}, wantErr: "policy"},
		{name: "negative size", cfg: inbox.Config{Dir: t.TempDir(), MaxFileSize: -1}, wantErr: "size"},
		{name: "importer not all or nothing", cfg: inbox.Config{Dir: t.TempDir()}, im: allOrNothing(false), wantErr: "AllOrNothing"},
		{name: "importer all or nothing", cfg: inbox.Config{Dir: t.TempDir()}, im: allOrNothing(true)},
		{name: "partial importer", cfg: inbox.Config{Dir: t.TempDir(), Policy: inbox.Partial}, im: allOrNothing(false)},
		{name: "partial, importer all or nothing", cfg: inbox.Config{Dir: t.TempDir(), Policy: inbox.Partial}, im: allOrNothing(true), wantErr: "AllOrNothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im := tt.im
			if im == nil {
				im = &fakeImporter{}
			}
			_, err := inbox.New(tt.cfg, im)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				for _, sub := range []string{"processed", "failed"} {
					fi, err := os.Stat(filepath.Join(tt.cfg.Dir, sub))
					if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
						t.Errorf("%s/: %v %v", sub, fi, err)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}

// syncBuffer is a log destination read while polls write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// noGoroutinesLeft waits for the scheduler's and the inbox's goroutines to
// end. The tests that start an inbox do not run in parallel.
func noGoroutinesLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "robfig/cron") && !strings.Contains(stacks, "inbox.(*Inbox)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInbox_StartRunNowClose(t *testing.T) {
	t.Run("scheduled polls run", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{}
		in := newInbox(t, inbox.Config{Dir: dir, Schedule: "*/1 * * * * *", SettleLook: 10 * time.Millisecond}, im)
		write(t, dir, "hours.csv", "x\n")
		if err := in.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := in.Start(context.Background()); err == nil {
			t.Error("a second Start did not fail")
		}
		waitFor(t, "a scheduled poll", 3*time.Second, func() bool { return len(im.Calls()) == 1 })
		if err := in.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		noGoroutinesLeft(t)
		if err := in.Close(context.Background()); err != nil {
			t.Errorf("a second Close: %v", err)
		}
		if err := in.Start(context.Background()); err == nil {
			t.Error("Start after Close did not fail")
		}
		in.RunNow() // ignored
		write(t, dir, "late.csv", "x\n")
		time.Sleep(30 * time.Millisecond)
		if n := len(im.Calls()); n != 1 {
			t.Errorf("%d imports after Close", n)
		}
	})
	t.Run("RunNow while a poll runs, Close waits for the poll", func(t *testing.T) {
		dir := t.TempDir()
		entered, release := make(chan struct{}, 10), make(chan struct{})
		im := &fakeImporter{respond: func(_ context.Context, n int, _ string, _ []byte) (inbox.Imported, error) {
			entered <- struct{}{}
			<-release // ignores the context: Close must wait
			return inbox.Imported{ImportID: int64(n)}, nil
		}}
		logs := &syncBuffer{}
		in := newInbox(t, inbox.Config{Dir: dir, Schedule: "@hourly", SettleLook: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))}, im)
		write(t, dir, "hours.csv", "x\n")
		in.RunNow() // before Start: ignored
		if err := in.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		in.RunNow()
		<-entered
		in.RunNow() // a poll is running: another follows it, unless closed meanwhile

		closed := make(chan error, 1)
		go func() { closed <- in.Close(context.Background()) }()
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while a poll was running", err)
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if n := len(im.Calls()); n != 1 {
			t.Errorf("%d imports, want 1", n)
		}
		if got := ls(t, filepath.Join(dir, "processed")); len(got) != 2 {
			t.Errorf("the poll in progress did not finish: processed/ = %v", got)
		}
		noGoroutinesLeft(t)
	})
	t.Run("Close gives up when its context ends and cancels the poll", func(t *testing.T) {
		dir := t.TempDir()
		entered := make(chan struct{}, 1)
		im := &fakeImporter{respond: func(ctx context.Context, _ int, _ string, _ []byte) (inbox.Imported, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return inbox.Imported{}, ctx.Err()
		}}
		in := newInbox(t, inbox.Config{Dir: dir, Schedule: "@hourly", SettleLook: 10 * time.Millisecond}, im)
		write(t, dir, "hours.csv", "x\n")
		if err := in.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		in.RunNow()
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := in.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v", err)
		}
		noGoroutinesLeft(t)
		if _, err := os.Stat(filepath.Join(dir, "hours.csv")); err != nil {
			t.Errorf("the file whose import was cancelled was moved: %v", err)
		}
	})
	t.Run("a panic does not stop later polls", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{respond: func(_ context.Context, n int, _ string, _ []byte) (inbox.Imported, error) {
			if n == 1 {
				panic("importer bug")
			}
			return inbox.Imported{ImportID: int64(n)}, nil
		}}
		logs := &syncBuffer{}
		in := newInbox(t, inbox.Config{Dir: dir, Schedule: "*/1 * * * * *", SettleLook: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))}, im)
		write(t, dir, "hours.csv", "x\n")
		if err := in.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		in.RunNow()
		waitFor(t, "the panic", 2*time.Second, func() bool { return strings.Contains(logs.String(), "importer bug") })
		// With Recover outside SkipIfStillRunning every later tick would
		// be skipped.
		waitFor(t, "a scheduled poll after the panic", 3*time.Second, func() bool {
			return len(ls(t, filepath.Join(dir, "processed"))) == 2
		})
		if err := in.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		noGoroutinesLeft(t)
		if !strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("the panic was not logged as an error:\n%s", logs)
		}
	})
}

// OnFile hears each file a poll finished with, once, under its outcome
// (paysync_inbox_files_total); waiting files and errors are no outcome.
func TestInbox_OnFile(t *testing.T) {
	dir := t.TempDir()
	var heard []string
	im := &fakeImporter{respond: func(_ context.Context, n int, name string, _ []byte) (inbox.Imported, error) {
		switch {
		case strings.HasSuffix(name, "bad.csv"):
			return inbox.Imported{Problems: []error{errors.New("row 2: no employee")}}, nil
		case strings.HasSuffix(name, "broken.csv"):
			return inbox.Imported{}, errors.New("ledger is read-only")
		}
		return inbox.Imported{ImportID: int64(n), Entries: 1, PayParts: 1, Batches: 1}, nil
	}}
	in := newInbox(t, inbox.Config{Dir: dir, OnFile: func(o string) { heard = append(heard, o) }}, im)
	write(t, dir, "good.csv", "x\n")
	write(t, dir, "bad.csv", "y\n")
	write(t, dir, "broken.csv", "z\n")
	poll(t, in) // every file new: waiting
	if len(heard) != 0 {
		t.Fatalf("heard %v for waiting files, want nothing", heard)
	}
	in.Poll(context.Background())
	slices.Sort(heard)
	if want := []string{inbox.OutcomeFailed, inbox.OutcomeProcessed}; !slices.Equal(heard, want) {
		t.Errorf("heard %v, want %v", heard, want)
	}
}

// rename moves content into the inbox as an exporter should: written
// under a temporary name, then renamed.
func rename(t *testing.T, dir, name, content string) {
	t.Helper()
	write(t, dir, name+".part", content)
	if err := os.Rename(filepath.Join(dir, name+".part"), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// Issue 16: one SIGHUP did not pick up a file just renamed into the inbox.
// A poll asked for (RunNow: SIGHUP, SIGUSR1) always starts after the ask
// and takes a file that arrived before it, even one no look has seen yet.
func TestInbox_RunNowTakesWhatArrivedBefore(t *testing.T) {
	t.Run("asked during a poll: another poll follows it", func(t *testing.T) {
		dir := t.TempDir()
		entered, release := make(chan struct{}, 10), make(chan struct{})
		im := &fakeImporter{respond: func(_ context.Context, n int, _ string, _ []byte) (inbox.Imported, error) {
			entered <- struct{}{}
			<-release
			return inbox.Imported{ImportID: int64(n)}, nil
		}}
		in := newInbox(t, inbox.Config{Dir: dir, Schedule: "@hourly", SettleLook: 10 * time.Millisecond}, im)
		write(t, dir, "hours.csv", "x\n")
		if err := in.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		in.RunNow()
		<-entered // the first poll is importing hours.csv: its looks are done
		rename(t, dir, "late.csv", "y\n")
		in.RunNow()
		close(release)
		waitFor(t, "late.csv imported by a poll after the ask", 5*time.Second, func() bool { return len(im.Calls()) == 2 })
		if err := in.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := im.Calls(); !strings.HasSuffix(c[1].name, "late.csv") {
			t.Errorf("second import of %q, want late.csv: %+v", c[1].name, c)
		}
		if got := ls(t, dir); slices.Contains(got, "late.csv") {
			t.Errorf("late.csv still in the inbox: %v", got)
		}
		noGoroutinesLeft(t)
	})
	t.Run("a file no look has seen yet is taken by the asked poll", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{}
		// As the daemon runs it: no settle look of its own.
		in := newInbox(t, inbox.Config{Dir: dir, Schedule: "@hourly"}, im)
		if err := in.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		rename(t, dir, "hours.csv", "x\n")
		in.RunNow()
		waitFor(t, "hours.csv imported by the asked poll", 5*time.Second, func() bool { return len(im.Calls()) == 1 })
		if err := in.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		noGoroutinesLeft(t)
	})
}

func Example() {
	dir, _ := os.MkdirTemp("", "inbox")
	defer os.RemoveAll(dir)
	// The exporter writes hours.csv.part, then renames it.
	os.WriteFile(filepath.Join(dir, "hours.csv.part"), []byte("id,employee_id,date,hours,code\n"), 0o600)
	os.Rename(filepath.Join(dir, "hours.csv.part"), filepath.Join(dir, "hours.csv"))

	in, err := inbox.New(inbox.Config{
		Dir:        dir,
		SettleLook: 10 * time.Millisecond, // one poll, as paysync run --once
		Now:        func() time.Time { return time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC) },
	}, &fakeImporter{})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := in.Poll(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range res.Files {
		rel, _ := filepath.Rel(dir, f.Moved)
		fmt.Println(f.Name, f.Outcome, f.ImportID, rel)
	}
	// Output:
	// hours.csv processed 1 processed/20250301T100000Z-hours.csv
}
