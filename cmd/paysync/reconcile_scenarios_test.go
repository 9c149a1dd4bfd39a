package main

// Regression scenarios of the desired-state model (round 3): after every
// operation and its reconcile, payroll holds, per group (company ×
// employee × code × rate; the pay period is the scenario's one month, as
// pay parts carry no date), exactly the sum of the entries that count, as
// one pay part. Each scenario is driven only through the CLI (in process
// or the built binary) or the daemon (`paysync run` over NATS), never
// through worker/ or ledger/, so that it survives their rewrite; it
// asserts only on what payroll holds (the sandbox) and on exit codes.
//
//	go test ./cmd/paysync -run TestScenario -count=1 -v

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
	"github.com/shopspring/decimal"
)

// ---- what payroll holds, per group ----

// scGroup is what payroll holds for one group.
type scGroup struct {
	units, amount decimal.Decimal
	ids           []string // payroll ids, sorted
}

func (g scGroup) String() string {
	s := g.units.String()
	if !g.amount.IsZero() {
		s += " (amount " + g.amount.String() + ")"
	}
	if len(g.ids) != 1 {
		s += fmt.Sprintf(" as %d pay parts", len(g.ids))
	}
	return s
}

// scPayroll sums the sandbox's pay parts per group
// "company|employee|code|rate" (rate "" when the pay part has none).
func scPayroll(sb *sandbox.Server) map[string]scGroup {
	out := map[string]scGroup{}
	for _, c := range sb.State().Companies {
		for _, p := range c.PayParts {
			rate := ""
			if p.Rate.Valid {
				rate = p.Rate.Decimal.String()
			}
			k := c.ID + "|" + p.EmployeeID + "|" + p.Code + "|" + rate
			g := out[k]
			if p.Units.Valid {
				g.units = g.units.Add(p.Units.Decimal)
			}
			if p.Amount.Valid {
				g.amount = g.amount.Add(p.Amount.Decimal)
			}
			g.ids = append(g.ids, p.ID)
			slices.Sort(g.ids)
			out[k] = g
		}
	}
	return out
}

// scKey is a group's key; rate "" for none.
func scKey(company, employee, code, rate string) string {
	return company + "|" + employee + "|" + code + "|" + rate
}

// nordlys is scKey for Nordlys.
func nordlys(employee, code, rate string) string {
	return scKey(sandbox.CompanyNordlys, employee, code, rate)
}

// scDiff says how payroll differs from want (group → total units), each
// group as exactly one pay part; "" when it holds exactly that.
func scDiff(got map[string]scGroup, want map[string]string) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		g := got[k]
		w, ok := want[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s holds %s, want nothing", k, g))
		case !g.units.Equal(decimal.RequireFromString(w)) || len(g.ids) != 1:
			diffs = append(diffs, fmt.Sprintf("%s holds %s, want %s as one pay part", k, g, w))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s holds nothing, want %s", k, want[k]))
		}
	}
	return strings.Join(diffs, "; ")
}

// scWant fails the test unless payroll holds exactly want.
func scWant(t *testing.T, sb *sandbox.Server, step string, want map[string]string) map[string]scGroup {
	t.Helper()
	got := scPayroll(sb)
	if d := scDiff(got, want); d != "" {
		t.Fatalf("%s: payroll per group differs: %s", step, d)
	}
	return got
}

// scExpect is scWant that lets the test go on (t.Errorf).
func scExpect(t *testing.T, sb *sandbox.Server, step string, want map[string]string) map[string]scGroup {
	t.Helper()
	got := scPayroll(sb)
	if d := scDiff(got, want); d != "" {
		t.Errorf("%s: payroll per group differs: %s", step, d)
	}
	return got
}

// scSame fails the test unless payroll holds exactly the pay parts of
// before (same groups, totals and payroll ids).
func scSame(t *testing.T, sb *sandbox.Server, step string, before map[string]scGroup) {
	t.Helper()
	got := scPayroll(sb)
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		b, ok := before[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s holds %s %v, held nothing", k, got[k], got[k].ids))
		} else if !b.units.Equal(got[k].units) || !slices.Equal(b.ids, got[k].ids) {
			diffs = append(diffs, fmt.Sprintf("%s holds %s %v, held %s %v", k, got[k], got[k].ids, b, b.ids))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if _, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s holds nothing, held %s %v", k, before[k], before[k].ids))
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: payroll changed: %s", step, strings.Join(diffs, "; "))
	}
}

// scWith is before with group k as got holds it (a group another step
// changes as it should, e.g. of another period).
func scWith(before map[string]scGroup, k string, got map[string]scGroup) map[string]scGroup {
	out := maps.Clone(before)
	if g, ok := got[k]; ok {
		out[k] = g
	}
	return out
}

// scTotals is got as group → units (for messages and for comparing two
// states by totals).
func scTotals(got map[string]scGroup) map[string]string {
	out := map[string]string{}
	for k, g := range got {
		out[k] = g.units.String()
	}
	return out
}

// ---- the CLI ----

// scCLI runs paysync commands in process over one sandbox and ledger.
type scCLI struct {
	t   *testing.T
	s   sandboxEnv
	env map[string]string
}

// newSCCLI: a sandbox, a new ledger, the example rules and company
// Nordlys; kv overrides the environment.
func newSCCLI(t *testing.T, opts sandbox.Options, kv ...string) *scCLI {
	s := startSandbox(t, opts)
	env := with(s.env, append([]string{"PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"),
		"PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml", "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys}, kv...)...)
	return &scCLI{t: t, s: s, env: env}
}

// do runs a command and fails the test unless it exits wantCode.
func (c *scCLI) do(wantCode int, args ...string) result {
	c.t.Helper()
	r := runInProcess(c.t, c.env, args...)
	if r.code != wantCode {
		c.t.Fatalf("paysync %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
	}
	assertClean(c.t, r, c.env["PAYSYNC_CLIENT_SECRET"])
	return r
}

// any runs a command whatever its exit code (not a usage error, 2, and
// without a panic or stack trace) and returns its result.
func (c *scCLI) any(args ...string) result {
	c.t.Helper()
	r := runInProcess(c.t, c.env, args...)
	if r.code == 2 {
		c.t.Fatalf("paysync %s: exit 2 (usage or configuration)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	}
	assertClean(c.t, r, c.env["PAYSYNC_CLIENT_SECRET"])
	c.t.Logf("paysync %s: exit %d", strings.Join(args, " "), r.code)
	return r
}

// interrupted runs a command in process and cancels it once until holds
// (within 20 s); it returns the command's result. A command that ends by
// itself once until holds is taken as it is.
func (c *scCLI) interrupted(until func() bool, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		code := run(ctx, args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup)
		done <- result{code, out.String(), errb.String()}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !until() {
		select {
		case r := <-done:
			if until() {
				return r
			}
			c.t.Fatalf("paysync %s ended before the moment to interrupt it: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("paysync %s: the moment to interrupt it did not come in 20 s", strings.Join(args, " "))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	r := <-done
	assertClean(c.t, r, c.env["PAYSYNC_CLIENT_SECRET"])
	c.t.Logf("paysync %s, interrupted: exit %d", strings.Join(args, " "), r.code)
	return r
}

// stalled arms a fault that holds every call of op back, unexecuted (429
// with a Retry-After of an hour), and returns a condition that holds once
// the fault has fired: the command calling op is then waiting, with
// nothing of that call applied.
func (c *scCLI) stalled(op string) func() bool {
	c.s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: op, RetryAfter: time.Hour})
	fired := c.s.sb.State().Counters.Faults[sandbox.FaultRateLimit]
	return func() bool { return c.s.sb.State().Counters.Faults[sandbox.FaultRateLimit] > fired }
}

// settle runs `paysync run --once` over an empty inbox: the daemon's pass
// that sends whatever the ledger has left to send (open batches, pending
// corrections), then exits.
func (c *scCLI) settle() result {
	c.t.Helper()
	return runInProcess(c.t, with(c.env, "PAYSYNC_INBOX", c.t.TempDir()), "run", "--once")
}

// scRow is an NDJSON entry line for the example rules (no code: the rules
// map it; tags as given).
func scRow(id, emp, date, hours string, tags ...string) string {
	s := `{"id":"` + id + `","employee_id":"` + emp + `","date":"` + date + `","hours":"` + hours + `"`
	if len(tags) > 0 {
		s += `,"tags":["` + strings.Join(tags, `","`) + `"]`
	}
	return s + "}"
}

// scT1 is an NDJSON entry with its own code T1.
func scT1(id, emp, date, hours string) string {
	return `{"id":"` + id + `","employee_id":"` + emp + `","date":"` + date + `","hours":"` + hours + `","code":"T1"}`
}

// scRowProject is an NDJSON entry line with a project.
func scRowProject(id, emp, date, hours, project string) string {
	return `{"id":"` + id + `","employee_id":"` + emp + `","date":"` + date + `","hours":"` + hours + `","project":"` + project + `"}`
}

// scRules writes a rules file (its YAML after "version: 1\ncompany: MV8x\n")
// and returns its path.
func scRules(t *testing.T, yaml string) string {
	t.Helper()
	return writeLines(t, "rules.yaml", "version: 1", "company: "+sandbox.CompanyNordlys, yaml)
}

// threeT1Rules: three rules (two projects and the default) that all give T1.
const threeT1Rules = `rules:
  - name: havnen
    match: {project: [Havnen]}
    code: T1
    units: hours
  - name: internal
    match: {project: [Internal]}
    code: T1
    units: hours
  - name: hourly
    default: true
    code: T1
    units: hours`

// scRulesRate writes the example rules with one value replaced.
func scRulesRate(t *testing.T, old, new string) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/examples/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("rate: "+old)) {
		t.Fatalf("the example rules have no rate %s", old)
	}
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, bytes.Replace(b, []byte("rate: "+old), []byte("rate: "+new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The example export and its corrected re-export (Lars Nielsen's sick day
// 8 → 8.5 h).
const (
	scToggl          = "../../deploy/examples/toggl.csv"
	scTogglCorrected = "testdata/corrections/toggl-corrected.csv"
)

// scTogglGroups is what toggl.csv makes under the example rules: Mette's
// hours (7:30 + 4:20), her overtime (2:40, T2 at 310.50) and its evening
// supplement, Lars's support and sick day, Sofie's evening deploy (3:20)
// and its supplement; the office account is ignored.
func scTogglGroups() map[string]string {
	const mette, lars, sofie = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen
	return map[string]string{
		nordlys(mette, "T1", ""): "11.83", nordlys(mette, "T2", "310.5"): "2.67", nordlys(mette, "TILLAEG", "45"): "2.67",
		nordlys(lars, "T1", ""): "7", nordlys(lars, "SYG", ""): "8",
		nordlys(sofie, "T1", ""): "3.33", nordlys(sofie, "TILLAEG", "45"): "3.33",
	}
}

// ---- the daemon (`paysync run` over NATS) ----

// scDaemon is `paysync run` over NATS (the daemon suite's harness) with
// rules that aggregate: the tag "sick" is SYG, other hours T1
// (testdata/corrections_daemon/rules.yaml), unless rules is given.
func scDaemon(t *testing.T, rules string, kv ...string) (*daemonHarness, *natsDriver) {
	t.Helper()
	h := newDaemonHarness(t, newNATSDriver(t), "scen")
	if rules == "" {
		var err error
		if rules, err = filepath.Abs("testdata/corrections_daemon/rules.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	h.env["PAYSYNC_MAPPING"] = rules
	for i := 0; i+1 < len(kv); i += 2 {
		h.env[kv[i]] = kv[i+1]
	}
	return h, h.drv.(*natsDriver)
}

// scCmd runs a CLI command (the built binary) over the daemon's ledger and
// payroll, failing the test unless it exits wantCode (-1: any but 2).
func scCmd(t *testing.T, h *daemonHarness, wantCode int, args ...string) result {
	t.Helper()
	r := runBinary(t, h.env, args...)
	if (wantCode >= 0 && r.code != wantCode) || (wantCode < 0 && r.code == 2) {
		t.Fatalf("paysync %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
	}
	assertClean(t, r, h.env["PAYSYNC_CLIENT_SECRET"])
	if wantCode < 0 {
		t.Logf("paysync %s: exit %d", strings.Join(args, " "), r.code)
	}
	return r
}

// scKill ends the daemon with SIGKILL (its call held back by a 429 with a
// Retry-After of an hour was never executed) and readies NATS for the
// next start.
func scKill(t *testing.T, h *daemonHarness, d *daemonProc) {
	t.Helper()
	d.signal(t, syscall.SIGKILL)
	if !d.waitExit(10 * time.Second) {
		t.Fatal("paysync run did not die of SIGKILL")
	}
	h.drv.afterHardStop(t)
}

// scSteady is how long payroll must hold what a step wants, unchanged,
// for the step to be done: longer than the daemon's linger (100ms) and its
// merge's debounce, so that a pay part sent twice has had its chance.
const scSteady = 1500 * time.Millisecond

// scEventually waits (up to d) until payroll holds exactly want (per
// group, one pay part each) and keeps holding it for scSteady.
func scEventually(t *testing.T, sb *sandbox.Server, step string, d time.Duration, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(d)
	var since time.Time
	last := ""
	for {
		last = scDiff(scPayroll(sb), want)
		switch {
		case last != "":
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= scSteady:
			return
		}
		if time.Now().After(deadline) {
			if last == "" {
				return
			}
			t.Fatalf("%s: payroll per group differs after %s: %s", step, d, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scEntry is an entry of the daemon's rules: T1, or SYG when sick.
func scEntry(id, emp, date, hours string) paysync.Entry { return cdEntry(id, emp, date, hours, false) }

// scMergeChunk is the most held entries one merge takes.
const scMergeChunk = 5000

// scPublishMessage publishes entries as one message ({"entries": [...]})
// on company's subject.
func scPublishMessage(t *testing.T, d *natsDriver, company, msgID string, entries []paysync.Entry) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"entries": entries})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack, err := d.js.Publish(ctx, stream.Subject("timesheets", company, daemonSubjectSource), b, jetstream.WithMsgID(msgID))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Duplicate {
		t.Fatalf("message %s: dropped by the server as a duplicate", msgID)
	}
}

// ---- a gate in front of payroll, and the console ----

// scGate is a proxy in front of payroll's GraphQL that, once armed, holds
// the first request naming one of its words until opened.
type scGate struct {
	url  string
	held chan struct{} // closed once a request is held

	mu     sync.Mutex
	words  []string
	opened chan struct{}
}

func newSCGate(t *testing.T, target string) *scGate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &scGate{held: make(chan struct{}), opened: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		g.mu.Lock()
		hold := false
		for _, word := range g.words {
			if bytes.Contains(body, []byte(word)) {
				hold = true
			}
		}
		if hold {
			g.words = nil
			close(g.held)
		}
		g.mu.Unlock()
		if hold {
			select {
			case <-g.opened:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.open)
	g.url = srv.URL
	return g
}

// arm holds the next request that names one of words.
func (g *scGate) arm(words ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.words = words
}

// open lets the held request (and every later one) go.
func (g *scGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.words = nil
	select {
	case <-g.opened:
	default:
		close(g.opened)
	}
}

// scConsole is the console of a `paysync run` (or `paysync console`), with
// Basic auth.
type scConsole struct{ base string }

const scConsolePassword = "scenario"

// scConsoleIn serves the console beside the daemon h starts.
func scConsoleIn(t *testing.T, h *daemonHarness) scConsole {
	addr := freeAddr(t)
	h.env["PAYSYNC_CONSOLE_ADDR"] = addr
	h.env["PAYSYNC_CONSOLE_PASSWORD"] = scConsolePassword
	return scConsole{base: "http://" + addr}
}

func (c scConsole) do(t *testing.T, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.SetBasicAuth("scenario", scConsolePassword)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// get waits (up to 20 s) for the console to answer.
func (c scConsole) get(t *testing.T, path string) (int, string) {
	t.Helper()
	var code int
	var page string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, page = c.do(t, http.MethodGet, path, nil); code != 0 {
			break
		}
	}
	return code, page
}

func (c scConsole) post(t *testing.T, path string, form url.Values) (int, string) {
	return c.do(t, http.MethodPost, path, form)
}

var scHidden = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// scConfirmForm is the hidden fields of a preview's confirmation form.
func scConfirmForm(t *testing.T, page string) url.Values {
	t.Helper()
	i := strings.Index(page, `id="confirm"`)
	if i < 0 {
		t.Fatalf("no confirmation form in:\n%s", page)
	}
	form := url.Values{}
	for _, m := range scHidden.FindAllStringSubmatch(page[i:], -1) {
		form.Add(m[1], html.UnescapeString(m[2]))
	}
	return form
}

// scNotice is what a console page says of an action's outcome (its
// result notice, else its heading), for messages.
func scNotice(page string) string {
	for _, mark := range []string{`id="result"`, "<h1>"} {
		for _, l := range strings.Split(page, "\n") {
			if strings.Contains(l, mark) {
				return strings.TrimSpace(l)
			}
		}
	}
	return fmt.Sprintf("(a page of %d bytes)", len(page))
}

// ---- the scenarios (and their close cousins) ----

// 1. A rule with continue: true gives an evening entry a second line (the
// supplement TILLAEG, rate 45) beside its hours (T1). e1 8 h evening and
// e2 2 h daytime are imported; then the same entries with e2 at 3 h. The
// T1 group changes (10 → 11); the supplement group does not (8): payroll
// holds it once.
func TestScenario01_SupplementPaidOnce(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "v1.ndjson", scRow("e1", mette, "2026-11-02", "8", "evening"), scRow("e2", mette, "2026-11-03", "2")))
	v1 := scWant(t, c.s.sb, "after v1", map[string]string{nordlys(mette, "T1", ""): "10", nordlys(mette, "TILLAEG", "45"): "8"})
	c.do(0, "import", writeLines(t, "v2.ndjson", scRow("e1", mette, "2026-11-02", "8", "evening"), scRow("e2", mette, "2026-11-03", "3")))
	v2 := scWant(t, c.s.sb, "after v2 (e2 2 → 3 h)", map[string]string{nordlys(mette, "T1", ""): "11", nordlys(mette, "TILLAEG", "45"): "8"})
	if k := nordlys(mette, "TILLAEG", "45"); !slices.Equal(v1[k].ids, v2[k].ids) {
		t.Errorf("the supplement, which v2 does not change: payroll ids %v became %v (want the same pay part)", v1[k].ids, v2[k].ids)
	}
}

// 2. Closing a period stops what is in flight: a correction of e1 (8 →
// 9 h) is under way when payroll refuses its create (its delete went
// through: payroll holds nothing of e1), and the command is interrupted.
// Then 2026-11 is closed. Whatever runs after that must not create or
// delete anything in 2026-11: payroll holds what it held at the close,
// same payroll ids and totals.
func TestScenario02_ClosedPeriodStopsWhatIsInFlight(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	c.do(0, "import", writeLines(t, "v1.ndjson", scT1("e1", mette, "2026-11-02", "8"), scT1("e2", lars, "2026-11-03", "4")))
	scWant(t, c.s.sb, "after v1", map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "T1", ""): "4"})
	c.interrupted(c.stalled("create_pay_parts"), "import", writeLines(t, "v2.ndjson", scT1("e1", mette, "2026-11-02", "9"), scT1("e2", lars, "2026-11-03", "4")))
	c.s.sb.SetFaults()
	atClose := scPayroll(c.s.sb)
	t.Logf("payroll at the close: %v", scTotals(atClose))
	c.do(0, "periods", "close", "2026-11")
	r := c.settle()
	t.Logf("paysync run --once after the close: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	scSame(t, c.s.sb, "after the close and run --once", atClose)
	// An import of another period (Sofie, December) delivers too.
	const sofie = sandbox.EmpSofieJensen
	c.do(0, "import", writeLines(t, "dec.ndjson", scT1("d1", sofie, "2026-12-01", "1")))
	scSame(t, c.s.sb, "after an import of December", scWith(atClose, nordlys(sofie, "T1", ""), scPayroll(c.s.sb)))
}

// 2 (daemon). TestScenario02 in `paysync run`: e1 (8 h) merged and paid;
// its correction (9 h) by message is merged while payroll holds creates
// back, so the merge's create is in flight (its delete went through);
// 2026-11 is closed; payroll comes back and the daemon restarts: nothing
// of 2026-11 changes after the close.
func TestScenario02_ClosedPeriodStopsWhatIsInFlightDaemon(t *testing.T) {
	h, drv := scDaemon(t, "")
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	d := h.start(t)
	drv.publish(t, []paysync.Entry{scEntry("e1", mette, "2026-11-02", "8"), scEntry("e2", lars, "2026-11-03", "4")})
	scEventually(t, h.sb, "after e1 and e2", 10*time.Second, map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "T1", ""): "4"})
	h.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: time.Hour})
	drv.publish(t, []paysync.Entry{scEntry("e1", mette, "2026-11-02", "9")})
	waitFor(t, "the merge's create held back", 10*time.Second, func() bool { return h.sb.State().Counters.Faults[sandbox.FaultRateLimit] > 0 })
	scKill(t, h, d) // a graceful stop would wait out the Retry-After (the grace)
	h.sb.SetFaults()
	atClose := scPayroll(h.sb)
	t.Logf("payroll at the close: %v", scTotals(atClose))
	scCmd(t, h, 0, "periods", "close", "2026-11")
	d = h.start(t)
	// An entry of December, merged and sent after whatever the daemon had
	// left to send from before its restart.
	const sofie = sandbox.EmpSofieJensen
	drv.publish(t, []paysync.Entry{scEntry("d1", sofie, "2026-12-01", "1")})
	waitFor(t, "December's entry paid", 10*time.Second, func() bool { return len(scPayroll(h.sb)[nordlys(sofie, "T1", "")].ids) > 0 })
	d.stop(t)
	scSame(t, h.sb, "after the close, a restart of the daemon and an entry of December", scWith(atClose, nordlys(sofie, "T1", ""), scPayroll(h.sb)))
}

// 3. revert --period P --company A leaves company B alone: entries of
// Nordlys and Fjordtech in 2026-11; revert --period 2026-11 --company
// Nordlys: Nordlys's hours leave payroll, Fjordtech's are paid and stay
// paid. "imported": both paid by an import first. "held": both held by
// the daemon (PAYSYNC_SEND=cutoff, nothing sent yet), the revert, then
// the cutoff.
func TestScenario03_RevertPeriodOfOneCompany(t *testing.T) {
	const mette, jonas = sandbox.EmpMetteHansen, sandbox.EmpJonasLarsen
	fjGroup := scKey(sandbox.CompanyFjordtech, jonas, "T1", "")
	t.Run("imported", func(t *testing.T) {
		c := newSCCLI(t, sandbox.Options{})
		fj := `{"id":"f1","company_id":"` + sandbox.CompanyFjordtech + `","employee_id":"` + jonas + `","date":"2026-11-02","hours":"6","code":"T1"}`
		c.do(0, "import", writeLines(t, "both.ndjson", scT1("n1", mette, "2026-11-02", "8"), fj))
		scWant(t, c.s.sb, "after the import", map[string]string{nordlys(mette, "T1", ""): "8", fjGroup: "6"})
		c.do(0, "revert", "--period", "2026-11", "--company", sandbox.CompanyNordlys, "--yes")
		scWant(t, c.s.sb, "after revert --period 2026-11 --company "+sandbox.CompanyNordlys, map[string]string{fjGroup: "6"})
		c.settle()
		scWant(t, c.s.sb, "after run --once", map[string]string{fjGroup: "6"})
	})
	t.Run("held", func(t *testing.T) {
		h, drv := scDaemon(t, "", "PAYSYNC_SEND", "cutoff", "PAYSYNC_CUTOFF", "0 0 1 1 *")
		d := h.start(t)
		publishFor(t, drv, sandbox.CompanyNordlys, []paysync.Entry{scEntry("n1", mette, "2026-11-02", "8")})
		publishFor(t, drv, sandbox.CompanyFjordtech, []paysync.Entry{scEntry("f1", jonas, "2026-11-02", "6")})
		waitFor(t, "the stream drained", 20*time.Second, func() bool { return drv.drained(t) })
		d.stop(t)
		scWant(t, h.sb, "while held", nil)
		scCmd(t, h, 0, "revert", "--period", "2026-11", "--company", sandbox.CompanyNordlys, "--yes")
		scCmd(t, h, -1, "cutoff", "--yes")
		scWant(t, h.sb, "after the revert of Nordlys's 2026-11 and the cutoff", map[string]string{fjGroup: "6"})
	})
}

// 4. A batch reverted before it was sent: payroll held e1's create back
// (429) and the import was interrupted, its batch unsent; `revert 1`
// then. A later import listing e1 again makes it count again: payroll
// ends holding it exactly once (not "duplicate", never paid).
func TestScenario04_BatchRevertedBeforeSent(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	c.interrupted(c.stalled("create_pay_parts"), "import", writeLines(t, "a.ndjson", scT1("e1", mette, "2026-11-02", "8")))
	c.s.sb.SetFaults()
	scWant(t, c.s.sb, "after the interrupted import", nil)
	c.do(0, "revert", "1", "--yes")
	scWant(t, c.s.sb, "after revert 1", nil)
	c.any("import", writeLines(t, "b.ndjson", scT1("e1", mette, "2026-11-02", "8"), scT1("e2", lars, "2026-11-03", "4")))
	c.settle()
	scWant(t, c.s.sb, "after a later import listing e1 again", map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "T1", ""): "4"})
}

// 4 (merge). TestScenario04 with the daemon: e1's merge is committed and
// its create held back by payroll (429), the daemon stops; `revert 1`
// (the merge's batch, never sent); e1 comes again in a later message: it
// is paid exactly once.
func TestScenario04_BatchRevertedBeforeSentMerge(t *testing.T) {
	h, drv := scDaemon(t, "")
	const mette = sandbox.EmpMetteHansen
	h.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: time.Hour})
	d := h.start(t)
	e1 := scEntry("e1", mette, "2026-11-02", "8")
	drv.publish(t, []paysync.Entry{e1})
	waitFor(t, "the merge's create held back", 10*time.Second, func() bool { return h.sb.State().Counters.Faults[sandbox.FaultRateLimit] > 0 })
	scKill(t, h, d) // a graceful stop would wait out the Retry-After (the grace)
	h.sb.SetFaults()
	scWant(t, h.sb, "after the held-back create", nil)
	scCmd(t, h, 0, "revert", "1", "--yes")
	scWant(t, h.sb, "after revert 1", nil)
	d = h.start(t)
	// The same entry in a later message (with another one: a message of
	// the very same bytes is a redelivery, a duplicate as a whole).
	scPublishMessage(t, drv, sandbox.CompanyNordlys, "again", []paysync.Entry{e1, scEntry("e2", sandbox.EmpLarsNielsen, "2026-11-03", "2")})
	scEventually(t, h.sb, "after a later message listing e1 again", 10*time.Second,
		map[string]string{nordlys(mette, "T1", ""): "8", nordlys(sandbox.EmpLarsNielsen, "T1", ""): "2"})
	d.stop(t)
}

// 5. A replay of a message's import racing the daemon's merge: one
// 8-hour entry must end as one pay part of 8. The replay is the
// console's, inside `paysync run` (a CLI replay cannot run beside the
// daemon: it waits for the ledger's work lock). The race is staged in
// one order, deterministically: the console's replay of import 1 plans
// while the entry is held (not merged yet: linger 3 s), and its first
// payroll read after reading what is live (the mapper's pay codes or
// employees) is held back by a proxy until the daemon's merge has paid
// the entry; then the replay goes on. If the replay makes no such read
// (or the merge waits for the replay), the steps simply run in turn; the
// end state asserted is the same.
func TestScenario05_ConsoleReplayImportRacingMerge(t *testing.T) {
	h, drv := scDaemon(t, "", "PAYSYNC_BATCH_LINGER", "3s")
	gate := newSCGate(t, h.env["PAYSYNC_PAYROLL_URL"])
	h.env["PAYSYNC_PAYROLL_URL"] = gate.url
	con := scConsoleIn(t, h)
	const mette = sandbox.EmpMetteHansen
	d := h.start(t)
	drv.publish(t, []paysync.Entry{scEntry("m1", mette, "2026-11-02", "8")})
	waitFor(t, "the stream drained", 20*time.Second, func() bool { return drv.drained(t) })
	code, page := con.get(t, "/actions/replay?import=1")
	if code != http.StatusOK || !strings.Contains(page, `id="confirm"`) {
		// Nothing to confirm: the console offers no replay of a held entry.
		t.Logf("the console's replay preview of import 1 (held): %d, no confirmation form", code)
		scEventually(t, h.sb, "after the merge", 15*time.Second, map[string]string{nordlys(mette, "T1", ""): "8"})
		d.stop(t)
		return
	}
	if got := scPayroll(h.sb); len(got) != 0 {
		t.Logf("note: the merge came before the console's preview (a linger of 3 s was too short here): payroll holds %v", scTotals(got))
	}
	gate.arm("pay_parts_meta", "employees")
	form := scConfirmForm(t, page)
	posted := make(chan string, 1)
	go func() {
		code, body := con.post(t, "/actions/replay", form)
		posted <- fmt.Sprintf("%d %s", code, scNotice(body))
	}()
	select {
	case <-gate.held:
		t.Log("the console's replay is held at its first payroll read after planning")
		if got := scPayroll(h.sb); len(got) != 0 {
			t.Logf("note: the merge came before the console's replay planned: payroll holds %v", scTotals(got))
		}
		deadline := time.Now().Add(10 * time.Second)
		for scPayroll(h.sb)[nordlys(mette, "T1", "")].units.String() != "8" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("while the replay is held, payroll holds %v", scTotals(scPayroll(h.sb)))
		gate.open()
		t.Logf("the console's replay: %s", <-posted)
	case r := <-posted:
		gate.open()
		t.Logf("the console's replay made no payroll read to hold: %s", r)
	case <-time.After(15 * time.Second):
		gate.open()
		t.Fatal("the console's replay neither ended nor read payroll in 15 s")
	}
	scEventually(t, h.sb, "after the console's replay and the merge", 15*time.Second, map[string]string{nordlys(mette, "T1", ""): "8"})
	d.stop(t)
}

// 6. Held entries the rules refuse at merge (the rules changed between
// intake and merge: no rule maps them any more) must not stall every
// merge: another company's good entries are paid within a deadline.
func TestScenario06_RefusedHeldEntriesDoNotStall(t *testing.T) {
	// Held, not reconciled, before the stop: a cutoff that does not come.
	h, drv := scDaemon(t, "", "PAYSYNC_SEND", "cutoff", "PAYSYNC_CUTOFF", "0 0 1 1 *")
	const mette, jonas = sandbox.EmpMetteHansen, sandbox.EmpJonasLarsen
	d := h.start(t)
	// One message of scMergeChunk entries (a merge takes at most 5,000
	// held entries, the oldest first), committed as one import.
	var held []paysync.Entry
	for i := range scMergeChunk {
		held = append(held, scEntry(fmt.Sprintf("h%05d", i), mette, fmt.Sprintf("2026-11-%02d", 1+i%28), "1"))
	}
	scPublishMessage(t, drv, sandbox.CompanyNordlys, "held", held)
	waitFor(t, "the stream drained", 30*time.Second, func() bool { return drv.drained(t) })
	d.stop(t)
	// New rules: only the tag "sick" is mapped (no default); entries with
	// a code of their own need no rule.
	h.env["PAYSYNC_MAPPING"] = scRules(t, "aggregate: true\nrules:\n  - name: sick\n    match: {tags: [sick]}\n    code: SYG\n    units: hours")
	h.env["PAYSYNC_BATCH_LINGER"] = "100ms"
	delete(h.env, "PAYSYNC_SEND") // immediate
	delete(h.env, "PAYSYNC_CUTOFF")
	h.env["PAYSYNC_LOG_LEVEL"] = "error" // not a WARN per merge retried
	d = h.start(t)
	good := paysync.Entry{ID: "g1", CompanyID: sandbox.CompanyFjordtech, EmployeeID: jonas, Date: "2026-11-03", Code: "T1", Hours: paysync.HoursFromSeconds(5 * 3600)}
	publishFor(t, drv, sandbox.CompanyFjordtech, []paysync.Entry{good})
	start := time.Now()
	scEventually(t, h.sb, "Fjordtech's entry beside Nordlys's refused held entries", 10*time.Second,
		map[string]string{scKey(sandbox.CompanyFjordtech, jonas, "T1", ""): "5"})
	t.Logf("Fjordtech's entry paid within %s", time.Since(start).Round(time.Millisecond))
	d.stop(t)
}

// 7. revert --import N of a NATS message whose entry was merged: the
// daemon took and merged the message, then stopped; `paysync revert
// --import 1 --yes` exits 0 (no panic) and payroll no longer holds its
// hours.
func TestScenario07_RevertMergedMessageImport(t *testing.T) {
	h, drv := scDaemon(t, "")
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	d := h.start(t)
	drv.publish(t, []paysync.Entry{scEntry("m1", mette, "2026-11-02", "8")})
	scEventually(t, h.sb, "after the first message", 15*time.Second, map[string]string{nordlys(mette, "T1", ""): "8"})
	drv.publish(t, []paysync.Entry{scEntry("m2", mette, "2026-11-03", "2"), scEntry("m3", lars, "2026-11-03", "4")})
	scEventually(t, h.sb, "after the later messages", 15*time.Second, map[string]string{nordlys(mette, "T1", ""): "10", nordlys(lars, "T1", ""): "4"})
	d.stop(t)
	scCmd(t, h, 0, "revert", "--import", "1", "--yes")
	scWant(t, h.sb, "after revert --import 1", map[string]string{nordlys(mette, "T1", ""): "2", nordlys(lars, "T1", ""): "4"})
}

// 8. A batch revert is not undone by a correction still pending: v1
// (e1 8 h) paid as batch 1; v2 (e1 9 h) recorded while payroll held its
// delete back, interrupted, so its unit is not applied; `revert 1`. After
// everything settles payroll holds nothing of e1, as the revert's preview
// promised (e2, of another batch, stays).
func TestScenario08_PendingCorrectionDoesNotUndoBatchRevert(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	c.do(0, "import", writeLines(t, "v1.ndjson", scT1("e1", mette, "2026-11-02", "8")))
	c.do(0, "import", writeLines(t, "other.ndjson", scT1("e2", lars, "2026-11-03", "4")))
	scWant(t, c.s.sb, "after v1", map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "T1", ""): "4"})
	c.interrupted(c.stalled("delete_pay_parts"), "import", writeLines(t, "v2.ndjson", scT1("e1", mette, "2026-11-02", "9")))
	c.s.sb.SetFaults()
	c.do(0, "revert", "1", "--yes")
	scWant(t, c.s.sb, "after revert 1", map[string]string{nordlys(lars, "T1", ""): "4"})
	r := c.settle()
	t.Logf("paysync run --once: exit %d", r.code)
	scWant(t, c.s.sb, "after run --once", map[string]string{nordlys(lars, "T1", ""): "4"})
	c.any("import", writeLines(t, "dec.ndjson", scT1("d1", sandbox.EmpSofieJensen, "2026-12-01", "1")))
	scWant(t, c.s.sb, "after another import", map[string]string{nordlys(lars, "T1", ""): "4", nordlys(sandbox.EmpSofieJensen, "T1", ""): "1"})
}

// 9. replay --period after T2's rate changed in the rules moves T2 to the
// new rate, and leaves the period's unchanged groups as they are (same
// payroll ids): exit 0.
func TestScenario09_ReplayPeriodAfterRateChange(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	c.do(0, "import", scToggl)
	before := scPayroll(c.s.sb)
	const mette = sandbox.EmpMetteHansen
	t2 := nordlys(mette, "T2", "310.5")
	if before[t2].units.String() != "2.67" {
		t.Fatalf("after the import payroll holds %v, want Mette's T2 2.67 at 310.5", scTotals(before))
	}
	c.env["PAYSYNC_MAPPING"] = scRulesRate(t, "310.50", "350")
	c.do(0, "replay", "--period", "2026-11", "--yes")
	want := maps.Clone(before)
	delete(want, t2)
	got := scPayroll(c.s.sb)
	want[nordlys(mette, "T2", "350")] = got[nordlys(mette, "T2", "350")]
	if g := got[nordlys(mette, "T2", "350")]; g.units.String() != "2.67" || len(g.ids) != 1 {
		t.Fatalf("after replay --period 2026-11 payroll holds %v, want Mette's T2 2.67 at 350 as one pay part", scTotals(got))
	}
	scSame(t, c.s.sb, "after replay --period 2026-11 (the groups it does not change)", want)
}

// 9 (console). TestScenario09 through `paysync console`'s replay of the
// period (preview, then its confirmation).
func TestScenario09_ReplayPeriodAfterRateChangeConsole(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	c.do(0, "import", scToggl)
	before := scPayroll(c.s.sb)
	const mette = sandbox.EmpMetteHansen
	addr := freeAddr(t)
	env := with(c.env, "PAYSYNC_MAPPING", scRulesRate(t, "310.50", "350"), "PAYSYNC_CONSOLE_ADDR", addr, "PAYSYNC_CONSOLE_PASSWORD", scConsolePassword)
	env["PAYSYNC_MAPPING"], _ = filepath.Abs(env["PAYSYNC_MAPPING"])
	p := secretStart(t, env, "console")
	con := scConsole{base: "http://" + addr}
	code, page := con.get(t, "/actions/replay?period=2026-11")
	if code != http.StatusOK {
		t.Fatalf("the console's replay preview of 2026-11: %d\n%s\n%s", code, page, p.stderr.String())
	}
	code, page = con.post(t, "/actions/replay", scConfirmForm(t, page))
	t.Logf("the console's replay of 2026-11: %d %s", code, scNotice(page))
	p.stop(10 * time.Second)
	got := scPayroll(c.s.sb)
	t2new := nordlys(mette, "T2", "350")
	if g := got[t2new]; g.units.String() != "2.67" || len(g.ids) != 1 {
		t.Fatalf("after the console's replay of 2026-11 payroll holds %v, want Mette's T2 2.67 at 350 as one pay part (the console answered %d: %s)",
			scTotals(got), code, scNotice(page))
	}
	want := maps.Clone(before)
	delete(want, nordlys(mette, "T2", "310.5"))
	want[t2new] = got[t2new]
	scSame(t, c.s.sb, "after the console's replay of 2026-11 (the groups it does not change)", want)
}

// 10. Reverting a correction import gives back the hours as they stood
// before it: toggl.csv (import 1), its corrected re-export (import 2),
// revert --import 2: payroll holds exactly what it held after import 1
// (per group). replay --import 2: what it held after import 2.
func TestScenario10_RevertCorrectionImport(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	afterV1 := scTogglGroups()
	afterV2 := with(afterV1, nordlys(sandbox.EmpLarsNielsen, "SYG", ""), "8.5")
	c.do(0, "import", scToggl)
	scWant(t, c.s.sb, "after import 1", afterV1)
	c.do(0, "import", scTogglCorrected)
	scWant(t, c.s.sb, "after import 2 (the correction)", afterV2)
	c.do(0, "revert", "--import", "2", "--yes")
	scWant(t, c.s.sb, "after revert --import 2 (want what import 1 made)", afterV1)
	c.do(0, "replay", "--import", "2", "--yes")
	scWant(t, c.s.sb, "after replay --import 2 (want what import 2 made)", afterV2)
}

// 10 (NATS). TestScenario10 with messages: message 1 (import 1: c1 8 h
// T1, c3 8 h SYG), message 2 (import 2: c3 corrected to 8.5 h), both
// merged; the daemon stops; revert --import 2: payroll as after message
// 1; replay --import 2: as after message 2.
func TestScenario10_RevertCorrectionImportNATS(t *testing.T) {
	h, drv := scDaemon(t, "")
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	afterV1 := map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "SYG", ""): "8"}
	afterV2 := map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "SYG", ""): "8.5"}
	d := h.start(t)
	scPublishMessage(t, drv, sandbox.CompanyNordlys, "v1", []paysync.Entry{cdEntry("c1", mette, "2026-11-02", "8", false), cdEntry("c3", lars, "2026-11-02", "8", true)})
	scEventually(t, h.sb, "after message 1", 10*time.Second, afterV1)
	scPublishMessage(t, drv, sandbox.CompanyNordlys, "v2", []paysync.Entry{cdEntry("c3", lars, "2026-11-02", "8.5", true)})
	scEventually(t, h.sb, "after message 2 (the correction)", 10*time.Second, afterV2)
	d.stop(t)
	r := scCmd(t, h, 0, "revert", "--import", "2", "--yes")
	t.Logf("paysync revert --import 2:\n%s", r.stdout)
	scWant(t, h.sb, "after revert --import 2 (want what message 1 made)", afterV1)
	scCmd(t, h, 0, "replay", "--import", "2", "--yes")
	scWant(t, h.sb, "after replay --import 2 (want what message 2 made)", afterV2)
}

// 11. Three rules that all map to T1 make one group for one person × rate
// × month, so one T1 pay part, not one per rule; a later import adding
// entries replaces that one pay part (delete + create), not a new one
// beside it.
func TestScenario11_OnePayPartPerGroupNotPerRule(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{}, "PAYSYNC_MAPPING", scRules(t, threeT1Rules))
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "a.ndjson",
		scRowProject("r1", mette, "2026-11-02", "4", "Havnen"),
		scRowProject("r2", mette, "2026-11-03", "3", "Internal"),
		scRowProject("r3", mette, "2026-11-04", "2", "Other")))
	scExpect(t, c.s.sb, "after the first import", map[string]string{nordlys(mette, "T1", ""): "9"})
	c.do(0, "import", writeLines(t, "b.ndjson",
		scRowProject("r4", mette, "2026-11-05", "1", "Havnen"),
		scRowProject("r5", mette, "2026-11-06", "1.5", "Other")))
	scWant(t, c.s.sb, "after a later import adding entries", map[string]string{nordlys(mette, "T1", ""): "11.5"})
}

// 11 (NATS). TestScenario11 with one message per entry, merged by the
// daemon: one T1 pay part for Mette, replaced (not added to) by later
// messages.
func TestScenario11_OnePayPartPerGroupNotPerRuleNATS(t *testing.T) {
	h, drv := scDaemon(t, scRules(t, "aggregate: true\nperiod: month\n"+threeT1Rules))
	const mette = sandbox.EmpMetteHansen
	entry := func(id, date, hours, project string) paysync.Entry {
		return paysync.Entry{ID: id, EmployeeID: mette, Date: date, Project: project,
			Hours: paysync.HoursFromSeconds(decimal.RequireFromString(hours).Mul(decimal.NewFromInt(3600)).IntPart())}
	}
	d := h.start(t)
	drv.publish(t, []paysync.Entry{entry("r1", "2026-11-02", "4", "Havnen"), entry("r2", "2026-11-03", "3", "Internal"), entry("r3", "2026-11-04", "2", "Other")})
	scEventually(t, h.sb, "after the first messages", 10*time.Second, map[string]string{nordlys(mette, "T1", ""): "9"})
	drv.publish(t, []paysync.Entry{entry("r4", "2026-11-05", "1", "Havnen"), entry("r5", "2026-11-06", "1.5", "Other")})
	scEventually(t, h.sb, "after later messages", 10*time.Second, map[string]string{nordlys(mette, "T1", ""): "11.5"})
	d.stop(t)
}

// 12. A closed period is frozen: import 1 paid, 2026-11 closed; then
// revert --import 1, a replay --import of an import reverted before the
// close, or a new entry dated in 2026-11: payroll keeps exactly what it
// held at the close (ids and totals).
func TestScenario12_ClosedPeriodFrozen(t *testing.T) {
	const mette, lars, sofie = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen
	first := func(t *testing.T) string {
		return writeLines(t, "nov.ndjson", scT1("e1", mette, "2026-11-02", "8"), scT1("e2", lars, "2026-11-03", "4"))
	}
	t.Run("revert --import", func(t *testing.T) {
		c := newSCCLI(t, sandbox.Options{})
		c.do(0, "import", first(t))
		c.do(0, "periods", "close", "2026-11")
		atClose := scPayroll(c.s.sb)
		c.any("revert", "--import", "1", "--yes")
		scSame(t, c.s.sb, "after revert --import 1", atClose)
	})
	t.Run("replay --import", func(t *testing.T) {
		c := newSCCLI(t, sandbox.Options{})
		c.do(0, "import", first(t))
		c.do(0, "revert", "--import", "1", "--yes")
		scWant(t, c.s.sb, "after revert --import 1", nil)
		c.do(0, "periods", "close", "2026-11")
		c.any("replay", "--import", "1", "--yes")
		scWant(t, c.s.sb, "after replay --import 1", nil)
	})
	t.Run("new entry", func(t *testing.T) {
		c := newSCCLI(t, sandbox.Options{})
		c.do(0, "import", first(t))
		c.do(0, "periods", "close", "2026-11")
		atClose := scPayroll(c.s.sb)
		c.any("import", writeLines(t, "late.ndjson", scT1("e3", sofie, "2026-11-04", "5")))
		c.settle()
		scSame(t, c.s.sb, "after an import of a new entry dated in 2026-11", atClose)
	})
}

// 13. replay BATCH does not pay again the entries of an import reverted
// after the batch was: import 1 → batch 1; revert 1; revert --import 1;
// replay 1: payroll holds nothing of import 1.
func TestScenario13_ReplayBatchOfRevertedImport(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	c.do(0, "import", scToggl)
	c.do(0, "revert", "1", "--yes")
	scWant(t, c.s.sb, "after revert 1", nil)
	c.any("revert", "--import", "1", "--yes")
	scWant(t, c.s.sb, "after revert --import 1", nil)
	c.any("replay", "1", "--yes")
	scWant(t, c.s.sb, "after replay 1", nil)
}
