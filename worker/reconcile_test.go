package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// payrollParts is payroll's pay parts of the default company as
// "employee|code|units" → payroll id.
func (e *env) payrollParts() map[string]string {
	out := map[string]string{}
	for _, c := range e.sb.State().Companies {
		if c.ID != sandbox.CompanyNordlys {
			continue
		}
		for _, p := range c.PayParts {
			out[p.EmployeeID+"|"+p.Code+"|"+p.Numbers.Units.Decimal.String()] = p.ID
		}
	}
	return out
}

// holds fails the test unless payroll holds exactly the pay parts want
// ("employee|code|units"), and returns them with their payroll ids.
func (e *env) holds(t testing.TB, step string, want ...string) map[string]string {
	t.Helper()
	got := e.payrollParts()
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("%s: payroll holds %v, want %v", step, keys, want)
	}
	return got
}

func entryJSON(id, emp, code, hours string) string {
	return fmt.Sprintf(`{"id":%q,"employee_id":%q,"date":"2026-11-02","hours":%s,"code":%q}`, id, emp, hours, code)
}

// TestCorrections_File: an export imported again with an entry changed is
// a correction: the one pay part it is in is replaced (deleted, then
// created with the new total), the others keep their payroll ids; the same
// corrected export again makes no call; a tombstone removes its entry; a
// tag that moves an entry to another code moves its hours.
func TestCorrections_File(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rules := mapping.DefaultRules()
	rules.Aggregate = true
	im := e.importer(t, rules, 100)
	mette, jonas := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	export := func(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	run := func(name string, payload []byte) worker.Report {
		t.Helper()
		sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, name, payload)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep := sum.Inputs[0].Report
		if probs := rep.ProblemList(); len(probs) > 0 || sum.Unfinished > 0 {
			t.Fatalf("%s: problems %v, unfinished %d", name, probs, sum.Unfinished)
		}
		return rep
	}

	run("v1.ndjson", export(entryJSON("e1", mette, "T1", "8"), entryJSON("e2", mette, "T1", "2"), entryJSON("e3", jonas, "T1", "5")))
	first := e.holds(t, "first import", mette+"|T1|10", jonas+"|T1|5")

	// e1: 8 → 8.5 hours.
	rep := run("v2.ndjson", export(entryJSON("e1", mette, "T1", "8.5"), entryJSON("e2", mette, "T1", "2"), entryJSON("e3", jonas, "T1", "5")))
	if rep.Corrections != 1 || rep.Duplicates != 2 {
		t.Errorf("v2: %d corrections, %d duplicates; want 1 and 2", rep.Corrections, rep.Duplicates)
	}
	second := e.holds(t, "after the correction", mette+"|T1|10.5", jonas+"|T1|5")
	if second[jonas+"|T1|5"] != first[jonas+"|T1|5"] {
		t.Errorf("the pay part the correction does not touch was replaced")
	}

	// The same corrected content again, as another file: no call.
	writes := func() int {
		r := e.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	calls := writes()
	rep = run("v2-again.ndjson", export(entryJSON("e2", mette, "T1", "2"), entryJSON("e1", mette, "T1", "8.5"), entryJSON("e3", jonas, "T1", "5")))
	if rep.Corrections != 0 || rep.Duplicates != 3 {
		t.Errorf("v2 again: %+v", rep)
	}
	if n := writes() - calls; n != 0 {
		t.Errorf("v2 again: %d calls to payroll, want none", n)
	}
	e.holds(t, "v2 again", mette+"|T1|10.5", jonas+"|T1|5")

	// A tombstone removes e2; e3 moves to another code.
	rep = run("v3.ndjson", export(`{"id":"e2","deleted":true}`, entryJSON("e3", jonas, "SYG", "5")))
	if rep.Corrections != 2 {
		t.Errorf("v3: %d corrections, want 2", rep.Corrections)
	}
	e.holds(t, "after the tombstone and the new code", mette+"|T1|8.5", jonas+"|SYG|5")
}

// TestCorrections_Messages: the same for streamed entries: a message with
// a paid entry changed replaces the pay part of its group (company ×
// employee × code × rate × month: both of Mette's messages are one pay part)
// through the sending loop (the reconciler runs before each look), another
// group's pay part keeps its payroll id, a tombstone takes its entry's hours
// out, and the corrected entry again, in another message, makes no call.
func TestCorrections_Messages(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	rec := &worker.Reconciler{L: e.led, Mapper: mi.Mapper, Rules: mi.Rules, Wire: mi.Wire, BatchSize: 100}
	pipe := &worker.Pipeline{L: e.led, D: e.deliverer(e.cl), Correct: applyWith(rec)}
	mette, lars := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	send := func(step string, bodies ...string) []worker.Report {
		t.Helper()
		msgs := make([]worker.Message, len(bodies))
		for i, b := range bodies {
			msgs[i] = msg("timesheets.MV8x.toggl", b)
		}
		reps, errs, err := mi.Plan(ctx(t), msgs)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		for i := range reps {
			if errs[i] != nil || len(reps[i].ProblemList()) > 0 {
				t.Fatalf("%s: message %d: %v %v", step, i, errs[i], reps[i].ProblemList())
			}
		}
		if err := pipe.Flush(ctx(t), 0); err != nil {
			t.Fatalf("%s: flush: %v", step, err)
		}
		return reps
	}
	send("first", entryJSON("m1", mette, "T1", "8"), entryJSON("m2", mette, "T1", "2"), entryJSON("m3", lars, "T1", "5"))
	first := e.holds(t, "first", mette+"|T1|10", lars+"|T1|5")

	reps := send("correction", entryJSON("m1", mette, "T1", "8.5"))
	if reps[0].Corrections != 1 {
		t.Errorf("correction: %+v", reps[0])
	}
	second := e.holds(t, "correction", mette+"|T1|10.5", lars+"|T1|5")
	if second[lars+"|T1|5"] != first[lars+"|T1|5"] {
		t.Errorf("the pay part of the group the correction does not touch was replaced")
	}

	writes := func() int {
		r := e.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	before := writes()
	reps = send("the corrected entry again", `[`+entryJSON("m1", mette, "T1", "8.5")+`]`)
	if reps[0].Corrections != 0 || reps[0].Duplicates != 1 || writes() != before {
		t.Errorf("the corrected entry again: %+v, %d calls", reps[0], writes()-before)
	}

	send("tombstone", `{"id":"m2","deleted":true}`)
	e.holds(t, "tombstone", mette+"|T1|8.5", lars+"|T1|5")
}

// TestCorrections_PeriodStatement: an import given as the complete
// statement of its source for a period removes the entries of that source
// and period it no longer has (their groups' pay parts replaced), takes
// added rows, warns of rows outside the period without importing them, and
// leaves another source's entries of the same period alone (they stay in
// their group's total); a group it does not change keeps its payroll id.
func TestCorrections_PeriodStatement(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rules := mapping.DefaultRules()
	rules.Aggregate = true
	nov, err := paysync.ParsePeriod("2026-11")
	if err != nil {
		t.Fatal(err)
	}
	mette, lars, sofie := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen
	dated := func(id, emp, date, hours string) string {
		return fmt.Sprintf(`{"id":%q,"employee_id":%q,"date":%q,"hours":%s,"code":"T1"}`, id, emp, date, hours)
	}
	run := func(name, origin string, lines ...string) worker.Report {
		t.Helper()
		im := e.importer(t, rules, 100)
		im.Origin, im.Statement = origin, &worker.PeriodStatement{Period: nov}
		sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, name, []byte(strings.Join(lines, "\n")+"\n"))}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep := sum.Inputs[0].Report
		if probs := rep.ProblemList(); len(probs) > 0 || sum.Unfinished > 0 {
			t.Fatalf("%s: problems %v, unfinished %d", name, probs, sum.Unfinished)
		}
		return rep
	}
	rep := run("nov.ndjson", "",
		dated("s1", mette, "2026-11-02", "8"), dated("s2", mette, "2026-11-03", "2"), dated("s3", lars, "2026-11-04", "5"),
		dated("s5", sofie, "2026-11-06", "4"), dated("s0", lars, "2026-10-31", "7"))
	if rep.Outside != 1 || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "outside 2026-11") || !strings.Contains(rep.Warnings[0], ":5") {
		t.Errorf("row outside the period: %d, warnings %v", rep.Outside, rep.Warnings)
	}
	run("other.ndjson", "timelog", dated("o1", mette, "2026-11-10", "3"))
	// Mette: s1 8 + s2 2 + the other source's o1 3, one pay part.
	first := e.holds(t, "first statement", mette+"|T1|13", lars+"|T1|5", sofie+"|T1|4")

	// s2 is gone from the statement, s4 is new.
	rep = run("nov-again.ndjson", "", dated("s1", mette, "2026-11-02", "8"), dated("s3", lars, "2026-11-04", "5"), dated("s4", lars, "2026-11-05", "1"),
		dated("s5", sofie, "2026-11-06", "4"))
	if rep.Removed != 1 || rep.Duplicates != 3 {
		t.Errorf("second statement: removed %d, duplicates %d; want 1, 3", rep.Removed, rep.Duplicates)
	}
	second := e.holds(t, "second statement", mette+"|T1|11", lars+"|T1|6", sofie+"|T1|4")
	if second[sofie+"|T1|4"] != first[sofie+"|T1|4"] {
		t.Errorf("a pay part the statement does not change was replaced")
	}

	// The same statement again, as another file: nothing changes.
	writes := func() int {
		r := e.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	before := writes()
	rep = run("nov-third.ndjson", "", dated("s5", sofie, "2026-11-06", "4"), dated("s4", lars, "2026-11-05", "1"), dated("s1", mette, "2026-11-02", "8"),
		dated("s3", lars, "2026-11-04", "5"))
	if rep.Removed != 0 || rep.Corrections != 0 || rep.Duplicates != 4 {
		t.Errorf("the same statement again: %+v", rep)
	}
	if n := writes() - before; n != 0 {
		t.Errorf("the same statement again made %d calls to payroll, want none", n)
	}
	third := e.holds(t, "the same statement again", mette+"|T1|11", lars+"|T1|6", sofie+"|T1|4")
	for k, id := range second {
		if third[k] != id {
			t.Errorf("the same statement again replaced %s", k)
		}
	}
}

// TestCorrections_AfterRevert: after its batch is reverted, a corrected
// export pays every entry again (the changed one with its new content), not
// only the changed one: entries no longer in payroll are not "in the
// ledger already" (listed again, they count again).
func TestCorrections_AfterRevert(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rules := mapping.DefaultRules()
	rules.Aggregate = true
	im := e.importer(t, rules, 100)
	mette, lars := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	v1 := entryJSON("r1", mette, "T1", "8") + "\n" + entryJSON("r2", mette, "T1", "2") + "\n" + entryJSON("r3", lars, "T1", "5") + "\n"
	sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, "v1.ndjson", []byte(v1))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.operate(t, im.Reconciler(), false, ledger.Target{Batches: sum.Inputs[0].Report.Batches})
	if n := len(e.payrollParts()); n != 0 {
		t.Fatalf("after the revert payroll holds %d pay parts", n)
	}
	v2 := entryJSON("r1", mette, "T1", "8.5") + "\n" + entryJSON("r2", mette, "T1", "2") + "\n" + entryJSON("r3", lars, "T1", "5") + "\n"
	sum, err = im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, "v2.ndjson", []byte(v2))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := sum.Inputs[0].Report
	// Each entry is taken again as a new version of it (reported with the
	// corrections), none is dropped as a duplicate.
	if rep.Duplicates != 0 || rep.Mapped+rep.Corrections != 3 || rep.PayParts != 2 {
		t.Errorf("corrected export after the revert: %+v; want its 3 entries taken again, in 2 pay parts", rep)
	}
	got := e.payrollParts()
	if len(got) != 2 || got[mette+"|T1|10.5"] == "" || got[lars+"|T1|5"] == "" {
		t.Errorf("payroll holds %v, want Mette's 10.5 and Lars's 5", got)
	}
}

// TestCorrections_ClosedPeriod: a period closed once payroll ran is
// frozen: a correction of an entry dated in it (recorded before the close,
// or after it) is recorded, not refused, but nothing is created or deleted
// there, whatever happens; the plan lists the group as late (what it would
// hold). Opened again, the next reconcile catches up to the desired total,
// as one pay part.
func TestCorrections_ClosedPeriod(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	rec := &worker.Reconciler{L: e.led, Mapper: mi.Mapper, Rules: mi.Rules, Wire: mi.Wire, BatchSize: 100}
	pipe := &worker.Pipeline{L: e.led, D: e.deliverer(e.cl), Correct: applyWith(rec)}
	mette := sandbox.EmpMetteHansen
	plan := func(body string) worker.Report {
		t.Helper()
		reps, errs, err := mi.Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", body)})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs[0])
		}
		return reps[0]
	}
	flush := func() {
		t.Helper()
		if err := pipe.Flush(ctx(t), 0); err != nil {
			t.Fatal(err)
		}
	}
	writes := func() int {
		r := e.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	plan(entryJSON("k1", mette, "T1", "8"))
	plan(entryJSON("k2", mette, "T1", "3"))
	flush()
	first := e.holds(t, "before the close", mette+"|T1|11")
	nov, _ := paysync.ParsePeriod("2026-11")

	// Recorded while open, closed before it is applied.
	if rep := plan(entryJSON("k2", mette, "T1", "4")); rep.Corrections != 1 {
		t.Fatalf("k2's correction: %+v", rep)
	}
	if _, err := e.led.ClosePeriod(ctx(t), nov, "payroll ran"); err != nil {
		t.Fatal(err)
	}
	// Recorded after the close: not a problem of the message.
	rep := plan(entryJSON("k1", mette, "T1", "9"))
	if probs := rep.ProblemList(); len(probs) != 0 || rep.Corrections != 1 || rep.RejectedAs != 0 {
		t.Fatalf("a correction to the closed period: %+v, problems %v; want it recorded", rep, probs)
	}
	before := writes()
	flush()
	if n := writes() - before; n != 0 {
		t.Errorf("%d calls to payroll for a closed period, want none", n)
	}
	if got := e.holds(t, "after the close", mette+"|T1|11"); got[mette+"|T1|11"] != first[mette+"|T1|11"] {
		t.Errorf("the closed period's pay part was replaced")
	}
	if n := count(t, rawLedger(t, e.led.Path()), `SELECT count(*) FROM entry_corrections WHERE state = 'pending'`); n != 0 {
		t.Errorf("%d corrections not taken into the desired state", n)
	}
	p, err := rec.Plan(ctx(t), worker.PlanFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].Kind != worker.ChangeLate || p.Sends() ||
		p.Changes[0].Before.Units.Decimal.String() != "11" || p.Changes[0].After.Units.Decimal.String() != "13" {
		t.Fatalf("plan of the closed period: %+v; want its group late, 11 → 13", p)
	}

	// Opened again: the next reconcile catches up (k1 9 + k2 4).
	if _, err := e.led.ReopenPeriod(ctx(t), nov); err != nil {
		t.Fatal(err)
	}
	flush()
	e.holds(t, "opened again", mette+"|T1|13")
	before = writes()
	flush()
	if n := writes() - before; n != 0 {
		t.Errorf("a second flush made %d calls", n)
	}
}

// TestCorrections_Preview: a dry run of a corrected export (as paysync
// import --dry-run does it: the import into a copy of the ledger with its
// reconcile deferred, then the reconciler's plan of the copy) shows the
// change of the group it is in (the pay part it replaces, 10 → 10.5, the
// entries behind it) and changes nothing: not payroll, not the ledger.
// The real import then does what the plan said.
func TestCorrections_Preview(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rules := mapping.DefaultRules()
	im := e.importer(t, rules, 100)
	mette := sandbox.EmpMetteHansen
	if _, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, "v1.ndjson",
		[]byte(entryJSON("d1", mette, "T1", "8")+"\n"+entryJSON("d2", mette, "T1", "2")+"\n"))}, nil); err != nil {
		t.Fatal(err)
	}
	before := e.holds(t, "v1", mette+"|T1|10")
	calls := e.cl.Calls()
	v2 := []byte(entryJSON("d1", mette, "T1", "8.5") + "\n" + entryJSON("d2", mette, "T1", "2") + "\n")

	path := filepath.Join(t.TempDir(), "copy.db")
	if err := e.led.CopyTo(ctx(t), path); err != nil {
		t.Fatal(err)
	}
	cp, err := ledger.Open(ctx(t), path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	dry := &worker.Importer{L: cp, Mapper: im.Mapper, Rules: rules, Wire: im.Wire, BatchSize: 100, Defer: true}
	rep, err := dry.Plan(ctx(t), paysync.SourceFile, "v2.ndjson", v2)
	if err != nil || rep.Corrections != 1 || rep.Duplicates != 1 || len(rep.Batches) != 0 {
		t.Fatalf("dry import: %+v, %v", rep, err)
	}
	rec := dry.Reconciler()
	if _, err := rec.Absorb(ctx(t)); err != nil {
		t.Fatal(err)
	}
	p, err := rec.Plan(ctx(t), worker.PlanFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 {
		t.Fatalf("plan: %+v, want one change", p)
	}
	c := p.Changes[0]
	if c.Kind != worker.ChangeReplace || c.Before.Units.Decimal.String() != "10" || c.After.Units.Decimal.String() != "10.5" ||
		c.Desired == nil || c.Desired.Units.Decimal.String() != "10.5" || c.Group.Lines != 2 || len(c.Group.Live) != 1 {
		t.Fatalf("plan: %+v; want the pay part of 10 replaced by one of 10.5, 2 entries behind it", c)
	}

	if n := e.cl.Calls() - calls; n != 0 {
		t.Errorf("the dry run made %d payroll calls", n)
	}
	if after := e.holds(t, "after the dry run", mette+"|T1|10"); after[mette+"|T1|10"] != before[mette+"|T1|10"] {
		t.Errorf("a dry run replaced the pay part")
	}
	if srcs := e.importSources(t); len(srcs) != 1 {
		t.Errorf("the ledger holds %d imports after a dry run, want 1", len(srcs))
	}
	if p, err := im.Reconciler().Plan(ctx(t), worker.PlanFilter{}); err != nil || len(p.Changes) != 0 {
		t.Errorf("the ledger's own plan after a dry run: %+v, %v; want nothing", p, err)
	}
	if n := count(t, rawLedger(t, e.led.Path()), `SELECT count(*) FROM entry_corrections`); n != 0 {
		t.Errorf("a dry run recorded %d corrections", n)
	}

	// The real import does what the plan said.
	if _, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, "v2.ndjson", v2)}, nil); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "v2", mette+"|T1|10.5")
}

// TestCorrections_MovesCompany: a correction that moves an entry to
// another company deletes its pay part in the first company (through that
// company's own batch of the unit) and creates it in the second.
func TestCorrections_MovesCompany(t *testing.T) {
	e := setup(t, sandbox.Options{})
	im := e.importer(t, mapping.DefaultRules(), 100)
	row := func(company, emp string) string {
		return fmt.Sprintf(`{"id":"mv1","company_id":%q,"employee_id":%q,"date":"2026-11-02","hours":6,"code":"T1"}`, company, emp) + "\n"
	}
	for i, body := range []string{row(sandbox.CompanyNordlys, sandbox.EmpMetteHansen), row(sandbox.CompanyFjordtech, sandbox.EmpJonasLarsen)} {
		sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, fmt.Sprintf("v%d.ndjson", i), []byte(body))}, nil)
		if err != nil || sum.Unfinished != 0 {
			t.Fatalf("import %d: %v, %+v", i, err, sum)
		}
	}
	got := e.sandboxParts()
	if len(got) != 1 || !strings.HasPrefix(got[0], sandbox.CompanyFjordtech+"|"+sandbox.EmpJonasLarsen+"|T1|6") {
		t.Errorf("payroll holds %v, want the entry's 6 hours in %s only", got, sandbox.CompanyFjordtech)
	}
}

// TestScope_RevertAndReplayPeriod: revert --period deletes exactly what
// payroll holds for the period (the other month stays), twice changes
// nothing; replay --period pays it again (once: twice changes nothing);
// after a rules change, replay replaces only the pay parts that change.
func TestScope_RevertAndReplayPeriod(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rules := mapping.DefaultRules()
	im := e.importer(t, rules, 100)
	mette, lars := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	dated := func(id, emp, date, hours string) string {
		return fmt.Sprintf(`{"id":%q,"employee_id":%q,"date":%q,"hours":%s,"code":"T1"}`, id, emp, date, hours)
	}
	body := strings.Join([]string{dated("a1", mette, "2026-10-30", "8"), dated("a2", mette, "2026-11-02", "6"), dated("a3", lars, "2026-11-03", "4")}, "\n") + "\n"
	if _, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, "oct-nov.ndjson", []byte(body))}, nil); err != nil {
		t.Fatal(err)
	}
	first := e.holds(t, "import", mette+"|T1|8", mette+"|T1|6", lars+"|T1|4")
	nov, _ := paysync.ParsePeriod("2026-11")
	rec := im.Reconciler()
	writes := func() int {
		r := e.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	sc := ledger.Target{Period: &nov}
	if d := e.operate(t, rec, false, sc); d.Stats.Deleted != 2 {
		t.Fatalf("revert: %+v", d.Stats)
	}
	e.holds(t, "after the revert of November", mette+"|T1|8")
	before := writes()
	e.operate(t, rec, false, sc)
	if writes() != before {
		t.Fatalf("revert again made %d calls; want none", writes()-before)
	}
	if d := e.operate(t, rec, true, sc); d.Stats.Created != 2 || d.Stats.Deleted != 0 {
		t.Fatalf("replay: %+v", d.Stats)
	}
	again := e.holds(t, "after the replay", mette+"|T1|8", mette+"|T1|6", lars+"|T1|4")
	if again[mette+"|T1|8"] != first[mette+"|T1|8"] {
		t.Error("October's pay part was replaced")
	}
	before = writes()
	e.operate(t, rec, true, sc)
	// The rules now round to whole hours down: 6 and 4 stay, nothing changes.
	rules.Places = 0
	e.operate(t, rec, true, sc)
	if writes() != before {
		t.Fatalf("replay again (and under rules that give the same) made %d calls; want none", writes()-before)
	}
}

// TestCutoff_HoldsAndAggregates: with PAYSYNC_SEND=cutoff streamed entries
// are held (no call) until the cutoff, which creates one pay part per
// employee × code of the period; entries held for a later cutoff join
// their aggregate (replaced: delete, then create), an untouched one keeps
// its payroll id; a cutoff with nothing held does nothing.
func TestCutoff_HoldsAndAggregates(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi, rec := e.holdingImporter(t)
	// PAYSYNC_SEND=cutoff: taken into the desired state as they come,
	// planned only at the cutoff.
	pipe := &worker.Pipeline{L: e.led, D: e.deliverer(e.cl), Correct: rec.Absorb}
	mette, lars := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	send := func(bodies ...string) {
		t.Helper()
		for _, b := range bodies {
			reps, errs, err := mi.Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", b)})
			if err != nil || errs[0] != nil || len(reps[0].ProblemList()) > 0 {
				t.Fatalf("%v %v %v", err, errs[0], reps[0].ProblemList())
			}
		}
		if err := pipe.Flush(ctx(t), 0); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := func() []int64 {
		t.Helper()
		bs, err := rec.Apply(ctx(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := pipe.Flush(ctx(t), 0); err != nil {
			t.Fatal(err)
		}
		return bs
	}
	send(entryJSON("h1", mette, "T1", "8"), entryJSON("h2", mette, "T1", "2"), entryJSON("h3", lars, "T1", "5"))
	if n := len(e.payrollParts()); n != 0 {
		t.Fatalf("before the cutoff payroll holds %d pay parts", n)
	}
	if bs := cutoff(); len(bs) != 1 {
		t.Fatalf("first cutoff: batches %v", bs)
	}
	first := e.payrollParts()
	if len(first) != 2 || first[mette+"|T1|10"] == "" || first[lars+"|T1|5"] == "" {
		t.Fatalf("after the first cutoff payroll holds %v", first)
	}
	send(entryJSON("h4", mette, "T1", "1"))
	if got := e.payrollParts(); len(got) != 2 || got[mette+"|T1|10"] == "" {
		t.Fatalf("a held entry reached payroll before the cutoff: %v", got)
	}
	if bs := cutoff(); len(bs) != 1 {
		t.Fatalf("second cutoff: batches %v", bs)
	}
	second := e.payrollParts()
	if len(second) != 2 || second[mette+"|T1|11"] == "" || second[lars+"|T1|5"] != first[lars+"|T1|5"] {
		t.Fatalf("after the second cutoff payroll holds %v (Lars's id before: %s)", second, first[lars+"|T1|5"])
	}
	if bs := cutoff(); len(bs) != 0 {
		t.Errorf("a cutoff with nothing held: batches %v", bs)
	}
}

// TestScope_RevertMessage: revert --import of one NATS message deletes its
// entries' pay parts although they were batched under another message's
// import; the other message's stay.
func TestScope_RevertMessage(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	rec := &worker.Reconciler{L: e.led, Mapper: mi.Mapper, Rules: mi.Rules, Wire: mi.Wire, BatchSize: 100}
	d := e.deliverer(e.cl)
	pipe := &worker.Pipeline{L: e.led, D: d, Correct: applyWith(rec)}
	mette, lars := sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	reps, errs, err := mi.Plan(ctx(t), []worker.Message{
		msg("timesheets.MV8x.toggl", entryJSON("n1", mette, "T1", "8")),
		msg("timesheets.MV8x.toggl", entryJSON("n2", lars, "T1", "5")),
	})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatal(err, errs)
	}
	if err := pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.led.BatchesOfSource(ctx(t), reps[1].ImportID); reps[1].ImportID == 0 || len(b) != 0 || len(e.payrollParts()) != 2 {
		t.Fatalf("the second message (import %d) has batches of its own (%v), or payroll holds %v", reps[1].ImportID, b, e.payrollParts())
	}
	if d := e.operate(t, rec, false, ledger.Target{Import: reps[1].ImportID}); d.Stats.Deleted != 1 {
		t.Fatalf("revert of the second message: %+v", d.Stats)
	}
	got := e.payrollParts()
	if len(got) != 1 || got[mette+"|T1|8"] == "" {
		t.Errorf("payroll holds %v, want the first message's 8 only", got)
	}
}

// TestCorrections_StatementOfOneCompany: a period statement of one
// company's export never removes another company's entries of the same
// source and period.
func TestCorrections_StatementOfOneCompany(t *testing.T) {
	e := setup(t, sandbox.Options{})
	nov, _ := paysync.ParsePeriod("2026-11")
	run := func(name, body string) worker.Report {
		t.Helper()
		im := e.importer(t, mapping.DefaultRules(), 100)
		im.Statement = &worker.PeriodStatement{Period: nov}
		sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, name, []byte(body))}, nil)
		if err != nil || sum.Unfinished != 0 {
			t.Fatalf("%s: %v %+v", name, err, sum)
		}
		return sum.Inputs[0].Report
	}
	run("nordlys.ndjson", fmt.Sprintf(`{"id":"sc1","employee_id":%q,"date":"2026-11-02","hours":7,"code":"T1"}`+"\n", sandbox.EmpMetteHansen))
	rep := run("fjordtech.ndjson", fmt.Sprintf(`{"id":"sc2","company_id":%q,"employee_id":%q,"date":"2026-11-02","hours":5,"code":"T1"}`+"\n", sandbox.CompanyFjordtech, sandbox.EmpJonasLarsen))
	if rep.Removed != 0 {
		t.Errorf("the other company's statement removed %d entries", rep.Removed)
	}
	if got := e.sandboxParts(); len(got) != 2 {
		t.Errorf("payroll holds %v, want both companies' pay parts", got)
	}
}

// TestCorrections_AggregateWithClosedHours: a monthly group that also
// sums hours of a closed week is frozen: a correction of an entry in an
// open week of it is recorded (no reject), but its pay part is not replaced
// (that would pay the closed week's hours again): payroll keeps the monthly
// 12, the plan lists the group as late (12 → 13). With the week opened
// again, the next reconcile brings it to 13.
func TestCorrections_AggregateWithClosedHours(t *testing.T) {
	e := setup(t, sandbox.Options{})
	im := e.importer(t, mapping.DefaultRules(), 100)
	mette := sandbox.EmpMetteHansen
	row := func(id, date, hours string) string {
		return fmt.Sprintf(`{"id":%q,"employee_id":%q,"date":%q,"hours":%s,"code":"T1"}`, id, mette, date, hours) + "\n"
	}
	run := func(name, body string) worker.Report {
		t.Helper()
		sum, err := im.ImportAll(ctx(t), e.led, []worker.Input{fileInput(t, name, []byte(body))}, nil)
		if err != nil || sum.Unfinished != 0 {
			t.Fatal(err, sum.Unfinished)
		}
		return sum.Inputs[0].Report
	}
	run("v1.ndjson", row("w1", "2026-11-03", "8")+row("w2", "2026-11-20", "4"))
	first := e.holds(t, "v1", mette+"|T1|12")
	w45, _ := paysync.ParsePeriod("2026-W45")
	if _, err := e.led.ClosePeriod(ctx(t), w45, ""); err != nil {
		t.Fatal(err)
	}
	rep := run("v2.ndjson", row("w2", "2026-11-20", "5"))
	if probs := rep.ProblemList(); len(probs) != 0 || rep.Corrections != 1 || rep.PayParts != 0 {
		t.Fatalf("the correction: %+v, problems %v; want it recorded, no pay part", rep, probs)
	}
	if got := e.holds(t, "after the correction", mette+"|T1|12"); got[mette+"|T1|12"] != first[mette+"|T1|12"] {
		t.Fatalf("the monthly pay part with closed hours was replaced")
	}
	if rejects, err := e.led.Rejects(ctx(t), rep.ImportID); err != nil || len(rejects) != 0 {
		t.Errorf("rejects of the correction: %+v, %v; want none", rejects, err)
	}
	p, err := im.Reconciler().Plan(ctx(t), worker.PlanFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].Kind != worker.ChangeLate || p.Changes[0].After.Units.Decimal.String() != "13" {
		t.Fatalf("plan: %+v; want the monthly group late, 12 → 13", p)
	}
	if _, err := e.led.ReopenPeriod(ctx(t), w45); err != nil {
		t.Fatal(err)
	}
	d := e.deliverer(e.cl)
	bs, err := im.Reconciler().Apply(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver(ctx(t), bs); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "the week opened again", mette+"|T1|13")
	e.checkLedger(t)
}

// TestScope_RevertMessageInACutoffAggregate: in cutoff mode a message's
// entry shares its period's pay part with other messages' entries; revert
// of that message replaces the aggregate by the others' total (delete,
// then create), and an entry of it still held is held no longer (the next
// cutoff does not pay it).
func TestScope_RevertMessageInACutoffAggregate(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi, rec := e.holdingImporter(t)
	d := e.deliverer(e.cl)
	mette := sandbox.EmpMetteHansen
	plan := func(body string) worker.Report {
		t.Helper()
		reps, errs, err := mi.Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", body)})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs[0])
		}
		return reps[0]
	}
	cutoff := func() {
		t.Helper()
		bs, err := rec.Apply(ctx(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Deliver(ctx(t), bs); err != nil {
			t.Fatal(err)
		}
	}
	plan(entryJSON("g1", mette, "T1", "8"))
	second := plan(entryJSON("g2", mette, "T1", "3"))
	cutoff()
	if got := e.payrollParts(); len(got) != 1 || got[mette+"|T1|11"] == "" {
		t.Fatalf("after the cutoff payroll holds %v, want one pay part of 11", got)
	}
	e.operate(t, rec, false, ledger.Target{Import: second.ImportID})
	if got := e.payrollParts(); len(got) != 1 || got[mette+"|T1|8"] == "" {
		t.Fatalf("after reverting the second message payroll holds %v, want the first's 8", got)
	}
	// A message still held when reverted is not paid at the next cutoff.
	held := plan(entryJSON("g3", mette, "T1", "2"))
	// Reverted before the cutoff: the revert's own reconcile is the
	// cutoff here (an operation applies its change at once).
	e.operate(t, rec, false, ledger.Target{Import: held.ImportID})
	cutoff()
	if got := e.payrollParts(); len(got) != 1 || got[mette+"|T1|8"] == "" {
		t.Fatalf("after the next cutoff payroll holds %v, want the first's 8 still", got)
	}
}

// holdingImporter is a message importer that holds entries for the cutoff
// (PAYSYNC_SEND=cutoff), and its corrector.
func (e *env) holdingImporter(t *testing.T) (*worker.MessageImporter, *worker.Reconciler) {
	mi := e.messageImporter(t)
	mi.Rules.Aggregate = true
	return mi, &worker.Reconciler{L: e.led, Mapper: mi.Mapper, Rules: mi.Rules, Wire: mi.Wire, BatchSize: 100}
}

// applyWith is a Pipeline's Correct hook: the reconciler's Apply.
func applyWith(rec *worker.Reconciler) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		bs, err := rec.Apply(ctx, 0)
		return len(bs), err
	}
}

// operate runs a revert or a replay of t and sends what it planned.
func (e *env) operate(t *testing.T, rec *worker.Reconciler, replay bool, tg ledger.Target) *worker.Deliverer {
	t.Helper()
	d := e.deliverer(e.cl)
	ops := &worker.Operations{L: e.led, R: rec, D: d}
	if _, _, err := ops.Run(ctx(t), worker.Operation{Replay: replay, Target: tg}); err != nil {
		t.Fatalf("%v: %v", worker.Operation{Replay: replay, Target: tg}, err)
	}
	return d
}
