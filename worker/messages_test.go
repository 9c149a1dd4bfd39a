package worker_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
)

func (e *env) messageImporter(t *testing.T) *worker.MessageImporter {
	t.Helper()
	rules := mapping.DefaultRules()
	m := mapping.NewMapper(rules, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys)
	return &worker.MessageImporter{L: e.led, Mapper: m, Rules: rules, Wire: e.schema, BatchSize: 100}
}

func msg(subject, body string) worker.Message {
	return worker.Message{Kind: paysync.SourceNATS, Name: subject, Company: stream.CompanyOf(subject), Payload: []byte(body)}
}

// TestMessageImporter_SubjectCompany: the subject's company is the entry's
// company. An entry without company_id goes there (not to the default
// company); a body naming another company is an input problem. The
// messages commit their entries held; the reconciler plans their group
// (the subject's company × Jonas × T1 × November: one pay part of both).
func TestMessageImporter_SubjectCompany(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	msgs := []worker.Message{
		msg("timesheets.MV8y.toggl", `{"id":"s-1","employee_id":"`+sandbox.EmpJonasLarsen+`","date":"2026-11-02","hours":2,"code":"T1"}`),
		msg("timesheets.MV8y.toggl", `{"id":"s-2","company_id":"MV8x","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-02","hours":3,"code":"T1"}`),
		msg("timesheets.MV8y.toggl", `{"id":"s-3","company_id":"MV8y","employee_id":"`+sandbox.EmpJonasLarsen+`","date":"2026-11-02","hours":4,"code":"T1"}`),
	}
	reps, errs, err := mi.Plan(ctx(t), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		if errs[i] != nil {
			t.Fatalf("message %d: %v", i, errs[i])
		}
		t.Logf("message %d: import %d, problems %v", i, r.ImportID, r.ProblemList())
	}
	if reps[0].ImportID == 0 || reps[0].Mapped != 1 || len(reps[0].ProblemList()) != 0 {
		t.Errorf("entry without company_id on MV8y's subject: %+v", reps[0])
	}
	probs := reps[1].ProblemList()
	if len(probs) != 1 || !strings.Contains(probs[0].Error(), "company_id") || !strings.Contains(probs[0].Error(), "MV8y") {
		t.Errorf("body company MV8x on MV8y's subject: problems %v; want one company_id problem naming the subject's company", probs)
	}
	if reps[2].ImportID == 0 || reps[2].Mapped != 1 {
		t.Errorf("body and subject agree: %+v", reps[2])
	}
	if bs := e.apply(t, e.reconcilerOf(mi)); len(bs) != 1 {
		t.Errorf("the reconcile recorded batches %v, want one", bs)
	}
	// s-1's 2 hours and s-3's 4, both MV8y's; s-2 was refused.
	e.wantLive(t, "after the reconcile", sandbox.CompanyFjordtech+"|"+sandbox.EmpJonasLarsen+"|T1|6")
	open, err := e.led.OpenBatches(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range open {
		if b.CompanyID != sandbox.CompanyFjordtech {
			t.Errorf("batch %d is for %s; every pay part belongs to the subject's company MV8y", b.ID, b.CompanyID)
		}
	}
}

// TestMessageImporter_TransientMapping: a payroll outage while mapping one
// message is that message's transient error (retry it later); it is not a
// problem, nothing of it is committed or rejected, and the other messages of
// the group commit. Once payroll answers, the same message commits, and the
// reconcile plans every committed entry once.
func TestMessageImporter_TransientMapping(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	// MV8x's employees are read (and cached) first; then MV8y's read fails.
	warm := msg("timesheets.MV8x.toggl", `{"id":"w-1","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-02","hours":1,"code":"T1"}`)
	if _, _, err := mi.Plan(ctx(t), []worker.Message{warm}); err != nil {
		t.Fatal(err)
	}
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "companies", Status: 500})
	msgs := []worker.Message{
		msg("timesheets.MV8x.toggl", `{"id":"t-1","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-02","hours":2,"code":"T1"}`),
		msg("timesheets.MV8y.toggl", `{"id":"t-2","company_id":"MV8y","employee_id":"`+sandbox.EmpJonasLarsen+`","date":"2026-11-02","hours":3,"code":"T1"}`),
	}
	reps, errs, err := mi.Plan(ctx(t), msgs)
	if err != nil {
		t.Fatalf("group failed as a whole: %v", err)
	}
	if errs[0] != nil || reps[0].ImportID == 0 || reps[0].Mapped != 1 {
		t.Errorf("the message whose context was cached: rep %+v, err %v; want committed", reps[0], errs[0])
	}
	if errs[1] == nil || len(reps[1].ProblemList()) > 0 || reps[1].RejectedAs != 0 {
		t.Fatalf("the message whose employees could not be read: rep %+v, err %v; want a transient error, no problem, no reject", reps[1], errs[1])
	}
	var ie *mapping.Problem
	if errors.As(errs[1], &ie) {
		t.Fatalf("transient error %v is a Problem", errs[1])
	}
	for _, s := range e.importSources(t) {
		if s.Status == paysync.SourceRejected {
			t.Errorf("source %d (%s) recorded as rejected during an outage", s.ID, s.Name)
		}
	}
	e.sb.SetFaults()
	var rep worker.Report
	rep, err = afterOutage(func() (worker.Report, error) {
		reps, errs, err := mi.Plan(ctx(t), msgs[1:])
		if err != nil {
			return worker.Report{}, err
		}
		return reps[0], errs[0]
	})
	if err != nil || rep.ImportID == 0 || rep.Mapped != 1 || rep.Duplicate {
		t.Fatalf("after the outage: rep %+v, err %v; want committed", rep, err)
	}
	// w-1 and t-1 (MV8x's Mette: 1 + 2 hours), t-2 (MV8y's Jonas: 3).
	e.apply(t, e.reconcilerOf(mi))
	e.wantLive(t, "after the reconcile", sandbox.CompanyNordlys+"|"+sandbox.EmpMetteHansen+"|T1|3", sandbox.CompanyFjordtech+"|"+sandbox.EmpJonasLarsen+"|T1|3")
}

// TestImporter_TransientMapping: a file whose company's employees cannot
// be read is not refused: the import fails as a whole with a transient
// error (the inbox keeps the file for its next poll), nothing is recorded
// as rejected, and the same file imports once payroll answers.
func TestImporter_TransientMapping(t *testing.T) {
	e := setup(t, sandbox.Options{})
	im := e.importer(t, nil, 100)
	file := []byte(`{"id":"f-1","employee_id":"` + sandbox.EmpMetteHansen + `","date":"2026-11-02","hours":2,"code":"T1"}` + "\n")
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "companies", Status: 500})
	rep, err := im.Plan(ctx(t), "file", "hours.ndjson", file)
	if err == nil || len(rep.ProblemList()) > 0 || rep.RejectedAs != 0 {
		t.Fatalf("during an outage: rep %+v, err %v; want a transient error and no problem", rep, err)
	}
	if srcs := e.importSources(t); len(srcs) != 0 {
		t.Fatalf("sources recorded during an outage: %+v", srcs)
	}
	e.sb.SetFaults()
	rep, err = afterOutage(func() (worker.Report, error) { return im.Plan(ctx(t), "file", "hours.ndjson", file) })
	if err != nil || rep.PayParts != 1 {
		t.Fatalf("after the outage: rep %+v, err %v; want one pay part", rep, err)
	}
}

// TestMessageImporter_SubjectCompanyDuplicates: an entry sent again on its
// company's subject is a duplicate whether the earlier copy named the
// company or not (an entry stored before the subject gave entries their
// company, or sent once with company_id and once without): not "imported
// with different content", which would refuse the whole message; nor a
// correction, nor paid twice.
func TestMessageImporter_SubjectCompanyDuplicates(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	rec := e.reconcilerOf(mi)
	mette := sandbox.CompanyNordlys + "|" + sandbox.EmpMetteHansen + "|T1|"
	body := `{"id":"d-1","employee_id":"` + sandbox.EmpMetteHansen + `","date":"2026-11-02","hours":2,"code":"T1"}`
	// Stored as before: no subject company.
	old := worker.Message{Kind: paysync.SourceNATS, Name: "timesheets.MV8x.toggl", Payload: []byte(body)}
	if reps, errs, err := mi.Plan(ctx(t), []worker.Message{old}); err != nil || errs[0] != nil || reps[0].Mapped != 1 {
		t.Fatalf("first: %+v %v %v", reps, errs, err)
	}
	e.apply(t, rec)
	e.wantLive(t, "first", mette+"2")
	again := msg("timesheets.MV8x.toggl", `{"entries":[`+body+`,{"id":"d-2","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-03","hours":3,"code":"T1"}]}`)
	reps, errs, err := mi.Plan(ctx(t), []worker.Message{again})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	if probs := reps[0].ProblemList(); len(probs) > 0 || reps[0].Duplicates != 1 || reps[0].Mapped != 1 || reps[0].Corrections != 0 {
		t.Fatalf("resent with a new entry: %d duplicates, %d mapped, %d corrections, problems %v; want 1, 1, 0, none", reps[0].Duplicates, reps[0].Mapped, reps[0].Corrections, probs)
	}
	// d-1 once, d-2 new: their group's one pay part of 2 + 3.
	e.apply(t, rec)
	e.wantLive(t, "resent with a new entry", mette+"5")
	// And with company_id given, the same entry again: a duplicate too.
	withCompany := msg("timesheets.MV8x.toggl", `{"id":"d-2","company_id":"MV8x","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-03","hours":3,"code":"T1"}`)
	reps, errs, err = mi.Plan(ctx(t), []worker.Message{withCompany})
	if err != nil || errs[0] != nil || len(reps[0].ProblemList()) > 0 || reps[0].Duplicates != 1 || reps[0].Corrections != 0 {
		t.Fatalf("with company_id: %+v %v %v", reps[0], errs[0], err)
	}
	if bs := e.apply(t, rec); len(bs) != 0 {
		t.Errorf("with company_id: the reconcile recorded batches %v, want none", bs)
	}
	e.wantLive(t, "with company_id", mette+"5")
}

// afterOutage retries plan while it fails: a transient failure is given
// again for a moment (mapping fails fast during an outage), then payroll is
// asked again.
func afterOutage(plan func() (worker.Report, error)) (worker.Report, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := plan()
		if err == nil || time.Now().After(deadline) {
			return rep, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMessageImporter_PreparedBeforeTheGroupBefore: the stream prepares a
// group while the one before commits, so a group's look-ups may miss what
// that one commits. The ledger catches it at Commit: the same message is
// a duplicate; another message with an entry just committed is that
// message's error (retried), and its retry finds the entry stored. Either
// way the entry counts once: one line of it counts, and its group's one pay
// part holds each entry's hours once.
func TestMessageImporter_PreparedBeforeTheGroupBefore(t *testing.T) {
	e := setup(t, sandbox.Options{})
	mi := e.messageImporter(t)
	entry := func(id string, hours int) string {
		return `{"id":"` + id + `","employee_id":"` + sandbox.EmpMetteHansen + `","date":"2026-11-02","hours":` + strconv.Itoa(hours) + `,"code":"T1"}`
	}
	first := []worker.Message{
		msg("timesheets.MV8x.toggl", entry("x-1", 2)),
		msg("timesheets.MV8x.toggl", `[`+entry("x-2", 3)+`]`),
	}
	second := []worker.Message{
		msg("timesheets.MV8x.toggl", entry("x-1", 2)),                     // the same message again
		msg("timesheets.MV8x.toggl", `{"entries":[`+entry("x-2", 3)+`]}`), // another message, the same entry
		msg("timesheets.MV8x.toggl", entry("x-3", 4)),                     // new
	}
	g1, err := mi.Prepare(ctx(t), first)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := mi.Prepare(ctx(t), second) // before first commits
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, err := mi.Commit(ctx(t), g1); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("first group: %v %v", err, errs)
	}
	reps, errs, err := mi.Commit(ctx(t), g2)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !reps[0].Duplicate {
		t.Errorf("the same message again: %+v, %v; want a duplicate", reps[0], errs[0])
	}
	if errs[1] == nil {
		t.Errorf("another message with an entry committed meanwhile: %+v; want its error (retried)", reps[1])
	}
	if errs[2] != nil || reps[2].ImportID == 0 || reps[2].Mapped != 1 {
		t.Errorf("the new message: %+v, %v; want committed", reps[2], errs[2])
	}
	// The retry, as the stream's redelivery does it.
	reps, errs, err = mi.Plan(ctx(t), second[1:2])
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	if reps[0].Mapped != 0 || reps[0].Corrections != 0 || reps[0].Duplicates != 1 {
		t.Errorf("the retry: %+v; want its entry a duplicate", reps[0])
	}
	e.apply(t, e.reconcilerOf(mi))
	// x-1, x-2, x-3 once each: 2 + 3 + 4 hours in Mette's one group.
	e.wantLive(t, "after the reconcile", sandbox.CompanyNordlys+"|"+sandbox.EmpMetteHansen+"|T1|9")
	if got, err := e.led.PendingPayParts(ctx(t)); err != nil || got != 1 {
		t.Errorf("%d pay parts pending in the ledger (%v), want 1", got, err)
	}
	db := rawLedger(t, e.led.Path())
	for _, id := range []string{"x-1", "x-2", "x-3"} {
		if n := count(t, db, `SELECT count(*) FROM entries WHERE entry_id = ?`, id); n != 1 {
			t.Errorf("entry %s: %d rows, want 1", id, n)
		}
		if n := count(t, db, `SELECT count(*) FROM lines l JOIN versions v ON v.id = l.version JOIN entries e ON e.id = v.entry
			WHERE e.entry_id = ? AND l.counts = 1`, id); n != 1 {
			t.Errorf("entry %s: %d lines count, want 1", id, n)
		}
	}
}
