package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
	"github.com/shopspring/decimal"
)

var nordlys = []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}

// writeCSV writes an n-line CSV of T1 hours for the four Nordlys people to
// a file in dir, without holding it in memory, and returns its path and
// the expected minutes per person (index i%4). Every 180th line has zero
// hours (skipped).
func writeCSV(t testing.TB, dir, prefix string, n int) (string, [4]int64) {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.csv", prefix, n))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "id,employee_id,date,hours,code")
	var minutes [4]int64
	for i := 0; i < n; i++ {
		h, m := i%9, i%60
		fmt.Fprintf(w, "%s-%d,%s,2026-11-%02d,%d:%02d,T1\n", prefix, i, nordlys[i%4], i%28+1, h, m)
		minutes[i%4] += int64(h*60 + m)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path, minutes
}

// heapPeaks are the highest heap figures seen while a function ran.
type heapPeaks struct {
	inUse uint64 // objects and the unused part of their spans: runtime.MemStats.HeapInuse
	live  uint64 // the heap marked live by a GC: what the import holds, whatever the GC's pace
}

// peakHeap runs f and returns the peaks of the heap in use (sampled every
// 5 ms and at the end) and of the live heap, after a GC before it starts.
// Reading runtime/metrics does not stop the world.
func peakHeap(f func()) heapPeaks {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var peak heapPeaks
	sample := func() {
		metrics.Read(samples)
		peak.inUse = max(peak.inUse, samples[0].Value.Uint64()+samples[1].Value.Uint64())
		peak.live = max(peak.live, samples[2].Value.Uint64())
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	f()
	close(stop)
	<-done
	sample()
	return peak
}

// rawLedger opens the ledger file read-only with the plain driver.
func rawLedger(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func count(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// importFile imports path through the streaming path into a fresh ledger
// and returns the report, the ledger file and how the live heap grew.
func importFile(t *testing.T, path string, aggregate bool) (worker.Report, string, heapGrowth) {
	t.Helper()
	e := setup(t, sandbox.Options{})
	rules := mapping.DefaultRules()
	rules.Aggregate = aggregate
	im := e.importer(t, rules, 100)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// Warm up what every import needs once (the mapper's employees and
	// pay codes, the ledger's connection), so both sizes start alike. Its
	// entry is dated in October: a group of its own, which the import
	// leaves alone.
	if _, err := im.Plan(ctx(t), "file", "warm.csv", []byte("id,employee_id,date,hours,code\nwarm,"+nordlys[0]+",2026-10-01,1,T1\n")); err != nil {
		t.Fatal(err)
	}
	// About 32 looks at the heap per pass over the file.
	probe := &heapProbe{r: f, every: max(fi.Size()/32, 16<<10)}
	// The import commits, then its reconcile plans every group: more than
	// ctx's minute for 200,000 lines without aggregation on a slow machine.
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	g := heapGrowth{input: fi.Size(), base: liveHeap()}
	var rep worker.Report
	// The looks come while the file is read; the peak of the whole import,
	// its reconcile included, is logged (sampled, not asserted).
	whole := peakHeap(func() { rep, err = im.PlanFrom(c, "file", path, probe) })
	if err != nil {
		t.Fatal(err)
	}
	g.peak, g.looks = probe.peak, probe.looks
	t.Logf("%s (aggregate %v): %d entries (%.1f MiB) in %v (%.0f lines/s); live heap %.1f MiB before, at most %.1f MiB more over %d looks; whole import with its reconcile: peak live heap %.1f MiB",
		filepath.Base(path), aggregate, rep.Entries, mib(uint64(g.input)), time.Since(start).Round(time.Millisecond), float64(rep.Entries)/time.Since(start).Seconds(),
		mib(g.base), mib(g.grew()), g.looks, mib(whole.live))
	return rep, e.led.Path(), g
}

// liveHeap is the heap still reachable after a full collection: what the
// program holds, whatever the GC's pace or the machine's load (unlike the
// heap in use, or the live heap of a collection that ran while the import
// allocated).
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// heapProbe is the file an import reads: every so many bytes (and at the
// end), it measures the live heap while the importer waits for the read.
// The looks come at points of the import, not of the clock.
type heapProbe struct {
	r     io.ReadSeeker
	every int64
	since int64 // bytes read since the last look
	peak  uint64
	looks int
}

func (p *heapProbe) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.since += int64(n)
	if p.since >= p.every || err != nil {
		p.peak = max(p.peak, liveHeap())
		p.looks++
		p.since = 0
	}
	return n, err
}

func (p *heapProbe) Seek(offset int64, whence int) (int64, error) { return p.r.Seek(offset, whence) }

// heapGrowth is how the live heap grew while a file was imported.
type heapGrowth struct {
	input      int64  // the file's size
	base, peak uint64 // live heap before, and at most during the import
	looks      int
}

func (g heapGrowth) grew() uint64 { return g.peak - min(g.peak, g.base) }

// TestImporter_FlatMemory imports 60,000 and 200,000 lines from files: the
// live heap of the larger import must not grow with its size, and the
// ledger must hold exactly every entry, every entry's counting line and
// every group's pay part, with the right totals.
//
// The heap is measured after forced collections at points of the import
// (heapProbe), so the result does not depend on when the GC runs or how
// loaded the machine is: holding the file, or its entries, in memory grows
// the large import's live heap by megabytes (its file alone is 7 MiB).
// Taking it out of the importer (reading the file whole first) makes it
// fail.
func TestImporter_FlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 520,000 lines")
	}
	if raceEnabled() {
		t.Skip("SQLite is 20 times slower under the race detector, and the heap is not what it measures")
	}
	dir := t.TempDir()
	for _, aggregate := range []bool{true, false} {
		t.Run(fmt.Sprintf("aggregate=%v", aggregate), func(t *testing.T) {
			var gs []heapGrowth
			for _, n := range []int{60_000, 200_000} {
				path, minutes := writeCSV(t, dir, "fm", n)
				rep, ledgerPath, g := importFile(t, path, aggregate)
				gs = append(gs, g)
				checkImported(t, rep, ledgerPath, n, minutes, aggregate)
			}
			small, large := gs[0], gs[1]
			// Both files are larger than the ledger's 1 MiB payload chunk,
			// so both imports use the same buffers. The looks fall at
			// different points of the importer's cycles (a staged chunk of
			// entries, a payload chunk): 1 MiB of slack. Beyond it, the
			// large import may hold a quarter of what its file has more,
			// never the file (holding it adds 5 MiB here).
			if limit := small.grew() + 1<<20 + uint64(large.input-small.input)/4; large.grew() > limit {
				t.Errorf("the live heap grew by %.1f MiB importing 200,000 lines (%.1f MiB), by %.1f MiB importing 60,000 (%.1f MiB): want at most %.1f MiB (memory grows with the input)",
					mib(large.grew()), mib(uint64(large.input)), mib(small.grew()), mib(uint64(small.input)), mib(limit))
			}
			if large.looks < 8 {
				t.Errorf("only %d looks at the heap during the large import: does the importer read the file it is given?", large.looks)
			}
		})
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// checkImported checks the ledger after importing writeCSV's n lines.
func checkImported(t *testing.T, rep worker.Report, path string, n int, minutes [4]int64, aggregate bool) {
	t.Helper()
	skipped := (n + 179) / 180 // lines i with i%9 == 0 and i%60 == 0
	mapped := n - skipped
	if rep.Entries != n || rep.Duplicates != 0 || len(rep.ProblemList()) != 0 || rep.Skipped["zero hours"] != skipped {
		t.Fatalf("report: %d entries, %d duplicates, skipped %v, problems %v", rep.Entries, rep.Duplicates, rep.Skipped, rep.ProblemList())
	}
	wantParts := 4
	if !aggregate {
		wantParts = mapped
	}
	if rep.PayParts != wantParts || len(rep.Batches) != (wantParts+99)/100 {
		t.Fatalf("report: %d pay parts in %d batches, want %d in %d", rep.PayParts, len(rep.Batches), wantParts, (wantParts+99)/100)
	}
	db := rawLedger(t, path)
	id := rep.ImportID
	for _, c := range []struct {
		what string
		got  int
		want int
	}{
		{"entries", count(t, db, `SELECT count(*) FROM entries WHERE source_id = ?`, id), n},
		{"mapped entries", count(t, db, `SELECT count(*) FROM entries WHERE source_id = ? AND status = 'mapped'`, id), mapped},
		{"skipped entries", count(t, db, `SELECT count(*) FROM entries WHERE source_id = ? AND status = 'skipped' AND note = 'zero hours'`, id), skipped},
		{"pay parts", count(t, db, `SELECT count(*) FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE b.source_id = ? AND p.state = 'pending'`, id), wantParts},
		{"batches over 100", count(t, db, `SELECT count(*) FROM (SELECT batch_id FROM pay_parts GROUP BY batch_id HAVING count(*) > 100)`), 0},
		// The desired state: each mapped entry's one version of this import
		// has its one line, counting; each group of them has its pay part.
		{"versions", count(t, db, `SELECT count(*) FROM versions WHERE source_id = ?`, id), mapped},
		{"counting lines", count(t, db, `SELECT count(*) FROM lines l JOIN versions v ON v.id = l.version WHERE v.source_id = ? AND l.counts = 1`, id), mapped},
		{"mapped entries without a counting line", count(t, db, `SELECT count(*) FROM entries e WHERE e.source_id = ? AND e.status = 'mapped'
			AND NOT EXISTS (SELECT 1 FROM versions v JOIN lines l ON l.version = v.id WHERE v.entry = e.id AND l.counts = 1)`, id), 0},
		{"groups", count(t, db, `SELECT count(DISTINCT l.group_id) FROM lines l JOIN versions v ON v.id = l.version WHERE v.source_id = ? AND l.counts = 1`, id), wantParts},
		{"groups without one pay part", count(t, db, `SELECT count(*) FROM (SELECT DISTINCT l.group_id AS g FROM lines l JOIN versions v ON v.id = l.version
			WHERE v.source_id = ? AND l.counts = 1) WHERE (SELECT count(*) FROM pay_parts p WHERE p.group_id = g AND p.state = 'pending') <> 1`, id), 0},
		{"entries held", count(t, db, `SELECT count(*) FROM entries WHERE note = 'held'`), 0},
		{"rejects", count(t, db, `SELECT count(*) FROM rejects WHERE source_id = ?`, id), 0},
		{"source entries", count(t, db, `SELECT entries FROM sources WHERE id = ?`, id), n},
		{"temporary tables left", count(t, db, `SELECT count(*) FROM sqlite_temp_master`), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	// Units per person: the hours summed exactly and rounded once.
	rows, err := db.Query(`SELECT p.employee_id, p.units FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE b.source_id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sums := map[string]decimal.Decimal{}
	for rows.Next() {
		var emp, units string
		if err := rows.Scan(&emp, &units); err != nil {
			t.Fatal(err)
		}
		sums[emp] = sums[emp].Add(decimal.RequireFromString(units))
	}
	for i, emp := range nordlys {
		want := decimal.NewFromInt(minutes[i]).DivRound(decimal.NewFromInt(60), 2)
		got := sums[emp]
		if aggregate && !got.Equal(want) {
			t.Errorf("%s: units %s, want %s", emp, got, want)
		}
		// Without aggregation each entry is rounded on its own: H:MM to two
		// places is within half a hundredth of the exact hours.
		if !aggregate && got.Sub(want).Abs().GreaterThan(decimal.NewFromFloat(0.005).Mul(decimal.NewFromInt(int64(n)))) {
			t.Errorf("%s: units %s, want about %s", emp, got, want)
		}
	}
}

// BenchmarkImportCSV imports a CSV file of -bench.lines lines (default
// 100,000) per iteration into a fresh ledger: lines/s and the peak heap.
func BenchmarkImportCSV(b *testing.B) {
	for _, aggregate := range []bool{true, false} {
		b.Run(fmt.Sprintf("aggregate=%v", aggregate), func(b *testing.B) {
			n := *benchLines
			path, _ := writeCSV(b, b.TempDir(), "bench", n)
			var peak heapPeaks
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				e := benchEnv(b)
				rules := mapping.DefaultRules()
				rules.Aggregate = aggregate
				m := mapping.NewMapper(rules, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys)
				im := &worker.Importer{L: e.led, Mapper: m, Rules: rules, Wire: e.schema, BatchSize: 100}
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				p := peakHeap(func() {
					var rep worker.Report
					rep, err = im.PlanFrom(context.Background(), "file", path, f)
					if err == nil && rep.Entries != n {
						err = fmt.Errorf("%d entries, want %d", rep.Entries, n)
					}
				})
				elapsed += time.Since(start)
				b.StopTimer()
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				peak.inUse, peak.live = max(peak.inUse, p.inUse), max(peak.live, p.live)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(mib(peak.inUse), "peak-heap-MiB")
			b.ReportMetric(mib(peak.live), "peak-live-heap-MiB")
		})
	}
}

var benchLines = flag.Int("bench.lines", 100_000, "lines of the CSV BenchmarkImportCSV imports")

// benchEnv is setup for benchmarks: a sandbox over loopback HTTP, the real
// client and a fresh SQLite ledger.
func benchEnv(b *testing.B) *env {
	b.Helper()
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	b.Cleanup(srv.Close)
	o := sb.Options()
	cl, err := payroll.New(payroll.Config{URL: srv.URL, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RefreshToken: sb.IssueRefreshToken(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	led, err := ledger.Open(context.Background(), filepath.Join(b.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { led.Close() })
	schema, err := cl.Schema(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return &env{sb: sb, url: srv.URL, cl: cl, led: led, schema: schema}
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// onlyReader hides every method but Read (standard input, a pipe).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// failingReader fails after n bytes.
type failingReader struct {
	r io.Reader
	n int
}

var errDisk = errors.New("input/output error")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errDisk
	}
	p = p[:min(len(p), f.n)]
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

func ledgerCounts(t *testing.T, e *env) string {
	t.Helper()
	db := rawLedger(t, e.led.Path())
	var parts []string
	for _, tb := range []string{"sources", "source_chunks", "entries", "batches", "pay_parts", "pay_part_entries", "rejects"} {
		parts = append(parts, fmt.Sprintf("%s %d", tb, count(t, db, "SELECT count(*) FROM "+tb)))
	}
	return strings.Join(parts, ", ")
}

func TestImporter_PlanFrom(t *testing.T) {
	t.Run("problems beyond MaxProblems are counted, every one is a reject", func(t *testing.T) {
		e := setup(t, sandbox.Options{})
		im := e.importer(t, nil, 10)
		im.MaxProblems = 10
		var b strings.Builder
		for i := 0; i < 1100; i++ { // past one chunk
			switch {
			case i%100 == 1: // a reader problem
				fmt.Fprintf(&b, `{"id":"p-%d","employee_id":"%s","date":"2026-11-02","hours":"x","code":"T1"}`+"\n", i, nordlys[0])
			case i%100 == 2: // a mapping problem
				fmt.Fprintf(&b, `{"id":"p-%d","employee_id":"nobody","date":"2026-11-02","hours":"1","code":"T1"}`+"\n", i)
			default:
				fmt.Fprintf(&b, `{"id":"p-%d","employee_id":"%s","date":"2026-11-02","hours":"1","code":"T1"}`+"\n", i, nordlys[i%4])
			}
		}
		rep, err := im.PlanFrom(ctx(t), "file", "many.ndjson", strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		probs := rep.ProblemList()
		if len(probs) != 10 || rep.ProblemsOmitted != 12 || rep.ProblemCount() != 22 || rep.PayParts != 1078 {
			t.Fatalf("%d problems listed, %d omitted, %d pay parts", len(probs), rep.ProblemsOmitted, rep.PayParts)
		}
		// The reader's problems come first, as they did when the whole file
		// was read before anything else.
		for i, p := range probs {
			if !strings.Contains(p.Error(), fmt.Sprintf("p-%d: hours", i*100+1)) {
				t.Errorf("problem %d: %v", i, p)
			}
		}
		rejects, err := e.led.Rejects(ctx(t), rep.ImportID)
		if err != nil || len(rejects) != 22 || rejects[10].EntryID != "p-1001" || rejects[11].EntryID != "p-2" {
			t.Fatalf("%d rejects, %v", len(rejects), err)
		}
	})

	t.Run("a failure to read the input commits nothing", func(t *testing.T) {
		for _, allOrNothing := range []bool{false, true} {
			e := setup(t, sandbox.Options{})
			im := e.importer(t, nil, 10)
			im.AllOrNothing = allOrNothing
			before := ledgerCounts(t, e)
			payload := ndjson(1200, "io")
			for _, r := range []io.Reader{
				&failingReader{r: bytes.NewReader(payload), n: 100_000},       // cannot seek: fails while importing
				onlyReader{&failingReader{r: bytes.NewReader(payload), n: 5}}, // fails before the format is known
			} {
				rep, err := im.PlanFrom(ctx(t), "stdin", "stdin", r)
				var ie *worker.InputError
				if !errors.As(err, &ie) || !errors.Is(err, errDisk) || rep.ImportID != 0 {
					t.Fatalf("all-or-nothing %v: PlanFrom = %+v, %v; want an InputError", allOrNothing, rep, err)
				}
			}
			if after := ledgerCounts(t, e); after != before {
				t.Errorf("all-or-nothing %v: the ledger changed: %s, was %s", allOrNothing, after, before)
			}
		}
	})

	t.Run("input that cannot seek", func(t *testing.T) {
		e := setup(t, sandbox.Options{})
		im := e.importer(t, nil, 10)
		payload := ndjson(1100, "ns")
		rep, err := im.PlanFrom(ctx(t), "stdin", "stdin", onlyReader{bytes.NewReader(payload)})
		if err != nil || rep.ImportID == 0 || rep.Entries != 1100 || rep.PayParts != 1100 {
			t.Fatalf("first: %+v, %v", rep, err)
		}
		// The same content again is recognised at the end: a duplicate,
		// and nothing is stored.
		before := ledgerCounts(t, e)
		again, err := im.PlanFrom(ctx(t), "stdin", "stdin", onlyReader{bytes.NewReader(payload)})
		if err != nil || !again.Duplicate || again.ImportID != rep.ImportID || again.Entries != 1100 || len(again.ProblemList()) != 0 {
			t.Fatalf("again: %+v, %v", again, err)
		}
		if after := ledgerCounts(t, e); after != before {
			t.Errorf("the ledger changed: %s, was %s", after, before)
		}
		// All or nothing: copied aside to be read again for the rejects.
		im.AllOrNothing = true
		bad := append(ndjson(1100, "ns2"), `{"id":"ns2-x","employee_id":"nobody","date":"2026-11-02","hours":"1","code":"T1"}`+"\n"...)
		rep, err = im.PlanFrom(ctx(t), "stdin", "stdin", onlyReader{bytes.NewReader(bad)})
		if err != nil || rep.ImportID != 0 || rep.RejectedAs == 0 || rep.Entries != 1101 || len(rep.ProblemList()) != 1 {
			t.Fatalf("all or nothing: %+v, %v", rep, err)
		}
		src, err := e.led.Source(ctx(t), rep.RejectedAs)
		if err != nil || src.Status != paysync.SourceRejected || src.Entries != 0 || src.Rejects != 1 || src.Size != int64(len(bad)) {
			t.Fatalf("rejected source %+v, %v", src, err)
		}
	})
}

// TestInbox_StreamsFiles: the inbox hands a *worker.Importer the open file;
// a file that changes while it is imported commits nothing and waits.
func TestInbox_StreamsFiles(t *testing.T) {
	e := setup(t, sandbox.Options{})
	im := e.importer(t, nil, 10)
	im.AllOrNothing = true
	dir := t.TempDir()
	path, _ := writeCSV(t, dir, "in", 1000)
	sink := im.InboxSink()
	var touched bool
	changing := importerFunc(func(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (inbox.Imported, error) {
		if !touched { // the first time, the file grows while it is read
			touched = true
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "in-late,%s,2026-11-02,1,T1\n", nordlys[0])
			f.Close()
		}
		return sink.ImportFrom(ctx, kind, name, r)
	})
	in, err := inbox.New(inbox.Config{Dir: dir, Schedule: "@every 1h"}, changing)
	if err != nil {
		t.Fatal(err)
	}
	before := ledgerCounts(t, e)
	poll := func() inbox.FileResult {
		t.Helper()
		res, err := in.Poll(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		return res.Files[0]
	}
	if fr := poll(); fr.Outcome != inbox.OutcomeWaiting { // new
		t.Fatalf("first poll: %+v", fr)
	}
	if fr := poll(); fr.Outcome != inbox.OutcomeWaiting { // changed while imported
		t.Fatalf("second poll: %+v", fr)
	}
	if after := ledgerCounts(t, e); after != before {
		t.Errorf("the ledger changed: %s, was %s", after, before)
	}
	poll() // settles
	fr := poll()
	if fr.Outcome != inbox.OutcomeProcessed || fr.ImportID == 0 {
		t.Fatalf("last poll: %+v", fr)
	}
	src, err := e.led.Source(ctx(t), fr.ImportID)
	if err != nil || src.Entries != 1001 {
		t.Fatalf("source %+v, %v", src, err)
	}
	report, err := os.ReadFile(fr.Report)
	if err != nil || !strings.Contains(string(report), "entries:   1001 read") {
		t.Fatalf("report: %s %v", report, err)
	}
}

// importerFunc is an inbox.StreamSink (and Sink) made of a function.
type importerFunc func(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (inbox.Imported, error)

func (f importerFunc) ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r io.Reader) (inbox.Imported, error) {
	return f(ctx, kind, name, r)
}

func (f importerFunc) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (inbox.Imported, error) {
	return f(ctx, kind, name, bytes.NewReader(payload))
}

// ledgerTokens keeps the payroll tokens in the ledger, as paysync does.
type ledgerTokens struct{ l *ledger.Ledger }

func (s ledgerTokens) Load(ctx context.Context) (payroll.StoredToken, error) {
	rt, seed, at, err := s.l.Credentials(ctx, "payroll")
	if errors.Is(err, ledger.ErrNoCredentials) {
		return payroll.StoredToken{}, payroll.ErrNoStoredToken
	}
	if err != nil {
		return payroll.StoredToken{}, err
	}
	st := payroll.StoredToken{RefreshToken: rt, Seed: seed, UpdatedAt: at}
	st.AccessToken, st.Issued, st.Expiry, err = s.l.AccessToken(ctx, "payroll")
	return st, err
}

func (s ledgerTokens) Save(ctx context.Context, st payroll.StoredToken) error {
	return s.l.SaveCredentials(ctx, "payroll", st.RefreshToken, st.Seed, st.AccessToken, st.Issued, st.Expiry)
}

// slowReader pauses once, after the first n bytes.
type slowReader struct {
	r     io.Reader
	n     int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n <= 0 && s.pause > 0 {
		time.Sleep(s.pause)
		s.pause = 0
	}
	if s.n > 0 {
		p = p[:min(len(p), s.n)]
	}
	n, err := s.r.Read(p)
	s.n -= n
	return n, err
}

// TestImporter_TokenRefreshMidImport: the payroll token (kept in the ledger,
// rotated on refresh) expires in the middle of an import, when the mapper
// first needs a second company's employees. The refresh saves the new
// token in the ledger at once: an import never holds the ledger while it
// calls the payroll API.
func TestImporter_TokenRefreshMidImport(t *testing.T) {
	e := setup(t, sandbox.Options{Rotate: true, AccessTTL: time.Second})
	o := e.sb.Options()
	cl, err := payroll.New(payroll.Config{URL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RefreshToken: e.sb.IssueRefreshToken(), Store: ledgerTokens{e.led}, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := cl.Schema(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	rules := mapping.DefaultRules()
	im := &worker.Importer{L: e.led, Mapper: mapping.NewMapper(rules, mapping.NewCache(cl), schema, sandbox.CompanyNordlys), Rules: rules, Wire: schema, BatchSize: 10}
	// 1,500 Nordlys entries, then (after the token expired) 1,500 of Fjordtech.
	var b bytes.Buffer
	for i := 0; i < 3000; i++ {
		company, emp := sandbox.CompanyNordlys, nordlys[i%4]
		if i >= 1500 {
			company, emp = sandbox.CompanyFjordtech, sandbox.EmpJonasLarsen
		}
		fmt.Fprintf(&b, `{"id":"tr-%d","company_id":"%s","employee_id":"%s","date":"2026-11-02","hours":"1","code":"T1"}`+"\n", i, company, emp)
	}
	half := bytes.Index(b.Bytes(), []byte(`"tr-1500"`))
	refreshes := cl.Tokens().Refreshes()
	// Had the refresh waited for the ledger, the mapper's call would have
	// run into the client's 3 s timeout and the entries would be problems
	// (no wall-clock assertion: those flake on a loaded CI machine).
	rep, err := im.PlanFrom(ctx(t), "stdin", "stdin", &slowReader{r: bytes.NewReader(b.Bytes()), n: half, pause: 1100 * time.Millisecond})
	if probs := rep.ProblemList(); err != nil || len(probs) > 0 || rep.PayParts != 5 {
		first := ""
		if len(probs) > 0 {
			first = probs[0].Error()
		}
		t.Fatalf("import: %d pay parts, %d problems (first: %s), %v", rep.PayParts, rep.ProblemCount(), first, err)
	}
	if cl.Tokens().Refreshes() == refreshes {
		t.Fatal("the token was not refreshed during the import: the test proves nothing")
	}
	// The rotated token was saved: a new client starts from it.
	rt, _, _, err := e.led.Credentials(ctx(t), "payroll")
	if err != nil || rt == "" {
		t.Fatalf("stored token %q, %v", rt, err)
	}
}
