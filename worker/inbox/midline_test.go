package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker/inbox"
)

// fakeClock is a clock the test moves on: the inbox measures how long a
// file has been unchanged with it, so no test sleeps out a settle time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: clock} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// cutAfter is the offset just past marker in s.
func cutAfter(t *testing.T, s, marker string) int {
	t.Helper()
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("%q is not in the file", marker)
	}
	return i + len(marker)
}

// TestInbox_Poll_writerStopsMidLine: a writer that flushes fixed-size
// buffers stops in the middle of a line ("e5,…,6.25" is on disk as
// "e5,…,6", itself a valid row), pauses longer than the normal settle,
// then finishes the line and writes more rows. Every row is imported once,
// with its full value, and nothing goes to failed/.
func TestInbox_Poll_writerStopsMidLine(t *testing.T) {
	var csvHoursLast, ndjson strings.Builder
	csvHoursLast.WriteString("id,employee_id,date,code,hours\n")
	for i := range 20 {
		fmt.Fprintf(&csvHoursLast, "e%d,%s,2026-11-%02d,T1,%d.25\n", i, nordlys[i%4], i%28+1, i+1)
		fmt.Fprintf(&ndjson, `{"id":"n%d","employee_id":%q,"date":"2026-11-%02d","code":"T1","hours":%d.25}`+"\n", i, nordlys[i%4], i%28+1, i+1)
	}
	presets := loadRules(t, "../../deploy/examples/rules.yaml")
	presets.Aggregate = false // a pay part per row: each row's fate shows
	tests := []struct {
		name, file, content, cutAfter string
		rules                         *mapping.Rules // nil: the default rules without aggregation
	}{
		{"csv, hours last", "hours.csv", csvHoursLast.String(), "e5," + nordlys[1] + ",2026-11-06,T1,6", nil},
		{"ndjson", "hours.ndjson", ndjson.String(), `{"id":"n5","employee_id":"` + nordlys[1] + `","date":"2026-11-06","code":"T1","hours":6`, nil},
		// A preset derives entry ids from row content: a cut row and the
		// whole row would be two entries.
		{"toggl preset, amount last", "toggl.csv", readFile(t, "../../deploy/examples/toggl.csv"), "02:40:00,evening,666", presets},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What one import of the whole file gives.
			ref := newRealEnv(t, tt.rules, true)
			rep, err := ref.im.Import(context.Background(), "file", "inbox/"+tt.file, []byte(tt.content))
			if err != nil || len(rep.Problems) > 0 || rep.ImportID == 0 {
				t.Fatalf("reference import: %+v %v %v", rep, rep.Problems, err)
			}
			refEntries := ref.entryIDs(t, rep.ImportID)

			e := newRealEnv(t, tt.rules, true)
			dir := t.TempDir()
			clk := newFakeClock()
			in := newInbox(t, inbox.Config{Dir: dir, Now: clk.Now}, e.im)
			cut := cutAfter(t, tt.content, tt.cutAfter)
			w := openWriter(t, dir, tt.file, tt.content[:cut])
			results := poll(t, in).Files
			clk.Add(5 * time.Second) // the pause: past the normal settle
			results = append(results, poll(t, in).Files...)
			if _, err := w.WriteString(tt.content[cut:]); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				clk.Add(time.Minute)
				results = append(results, poll(t, in).Files...)
			}
			checkOnce(t, e, dir, results, ref.payParts(), len(refEntries))
			if got := ls(t, filepath.Join(dir, "failed")); len(got) != 0 {
				t.Errorf("failed/ holds %v", got)
			}
		})
	}
}

// TestInbox_Poll_noFinalLineBreak: a complete file that ends without a
// line break (a JSON document often does) is imported, only later: once
// it has been unchanged for SettleIncomplete and over two looks. The
// result says why it waits; the debug log says so once.
func TestInbox_Poll_noFinalLineBreak(t *testing.T) {
	tests := []struct{ name, file, content string }{
		{"csv", "hours.csv", strings.TrimSuffix(hoursHeader+hoursRows(0, 6), "\n")},
		{"json document", "hours.json", `{"entries": [` +
			`{"id":"j0","employee_id":"` + nordlys[0] + `","date":"2026-11-01","hours":1.25,"code":"T1"},` +
			`{"id":"j1","employee_id":"` + nordlys[1] + `","date":"2026-11-02","hours":2.25,"code":"T1"}]}`},
	}
	want := map[string]map[string]int{"csv": wantParts(6), "json document": wantParts(2)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newRealEnv(t, nil, true)
			dir := t.TempDir()
			clk := newFakeClock()
			logs := &syncBuffer{}
			in := newInbox(t, inbox.Config{Dir: dir, Now: clk.Now, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, e.im)
			write(t, dir, tt.file, tt.content)
			var results []inbox.FileResult
			for i, step := range []time.Duration{0, 5 * time.Second, 20 * time.Second, 10 * time.Second} {
				clk.Add(step)
				res := poll(t, in)
				results = append(results, res.Files...)
				fr := res.Files[0]
				switch {
				case i < 3 && fr.Outcome != inbox.OutcomeWaiting:
					t.Fatalf("poll %d, %s after the file was first seen: %+v", i+1, clk.Now().Sub(clock), fr)
				case i > 0 && i < 3 && !strings.Contains(fr.Error, "no line break"):
					t.Errorf("poll %d does not say why the file waits: %+v", i+1, fr)
				case i == 3 && fr.Outcome != inbox.OutcomeProcessed:
					t.Fatalf("poll %d, 35s after the file was first seen: %+v", i+1, fr)
				}
			}
			checkOnce(t, e, dir, results, want[tt.name], len(want[tt.name]))
			if n := strings.Count(logs.String(), "does not end with a line break"); n != 1 {
				t.Errorf("the log says %d times why the file waits, want once:\n%s", n, logs)
			}
		})
	}
	// However long the first pause, the file also waits over one more
	// look than a complete file: the settle is longer than a poll interval.
	t.Run("one more look", func(t *testing.T) {
		dir := t.TempDir()
		clk := newFakeClock()
		im := &fakeImporter{}
		in := newInbox(t, inbox.Config{Dir: dir, Now: clk.Now}, im)
		write(t, dir, "hours.csv", "a,b\n1,2")
		write(t, dir, "done.csv", "a,b\n1,2\n")
		poll(t, in)
		clk.Add(time.Hour)
		if o := outcomes(poll(t, in)); o["hours.csv"] != inbox.OutcomeWaiting || o["done.csv"] != inbox.OutcomeProcessed {
			t.Fatalf("the second poll: %v", o)
		}
		clk.Add(time.Hour)
		if o := outcomes(poll(t, in)); o["hours.csv"] != inbox.OutcomeProcessed {
			t.Fatalf("the third poll: %v", o)
		}
		if calls := im.Calls(); len(calls) != 2 || calls[1].payload != "a,b\n1,2" {
			t.Fatalf("calls = %+v", calls)
		}
	})
	// paysync run --once: one poll (SettleLook) waits for such a file,
	// SettleIncomplete at most, and takes it with the others.
	t.Run("one poll with SettleLook", func(t *testing.T) {
		e := newRealEnv(t, nil, true)
		dir := t.TempDir()
		in := newInbox(t, inbox.Config{Dir: dir, SettleLook: 10 * time.Millisecond, SettleIncomplete: 300 * time.Millisecond, Now: time.Now}, e.im)
		write(t, dir, "a.csv", hoursHeader+hoursRows(0, 3))
		write(t, dir, "b.csv", strings.TrimSuffix(hoursHeader+hoursRows(3, 6), "\n"))
		res := poll(t, in)
		if o := outcomes(res); o["a.csv"] != inbox.OutcomeProcessed || o["b.csv"] != inbox.OutcomeProcessed {
			t.Fatalf("%+v", res)
		}
		checkOnce(t, e, dir, res.Files, wantParts(6), 6)
	})
}

// TestInbox_Poll_lastLineContinued: a writer paused in the middle of the
// last line for longer than the long settle, so the file was read with
// that line cut short, then went on with it. The inbox cannot take back
// what the import committed, but it says so (WARN, and the file's next
// report quotes the line), whether the file was still in the inbox or
// already moved.
func TestInbox_Poll_lastLineContinued(t *testing.T) {
	const first, rest = "a,b\nx,6", ".25\ny,1\n"
	for _, moved := range []bool{false, true} {
		t.Run(fmt.Sprintf("moved=%v", moved), func(t *testing.T) {
			dir := t.TempDir()
			clk := newFakeClock()
			logs := &syncBuffer{}
			fake := &fakeImporter{respond: ledgerLike()}
			w := openWriter(t, dir, "hours.csv", first)
			goOn := func() {
				if _, err := w.WriteString(rest); err != nil {
					t.Error(err)
				}
				w.Close()
			}
			var im inbox.Sink = fake
			if !moved {
				im = &callbackImporter{fake, goOn}
			}
			in := newInbox(t, inbox.Config{Dir: dir, Now: clk.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))}, im)
			var results []inbox.FileResult
			for range 3 {
				results = append(results, poll(t, in).Files...)
				clk.Add(time.Minute)
			}
			if moved {
				goOn()
			}
			for range 3 {
				clk.Add(time.Minute)
				results = append(results, poll(t, in).Files...)
			}
			var reports []string
			for _, fr := range results {
				if fr.Report != "" {
					reports = append(reports, readFile(t, fr.Report))
				}
			}
			if len(reports) == 0 || !strings.Contains(reports[len(reports)-1], `it now reads "x,6.25"`) ||
				!strings.Contains(reports[len(reports)-1], "Import 1 holds the entry of that line as it was cut short") {
				t.Errorf("the reports:\n%s", strings.Join(reports, "\n----\n"))
			}
			if !strings.Contains(logs.String(), "level=WARN msg=\"inbox: the last line paysync read") || strings.Contains(logs.String(), "6.25") {
				t.Errorf("the log (a warning, without the file's content):\n%s", logs)
			}
		})
	}
}

// callbackImporter runs after once, after its first import.
type callbackImporter struct {
	im    *fakeImporter
	after func()
}

func (c *callbackImporter) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (inbox.Imported, error) {
	rep, err := c.im.Import(ctx, kind, name, payload)
	if c.after != nil {
		after := c.after
		c.after = nil
		after()
	}
	return rep, err
}
