package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
)

// Writers that keep their file open (issue 13, item 4): whatever the inbox
// took of a file still being written, every row ends up imported exactly
// once, and nothing is left unimported in processed/ or failed/.

var nordlys = []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}

const hoursHeader = "id,employee_id,date,hours,code\n"

// hoursRows are the CSV rows [from, to): each a pay part of its own.
func hoursRows(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "e%d,%s,2026-11-%02d,%d.25,T1\n", i, nordlys[i%4], i%28+1, i+1)
	}
	return b.String()
}

// wantParts is the pay parts of hoursRows(0, n), each once.
func wantParts(n int) map[string]int {
	out := map[string]int{}
	for i := range n {
		out[nordlys[i%4]+fmt.Sprintf("|T1|%d.25|-", i+1)]++
	}
	return out
}

// openWriter creates name in dir and writes first, keeping the file open
// as a slow exporter does.
func openWriter(t *testing.T, dir, name, first string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString(first); err != nil {
		t.Fatal(err)
	}
	return f
}

// hookImporter runs after once after the importer's first import has
// returned, before the inbox moves the file.
type hookImporter struct {
	im    *worker.InboxSink
	after func()
}

func (h *hookImporter) ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (inbox.Imported, error) {
	rep, err := h.im.ImportFrom(ctx, kind, name, r)
	if h.after != nil {
		after := h.after
		h.after = nil
		after()
	}
	return rep, err
}

func (h *hookImporter) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (inbox.Imported, error) {
	return h.ImportFrom(ctx, kind, name, bytes.NewReader(payload))
}

// pollAll polls n times and returns every file result.
func pollAll(t *testing.T, in *inbox.Inbox, n int) []inbox.FileResult {
	t.Helper()
	var all []inbox.FileResult
	for range n {
		all = append(all, poll(t, in).Files...)
	}
	return all
}

// checkOnce checks that payroll holds want, each pay part once, that the
// ledger holds every entry id of the imports once, and that no file is
// left in the inbox.
func checkOnce(t *testing.T, e *realEnv, dir string, results []inbox.FileResult, want map[string]int, ids int) {
	t.Helper()
	if got := e.payParts(); !maps.Equal(got, want) {
		t.Errorf("payroll holds %d kinds of pay part (%v)\nwant %d, each once (%v)", len(got), got, len(want), want)
	}
	seen := map[string]int{}
	imports := map[int64]bool{}
	for _, fr := range results {
		if fr.ImportID != 0 && !imports[fr.ImportID] {
			imports[fr.ImportID] = true
			for _, id := range e.entryIDs(t, fr.ImportID) {
				seen[id]++
			}
		}
	}
	if len(seen) != ids {
		t.Errorf("the ledger holds %d entry ids, want %d: %v", len(seen), ids, seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("entry %s is in %d imports", id, n)
		}
	}
	for _, name := range ls(t, dir) {
		if name != "processed" && name != "failed" && !strings.HasPrefix(name, ".") {
			t.Errorf("%s is still in the inbox", name)
		}
	}
}

func TestInbox_Poll_writerKeepsFileOpen(t *testing.T) {
	// The exporter pauses with its file open: two looks see it unchanged,
	// the inbox imports the first half and moves the file; then the
	// exporter writes the rest into the file it still holds (now in
	// processed/) and closes it.
	t.Run("written to after the move", func(t *testing.T) {
		e := newRealEnv(t, nil, true)
		dir := t.TempDir()
		logs := &syncBuffer{}
		in := newInbox(t, inbox.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))}, e.im)
		w := openWriter(t, dir, "hours.csv", hoursHeader+hoursRows(0, 10))
		results := pollAll(t, in, 2)
		if o := results[len(results)-1]; o.Outcome != inbox.OutcomeProcessed {
			t.Fatalf("the half-written file: %+v", o)
		}
		if _, err := w.WriteString(hoursRows(10, 20)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		results = append(results, pollAll(t, in, 4)...)
		checkOnce(t, e, dir, results, wantParts(20), 20)
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "written to after it was moved") {
			t.Errorf("no warning:\n%s", logs)
		}
		// Both reports say what happened.
		var reports []string
		for _, fr := range results {
			if fr.Report != "" {
				reports = append(reports, readFile(t, fr.Report))
			}
		}
		if len(reports) != 2 || !strings.Contains(reports[0], "afterwards: ") || !strings.Contains(reports[0], "moved back into the inbox as hours.csv") ||
			!strings.Contains(reports[1], "entries:   20 read, 10 already imported") || !strings.Contains(reports[1], "written to after it was moved") {
			t.Errorf("%d reports", len(reports))
		}
	})
	// The exporter writes the rest while the import commits: the file has
	// changed when the inbox is about to move it.
	t.Run("written to between the import and the move", func(t *testing.T) {
		e := newRealEnv(t, nil, true)
		dir := t.TempDir()
		logs := &syncBuffer{}
		w := openWriter(t, dir, "hours.csv", hoursHeader+hoursRows(0, 10))
		im := &hookImporter{im: e.im, after: func() {
			if _, err := w.WriteString(hoursRows(10, 20)); err != nil {
				t.Error(err)
			}
			w.Close()
		}}
		in := newInbox(t, inbox.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))}, im)
		results := pollAll(t, in, 5)
		checkOnce(t, e, dir, results, wantParts(20), 20)
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "changed after") {
			t.Errorf("no warning:\n%s", logs)
		}
		// The report of the whole file says what happened.
		var last inbox.FileResult
		for _, fr := range results {
			if fr.Outcome == inbox.OutcomeProcessed {
				last = fr
			}
		}
		if last.Report == "" {
			t.Fatalf("no file processed: %+v", results)
		}
		if r := readFile(t, last.Report); !strings.Contains(r, "entries:   20 read, 10 already imported") || !strings.Contains(r, "changed after") {
			t.Errorf("report:\n%s", r)
		}
	})
	// Another file is renamed over the one imported before the inbox moves
	// it: the new one must not go to processed/ unimported.
	t.Run("replaced between the import and the move", func(t *testing.T) {
		e := newRealEnv(t, nil, true)
		dir := t.TempDir()
		write(t, dir, "hours.csv", hoursHeader+hoursRows(0, 10))
		im := &hookImporter{im: e.im, after: func() {
			write(t, dir, "hours.csv.part", hoursHeader+hoursRows(10, 20))
			if err := os.Rename(filepath.Join(dir, "hours.csv.part"), filepath.Join(dir, "hours.csv")); err != nil {
				t.Error(err)
			}
		}}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		results := pollAll(t, in, 5)
		checkOnce(t, e, dir, results, wantParts(20), 20)
	})
}

// TestInbox_Poll_writerKeepsPresetOpen: presets derive entry ids from row
// content, numbering identical rows -2, -3 in file order. Reading the
// grown file again gives the rows read before the same ids, so they are
// recognised as imported, and the identical rows after the cut are new.
func TestInbox_Poll_writerKeepsPresetOpen(t *testing.T) {
	const header = "\ufeffUser,Email,Client,Project,Task,Description,Billable,Start date,Start time,End date,End time,Duration,Tags,Amount (DKK)\r\n"
	standup := "Mette Hansen,mette.hansen@nordlys.dk,,Internal,Meeting,Standup,No,2026-11-05,09:00:00,2026-11-05,09:15:00,00:15:00,,0.00\r\n"
	first := header +
		"Mette Hansen,mette.hansen@nordlys.dk,Havnen A/S,Havnen,Development,\"API work, part 1\",Yes,2026-11-02,08:00:00,2026-11-02,15:30:00,07:30:00,,1875.00\r\n" +
		"Lars Nielsen,lars.nielsen@nordlys.dk,,Internal,Support,\"Support rota\r\n(two lines)\",No,2026-11-02,09:00:00,2026-11-02,16:00:00,07:00:00,,0.00\r\n" +
		standup +
		"Sofie Jensen,sofie.jensen@nordlys.dk,,Internal,Meeting,Standup,No,2026-11-05,09:00:00,2026-11-05,09:30:00,00:30:00,,0.00\r\n" +
		"Sofie Jensen,sofie.jensen@nordlys.dk,,Internal,Meeting,Standup,No,2026-11-05,09:00:00,2026-11-05,09:30:00,00:30:00,,0.00\r\n"
	rest := standup + standup +
		"Lars Nielsen,lars.nielsen@nordlys.dk,,Internal,Sick,,No,2026-11-04,08:00:00,2026-11-04,16:00:00,08:00:00,,0.00\r\n" +
		"Sofie Jensen,sofie.jensen@nordlys.dk,,Internal,Meeting,Standup,No,2026-11-05,09:00:00,2026-11-05,09:30:00,00:30:00,,0.00\r\n"

	rules := loadRules(t, "../../deploy/examples/rules.yaml")
	rules.Aggregate = false // a pay part per row: each row's fate shows

	// What one import of the whole file gives.
	ref := newRealEnv(t, rules, true)
	rep, err := ref.im.Import(context.Background(), "file", "inbox/toggl.csv", []byte(first+rest))
	if err != nil || len(rep.Problems) > 0 || rep.Entries != 9 {
		t.Fatalf("reference import: %+v %v %v", rep, rep.Problems, err)
	}
	refIDs := ref.entryIDs(t, rep.ImportID)
	slices.Sort(refIDs)
	if !slices.ContainsFunc(refIDs, func(id string) bool { return strings.HasSuffix(id, "-3") }) {
		t.Fatalf("no repeated row numbered -3: %v", refIDs)
	}

	e := newRealEnv(t, rules, true)
	dir := t.TempDir()
	in := newInbox(t, inbox.Config{Dir: dir}, e.im)
	w := openWriter(t, dir, "toggl.csv", first)
	results := pollAll(t, in, 2)
	if _, err := w.WriteString(rest); err != nil {
		t.Fatal(err)
	}
	w.Close()
	results = append(results, pollAll(t, in, 4)...)
	checkOnce(t, e, dir, results, ref.payParts(), len(refIDs))
	var ids []string
	for _, fr := range results {
		if fr.ImportID == 0 || fr.Outcome == inbox.OutcomeDuplicate {
			continue
		}
		for _, id := range e.entryIDs(t, fr.ImportID) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, refIDs) {
		t.Errorf("entry ids %v\nwant (one import of the whole file) %v", ids, refIDs)
	}
}

// TestInbox_Poll_movedFileWatched: the inbox remembers the files it moved
// on disk, so another process (a restart, or the next paysync run --once)
// still notices one written to after the move; it stops watching when the
// file is gone or after a day.
func TestInbox_Poll_movedFileWatched(t *testing.T) {
	t.Run("a new process notices", func(t *testing.T) {
		e := newRealEnv(t, nil, true)
		dir := t.TempDir()
		w := openWriter(t, dir, "hours.csv", hoursHeader+hoursRows(0, 10))
		in := newInbox(t, inbox.Config{Dir: dir}, e.im)
		results := pollAll(t, in, 2)
		w.WriteString(hoursRows(10, 20))
		w.Close()
		// paysync run --once: one poll that looks twice.
		in2 := newInbox(t, inbox.Config{Dir: dir, SettleLook: time.Millisecond}, e.im)
		results = append(results, pollAll(t, in2, 1)...)
		checkOnce(t, e, dir, results, wantParts(20), 20)
	})
	t.Run("not after a day", func(t *testing.T) {
		dir := t.TempDir()
		now := clock
		in := newInbox(t, inbox.Config{Dir: dir, Now: func() time.Time { return now }}, &fakeImporter{})
		write(t, dir, "a.csv", "a\n")
		write(t, dir, "b.csv", "b\n")
		pollAll(t, in, 2)
		// b's moved file is removed: it is no longer watched.
		if err := os.Remove(filepath.Join(dir, "processed", stamp+"-b.csv")); err != nil {
			t.Fatal(err)
		}
		poll(t, in)
		now = now.Add(25 * time.Hour)
		poll(t, in)
		f, err := os.OpenFile(filepath.Join(dir, "processed", stamp+"-a.csv"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("late\n")
		f.Close()
		if res := poll(t, in); len(res.Files) != 0 {
			t.Errorf("a file moved more than a day ago was taken back: %+v", res)
		}
		if got := ls(t, filepath.Join(dir, ".paysync-watch")); len(got) != 0 {
			t.Errorf("watch records left: %v", got)
		}
	})
}

// Under policy partial, an empty or unreadable file is refused without
// a warning about the importer's configuration (issue 13, item 11).
func TestInbox_Poll_partialUnreadable(t *testing.T) {
	tests := []struct {
		name, content string
		report        []string
		processed     bool
	}{
		{"empty.csv", "", []string{"outcome:   failed: the file could not be read", "empty input"}, false},
		{"garbage.csv", "\x00\x01garbage\xff\n", []string{"outcome:   failed: the file could not be read", "missing columns"}, false},
		{"words.txt", "hello world\nfoo bar\n", []string{"outcome:   failed: the file could not be read", "missing columns"}, false},
		{"broken.json", "{\n", []string{"outcome:   failed: nothing of the file could be imported", "unexpected end of JSON input"}, false},
		{"nobody.csv", hoursHeader + "x1,nobody,2026-11-02,1,T1\n", []string{"outcome:   failed: nothing of the file could be imported", "not in company"}, false},
		{"mixed.csv", hoursHeader + "x2,nobody,2026-11-02,1,T1\n" + hoursRows(0, 1), []string{"outcome:   processed with rejects: the good entries were imported", "not in company"}, true},
	}
	e := newRealEnv(t, nil, false)
	dir := t.TempDir()
	logs := &syncBuffer{}
	in := newInbox(t, inbox.Config{Dir: dir, Policy: inbox.Partial, Logger: slog.New(slog.NewTextHandler(logs, nil))}, e.im)
	for _, tt := range tests {
		write(t, dir, tt.name, tt.content)
	}
	poll(t, in)
	res := poll(t, in)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fr inbox.FileResult
			for _, f := range res.Files {
				if f.Name == tt.name {
					fr = f
				}
			}
			want, sub := inbox.OutcomeFailed, "failed"
			if tt.processed {
				want, sub = inbox.OutcomeProcessed, "processed"
			}
			if fr.Outcome != want || !strings.HasPrefix(fr.Moved, filepath.Join(dir, sub)) {
				t.Fatalf("%+v", fr)
			}
			r := readFile(t, fr.Report)
			for _, s := range tt.report {
				if !strings.Contains(r, s) {
					t.Errorf("the report lacks %q:\n%s", s, r)
				}
			}
			if strings.Contains(r, "all-or-nothing") || !tt.processed && strings.Contains(r, "good entries were imported") {
				t.Errorf("the report:\n%s", r)
			}
		})
	}
	if strings.Contains(logs.String(), "AllOrNothing") {
		t.Errorf("a warning about the importer's configuration:\n%s", logs)
	}
}

func TestInbox_Poll_changedAfterImport(t *testing.T) {
	// Rewritten in place between the import and the move, with the same
	// size and the modification time put back: only the content tells.
	t.Run("same size and time, other content", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "hours.csv")
		im := &fakeImporter{}
		im.respond = func(_ context.Context, n int, name string, _ []byte) (inbox.Imported, error) {
			if n == 1 {
				fi, err := os.Stat(path)
				if err != nil {
					t.Error(err)
				}
				write(t, dir, "hours.csv", "a,b\n3,4\n")
				if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
					t.Error(err)
				}
			}
			return inbox.Imported{ImportID: int64(n), Entries: 1, PayParts: 1}, nil
		}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "hours.csv", "a,b\n1,2\n")
		poll(t, in)
		if res := poll(t, in); outcomes(res)["hours.csv"] != inbox.OutcomeChanged || res.Waiting != 1 {
			t.Fatalf("the poll that imported it: %+v", res)
		}
		if res := poll(t, in); res.Processed != 1 {
			t.Fatalf("the next poll: %+v", res)
		}
		if calls := im.Calls(); len(calls) != 2 || calls[1].payload != "a,b\n3,4\n" {
			t.Fatalf("calls = %+v", calls)
		}
		if got := ls(t, filepath.Join(dir, "processed")); len(got) != 2 {
			t.Fatalf("processed/ = %v", got)
		}
	})
	// Another file takes the name just as the imported one is moved: it
	// is put back, not left in processed/ unread.
	t.Run("replaced as it is moved", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{respond: ledgerLike()}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		write(t, dir, "hours.csv", "a\n")
		replaced := false
		inbox.SetBeforeRename(t, func(path string) {
			if !replaced {
				replaced = true
				write(t, dir, "hours.csv.part", "b\n")
				if err := os.Rename(filepath.Join(dir, "hours.csv.part"), path); err != nil {
					t.Error(err)
				}
			}
		})
		poll(t, in)
		if res := poll(t, in); outcomes(res)["hours.csv"] != inbox.OutcomeChanged {
			t.Fatalf("the poll that imported it: %+v", res)
		}
		if got := readFile(t, filepath.Join(dir, "hours.csv")); got != "b\n" {
			t.Fatalf("the inbox's hours.csv reads %q", got)
		}
		pollAll(t, in, 2)
		var payloads []string
		for _, c := range im.Calls() {
			payloads = append(payloads, c.payload)
		}
		if !slices.Equal(payloads, []string{"a\n", "b\n"}) {
			t.Fatalf("imported %q", payloads)
		}
		got := ls(t, filepath.Join(dir, "processed"))
		if len(got) != 2 || readFile(t, filepath.Join(dir, "processed", got[0])) != "b\n" {
			t.Fatalf("processed/ = %v", got)
		}
	})
	// The file is written to after it was moved while a new file of the
	// same name waits in the inbox: it goes back once that one is taken.
	t.Run("moved back once its name is free", func(t *testing.T) {
		dir := t.TempDir()
		im := &fakeImporter{respond: ledgerLike()}
		in := newInbox(t, inbox.Config{Dir: dir}, im)
		w := openWriter(t, dir, "hours.csv", "x\n")
		pollAll(t, in, 2)
		write(t, dir, "hours.csv", "new\n")
		w.WriteString("y\n")
		w.Close()
		pollAll(t, in, 5)
		var payloads []string
		for _, c := range im.Calls() {
			payloads = append(payloads, c.payload)
		}
		if !slices.Equal(payloads, []string{"x\n", "new\n", "x\ny\n"}) {
			t.Fatalf("imported %q", payloads)
		}
		if got := ls(t, dir); !slices.Equal(got, []string{inbox.WatchDir, "failed", "processed"}) {
			t.Fatalf("inbox = %v", got)
		}
	})
}
