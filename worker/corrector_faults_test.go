package worker_test

// Corrections through faults: a correction is a delete of the pay parts it
// replaces followed by a create of the new ones, and both must land
// exactly once whatever payroll answers (5xx before or after executing,
// timeouts, 429, a revoked connection) and wherever the process dies.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// The export of the fault tests, imported once and then corrected: c1
// changes from 8 to 8.5 hours (Mette's pay part is replaced) and c5 is
// deleted (Anders's pay part goes); Lars's and Sofie's pay parts are not
// touched and keep their payroll ids.
var (
	corrV1 = []string{
		entryJSON("c1", sandbox.EmpMetteHansen, "T1", "8"),
		entryJSON("c2", sandbox.EmpMetteHansen, "T1", "2"),
		entryJSON("c3", sandbox.EmpLarsNielsen, "T1", "5"),
		entryJSON("c4", sandbox.EmpSofieJensen, "T1", "4"),
		entryJSON("c5", sandbox.EmpAndersPedersen, "T1", "3"),
	}
	corrV2 = []string{
		entryJSON("c1", sandbox.EmpMetteHansen, "T1", "8.5"),
		corrV1[1], corrV1[2], corrV1[3],
		`{"id":"c5","deleted":true}`,
	}
	corrBefore   = []string{sandbox.EmpMetteHansen + "|T1|10", sandbox.EmpLarsNielsen + "|T1|5", sandbox.EmpSofieJensen + "|T1|4", sandbox.EmpAndersPedersen + "|T1|3"}
	corrAfter    = []string{sandbox.EmpMetteHansen + "|T1|10.5", sandbox.EmpLarsNielsen + "|T1|5", sandbox.EmpSofieJensen + "|T1|4"}
	corrReplaced = []string{sandbox.EmpMetteHansen + "|T1|10", sandbox.EmpAndersPedersen + "|T1|3"}
	corrKept     = []string{sandbox.EmpLarsNielsen + "|T1|5", sandbox.EmpSofieJensen + "|T1|4"}
)

func ndjsonLines(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// corrKey is a pay part as "employee|code|units".
func corrKey(emp, code string, n paysync.Numbers) string {
	return emp + "|" + code + "|" + n.Units.Decimal.String()
}

// nordlys returns payroll's pay parts of the default company: payroll id
// → key, and the keys as a sorted multiset.
func (e *env) nordlys() (byID map[string]string, keys []string) {
	byID = map[string]string{}
	for _, c := range e.sb.State().Companies {
		if c.ID != sandbox.CompanyNordlys {
			continue
		}
		for _, p := range c.PayParts {
			k := corrKey(p.EmployeeID, p.Code, p.Numbers)
			byID[p.ID] = k
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return byID, keys
}

// idsOf returns the payroll id of each key, which must be there once.
func (e *env) idsOf(t *testing.T, keys []string) map[string]string {
	t.Helper()
	byID, _ := e.nordlys()
	out := map[string]string{}
	for id, k := range byID {
		if slices.Contains(keys, k) {
			if out[k] != "" {
				t.Fatalf("payroll holds %s twice", k)
			}
			out[k] = id
		}
	}
	return out
}

// writes counts the mutations payroll executed.
func (e *env) writes() int {
	r := e.sb.State().Counters.Requests
	return r["create_pay_parts"] + r["delete_pay_parts"]
}

// correctionImporter is an importer of aggregated pay parts (as paysync
// import without a rules file) whose mapper and deliverer use cl.
func (e *env) correctionImporter(cl *payroll.Client, p worker.Payroll) *worker.Importer {
	rules := mapping.DefaultRules()
	rules.Aggregate = true
	m := mapping.NewMapper(rules, mapping.NewCache(cl), e.schema, sandbox.CompanyNordlys)
	d := &worker.Deliverer{L: e.led, P: p, Sleep: noSleep, MaxAttempts: 20}
	return &worker.Importer{L: e.led, D: d, Mapper: m, Rules: rules, Wire: e.schema, BatchSize: 100}
}

// importCorrected imports in alone (paysync import's ImportAll); a problem
// of the input fails the test.
func importCorrected(t *testing.T, im *worker.Importer, led *ledger.Ledger, in worker.Input) (worker.ImportSummary, error) {
	t.Helper()
	sum, err := im.ImportAll(ctx(t), led, []worker.Input{in}, nil)
	for _, r := range sum.Inputs {
		if probs := r.Report.ProblemList(); len(probs) > 0 || r.Unreadable != nil {
			t.Fatalf("%s: problems %v %v", in.Name, probs, r.Unreadable)
		}
	}
	return sum, err
}

// restart is what a new `paysync import` of the same file does after a run
// that died or gave up: settle what was left in flight, finish the open
// batches, then the file (a duplicate: its open batches).
func (e *env) restart(t *testing.T, cl *payroll.Client, in worker.Input) {
	t.Helper()
	im := e.correctionImporter(cl, cl)
	if err := im.D.Recover(ctx(t)); err != nil {
		t.Fatalf("restart: recover: %v", err)
	}
	if _, err := im.D.DeliverOpen(ctx(t), 0, nil); err != nil {
		t.Fatalf("restart: deliver open batches: %v", err)
	}
	sum, err := importCorrected(t, im, e.led, in)
	if err != nil || sum.Unfinished > 0 {
		t.Fatalf("restart: %v, %d batches unfinished", err, sum.Unfinished)
	}
}

// checkCorrected: payroll holds exactly want (each once), the pay parts of
// kept under the same payroll ids, and the ledger agrees: nothing left to
// send or to correct, every created pay part's payroll id in payroll once
// and the same content, every pay part of the company recorded once, and
// the replaced ones deleted by paysync.
func (e *env) checkCorrected(t *testing.T, want []string, kept map[string]string, replaced []string) {
	t.Helper()
	byID, got := e.nordlys()
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("payroll holds %v, want %v", got, want)
	}
	for k, id := range kept {
		if byID[id] != k {
			t.Errorf("%s, not touched by the correction, is no longer payroll's %s (payroll's %s is %q)", k, id, id, byID[id])
		}
	}
	pcs, err := e.led.PendingCorrections(ctx(t), 100)
	if err != nil || len(pcs) > 0 {
		t.Errorf("corrections still pending: %d, %v", len(pcs), err)
	}
	bs, err := e.led.ListBatches(ctx(t), ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	deleted := map[string]int{}
	for _, b := range bs {
		items, err := e.led.Items(ctx(t), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		created := 0
		for _, it := range items {
			k := corrKey(it.EmployeeID, it.Code, it.Numbers)
			switch it.State {
			case paysync.PartCreated:
				created++
				switch {
				case byID[it.PayrollID] == "":
					t.Errorf("batch %d pay part %d (%s) is created as payroll's %s, which payroll does not hold", b.ID, it.ID, k, it.PayrollID)
				case byID[it.PayrollID] != k:
					t.Errorf("batch %d pay part %d (%s) is recorded as payroll's %s, which is %s", b.ID, it.ID, k, it.PayrollID, byID[it.PayrollID])
				case recorded[it.PayrollID]:
					t.Errorf("payroll's %s is recorded for two pay parts", it.PayrollID)
				}
				recorded[it.PayrollID] = true
			case paysync.PartDeleted:
				if it.DeleteAttempt == 0 || byID[it.PayrollID] != "" {
					t.Errorf("batch %d pay part %d (%s) is deleted (delete attempt %d), payroll's %s holds %q", b.ID, it.ID, k, it.DeleteAttempt, it.PayrollID, byID[it.PayrollID])
				}
				if it.PayrollID != "" {
					deleted[k]++
				}
			case paysync.PartPending:
				t.Errorf("batch %d (%s) pay part %d (%s) is still pending", b.ID, b.State, it.ID, k)
			}
		}
		switch {
		case b.State == paysync.BatchCreated:
		case b.State == paysync.BatchReverted && created == 0:
			// Every pay part of it was replaced.
		default:
			t.Errorf("batch %d is %s with %d pay parts created (last error %q)", b.ID, b.State, created, b.LastError)
		}
	}
	for id, k := range byID {
		if !recorded[id] {
			t.Errorf("payroll's %s (%s) is recorded by no pay part of the ledger", id, k)
		}
	}
	for _, k := range replaced {
		if deleted[k] != 1 {
			t.Errorf("%s, replaced, is deleted %d times in the ledger, want once", k, deleted[k])
		}
	}
}

// cutCall makes the first call of one mutation end as if the process died
// there: the error is no answer of payroll's (so the attempt is left as a
// dead process leaves it, to be settled on the next start), either before
// the call goes out or after payroll executed it. With revoke set, it
// instead revokes the connection just before the call (the user
// disconnected the app): the call is answered 401 and the token refresh
// fails.
type cutCall struct {
	worker.Payroll
	op     string // "create" or "delete"
	after  bool
	revoke func()
	done   bool
}

var errDied = errors.New("the process died here")

func (p *cutCall) fire(op string) bool {
	if p.done || op != p.op {
		return false
	}
	p.done = true
	if p.revoke != nil {
		p.revoke()
		return false
	}
	return true
}

func (p *cutCall) CreatePayParts(ctx context.Context, company string, in []paysync.PayPartInput) ([]paysync.PayPart, error) {
	if !p.fire("create") {
		return p.Payroll.CreatePayParts(ctx, company, in)
	}
	if p.after {
		if _, err := p.Payroll.CreatePayParts(ctx, company, in); err != nil {
			return nil, err
		}
	}
	return nil, errDied
}

func (p *cutCall) DeletePayParts(ctx context.Context, company string, ids []string) (payroll.DeleteResult, error) {
	if !p.fire("delete") {
		return p.Payroll.DeletePayParts(ctx, company, ids)
	}
	if p.after {
		if _, err := p.Payroll.DeletePayParts(ctx, company, ids); err != nil {
			return payroll.DeleteResult{}, err
		}
	}
	return payroll.DeleteResult{}, errDied
}

// TestCorrectionFaults_Matrix: an export imported, then imported again
// corrected (one entry's hours changed, one entry deleted), with a fault on
// the correction's delete_pay_parts or its create_pay_parts: 5xx before
// executing, 5xx or a dropped connection or a timeout after executing, 429
// with Retry-After, every call failing until the run gives up, a revoked
// connection, the process dying before or after a call. The import runs
// (and, where it cannot finish, runs again as a restarted process would):
// payroll ends at exactly the corrected totals, each pay part once, the
// pay parts the correction does not touch keep their payroll ids, and the
// ledger agrees.
func TestCorrectionFaults_Matrix(t *testing.T) {
	type cut struct {
		op     string
		after  bool
		revoke bool
	}
	cases := []struct {
		name   string
		faults []sandbox.Fault
		cut    *cut
		// timeout: the client gives up on a call after a short time.
		timeout bool
		// finishes: the faulted run itself ends with everything sent, and
		// the restart makes no call; else it ends with an error or
		// unfinished batches, and the restart finishes.
		finishes bool
	}{
		{name: "no fault", finishes: true},
		{name: "delete/503 before executing", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "delete_pay_parts", Status: 503, Times: 2}}},
		{name: "delete/500 before executing, Retry-After", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "delete_pay_parts", Status: 500, RetryAfter: time.Second, Times: 1}}},
		{name: "delete/502 after executing", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultBadGatewayAfterCommit, Op: "delete_pay_parts", Times: 1}}},
		{name: "delete/dropped after executing", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultDropAfterCommit, Op: "delete_pay_parts", Times: 1}}},
		{name: "delete/timeout after executing", finishes: true, timeout: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultTimeoutAfterCommit, Op: "delete_pay_parts", Delay: 5 * time.Second, Times: 1}}},
		{name: "delete/429 Retry-After", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultRateLimit, Op: "delete_pay_parts", RetryAfter: time.Second, Times: 2}}},
		{name: "delete/503 until the run gives up",
			faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "delete_pay_parts", Status: 503}}},
		{name: "delete/revoked", cut: &cut{op: "delete", revoke: true}},
		{name: "delete/process dies before the call", cut: &cut{op: "delete"}},
		{name: "delete/process dies after payroll executed it", cut: &cut{op: "delete", after: true}},
		{name: "create/503 before executing", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503, Times: 2}}},
		{name: "create/502 after executing", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultBadGatewayAfterCommit, Op: "create_pay_parts", Times: 1}}},
		{name: "create/dropped after executing", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts", Times: 1}}},
		{name: "create/timeout after executing", finishes: true, timeout: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultTimeoutAfterCommit, Op: "create_pay_parts", Delay: 5 * time.Second, Times: 1}}},
		{name: "create/429 Retry-After", finishes: true,
			faults: []sandbox.Fault{{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: time.Second, Times: 2}}},
		{name: "create/503 until the batch fails",
			faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503}}},
		{name: "create/revoked", cut: &cut{op: "create", revoke: true}},
		{name: "create/process dies before the call", cut: &cut{op: "create"}},
		{name: "create/process dies after payroll executed it", cut: &cut{op: "create", after: true}},
		{name: "both/dropped after executing", finishes: true,
			faults: []sandbox.Fault{
				{Kind: sandbox.FaultDropAfterCommit, Op: "delete_pay_parts", Times: 1},
				{Kind: sandbox.FaultBadGatewayAfterCommit, Op: "create_pay_parts", Times: 1},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, sandbox.Options{})
			v1 := fileInput(t, "v1.ndjson", ndjsonLines(corrV1))
			v2 := fileInput(t, "v2.ndjson", ndjsonLines(corrV2))
			if sum, err := importCorrected(t, e.correctionImporter(e.cl, e.cl), e.led, v1); err != nil || sum.Unfinished > 0 {
				t.Fatalf("v1: %v, %d unfinished", err, sum.Unfinished)
			}
			e.checkCorrected(t, corrBefore, nil, nil)
			kept := e.idsOf(t, corrKept)

			cl := e.cl
			if tc.timeout {
				o := e.sb.Options()
				var err error
				cl, err = payroll.New(payroll.Config{URL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
					RefreshToken: e.sb.IssueRefreshToken(), Timeout: 500 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
			}
			var p worker.Payroll = cl
			if tc.cut != nil {
				c := &cutCall{Payroll: cl, op: tc.cut.op, after: tc.cut.after}
				if tc.cut.revoke {
					c.revoke = e.sb.RevokeAll
				}
				p = c
			}
			e.sb.SetFaults(tc.faults...)
			sum, err := importCorrected(t, e.correctionImporter(cl, p), e.led, v2)
			st := e.sb.State()
			t.Logf("faulted run: %v, %d unfinished; faults fired %v, requests %v", err, sum.Unfinished, st.Counters.Faults, st.Counters.Requests)
			for _, f := range tc.faults {
				if st.Counters.Faults[f.Kind] == 0 {
					t.Fatalf("the fault %s did not fire", f)
				}
			}
			if c, ok := p.(*cutCall); ok && !c.done {
				t.Fatalf("the correction made no %s call", c.op)
			}
			if len(sum.Inputs) == 0 || sum.Inputs[0].Report.Corrections != 2 {
				t.Fatalf("v2: %+v, want 2 corrections", sum.Inputs)
			}
			e.sb.SetFaults()
			if tc.finishes {
				if err != nil || sum.Unfinished > 0 {
					t.Fatalf("the faulted run: %v, %d batches unfinished; want it to finish", err, sum.Unfinished)
				}
				e.checkCorrected(t, corrAfter, kept, corrReplaced)
			} else if err == nil && sum.Unfinished == 0 {
				t.Fatalf("the faulted run finished; want an error or unfinished batches")
			}

			if tc.cut != nil && tc.cut.revoke {
				e.cl = e.client(t, e.sb.IssueRefreshToken()) // re-connected
			}
			before := e.writes()
			e.restart(t, e.cl, v2)
			if tc.finishes && e.writes() != before {
				t.Errorf("the restart after a finished run made %d calls", e.writes()-before)
			}
			e.checkCorrected(t, corrAfter, kept, corrReplaced)
		})
	}
}

// TestCorrectionFaults_DiedBeforeApplied: the process dies after the
// corrected export is committed (its corrections recorded) and before
// they are applied. The same file imported again, as the operator does
// after a crash, must still bring payroll to the corrected totals.
func TestCorrectionFaults_DiedBeforeApplied(t *testing.T) {
	e := setup(t, sandbox.Options{})
	v1 := fileInput(t, "v1.ndjson", ndjsonLines(corrV1))
	if sum, err := importCorrected(t, e.correctionImporter(e.cl, e.cl), e.led, v1); err != nil || sum.Unfinished > 0 {
		t.Fatalf("v1: %v, %d unfinished", err, sum.Unfinished)
	}
	kept := e.idsOf(t, corrKept)
	// Import = commit, apply the corrections, deliver: it dies after the
	// commit.
	rep, err := e.correctionImporter(e.cl, e.cl).Plan(ctx(t), paysync.SourceFile, "v2.ndjson", ndjsonLines(corrV2))
	if err != nil || rep.Corrections != 2 {
		t.Fatalf("v2 committed: %+v, %v; want 2 corrections", rep, err)
	}
	e.restart(t, e.cl, fileInput(t, "v2.ndjson", ndjsonLines(corrV2)))
	e.checkCorrected(t, corrAfter, kept, corrReplaced)
}

// lostAnswer is a payroll whose first create_pay_parts executes, and then
// its answer is lost (502 from a proxy) and, before paysync reads payroll
// to settle it, the pay parts of the employees named in byHand are deleted
// there by hand; from then on payroll refuses every create (503) until
// the test says otherwise.
type lostAnswer struct {
	worker.Payroll
	sb     *sandbox.Server
	byHand []string
	calls  int
}

func (p *lostAnswer) CreatePayParts(ctx context.Context, company string, in []paysync.PayPartInput) ([]paysync.PayPart, error) {
	if p.calls++; p.calls > 1 {
		return p.Payroll.CreatePayParts(ctx, company, in)
	}
	created, err := p.Payroll.CreatePayParts(ctx, company, in)
	if err != nil {
		return nil, err
	}
	for _, c := range created {
		if slices.Contains(p.byHand, c.EmployeeID) {
			if err := p.sb.DeletePayPartDirect(company, c.ID); err != nil {
				return nil, err
			}
		}
	}
	p.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503})
	return nil, &payroll.Error{Op: "CreatePayParts", Class: payroll.Ambiguous, StatusCode: 502, Index: -1, Reason: "server error (HTTP 502)"}
}

// TestCorrectionFaults_PartlyCreatedBatch: a batch of the first import is
// left failed with some pay parts created and some still to send (an
// answer was lost, two of the pay parts it created were deleted by hand
// before paysync read payroll, and payroll then refused creates for a
// while). The corrected export replaces exactly the created ones. Once
// payroll takes creates again, it must hold the corrected totals: the pay
// parts still to send of the first batch too.
func TestCorrectionFaults_PartlyCreatedBatch(t *testing.T) {
	e := setup(t, sandbox.Options{})
	v1 := fileInput(t, "v1.ndjson", ndjsonLines(corrV1))
	p := &lostAnswer{Payroll: e.cl, sb: e.sb, byHand: []string{sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen}}
	sum, err := importCorrected(t, e.correctionImporter(e.cl, p), e.led, v1)
	if err != nil || sum.Unfinished != 1 {
		t.Fatalf("v1: %v, %d unfinished; want its batch failed", err, sum.Unfinished)
	}
	b, err := e.led.Batch(ctx(t), sum.Inputs[0].Report.Batches[0])
	if err != nil || b.State != paysync.BatchFailed || b.Created != 2 || b.Pending != 2 {
		t.Fatalf("v1's batch: %+v, %v; want failed with Mette's and Anders's pay parts created, Lars's and Sofie's pending", b, err)
	}

	// The corrected export while payroll still refuses creates: the
	// failed batch is tried again first (as paysync import does), then
	// the correction replaces Mette's and Anders's pay parts.
	im := e.correctionImporter(e.cl, e.cl)
	if err := im.D.Recover(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := im.D.DeliverOpen(ctx(t), 0, nil); err != nil {
		t.Fatal(err)
	}
	v2 := fileInput(t, "v2.ndjson", ndjsonLines(corrV2))
	if sum, err := importCorrected(t, im, e.led, v2); err != nil || sum.Unfinished == 0 {
		t.Fatalf("v2 while creates are refused: %v, %d unfinished; want some", err, sum.Unfinished)
	}

	e.sb.SetFaults()
	e.restart(t, e.cl, v2)
	e.checkCorrected(t, corrAfter, nil, corrReplaced)
}
