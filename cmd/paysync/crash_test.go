package main

// Crash tests: paysync is run as a real process against an in-process
// sandbox (rotating refresh tokens, latency and dropped responses), killed
// with SIGKILL at random moments, and run again until it finishes. Then
// payroll and the ledger are checked for exactness: every entry paid exactly
// once, nothing foreign claimed, every pay part accounted for.
//
//	go test -race -run Crash ./cmd/paysync/                      # 20 trials each
//	go test -run Crash ./cmd/paysync/ -crash.trials 200          # more
//	go test -run Crash_Revert ./cmd/paysync/ -crash.seed 17 -v   # one trial again
//
// A trial's seed fixes the kill delays, the faults and the sandbox's fault
// draws; where a kill lands still depends on timing, so a seed reproduces a
// failure often, not always.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

var (
	crashTrials = flag.Int("crash.trials", 20, "trials of each TestCrash_* test")
	crashSeed   = flag.Int64("crash.seed", 0, "run only the TestCrash_* trial with this seed (printed by a failing trial)")
)

// forEachCrashTrial runs fn as one subtest per seed: 1..-crash.trials, or
// only -crash.seed.
func forEachCrashTrial(t *testing.T, fn func(t *testing.T, seed int64)) {
	seeds := []int64{*crashSeed}
	if *crashSeed == 0 {
		seeds = seeds[:0]
		for i := 1; i <= max(*crashTrials, 1); i++ {
			seeds = append(seeds, int64(i))
		}
	}
	start := time.Now()
	// Cleanup runs after the parallel subtests have finished.
	t.Cleanup(func() { t.Logf("%d trials in %s", len(seeds), time.Since(start).Round(time.Millisecond)) })
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Trials mostly wait (latency, fsync): two or so at a time
			// (-parallel, default GOMAXPROCS) keep 20 trials near 15 s.
			t.Parallel()
			t.Logf("seed %d (rerun: go test -run '%s' ./cmd/paysync/ -crash.seed %d -v)", seed, t.Name()[:strings.Index(t.Name(), "/")], seed)
			fn(t, seed)
		})
	}
}

// crashStats counts over a test's trials (which run in parallel).
type crashStats struct{ kills, windows atomic.Int64 }

// start skips the test with -short, else logs the counts at its end.
func (s *crashStats) start(t *testing.T) {
	if testing.Short() {
		t.Skip("crash tests run real processes; skipped with -short")
	}
	t.Cleanup(func() {
		t.Logf("%d processes killed; %d kills landed between a token rotation and its save", s.kills.Load(), s.windows.Load())
	})
}

// ---- a sandbox that knows when the killed process's requests are over ----

// crashEnv is one trial: a sandbox served on loopback, a ledger, and the
// environment of the paysync processes.
type crashEnv struct {
	sb     *sandbox.Server
	env    map[string]string
	home   string
	ledger string

	mu    sync.Mutex
	conns int // open connections to the sandbox

	windowHits int64 // kills that landed between token rotation and save
}

func newCrashEnv(t *testing.T, opts sandbox.Options) *crashEnv {
	t.Helper()
	opts.Rotate = true
	c := &crashEnv{sb: sandbox.New(opts), home: t.TempDir()}
	c.ledger = filepath.Join(t.TempDir(), "ledger.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Served here rather than by sb.Start so that connections are counted:
	// after a kill the test waits until the server has finished every
	// request the dead process had sent (a request whose bytes were in
	// flight may still be executed after the client died).
	srv := &http.Server{Handler: c.sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st {
		case http.StateNew:
			c.conns++
		case http.StateClosed, http.StateHijacked:
			c.conns--
		}
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = c.sb.Close(context.Background()) // ends fault waits
		_ = srv.Close()
		<-served
	})
	base := "http://" + ln.Addr().String()
	o := c.sb.Options()
	c.env = map[string]string{
		"PAYSYNC_PAYROLL_URL":   base,
		"PAYSYNC_AUTH_URL":      base,
		"PAYSYNC_AUTH_REALM":    o.Realm,
		"PAYSYNC_CLIENT_ID":     o.ClientID,
		"PAYSYNC_CLIENT_SECRET": o.ClientSecret,
		"PAYSYNC_REFRESH_TOKEN": c.sb.IssueRefreshToken(),
		// No PAYSYNC_TOKEN_FILE: the rotated refresh token lives in the ledger.
		"PAYSYNC_LEDGER":     c.ledger,
		"PAYSYNC_BATCH_SIZE": "10",
		"PAYSYNC_LOG_LEVEL":  "warn",
		// No console beside `paysync run`: its default port is shared.
		"PAYSYNC_CONSOLE_ADDR": "",
	}
	return c
}

func (c *crashEnv) environ() []string {
	env := []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH")}
	for k, v := range c.env {
		env = append(env, k+"="+v)
	}
	return env
}

// quiesce waits until no connection to the sandbox is open, and stays so
// for a moment (a connection still in the listen backlog is not counted).
func (c *crashEnv) quiesce(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	quietSince := time.Time{}
	for {
		c.mu.Lock()
		n := c.conns
		c.mu.Unlock()
		now := time.Now()
		switch {
		case n > 0:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = now
		case now.Sub(quietSince) >= 25*time.Millisecond:
			return
		}
		if now.After(deadline) {
			t.Fatalf("the sandbox still has %d open connection(s) 15s after paysync ended", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type crashRun struct {
	args           []string
	killAfter      time.Duration // < 0: not killed
	killed         bool
	code           int
	took           time.Duration
	stdout, stderr string
}

func (r crashRun) String() string {
	what := fmt.Sprintf("exit %d after %s", r.code, r.took.Round(time.Millisecond))
	if r.killed {
		what = fmt.Sprintf("SIGKILL after %s", r.killAfter)
	}
	return fmt.Sprintf("paysync %s: %s\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), what, r.stdout, r.stderr)
}

// run runs paysync, killing it with SIGKILL after killAfter (unless it
// ended before, or killAfter < 0).
func (c *crashEnv) run(t *testing.T, killAfter time.Duration, args ...string) crashRun {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = c.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start paysync: %v", err)
	}
	if killAfter >= 0 {
		kill := time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer kill.Stop()
	}
	var hung atomic.Bool
	guard := time.AfterFunc(90*time.Second, func() {
		hung.Store(true)
		_ = cmd.Process.Kill()
	})
	err := cmd.Wait()
	guard.Stop()
	r := crashRun{args: args, killAfter: killAfter, took: time.Since(start), stdout: out.String(), stderr: errb.String()}
	if hung.Load() {
		t.Fatalf("paysync hung for 90s:\n%s", r)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait for paysync: %v", err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	r.killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
	r.code = cmd.ProcessState.ExitCode()
	if !r.killed {
		r.killAfter = -1
	}
	return r
}

func (c *crashEnv) grants() int { return c.sb.State().Counters.TokenGrants["refresh_token"] }

// storedToken reads the refresh token kept in the ledger, "" if none. It
// opens the file with plain SQLite (no migration) and only reads.
func (c *crashEnv) storedToken(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(c.ledger); err != nil {
		return ""
	}
	db, err := sql.Open("sqlite", "file:"+c.ledger+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tok string
	err = db.QueryRow(`SELECT refresh_token FROM credentials WHERE name = ?`, credentialName).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) || (err != nil && strings.Contains(err.Error(), "no such table")) {
		return ""
	}
	if err != nil {
		t.Fatalf("read the stored refresh token: %v", err)
	}
	return tok
}

// step runs paysync once (killed after killAfter unless < 0) and waits
// until the sandbox is done with it. A kill that landed after the sandbox
// rotated the refresh token but before the ledger saved the new one leaves
// only a spent token: that is the one unavoidable window of rotation (a
// refresh token reuse grace on the server closes it). It is detected here
// (a grant happened, the stored token did not change); the next run must
// then stop with "connection revoked" having sent nothing, and the test
// re-connects the account as an operator would. Any other revocation fails
// the test.
func (c *crashEnv) step(t *testing.T, killAfter time.Duration, args ...string) crashRun {
	t.Helper()
	g0, tok0 := c.grants(), c.storedToken(t)
	r := c.run(t, killAfter, args...)
	c.quiesce(t)
	g1, tok1 := c.grants(), c.storedToken(t)
	if r.killed {
		t.Logf("%s: killed after %s", strings.Join(args, " "), killAfter.Round(100*time.Microsecond))
	} else {
		t.Logf("%s: exit %d after %s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond))
	}
	if strings.Contains(r.stderr, "connection revoked") {
		t.Fatalf("paysync reports the connection revoked, but no kill landed between a token rotation and its save (a spent refresh token was reused):\n%s", r)
	}
	if r.killed && g1 > g0 && tok1 == tok0 {
		c.windowHits++
		t.Logf("the kill after %s landed between the sandbox's rotation of the refresh token and the ledger's save; expecting 'connection revoked', then re-connecting", killAfter)
		before := c.sb.State()
		rv := c.run(t, -1, args...)
		c.quiesce(t)
		after := c.sb.State()
		if rv.code != 1 || !strings.Contains(rv.stderr, "connection revoked: re-connect the payroll account") {
			t.Fatalf("after a kill in the rotation window: want exit 1 with 'connection revoked', got:\n%s", rv)
		}
		for _, op := range []string{"create_pay_parts", "delete_pay_parts"} {
			if before.Counters.Requests[op] != after.Counters.Requests[op] {
				t.Fatalf("a revoked run sent %s", op)
			}
		}
		c.env["PAYSYNC_REFRESH_TOKEN"] = c.sb.IssueRefreshToken()
	}
	return r
}

// killRuns runs paysync up to n times, each killed after a random delay
// below window: the first window is a whole run's worth, each later one
// what the killed run probably left (plus the start-up), so that kills
// keep landing mid-flight. It stops early when a run ends by itself, and
// returns how many runs were killed.
func (c *crashEnv) killRuns(t *testing.T, rng *rand.Rand, n int, window time.Duration, check func(*testing.T, crashRun), args ...string) int64 {
	t.Helper()
	const startup = 60 * time.Millisecond
	var killed int64
	for range n {
		d := time.Duration(rng.Int64N(int64(window)))
		r := c.step(t, d, args...)
		check(t, r)
		if !r.killed {
			break
		}
		killed++
		window = max(window-d+startup, startup)
	}
	return killed
}

// finish runs paysync to completion: exit 0, or exit 1 when ok says the
// failure is a retryable one (then it runs again, a bounded number of times).
func (c *crashEnv) finish(t *testing.T, retryable func(r crashRun) bool, args ...string) crashRun {
	t.Helper()
	var r crashRun
	for i := 0; i < 6; i++ {
		r = c.step(t, -1, args...)
		assertClean(t, result{r.code, r.stdout, r.stderr}, c.env["PAYSYNC_CLIENT_SECRET"], c.env["PAYSYNC_REFRESH_TOKEN"])
		if r.code == 0 {
			return r
		}
		if !retryable(r) {
			t.Fatalf("run to completion failed:\n%s", r)
		}
		t.Logf("run %d to completion left work (retrying):\n%s", i+1, r.stderr)
	}
	t.Fatalf("paysync did not finish in 6 runs; last:\n%s", r)
	return r
}

// ---- the input ----

// hourForms are the hours of the generated entries and the units paysync
// must make of each (half_up to 2 places).
var hourForms = []struct{ in, units string }{
	{"7.5", "7.5"}, {"0:20", "0.33"}, {"1.25", "1.25"}, {"8", "8"}, {"2:45", "2.75"},
	{"0.5", "0.5"}, {"3:10", "3.17"}, {"4:20", "4.33"}, {"6.75", "6.75"}, {"0:40", "0.67"},
}

var crashEmployees = []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}

type crashEntry struct {
	id, employee, hours, units string
}

// crashEntries returns n entries with unique ids, cycling over the four
// Nordlys employees, with hours chosen so that many pay parts are
// identical (same employee, code and units) to others.
func crashEntries(n int) []crashEntry {
	out := make([]crashEntry, n)
	for i := range out {
		h := hourForms[(i*3+i/4)%len(hourForms)]
		out[i] = crashEntry{id: fmt.Sprintf("crash-%04d", i+1), employee: crashEmployees[i%len(crashEmployees)], hours: h.in, units: h.units}
	}
	return out
}

// writeEntries writes canonical NDJSON: entries carrying employee_id and
// code, which need no rules.
func writeEntries(t *testing.T, entries []crashEntry) string {
	t.Helper()
	var b strings.Builder
	day := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	for i, e := range entries {
		fmt.Fprintf(&b, `{"id":%q,"employee_id":%q,"date":%q,"hours":%q,"code":"T1"}`+"\n",
			e.id, e.employee, day.AddDate(0, 0, i%20).Format("2006-01-02"), e.hours)
	}
	path := filepath.Join(t.TempDir(), "hours.ndjson")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (e crashEntry) input() paysync.PayPartInput {
	return paysync.PayPartInput{EmployeeID: e.employee, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec(e.units)}}
}

// seedIdentical puts pay parts identical to some planned ones into payroll
// before the import, as if typed in by hand: reconciliation must never
// claim them.
func (c *crashEnv) seedIdentical(t *testing.T, rng *rand.Rand, entries []crashEntry, n int) map[string]paysync.PayPartInput {
	t.Helper()
	seeded := map[string]paysync.PayPartInput{}
	for range n {
		in := entries[rng.IntN(len(entries))].input()
		p, err := c.sb.SeedPayPart(sandbox.CompanyNordlys, in)
		if err != nil {
			t.Fatal(err)
		}
		seeded[p.ID] = in
	}
	return seeded
}

// ---- exactness ----

func decKey(d decimal.NullDecimal) string {
	if !d.Valid {
		return "-"
	}
	return d.Decimal.String()
}

func ppKey(employee, code string, n paysync.Numbers) string {
	return fmt.Sprintf("%s %s units=%s rate=%s amount=%s", employee, code, decKey(n.Units), decKey(n.Rate), decKey(n.Amount))
}

func (c *crashEnv) payParts(t *testing.T) []paysync.PayPart {
	t.Helper()
	for _, co := range c.sb.State().Companies {
		if co.ID == sandbox.CompanyNordlys {
			return co.PayParts
		}
	}
	t.Fatal("no company Nordlys in the sandbox")
	return nil
}

// diffMultisets returns what want has more of and what got has more of.
func diffMultisets(want, got map[string]int) (missing, extra []string) {
	for k, n := range want {
		if d := n - got[k]; d > 0 {
			missing = append(missing, fmt.Sprintf("%dx %s", d, k))
		}
	}
	for k, n := range got {
		if d := n - want[k]; d > 0 {
			extra = append(extra, fmt.Sprintf("%dx %s", d, k))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

// checkPayroll: the company holds the seeded pay parts plus exactly one
// per entry (as a multiset of employee, code, units, rate, amount), and
// every seeded one is still there under its id.
func (c *crashEnv) checkPayroll(t *testing.T, entries []crashEntry, seeded map[string]paysync.PayPartInput) []paysync.PayPart {
	t.Helper()
	pps := c.payParts(t)
	want, got := map[string]int{}, map[string]int{}
	for _, in := range seeded {
		want[ppKey(in.EmployeeID, in.Code, in.Numbers)]++
	}
	for _, e := range entries {
		in := e.input()
		want[ppKey(in.EmployeeID, in.Code, in.Numbers)]++
	}
	ids := map[string]bool{}
	for _, p := range pps {
		got[ppKey(p.EmployeeID, p.Code, p.Numbers)]++
		ids[p.ID] = true
	}
	if missing, extra := diffMultisets(want, got); len(missing)+len(extra) > 0 {
		t.Errorf("payroll holds %d pay parts, want %d (%d seeded + %d entries)\nmissing (never created): %v\nextra (created twice): %v",
			len(pps), len(seeded)+len(entries), len(seeded), len(entries), missing, extra)
	}
	for id := range seeded {
		if !ids[id] {
			t.Errorf("seeded pay part %s is gone from payroll", id)
		}
	}
	return pps
}

func openLedger(t *testing.T, path string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.Options{})
	if err != nil {
		t.Fatalf("open the ledger: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ledgerItems returns every batch of the ledger with its items.
func ledgerItems(t *testing.T, l *ledger.Ledger) []ledger.BatchDetail {
	t.Helper()
	ctx := context.Background()
	bs, err := l.ListBatches(ctx, ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.BatchDetail
	for i := len(bs) - 1; i >= 0; i-- { // ListBatches is newest first
		d, err := l.BatchDetail(ctx, bs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func attemptLog(d ledger.BatchDetail) string {
	var b strings.Builder
	for _, a := range d.Log {
		fmt.Fprintf(&b, "\n    attempt %d: %s %d items at %s: %s %s", a.ID, a.Op, a.Items, a.StartedAt.Format("15:04:05.000"), a.Outcome, a.Error)
	}
	return b.String()
}

// ledgerGroups reads every group of the ledger (company × employee × code
// × rate × period, or one entry's own with aggregate: false) with its live
// pay parts: the reconciler's link between entries and pay parts.
func ledgerGroups(t *testing.T, l *ledger.Ledger) []ledger.Group {
	t.Helper()
	var out []ledger.Group
	var after int64
	for {
		gs, err := l.Groups(context.Background(), ledger.GroupFilter{Frozen: true, After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, gs...)
		if len(gs) < 500 {
			return out
		}
		after = gs[len(gs)-1].ID
	}
}

// crashGroupKey names a group of the crash tests' entries (all T1, all
// of November 2026): its entry's id when each entry is its own group
// (--no-aggregate, aggregate: false), else its employee.
func crashGroupKey(g ledger.Group) string {
	if g.Key.Own != "" {
		return g.Key.Own
	}
	return g.Key.Employee
}

// entryGroupKey is the crashGroupKey of the group entry e is in.
func entryGroupKey(e crashEntry, aggregate bool) string {
	if aggregate {
		return e.employee
	}
	return e.id
}

// groupsByLivePart maps each live pay part's id to its group, failing the
// test when a group of an open period has more than one live pay part or
// a pay part is live in two groups.
func groupsByLivePart(t *testing.T, gs []ledger.Group) map[int64]ledger.Group {
	t.Helper()
	out := map[int64]ledger.Group{}
	for _, g := range gs {
		if len(g.Live) > 1 {
			t.Errorf("group %s (%d lines) has %d live pay parts, want one", crashGroupKey(g), g.Lines, len(g.Live))
		}
		for _, lp := range g.Live {
			if _, dup := out[lp.ID]; dup {
				t.Errorf("pay part %d is live in two groups", lp.ID)
			}
			out[lp.ID] = g
		}
	}
	return out
}

// checkLedgerImported: every batch created, every pay part created with a
// payroll id that is in payroll and not a seeded one, each the one live pay
// part of one entry's group (--no-aggregate), every entry's group holding
// exactly one; and the pay parts in payroll that are not seeded are
// exactly the ledger's.
func (c *crashEnv) checkLedgerImported(t *testing.T, entries []crashEntry, seeded map[string]paysync.PayPartInput, pps []paysync.PayPart) map[string]ledger.Item {
	t.Helper()
	l := openLedger(t, c.ledger)
	inPayroll := map[string]paysync.PayPart{}
	for _, p := range pps {
		inPayroll[p.ID] = p
	}
	ours := map[string]ledger.Item{}
	byEntry := map[string]int{}
	items := 0
	byPart := groupsByLivePart(t, ledgerGroups(t, l))
	for _, d := range ledgerItems(t, l) {
		if d.State != paysync.BatchCreated {
			t.Errorf("batch %d is %s, want created (last error %q):%s", d.ID, d.State, d.LastError, attemptLog(d))
		}
		for _, it := range d.Items {
			items++
			if it.State != paysync.PartCreated || it.PayrollID == "" {
				t.Errorf("batch %d pay part %d is %s with payroll id %q, want created with an id:%s", d.ID, it.ID, it.State, it.PayrollID, attemptLog(d))
				continue
			}
			if _, isSeeded := seeded[it.PayrollID]; isSeeded {
				t.Errorf("batch %d pay part %d claimed the pre-existing pay part %s (seeded by hand before the import):%s", d.ID, it.ID, it.PayrollID, attemptLog(d))
			}
			p, ok := inPayroll[it.PayrollID]
			switch {
			case !ok:
				t.Errorf("batch %d pay part %d: payroll id %s is not in payroll", d.ID, it.ID, it.PayrollID)
			case !p.Matches(it.PayPartInput):
				t.Errorf("batch %d pay part %d (%s) is recorded as payroll id %s, which is %s", d.ID, it.ID,
					ppKey(it.EmployeeID, it.Code, it.Numbers), it.PayrollID, ppKey(p.EmployeeID, p.Code, p.Numbers))
			}
			if _, dup := ours[it.PayrollID]; dup {
				t.Errorf("payroll id %s is recorded for two pay parts", it.PayrollID)
			}
			ours[it.PayrollID] = it.Item
			g, ok := byPart[it.ID]
			switch {
			case !ok:
				t.Errorf("batch %d pay part %d (%s) is created but live in no group (replaced, and not deleted)", d.ID, it.ID, ppKey(it.EmployeeID, it.Code, it.Numbers))
				continue
			case g.Key.Own == "" || g.Lines != 1:
				t.Errorf("batch %d pay part %d is of group %+v with %d lines, want one entry's own group (--no-aggregate)", d.ID, it.ID, g.Key, g.Lines)
			}
			byEntry[g.Key.Own]++
		}
	}
	if items != len(entries) {
		t.Errorf("the ledger holds %d pay parts, want %d (one per entry)", items, len(entries))
	}
	for _, e := range entries {
		if n := byEntry[e.id]; n != 1 {
			t.Errorf("entry %s is behind %d pay parts, want 1", e.id, n)
		}
	}
	for _, p := range pps {
		if _, isSeeded := seeded[p.ID]; !isSeeded {
			if _, ok := ours[p.ID]; !ok {
				t.Errorf("pay part %s (%s) in payroll is neither seeded nor recorded in the ledger (a duplicate or an orphan)", p.ID, ppKey(p.EmployeeID, p.Code, p.Numbers))
			}
		}
	}
	if n := len(importsOf(t, l)); n != 1 {
		t.Errorf("the ledger holds %d imports, want 1", n)
	}
	return ours
}

// importsOf lists the ledger's imports (not its own source 0, "reconcile",
// of the reconciler's plans no import caused).
func importsOf(t *testing.T, l *ledger.Ledger) []ledger.Source {
	t.Helper()
	ss, err := l.ListSources(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Source
	for _, s := range ss {
		if s.ID != 0 {
			out = append(out, s)
		}
	}
	return out
}

// importRetryable: exit 1 is acceptable only when paysync says that
// batches did not finish (they are retried on the next run).
func importRetryable(r crashRun) bool {
	return r.code == 1 && (strings.Contains(r.stderr, "batch did not finish") || strings.Contains(r.stderr, "batches did not finish"))
}

func checkImportRun(t *testing.T, r crashRun) {
	t.Helper()
	if r.killed || r.code == 0 || importRetryable(r) {
		return
	}
	t.Fatalf("an import run failed:\n%s", r)
}

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)) }

// ---- the tests ----

// TestCrash_Import kills `paysync import --no-aggregate` at random moments
// (latency on create_pay_parts, sometimes responses dropped after commit),
// restarts it, and checks that payroll holds exactly one pay part per entry
// next to pre-existing identical ones, and that the ledger accounts for
// every one of them.
func TestCrash_Import(t *testing.T) {
	var stats crashStats
	stats.start(t)
	forEachCrashTrial(t, func(t *testing.T, seed int64) {
		rng := newRand(seed)
		faults := []sandbox.Fault{
			{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 5 * time.Millisecond},
			{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 15 * time.Millisecond, Probability: 0.5},
			{Kind: sandbox.FaultLatency, Op: "pay_parts", Delay: 3 * time.Millisecond},
		}
		drops := rng.IntN(2) == 0
		if drops {
			faults = append(faults, sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts", Probability: 0.2})
		}
		c := newCrashEnv(t, sandbox.Options{Seed: seed, Faults: faults})
		entries := crashEntries(200)
		file := writeEntries(t, entries)
		seeded := c.seedIdentical(t, rng, entries, 4)
		args := []string{"import", "--no-aggregate", file}

		t.Logf("drops after commit: %v", drops)
		stats.kills.Add(c.killRuns(t, rng, 2+rng.IntN(2), 400*time.Millisecond, checkImportRun, args...))
		c.finish(t, importRetryable, args...)
		stats.windows.Add(c.windowHits)

		pps := c.checkPayroll(t, entries, seeded)
		c.checkLedgerImported(t, entries, seeded, pps)
	})
}

// TestCrash_Revert imports, deletes two of the pay parts by hand, then kills
// `paysync revert --import 1 --yes` at random moments (latency on the
// reads and deletes, sometimes deletes dropped after commit) and restarts
// it until it succeeds: payroll must hold exactly the pre-existing pay
// parts, and the ledger must say which pay parts paysync deleted and which
// two were gone, with no entry counting any more.
func TestCrash_Revert(t *testing.T) {
	var stats crashStats
	stats.start(t)
	forEachCrashTrial(t, func(t *testing.T, seed int64) {
		rng := newRand(seed)
		c := newCrashEnv(t, sandbox.Options{Seed: seed, Faults: []sandbox.Fault{
			{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 2 * time.Millisecond},
		}})
		entries := crashEntries(100)
		file := writeEntries(t, entries)
		seeded := c.seedIdentical(t, rng, entries, 3)
		c.finish(t, importRetryable, "import", "--no-aggregate", file)
		pps := c.checkPayroll(t, entries, seeded)
		ours := c.checkLedgerImported(t, entries, seeded, pps)
		if t.Failed() {
			t.FailNow()
		}

		// Two of ours deleted by hand in payroll.
		var ids []string
		for id := range ours {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		byHand := map[string]bool{}
		for len(byHand) < 2 {
			id := ids[rng.IntN(len(ids))]
			if !byHand[id] {
				byHand[id] = true
				if err := c.sb.DeletePayPartDirect(sandbox.CompanyNordlys, id); err != nil {
					t.Fatal(err)
				}
			}
		}

		drops := c.slowMutations(rng, "delete_pay_parts", 10*time.Millisecond, 4*time.Millisecond)
		args := []string{"revert", "--import", "1", "--yes"}
		t.Logf("drops after commit: %v", drops)
		stats.kills.Add(c.killRuns(t, rng, 2+rng.IntN(2), 300*time.Millisecond, func(t *testing.T, r crashRun) {
			if !r.killed && r.code != 0 {
				t.Fatalf("a revert run failed:\n%s", r)
			}
		}, args...))
		c.finish(t, func(crashRun) bool { return false }, args...)
		stats.windows.Add(c.windowHits)

		// Payroll: exactly the seeded pay parts, none of ours.
		left := c.payParts(t)
		for _, p := range left {
			if _, ok := seeded[p.ID]; !ok {
				t.Errorf("pay part %s (%s) is still in payroll after the revert", p.ID, ppKey(p.EmployeeID, p.Code, p.Numbers))
			}
		}
		if len(left) != len(seeded) {
			t.Errorf("payroll holds %d pay parts after the revert, want the %d seeded ones", len(left), len(seeded))
		}
		c.checkPayroll(t, nil, seeded)

		// Ledger: every batch finished (the import's, and the revert's
		// delete); ours deleted by paysync, except the two deleted by hand,
		// which are gone; no group holds a live pay part.
		l := openLedger(t, c.ledger)
		for _, g := range ledgerGroups(t, l) {
			if len(g.Live) > 0 || g.Lines > 0 {
				t.Errorf("group %s after the revert: %d lines count, %d live pay parts; want none", crashGroupKey(g), g.Lines, len(g.Live))
			}
		}
		var deleted, gone []string
		for _, d := range ledgerItems(t, l) {
			if d.State != paysync.BatchCreated && d.State != paysync.BatchReverted {
				t.Errorf("batch %d is %s, want finished (last error %q):%s", d.ID, d.State, d.LastError, attemptLog(d))
			}
			var misGone, misDeleted []string
			for _, it := range d.Items {
				switch it.State {
				case paysync.PartDeleted:
					deleted = append(deleted, it.PayrollID)
					if byHand[it.PayrollID] {
						misDeleted = append(misDeleted, fmt.Sprintf("%d (%s)", it.ID, it.PayrollID))
					}
				case paysync.PartGone:
					gone = append(gone, it.PayrollID)
					if !byHand[it.PayrollID] {
						misGone = append(misGone, fmt.Sprintf("%d (%s)", it.ID, it.PayrollID))
					}
				default:
					t.Errorf("batch %d pay part %d is %s after the revert, want deleted or gone", d.ID, it.ID, it.State)
				}
			}
			if len(misGone) > 0 {
				t.Errorf("batch %d: pay parts %s were deleted by paysync, but the ledger records them as gone (deleted in payroll by someone else): "+
					"a run died after sending delete_pay_parts and before recording its outcome, and the ids it sent were kept in memory only; attempts:%s",
					d.ID, strings.Join(misGone, ", "), attemptLog(d))
			}
			if len(misDeleted) > 0 {
				t.Errorf("batch %d: pay parts %s were deleted by hand, but the ledger records them as deleted by paysync", d.ID, strings.Join(misDeleted, ", "))
			}
		}
		if len(deleted)+len(gone) != len(entries) || len(gone) != 2 {
			t.Errorf("ledger: %d deleted and %d gone, want %d deleted and 2 gone", len(deleted), len(gone), len(entries)-2)
		}
	})
}

// TestCrash_Replay imports, reverts (the import, or its first batch), then
// kills `paysync replay --yes` (of the import, or of that batch) at random
// moments (latency on create_pay_parts, sometimes responses dropped after
// commit) and runs it again until it succeeds: payroll must hold exactly
// one pay part per entry next to the pre-existing identical ones, every
// batch must be finished, and the same file imported again must be a
// duplicate that exits 0.
func TestCrash_Replay(t *testing.T) {
	var stats crashStats
	stats.start(t)
	forEachCrashTrial(t, func(t *testing.T, seed int64) {
		rng := newRand(seed)
		c := newCrashEnv(t, sandbox.Options{Seed: seed, Faults: []sandbox.Fault{
			{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 2 * time.Millisecond},
		}})
		rules := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(rules, []byte("version: 1\naggregate: false\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.env["PAYSYNC_MAPPING"] = rules // one pay part per entry, for the import and the replay
		entries := crashEntries(100)
		file := writeEntries(t, entries)
		seeded := c.seedIdentical(t, rng, entries, 3)
		c.finish(t, importRetryable, "import", file)
		c.checkPayroll(t, entries, seeded)
		target := []string{"--import", "1"}
		if rng.IntN(2) == 0 {
			target = []string{"1"}
		}
		c.finish(t, func(crashRun) bool { return false }, append([]string{"revert", "--yes"}, target...)...)

		drops := c.slowMutations(rng, "create_pay_parts", 15*time.Millisecond, 3*time.Millisecond)
		args := append([]string{"replay", "--yes"}, target...)
		t.Logf("replay %v; drops after commit: %v", target, drops)
		stats.kills.Add(c.killRuns(t, rng, 2+rng.IntN(2), 300*time.Millisecond, checkImportRun, args...))
		c.finish(t, importRetryable, args...)
		stats.windows.Add(c.windowHits)
		c.sb.SetFaults()

		c.checkPayroll(t, entries, seeded)
		l := openLedger(t, c.ledger)
		for _, d := range ledgerItems(t, l) {
			switch d.State {
			case paysync.BatchCreated, paysync.BatchReverted, paysync.BatchSplit:
			default:
				t.Errorf("batch %d is %s (last error %q):%s", d.ID, d.State, d.LastError, attemptLog(d))
			}
		}
		r := c.finish(t, func(crashRun) bool { return false }, "import", file)
		if !strings.Contains(r.stdout, "already imported as import 1") {
			t.Errorf("the same file again:\n%s", r)
		}
		c.checkPayroll(t, entries, seeded)
	})
}

// slowMutations makes op (a mutation) take 5 ms, and half the time extra
// more, and the pay_parts read take read, so that a kill lands inside a
// call; in half the trials (drawn from rng) 20 % of op's calls are executed
// and then dropped unanswered. It reports whether they are.
func (c *crashEnv) slowMutations(rng *rand.Rand, op string, extra, read time.Duration) (drops bool) {
	faults := []sandbox.Fault{
		{Kind: sandbox.FaultLatency, Op: op, Delay: 5 * time.Millisecond},
		{Kind: sandbox.FaultLatency, Op: op, Delay: extra, Probability: 0.5},
		{Kind: sandbox.FaultLatency, Op: "pay_parts", Delay: read},
	}
	if drops = rng.IntN(2) == 0; drops {
		faults = append(faults, sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: op, Probability: 0.2})
	}
	c.sb.SetFaults(faults...)
	return drops
}
