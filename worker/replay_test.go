package worker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

func (e *env) replayer(im *worker.Importer) *worker.Replayer {
	return &worker.Replayer{L: e.led, D: e.deliverer(e.cl), Mapper: im.Mapper, Rules: im.Rules, Wire: e.schema, BatchSize: 3}
}

// revertedImport imports 8 entries in batches of 3 and reverts them all.
func revertedImport(t *testing.T, e *env) (worker.Report, *worker.Importer, []string) {
	t.Helper()
	im := e.importer(t, nil, 3)
	rep, err := im.Import(ctx(t), "file", "rp.ndjson", ndjson(8, "rp"))
	if err != nil {
		t.Fatal(err)
	}
	before := e.sandboxParts()
	if err := e.deliverer(e.cl).Revert(ctx(t), rep.Batches); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sandboxParts()); n != 0 {
		t.Fatalf("after the revert payroll holds %d", n)
	}
	return rep, im, before
}

func replayRun(t *testing.T, r *worker.Replayer, batchID, sourceID int64, force bool) worker.ReplayPlan {
	t.Helper()
	plan, err := r.Plan(ctx(t), batchID, sourceID, force)
	if err != nil {
		t.Fatalf("Plan(%d, %d): %v", batchID, sourceID, err)
	}
	if _, err := r.Run(ctx(t), plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestReplayer_EntryOnce: after a replay, replaying the import or any of
// its batches again finds every entry in payroll through that replay and
// plans nothing, naming the replay's batches; --force plans them again and
// says which. The replay's own batch, named, is refused like an original.
func TestReplayer_EntryOnce(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rep, im, before := revertedImport(t, e)
	r := e.replayer(im)
	first := replayRun(t, r, 0, rep.ImportID, false)
	if len(first.PayParts) != 8 || len(first.InPayroll) != 0 {
		t.Fatalf("first replay planned %d pay parts, skipped %v", len(first.PayParts), first.InPayroll)
	}
	sameMultiset(t, e.sandboxParts(), before)
	replayBatches, err := e.led.ListBatches(ctx(t), ledger.BatchFilter{State: paysync.BatchCreated})
	if err != nil || len(replayBatches) != 3 {
		t.Fatalf("created batches: %v, %v", replayBatches, err)
	}
	for _, target := range []struct{ batch, source int64 }{{0, rep.ImportID}, {rep.Batches[0], 0}, {rep.Batches[2], 0}} {
		plan, err := r.Plan(ctx(t), target.batch, target.source, false)
		if err != nil {
			t.Fatalf("replay %+v again: %v", target, err)
		}
		skipped := 0
		for _, s := range plan.InPayroll {
			skipped += s.Entries
			if s.Pending || s.BatchID <= rep.Batches[len(rep.Batches)-1] {
				t.Errorf("replay %+v again: skip %+v, want a created batch of the replay", target, s)
			}
		}
		want := 8
		if target.batch != 0 {
			want = 3
			if target.batch == rep.Batches[2] {
				want = 2
			}
		}
		if len(plan.PayParts) != 0 || skipped != want {
			t.Errorf("replay %+v again: %d pay parts, %d entries skipped (%v), want 0 and %d", target, len(plan.PayParts), skipped, plan.InPayroll, want)
		}
	}
	forced, err := r.Plan(ctx(t), 0, rep.ImportID, true)
	if err != nil || len(forced.PayParts) != 8 || len(forced.Forced) == 0 {
		t.Errorf("forced: %d pay parts, forced %v, %v", len(forced.PayParts), forced.Forced, err)
	}
	own := replayBatches[len(replayBatches)-1].ID // newest first: the replay's first batch
	if _, err := r.Plan(ctx(t), own, 0, false); !errors.Is(err, worker.ErrStillInPayroll) || !strings.Contains(err.Error(), "revert it first") {
		t.Errorf("replay of the replay's own batch %d: err = %v, want ErrStillInPayroll", own, err)
	}
	sameMultiset(t, e.sandboxParts(), before)
}

// TestReplayer_ResumeAfterCommit: a replay that died after committing its
// batches and before sending them is finished by Resume; planned again, it
// finds nothing left. Before the resume, a plan names the pending batches.
func TestReplayer_ResumeAfterCommit(t *testing.T) {
	for _, target := range []struct {
		name          string
		batch, source bool
	}{{"import", false, true}, {"batch", true, false}} {
		t.Run(target.name, func(t *testing.T) {
			e := setup(t, sandbox.Options{})
			rep, im, before := revertedImport(t, e)
			var batchID, sourceID int64
			if target.batch {
				batchID = rep.Batches[0]
				before = before[:0]
			} else {
				sourceID = rep.ImportID
			}
			plan, err := e.replayer(im).Plan(ctx(t), batchID, sourceID, false)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := e.replayer(im).Commit(ctx(t), plan) // and the process dies
			if err != nil || len(ids) == 0 {
				t.Fatalf("Commit = %v, %v", ids, err)
			}
			r := e.replayer(im)
			if err := r.D.Recover(ctx(t)); err != nil {
				t.Fatal(err)
			}
			pending, err := r.Plan(ctx(t), batchID, sourceID, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(pending.PayParts) != 0 || len(pending.InPayroll) != len(ids) || !pending.InPayroll[0].Pending {
				t.Fatalf("plan before the resume: %d pay parts, skips %+v; want none and the %d pending batches %v", len(pending.PayParts), pending.InPayroll, len(ids), ids)
			}
			resumed, err := r.Resume(ctx(t), batchID, sourceID)
			if err != nil || !slices.Equal(resumed, ids) {
				t.Fatalf("Resume = %v, %v; want %v", resumed, err, ids)
			}
			again, err := r.Plan(ctx(t), batchID, sourceID, false)
			if err != nil || len(again.PayParts) != 0 {
				t.Fatalf("plan after the resume: %d pay parts, %v", len(again.PayParts), err)
			}
			if target.batch {
				if n := len(e.sandboxParts()); n != len(plan.PayParts) {
					t.Fatalf("payroll holds %d, want the %d of batch %d", n, len(plan.PayParts), batchID)
				}
			} else {
				sameMultiset(t, e.sandboxParts(), before)
			}
			if again, _ := r.Resume(ctx(t), batchID, sourceID); len(again) != 0 {
				t.Errorf("a second Resume delivered %v", again)
			}
		})
	}
}

// TestReplayer_DeletedByHand: a replay's pay part deleted by hand in
// payroll is not live: the next replay creates it (and only it) again.
func TestReplayer_DeletedByHand(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rep, im, before := revertedImport(t, e)
	r := e.replayer(im)
	replayRun(t, r, 0, rep.ImportID, false)
	p := e.sb.State().Companies[0].PayParts[0]
	if err := e.sb.DeletePayPartDirect(sandbox.CompanyNordlys, p.ID); err != nil {
		t.Fatal(err)
	}
	plan := replayRun(t, r, 0, rep.ImportID, false)
	if len(plan.PayParts) != 1 {
		t.Fatalf("replay after a deletion by hand planned %d pay parts, want 1", len(plan.PayParts))
	}
	sameMultiset(t, e.sandboxParts(), before)
}

const byEmail = `version: 1
aggregate: false
employees:
  by_email:
    mette.hansen@nordlys.dk: MV8xXzE=
    lars.nielsen@nordlys.dk: MV8xXzI=
`

// TestRedrive_File: a file refused as a whole (its rules knew nobody) is
// imported again from its stored input once the rules are fixed, linked to
// the refused import; run again, it is a duplicate and sends nothing.
func TestRedrive_File(t *testing.T) {
	e := setup(t, sandbox.Options{})
	// E-mails payroll does not know (its own match them by itself).
	payload := []byte(`{"id":"r1","email":"mette@home.example","date":"2026-11-02","hours":"7.5","code":"T1"}
{"id":"r2","email":"lars@home.example","date":"2026-11-02","hours":"6","code":"T1"}
`)
	im := e.importer(t, nil, 10)
	im.AllOrNothing = true
	refused, err := im.Import(ctx(t), "file", "inbox/r.ndjson", payload)
	if err != nil || refused.RejectedAs == 0 {
		t.Fatalf("import: %+v, %v; want it refused", refused, err)
	}
	src, err := e.led.Source(ctx(t), refused.RejectedAs)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := mapping.LoadRules("rules.yaml", strings.NewReader(`version: 1
aggregate: false
employees:
  by_email:
    mette@home.example: MV8xXzE=
    lars@home.example: MV8xXzI=
`))
	if err != nil {
		t.Fatal(err)
	}
	fixed := e.importer(t, rules, 10)
	rep, err := worker.Redrive(ctx(t), e.led, fixed, src, nil)
	if err != nil || rep.ImportID == 0 || rep.Duplicate || rep.PayParts != 2 {
		t.Fatalf("Redrive = %+v, %v", rep, err)
	}
	if n := len(e.sandboxParts()); n != 2 {
		t.Fatalf("payroll holds %d, want 2", n)
	}
	if of, err := e.led.SourceReplayOf(ctx(t), rep.ImportID); err != nil || of != src.ID {
		t.Errorf("the re-drive links to %d (%v), want %d", of, err, src.ID)
	}
	creates := e.sb.State().Counters.Requests["create_pay_parts"]
	again, err := worker.Redrive(ctx(t), e.led, fixed, src, nil)
	if err != nil || !again.Duplicate || again.ImportID != rep.ImportID {
		t.Fatalf("Redrive again = %+v, %v; want a duplicate of import %d", again, err, rep.ImportID)
	}
	if n := e.sb.State().Counters.Requests["create_pay_parts"]; n != creates || len(e.sandboxParts()) != 2 {
		t.Fatalf("a second re-drive sent %d creates; payroll holds %d", n-creates, len(e.sandboxParts()))
	}
}

const normalRule = `version: 1
aggregate: false
rules:
  - name: normal
    match: {type: [Normal]}
    code: T1
    units: hours
`

// TestRedriveMessage_SubjectCompany: a message refused as a whole is taken
// again as the daemon takes messages, for its subject's company (the
// entry names none; the default company is another), sealed and sent at
// once; a preview sends nothing; run again, nothing more.
func TestRedriveMessage_SubjectCompany(t *testing.T) {
	e := setup(t, sandbox.Options{})
	subject := "timesheets." + sandbox.CompanyFjordtech + ".tt"
	body := `{"id":"m1","employee_id":"` + sandbox.EmpJonasLarsen + `","date":"2026-11-02","hours":"2","type":"Normal"}`
	wrong := mapping.DefaultRules()
	mi := &worker.MessageImporter{L: e.led, Mapper: mapping.NewMapper(wrong, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys), Rules: wrong, Wire: e.schema, BatchSize: 100}
	reps, _, err := mi.Plan(ctx(t), []worker.Message{{Kind: "nats", Name: subject, Company: sandbox.CompanyFjordtech, Payload: []byte(body)}})
	if err != nil || reps[0].RejectedAs == 0 {
		t.Fatalf("message: %+v, %v; want it refused", reps, err)
	}
	src, err := e.led.Source(ctx(t), reps[0].RejectedAs)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := mapping.LoadRules("rules.yaml", strings.NewReader(normalRule))
	if err != nil {
		t.Fatal(err)
	}
	fixed := &worker.MessageImporter{L: e.led, Mapper: mapping.NewMapper(rules, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys), Rules: rules, Wire: e.schema, BatchSize: 100}
	var previewed []string
	prev, err := worker.RedriveMessage(ctx(t), e.led, fixed, e.deliverer(e.cl), src, sandbox.CompanyFjordtech, func(pp paysync.PlannedPayPart) error {
		previewed = append(previewed, pp.CompanyID)
		return nil
	})
	if err != nil || len(previewed) != 1 || previewed[0] != sandbox.CompanyFjordtech || prev.ImportID != 0 {
		t.Fatalf("preview: %+v, %v, companies %v", prev, err, previewed)
	}
	if n := len(e.sandboxParts()); n != 0 {
		t.Fatalf("the preview sent %d", n)
	}
	for i := range 2 {
		rep, err := worker.RedriveMessage(ctx(t), e.led, fixed, e.deliverer(e.cl), src, sandbox.CompanyFjordtech, nil)
		if err != nil || rep.ImportID == 0 || rep.Duplicate != (i == 1) {
			t.Fatalf("re-drive %d = %+v, %v", i+1, rep, err)
		}
		parts := e.sandboxParts()
		if len(parts) != 1 || !strings.HasPrefix(parts[0], sandbox.CompanyFjordtech+"|"+sandbox.EmpJonasLarsen+"|T1|") {
			t.Fatalf("after re-drive %d payroll holds %v, want one T1 of Jonas Larsen in %s", i+1, parts, sandbox.CompanyFjordtech)
		}
	}
}
