package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// env is a real sandbox over loopback HTTP, the real client and a real
// SQLite ledger.
type env struct {
	sb     *sandbox.Server
	url    string
	cl     *payroll.Client
	led    *ledger.Ledger
	schema payroll.Schema
}

func setup(t testing.TB, opts sandbox.Options) *env {
	t.Helper()
	return setupWith(t, opts, nil)
}

// setupWith is setup with the sandbox's handler wrapped (nil: as it is),
// for answers the sandbox's faults cannot give.
func setupWith(t testing.TB, opts sandbox.Options, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	sb := sandbox.New(opts)
	h := sb.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{sb: sb, url: srv.URL}
	e.cl = e.client(t, sb.IssueRefreshToken())
	led, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	e.led = led
	if e.schema, err = e.cl.Schema(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) client(t testing.TB, rt string) *payroll.Client {
	o := e.sb.Options()
	cl, err := payroll.New(payroll.Config{URL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RefreshToken: rt, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (e *env) deliverer(cl *payroll.Client) *worker.Deliverer {
	return &worker.Deliverer{L: e.led, P: cl, Sleep: noSleep, MaxAttempts: 20}
}

func (e *env) importer(t *testing.T, rules *mapping.Rules, batch int) *worker.Importer {
	if rules == nil {
		rules = mapping.DefaultRules()
		rules.Aggregate = false // one pay part per entry: easy to count
	}
	m := mapping.NewMapper(rules, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys)
	return &worker.Importer{L: e.led, D: e.deliverer(e.cl), Mapper: m, Rules: rules, Wire: e.schema, BatchSize: batch}
}

func loadRules(t *testing.T, path string) *mapping.Rules {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := mapping.LoadRules(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// key is a pay part's identity in payroll terms.
func key(company, emp, code string, n paysync.Numbers) string {
	f := func(d interface{ String() string }, ok bool) string {
		if !ok {
			return "-"
		}
		return d.String()
	}
	return strings.Join([]string{company, emp, code, f(n.Units.Decimal, n.Units.Valid), f(n.Rate.Decimal, n.Rate.Valid), f(n.Amount.Decimal, n.Amount.Valid)}, "|")
}

// sandboxParts is the multiset of pay parts in payroll.
func (e *env) sandboxParts() []string {
	var out []string
	for _, c := range e.sb.State().Companies {
		for _, p := range c.PayParts {
			out = append(out, key(c.ID, p.EmployeeID, p.Code, p.Numbers))
		}
	}
	sort.Strings(out)
	return out
}

// checkLedger: every open-or-done batch is created, every created item's
// payroll id exists in the sandbox exactly once.
func (e *env) checkLedger(t *testing.T) {
	t.Helper()
	bs, err := e.led.ListBatches(ctx(t), ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	inSandbox := map[string]bool{}
	for _, c := range e.sb.State().Companies {
		for _, p := range c.PayParts {
			inSandbox[p.ID] = true
		}
	}
	seen := map[string]bool{}
	for _, b := range bs {
		if b.State != paysync.BatchCreated && b.State != paysync.BatchSplit {
			t.Errorf("batch %d is %s (%s)", b.ID, b.State, b.LastError)
		}
		items, _ := e.led.Items(ctx(t), b.ID)
		for _, it := range items {
			if it.State != paysync.PartCreated {
				continue
			}
			if !inSandbox[it.PayrollID] || seen[it.PayrollID] {
				t.Errorf("batch %d item %d: payroll id %q in sandbox %v, twice %v", b.ID, it.ID, it.PayrollID, inSandbox[it.PayrollID], seen[it.PayrollID])
			}
			seen[it.PayrollID] = true
		}
	}
}

func sameMultiset(t *testing.T, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		extra, missing := diff(got, want), diff(want, got)
		t.Fatalf("pay parts differ: %d in payroll, want %d\nextra: %v\nmissing: %v", len(got), len(want), extra, missing)
	}
}

func diff(a, b []string) []string {
	m := map[string]int{}
	for _, s := range b {
		m[s]++
	}
	var out []string
	for _, s := range a {
		if m[s] > 0 {
			m[s]--
			continue
		}
		out = append(out, s)
	}
	if len(out) > 10 {
		out = append(out[:10], "…")
	}
	return out
}

// goldenParts reads the dry-run golden JSON of a sample: the expected set.
func goldenParts(t *testing.T, sample string) []string {
	b, err := os.ReadFile(filepath.Join("..", "cmd", "paysync", "testdata", "golden", sample+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		PayParts []paysync.PlannedPayPart `json:"pay_parts"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pp := range rep.PayParts {
		out = append(out, key(pp.CompanyID, pp.EmployeeID, pp.Code, pp.Numbers))
	}
	return out
}

func TestImporter_SamplesEndToEnd(t *testing.T) {
	for _, s := range []struct {
		file  string
		rules bool
	}{{"toggl.csv", true}, {"clockify.csv", true}, {"harvest.csv", true}, {"entries.ndjson", false}} {
		t.Run(s.file, func(t *testing.T) {
			e := setup(t, sandbox.Options{})
			rules := mapping.DefaultRules() // as paysync import without a rules file
			if s.rules {
				rules = loadRules(t, "../deploy/examples/rules.yaml")
			}
			payload, err := os.ReadFile("../deploy/examples/" + s.file)
			if err != nil {
				t.Fatal(err)
			}
			im := e.importer(t, rules, 3)
			rep, err := im.Import(ctx(t), "file", s.file, payload)
			if err != nil || len(rep.ProblemList()) > 0 {
				t.Fatalf("import: %v %v", err, rep.ProblemList())
			}
			sameMultiset(t, e.sandboxParts(), goldenParts(t, s.file))
			e.checkLedger(t)
			// The same file again: zero create calls.
			before := e.sb.State().Counters.Requests["create_pay_parts"]
			rep, err = e.importer(t, rules, 3).Import(ctx(t), "file", s.file, payload)
			if err != nil || !rep.Duplicate {
				t.Fatalf("second import: %+v %v", rep, err)
			}
			if after := e.sb.State().Counters.Requests["create_pay_parts"]; after != before {
				t.Fatalf("second import made %d create calls", after-before)
			}
		})
	}
}

// ndjson makes n entries for the four Nordlys people, code T1.
func ndjson(n int, prefix string) []byte {
	emps := []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}
	hours := []string{"7.5", "0:20", "1.25", "8", "3:45"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"%s-%d","employee_id":"%s","date":"2026-11-%02d","hours":"%s","code":"T1"}`+"\n",
			prefix, i, emps[i%len(emps)], i%28+1, hours[i%len(hours)])
	}
	return []byte(b.String())
}

func expectedFor(t *testing.T, e *env, payload []byte) []string {
	rules := mapping.DefaultRules()
	rules.Aggregate = false
	m := mapping.NewMapper(rules, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys)
	p := mapping.NewPlanner(rules, e.schema)
	rd, _, err := mapping.NewReader("x", strings.NewReader(string(payload)), mapping.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		en, err := rd.Next()
		if err != nil {
			break
		}
		lines, err := m.Map(ctx(t), en)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			p.Place(l)
		}
	}
	var out []string
	for _, pl := range p.Take(true) {
		if len(pl.Problems) == 0 {
			out = append(out, key(pl.PayPart.CompanyID, pl.PayPart.EmployeeID, pl.PayPart.Code, pl.PayPart.Numbers))
		}
	}
	return out
}

// TestDeliverer_FaultMatrix: 30 % ambiguous, 10 % 5xx, 10 % 429 over 1,200
// entries, with identical pay parts already in payroll: exactly the expected
// multiset, none twice, none missing.
func TestDeliverer_FaultMatrix(t *testing.T) {
	e := setup(t, sandbox.Options{Seed: 7})
	payload := ndjson(1200, "fm")
	want := expectedFor(t, e, payload)
	// Identical pay parts that existed before the import.
	var seeded []string
	for i := 0; i < 5; i++ {
		in := paysync.PayPartInput{EmployeeID: sandbox.EmpMetteHansen, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("7.5")}}
		if _, err := e.sb.SeedPayPart(sandbox.CompanyNordlys, in); err != nil {
			t.Fatal(err)
		}
		seeded = append(seeded, key(sandbox.CompanyNordlys, in.EmployeeID, in.Code, in.Numbers))
	}
	e.sb.SetFaults(
		sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts", Probability: 0.3},
		sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503, Probability: 0.1 / 0.7},
		sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", Probability: 0.1 / 0.6, RetryAfter: time.Second},
	)
	rules := mapping.DefaultRules()
	rules.Aggregate = false
	im := e.importer(t, rules, 20)
	rep, err := im.Import(ctx(t), "file", "matrix.ndjson", payload)
	if err != nil || len(rep.ProblemList()) > 0 {
		t.Fatalf("import: %v %v", err, rep.ProblemList())
	}
	st := e.sb.State()
	t.Logf("faults fired: %v; create requests %d; reconciled %d", st.Counters.Faults, st.Counters.Requests["create_pay_parts"], im.D.Stats.Reconciled)
	if st.Counters.Faults[sandbox.FaultDropAfterCommit] == 0 || st.Counters.Faults[sandbox.FaultRateLimit] == 0 || st.Counters.Faults[sandbox.FaultErrorBefore] == 0 {
		t.Fatalf("not every fault fired: %v", st.Counters.Faults)
	}
	sameMultiset(t, e.sandboxParts(), append(seeded, want...))
	e.checkLedger(t)
}

// A crash after create_pay_parts executed but before its ids were stored:
// the next start reconciles instead of sending again.
func TestDeliverer_RecoverAfterCrashWhileSending(t *testing.T) {
	e := setup(t, sandbox.Options{})
	// An identical pay part that was there before: must not be claimed.
	seed := paysync.PayPartInput{EmployeeID: sandbox.EmpMetteHansen, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("7.5")}}
	if _, err := e.sb.SeedPayPart(sandbox.CompanyNordlys, seed); err != nil {
		t.Fatal(err)
	}
	payload := ndjson(6, "crash")
	im := e.importer(t, nil, 10)
	rep, err := im.Plan(ctx(t), "file", "crash.ndjson", payload)
	if err != nil {
		t.Fatal(err)
	}
	// Snapshot, then the first half of "deliver": attempt recorded, call made, process dies.
	d := e.deliverer(e.cl)
	b := rep.Batches[0]
	items, _ := e.led.Items(ctx(t), b)
	current, _ := e.cl.PayParts(ctx(t), sandbox.CompanyNordlys)
	var foreign []string
	for _, p := range current {
		foreign = append(foreign, p.ID)
	}
	if err := e.led.AddForeign(ctx(t), sandbox.CompanyNordlys, foreign, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.led.BeginAttempt(ctx(t), b, paysync.AttemptCreate, len(items)); err != nil {
		t.Fatal(err)
	}
	var in []paysync.PayPartInput
	for _, it := range items {
		in = append(in, it.PayPartInput)
	}
	if _, err := e.cl.CreatePayParts(ctx(t), sandbox.CompanyNordlys, in); err != nil {
		t.Fatal(err)
	}
	// Restart.
	if err := d.Recover(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver(ctx(t), rep.Batches); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sandboxParts()); n != 7 {
		t.Fatalf("payroll holds %d pay parts, want 6 + the seeded one", n)
	}
	if d.Stats.Reconciled != 6 || d.Stats.Attempts != 0 {
		t.Fatalf("reconciled %d, create attempts after restart %d; want 6 and 0", d.Stats.Reconciled, d.Stats.Attempts)
	}
	e.checkLedger(t)
}

func TestDeliverer_RejectedItemIsIsolated(t *testing.T) {
	// With Boolean flags paysync cannot know that T2 needs a rate: the
	// server refuses the item, the others are still created.
	e := setup(t, sandbox.Options{})
	payload := []byte(`{"id":"r1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"7.5","code":"T1"}
{"id":"r2","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"2","code":"T2"}
{"id":"r3","employee_id":"MV8xXzM=","date":"2026-11-02","hours":"6","code":"T1"}
`)
	im := e.importer(t, nil, 10)
	rep, err := im.Import(ctx(t), "file", "rej.ndjson", payload)
	if err != nil {
		t.Fatal(err)
	}
	if im.D.Stats.Rejected != 1 || im.D.Stats.Created != 2 || len(e.sandboxParts()) != 2 {
		t.Fatalf("stats %+v, payroll %v", im.D.Stats, e.sandboxParts())
	}
	// The ledger keeps the refused pay part as rejected, with payroll's
	// reason; the others are created.
	db := rawLedger(t, e.led.Path())
	if n := count(t, db, `SELECT count(*) FROM pay_parts WHERE state = 'rejected' AND code = 'T2' AND error LIKE '%rate%'`); n != 1 {
		t.Errorf("%d pay parts of T2 rejected with payroll's reason, want 1", n)
	}
	if n := count(t, db, `SELECT count(*) FROM pay_parts WHERE state = 'created'`); n != 2 {
		t.Errorf("%d pay parts created, want 2", n)
	}
	// The reject names the entry behind the refused pay part (its group's
	// counting line).
	rejects, _ := e.led.Rejects(ctx(t), rep.ImportID)
	if len(rejects) != 1 || rejects[0].EntryID != "r2" || !strings.Contains(rejects[0].Message, "rate") {
		t.Fatalf("rejects = %+v", rejects)
	}
}

func TestDeliverer_RevokedKeepsEverythingPending(t *testing.T) {
	e := setup(t, sandbox.Options{Rotate: true})
	im := e.importer(t, nil, 2)
	rep, err := im.Plan(ctx(t), "file", "rv.ndjson", ndjson(5, "rv"))
	if err != nil {
		t.Fatal(err)
	}
	e.sb.RevokeAll()
	revoked := e.client(t, "stale-token")
	d := e.deliverer(revoked)
	if err := d.Deliver(ctx(t), rep.Batches); !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("err = %v, want revoked", err)
	}
	if n := len(e.sandboxParts()); n != 0 {
		t.Fatalf("%d sent while revoked", n)
	}
	// Re-connected: everything lands once.
	d = e.deliverer(e.client(t, e.sb.IssueRefreshToken()))
	if err := d.Recover(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver(ctx(t), rep.Batches); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sandboxParts()); n != 5 {
		t.Fatalf("payroll holds %d, want 5", n)
	}
	e.checkLedger(t)
}

// TestRevertAndReplay: reverting an import is undo (its pay parts
// deleted; ones deleted by hand are gone), replaying it is redo (the same
// pay parts again); each run twice changes nothing and calls nothing.
func TestRevertAndReplay(t *testing.T) {
	e := setup(t, sandbox.Options{})
	payload := ndjson(8, "rr")
	im := e.importer(t, nil, 3)
	rep, err := im.Import(ctx(t), "file", "rr.ndjson", payload)
	if err != nil {
		t.Fatal(err)
	}
	before := e.sandboxParts()
	if len(before) != 8 {
		t.Fatalf("import: payroll holds %d, want 8", len(before))
	}
	ops := func() (*worker.Operations, *worker.Deliverer) {
		d := e.deliverer(e.cl)
		return &worker.Operations{L: e.led, R: im.Reconciler(), D: d}, d
	}
	run := func(replay bool) *worker.Deliverer {
		t.Helper()
		o, d := ops()
		if _, _, err := o.Run(ctx(t), worker.Operation{Replay: replay, Target: ledger.Target{Import: rep.ImportID}}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Replay of what payroll holds: nothing to do, nobody paid twice.
	calls := e.cl.Calls()
	run(true)
	if e.cl.Calls() != calls || len(e.sandboxParts()) != 8 {
		t.Fatalf("replay before revert: %d calls, payroll holds %d", e.cl.Calls()-calls, len(e.sandboxParts()))
	}
	// Two pay parts deleted by hand in payroll.
	st := e.sb.State()
	for _, p := range st.Companies[0].PayParts[:2] {
		if err := e.sb.DeletePayPartDirect(sandbox.CompanyNordlys, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	d := run(false)
	if d.Stats.Gone != 2 || d.Stats.Deleted != 6 || len(e.sandboxParts()) != 0 {
		t.Fatalf("revert: %+v, payroll %v", d.Stats, e.sandboxParts())
	}
	// Twice: nothing left to do, no error, no call.
	calls = e.cl.Calls()
	run(false)
	if e.cl.Calls() != calls {
		t.Errorf("second revert made %d calls", e.cl.Calls()-calls)
	}
	// Replay after revert recreates the same pay parts.
	run(true)
	sameMultiset(t, e.sandboxParts(), before)
	calls = e.cl.Calls()
	run(true)
	if e.cl.Calls() != calls {
		t.Errorf("second replay made %d calls", e.cl.Calls()-calls)
	}
}

func TestImporter_EntryIDsAgain(t *testing.T) {
	e := setup(t, sandbox.Options{})
	first := []byte(`{"id":"x1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"7.5","code":"T1"}
{"id":"x2","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"6","code":"T1"}
`)
	if _, err := e.importer(t, nil, 10).Import(ctx(t), "file", "a.ndjson", first); err != nil {
		t.Fatal(err)
	}
	creates := e.sb.State().Counters.Requests["create_pay_parts"]
	// Another file with the same entries (one re-ordered field, same content): duplicates.
	again := []byte(`{"employee_id":"MV8xXzE=","id":"x1","date":"2026-11-02","hours":"7.5","code":"T1"}
`)
	rep, err := e.importer(t, nil, 10).Import(ctx(t), "file", "b.ndjson", again)
	if err != nil || rep.Duplicates != 1 || len(rep.ProblemList()) != 0 || rep.PayParts != 0 {
		t.Fatalf("same entry again: %+v %v", rep, err)
	}
	if n := e.sb.State().Counters.Requests["create_pay_parts"]; n != creates {
		t.Fatalf("%d more create calls", n-creates)
	}
	// The same id with other content: a correction, its pay part replaced.
	changed := []byte(`{"id":"x2","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"9","code":"T1"}
`)
	rep, err = e.importer(t, nil, 10).Import(ctx(t), "file", "c.ndjson", changed)
	if err != nil {
		t.Fatal(err)
	}
	if probs := rep.ProblemList(); len(probs) != 0 || rep.Corrections != 1 {
		t.Fatalf("changed entry: %d corrections, problems %v", rep.Corrections, probs)
	}
	got := e.payrollParts()
	if len(got) != 2 || got[sandbox.EmpMetteHansen+"|T1|7.5"] == "" || got[sandbox.EmpLarsNielsen+"|T1|9"] == "" {
		t.Fatalf("payroll holds %v, want x1's 7.5 and x2's corrected 9", got)
	}
}

// The sending loop: single-entry messages of two companies are committed
// held; the loop's reconcile (its Correct hook, as in the daemon) plans them
// into each company's batches of at most BatchSize, which are delivered in
// parallel per company, each company in order: every pay part once.
func TestPipeline_TwoCompanies(t *testing.T) {
	e := setup(t, sandbox.Options{})
	im := e.importer(t, nil, 7)
	im.Accumulate, im.AllOrNothing, im.Defer = true, true, true
	want := 0
	for i := 0; i < 40; i++ {
		company, emp := sandbox.CompanyNordlys, sandbox.EmpMetteHansen
		if i%2 == 1 {
			company, emp = sandbox.CompanyFjordtech, sandbox.EmpJonasLarsen
		}
		msg := fmt.Sprintf(`{"id":"p-%d","company_id":"%s","employee_id":"%s","date":"2026-11-02","hours":"%d","code":"T1"}`, i, company, emp, i+1)
		rep, err := im.Plan(ctx(t), "nats", "timesheets."+company+".t", []byte(msg))
		if err != nil || len(rep.ProblemList()) > 0 || len(rep.Batches) != 0 {
			t.Fatalf("message %d: %v %v, batches %v", i, err, rep.ProblemList(), rep.Batches)
		}
		want++
	}
	if n := len(e.liveParts(t)); n != 0 {
		t.Fatalf("%d pay parts planned before the reconcile", n)
	}
	p := &worker.Pipeline{L: e.led, D: e.deliverer(e.cl), Linger: time.Hour, InFlight: 2, Correct: applyWith(im.Reconciler())}
	if err := p.Flush(ctx(t), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := len(e.sandboxParts()); got != want {
		t.Fatalf("payroll holds %d, want %d", got, want)
	}
	if s := p.Stats(); s.Created != want {
		t.Fatalf("stats %+v", s)
	}
	// 20 per company: batches of 7, 7 and 6, each of one company.
	bs, err := e.led.ListBatches(ctx(t), ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string][]int{}
	for _, b := range bs {
		sizes[b.CompanyID] = append(sizes[b.CompanyID], b.Items)
	}
	for _, c := range []string{sandbox.CompanyNordlys, sandbox.CompanyFjordtech} {
		got := sizes[c]
		sort.Sort(sort.Reverse(sort.IntSlice(got)))
		if fmt.Sprint(got) != "[7 7 6]" {
			t.Errorf("company %s: batches of %v pay parts, want [7 7 6]", c, got)
		}
	}
	// Nothing more to do: a second flush calls nothing.
	calls := e.cl.Calls()
	if err := p.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if n := e.cl.Calls() - calls; n != 0 {
		t.Errorf("a second flush made %d calls", n)
	}
	e.checkLedger(t)
}

// slowRecord is a ledger whose first recording of a create result waits
// until another company's create call has started: it fails unless the
// pipeline's call slot is free while a company records its result.
type slowRecord struct {
	*ledger.Ledger
	t       *testing.T
	once    sync.Once
	started func(notCompany string) <-chan struct{}
}

func (l *slowRecord) wait(ctx context.Context, batchID int64) {
	l.once.Do(func() {
		b, err := l.Ledger.Batch(ctx, batchID)
		if err != nil {
			l.t.Error(err)
			return
		}
		select {
		case <-l.started(b.CompanyID):
		case <-time.After(20 * time.Second):
			l.t.Errorf("company %s recorded its result, and no other company's call went out meanwhile", b.CompanyID)
		}
	})
}

func (l *slowRecord) RecordCreated(ctx context.Context, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome) error {
	l.wait(ctx, batchID)
	return l.Ledger.RecordCreated(ctx, batchID, attemptID, ids, outcome)
}

func (l *slowRecord) RecordCreatedThenBegin(ctx context.Context, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome, next int64, items int) (int64, error) {
	l.wait(ctx, batchID)
	return l.Ledger.RecordCreatedThenBegin(ctx, batchID, attemptID, ids, outcome, next, items)
}

// callWatch notes the most create calls on the wire at once, and for each
// company whether another company's call started since its last call
// returned.
type callWatch struct {
	worker.Payroll
	mu           sync.Mutex
	now, most    int
	startedSince map[string]chan struct{} // closed when a company other than the key starts a call after the key's last call returned
}

func (w *callWatch) started(notCompany string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.startedSince[notCompany]
	if !ok {
		ch = make(chan struct{})
		w.startedSince[notCompany] = ch
	}
	return ch
}

func (w *callWatch) CreatePayParts(ctx context.Context, company string, in []paysync.PayPartInput) ([]paysync.PayPart, error) {
	w.mu.Lock()
	w.now++
	w.most = max(w.most, w.now)
	for other, ch := range w.startedSince {
		if other != company {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.now--
		w.startedSince[company] = make(chan struct{}) // before the call's slot is left
		w.mu.Unlock()
	}()
	return w.Payroll.CreatePayParts(ctx, company, in)
}

// PAYSYNC_IN_FLIGHT bounds the calls on the wire, not the companies being
// worked on: with one call slot and two companies, the second company's
// call goes out while the first records its result (so a company's
// ledger-first transactions between its calls do not leave the slot
// idle), and there is never more than one call at once.
func TestPipeline_CallSlotFreeWhileRecording(t *testing.T) {
	e := setup(t, sandbox.Options{})
	im := e.importer(t, nil, 3)
	im.Accumulate, im.AllOrNothing = true, true
	for i := 0; i < 12; i++ {
		company, emp := sandbox.CompanyNordlys, sandbox.EmpMetteHansen
		if i%2 == 1 {
			company, emp = sandbox.CompanyFjordtech, sandbox.EmpJonasLarsen
		}
		msg := fmt.Sprintf(`{"id":"slot-%d","company_id":"%s","employee_id":"%s","date":"2026-11-02","hours":"%d","code":"T1"}`, i, company, emp, i+1)
		if rep, err := im.Plan(ctx(t), "nats", "timesheets."+company+".t", []byte(msg)); err != nil || len(rep.ProblemList()) > 0 {
			t.Fatalf("message %d: %v %v", i, err, rep.ProblemList())
		}
	}
	w := &callWatch{Payroll: e.cl, startedSince: map[string]chan struct{}{}}
	d := e.deliverer(e.cl)
	d.P = w
	d.L = &slowRecord{Ledger: e.led, t: t, started: w.started}
	p := &worker.Pipeline{L: e.led, D: d, Linger: time.Hour, InFlight: 1}
	if err := p.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if got := len(e.sandboxParts()); got != 12 {
		t.Fatalf("payroll holds %d, want 12", got)
	}
	if w.most != 1 {
		t.Errorf("%d calls on the wire at once, want at most PAYSYNC_IN_FLIGHT (1)", w.most)
	}
	e.checkLedger(t)
}

// dieOnCall is a payroll whose nth create_pay_parts call never goes out:
// the process "dies" just before it (the call fails as if cut off).
type dieOnCall struct {
	*payroll.Client
	n, calls int
}

func (p *dieOnCall) CreatePayParts(ctx context.Context, company string, in []paysync.PayPartInput) ([]paysync.PayPart, error) {
	p.calls++
	if p.calls == p.n {
		return nil, context.Canceled
	}
	return p.Client.CreatePayParts(ctx, company, in)
}

// A batch begun in the transaction that recorded the batch before it
// (RecordCreatedThenBegin) and then never sent: after a restart it is
// reconciled (nothing of it is in payroll) and sent once; every pay part
// exists exactly once.
func TestDeliverer_CrashAfterNextBatchBegun(t *testing.T) {
	e := setup(t, sandbox.Options{})
	payload := ndjson(9, "begun")
	im := e.importer(t, nil, 3)
	rep, err := im.Plan(ctx(t), "file", "begun.ndjson", payload)
	if err != nil || len(rep.Batches) != 3 {
		t.Fatalf("plan: %v, %d batches; want 3", err, len(rep.Batches))
	}
	d := e.deliverer(e.cl)
	d.P = &dieOnCall{Client: e.cl, n: 2}
	if err := d.Deliver(ctx(t), rep.Batches); !errors.Is(err, context.Canceled) {
		t.Fatalf("Deliver = %v, want the cut-off call's error", err)
	}
	if b, err := e.led.Batch(ctx(t), rep.Batches[1]); err != nil || b.State != paysync.BatchSending || b.Attempts != 1 {
		t.Fatalf("second batch = %+v, %v; want sending, begun with the first one's result", b, err)
	}
	if n := len(e.sandboxParts()); n != 3 {
		t.Fatalf("payroll holds %d pay parts, want the first batch's 3", n)
	}
	// Restart.
	d2 := e.deliverer(e.cl)
	if err := d2.Recover(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := d2.Deliver(ctx(t), rep.Batches); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sandboxParts()); n != 9 {
		t.Fatalf("payroll holds %d pay parts, want 9", n)
	}
	e.checkLedger(t)
}
