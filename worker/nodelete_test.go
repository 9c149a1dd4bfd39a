package worker_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// ledgerState is the ledger's batches and their items, as JSON: what must
// not change when an operation is refused up front.
func (e *env) ledgerState(t *testing.T) string {
	t.Helper()
	bs, err := e.led.ListBatches(ctx(t), ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var all []any
	for _, b := range bs {
		its, err := e.led.Items(ctx(t), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b, its)
	}
	us, err := e.led.ListCorrections(ctx(t), ledger.CorrectionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(append(all, us))
	return string(out)
}

// TestNoDelete: against a camelCase server without a delete mutation,
// imports are created, but a revert, a revert or replay of a period that
// replaces sent pay parts, and a correction refuse up front with
// payroll.ErrNoDelete: nothing in the ledger changes, no delete is sent,
// and the correction stays pending.
func TestNoDelete(t *testing.T) {
	e := setup(t, sandbox.Options{Dialect: sandbox.CamelCase, NoDelete: true})
	rules := mapping.DefaultRules()
	im := e.importer(t, rules, 100)
	mette := sandbox.EmpMetteHansen
	export := func(lines ...string) worker.Input {
		return fileInput(t, "export.ndjson", []byte(strings.Join(lines, "\n")+"\n"))
	}
	sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{export(entryJSON("e1", mette, "T1", "8"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.holds(t, "import", mette+"|T1|8")
	batches := sum.Inputs[0].Report.Batches
	before := e.ledgerState(t)
	deletes := func() int { return e.sb.State().Counters.Requests["delete_pay_parts"] }

	d := e.deliverer(e.cl)
	if err := d.Revert(ctx(t), batches); !errors.Is(err, payroll.ErrNoDelete) {
		t.Fatalf("revert: err = %v, want ErrNoDelete", err)
	} else if !strings.Contains(err.Error(), "offers no delete mutation") {
		t.Errorf("revert: %v does not say why", err)
	}
	nov, _ := paysync.ParsePeriod("2026-11")
	corr := im.Corrector()
	if _, err := corr.RevertScope(ctx(t), ledger.Scope{Period: nov}, false); !errors.Is(err, payroll.ErrNoDelete) {
		t.Fatalf("revert --period: err = %v, want ErrNoDelete", err)
	}
	rules.Places = 0 // 8 stays 8: nothing to replace, the replay has nothing to do
	if res, err := corr.ReplayScope(ctx(t), ledger.Scope{Period: nov}, false); err != nil || res.Changes() {
		t.Fatalf("replay --period without changes: %+v, %v", res, err)
	}
	if after := e.ledgerState(t); after != before {
		t.Errorf("the ledger changed:\n%s\nwant\n%s", after, before)
	}

	// A correction (8 → 8.5 hours) would replace the pay part: it stays
	// pending, and says why.
	_, err = im.ImportAll(ctx(t), e.led, []worker.Input{export(entryJSON("e1", mette, "T1", "8.5"))}, nil)
	if !errors.Is(err, payroll.ErrNoDelete) {
		t.Fatalf("correction: err = %v, want ErrNoDelete", err)
	}
	pcs, perr := e.led.PendingCorrections(ctx(t), 10)
	if perr != nil || len(pcs) != 1 {
		t.Fatalf("pending corrections = %d, %v; want 1", len(pcs), perr)
	}
	if _, err := corr.Run(ctx(t)); !errors.Is(err, payroll.ErrNoDelete) {
		t.Fatalf("corrections run: err = %v, want ErrNoDelete", err)
	}
	e.holds(t, "after the refusals", mette+"|T1|8")
	if n := deletes(); n != 0 {
		t.Errorf("%d delete requests", n)
	}
}

// TestCutoff_NoDelete: against a server without a delete mutation, a
// cutoff keeps what payroll holds: entries held since the last cutoff get
// pay parts of their own beside the aggregate sent before (each exact),
// as in a closed period, instead of a replacement that cannot be made.
func TestCutoff_NoDelete(t *testing.T) {
	e := setup(t, sandbox.Options{Dialect: sandbox.CamelCase, NoDelete: true})
	mi, corr := e.holdingImporter(t)
	pipe := &worker.Pipeline{L: e.led, D: e.deliverer(e.cl), Correct: corr.Run}
	mette := sandbox.EmpMetteHansen
	round := func(id, hours string) {
		t.Helper()
		reps, errs, err := mi.Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", entryJSON(id, mette, "T1", hours))})
		if err != nil || errs[0] != nil || len(reps[0].ProblemList()) > 0 {
			t.Fatalf("%v %v %v", err, errs[0], reps[0].ProblemList())
		}
		if _, err := corr.Cutoff(ctx(t), false); err != nil {
			t.Fatalf("cutoff: %v", err)
		}
		if err := pipe.Flush(ctx(t), 0); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	round("n1", "8")
	e.holds(t, "first cutoff", mette+"|T1|8")
	round("n2", "2")
	e.holds(t, "second cutoff", mette+"|T1|8", mette+"|T1|2")
	if r := e.sb.State().Counters.Requests; r["delete_pay_parts"]+r["deletePayParts"] != 0 {
		t.Errorf("a delete was sent to a server without one: %v", r)
	}
}
