package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// intakeEntries meet every verdict of the intake step, after intakeEarlier:
// the same entry again (a duplicate), a paid entry changed (a correction), an
// entry rejected and one skipped before (taken again), an id twice in the
// input (a problem), and a value the wire cannot carry (the pay part is
// dropped: a problem, and its entry stays takeable).
var intakeEntries = []string{
	`{"id":"same","company_id":"MV8x","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"2","code":"T1"}`,
	`{"id":"changed","company_id":"MV8x","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"4","code":"T1"}`,
	`{"id":"wasbad","company_id":"MV8x","employee_id":"MV8xXzM=","date":"2026-11-02","hours":"1","code":"T1"}`,
	`{"id":"wasskipped","company_id":"MV8x","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"3","code":"T1"}`,
	`{"id":"dup","company_id":"MV8x","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"1","code":"T1"}`,
	`{"id":"dup","company_id":"MV8x","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"5","code":"T1"}`,
	`{"id":"wire","company_id":"MV8x","employee_id":"MV8xXzQ=","date":"2026-11-02","code":"DIAET","units":"1.005"}`,
}

var intakeEarlier = []byte(`{"id":"same","company_id":"MV8x","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"2","code":"T1"}
{"id":"changed","company_id":"MV8x","employee_id":"MV8xXzI=","date":"2026-11-02","hours":"3","code":"T1"}
{"id":"wasbad","company_id":"MV8x","employee_id":"nobody","date":"2026-11-02","hours":"1","code":"T1"}
{"id":"wasskipped","company_id":"MV8x","employee_id":"MV8xXzE=","date":"2026-11-02","hours":"0","code":"T1"}
`)

// TestIntake_EverySourceAlike: a file (partial or all or nothing) and a
// message with the same entries get the same verdicts from the one intake
// step, recorded as the same rejects in the same order; only the policy
// differs: a partial file takes the good entries, all or nothing and a
// message are refused as a whole.
func TestIntake_EverySourceAlike(t *testing.T) {
	var rejects []string
	for _, source := range []string{"file", "file all or nothing", "message"} {
		t.Run(source, func(t *testing.T) {
			e := setup(t, sandbox.Options{Numbers: sandbox.NumbersInt})
			im := e.importer(t, mapping.DefaultRules(), 10)
			if _, err := im.Plan(ctx(t), paysync.SourceFile, "earlier.ndjson", intakeEarlier); err != nil {
				t.Fatal(err)
			}
			var rep worker.Report
			var err error
			switch source {
			case "message":
				var reps []worker.Report
				var errs []error
				reps, errs, err = e.messageImporter(t).Plan(ctx(t), []worker.Message{msg("timesheets.MV8x.toggl", "["+strings.Join(intakeEntries, ",")+"]")})
				if err == nil {
					rep, err = reps[0], errs[0]
				}
			default:
				im.AllOrNothing = source != "file"
				rep, err = im.Plan(ctx(t), paysync.SourceFile, "new.ndjson", []byte(strings.Join(intakeEntries, "\n")+"\n"))
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Entries != 7 || rep.Duplicates != 1 {
				t.Errorf("entries %d, duplicates %d; want 7, 1", rep.Entries, rep.Duplicates)
			}
			if want := map[bool]int{true: 1, false: 0}[source == "file"]; rep.Corrections != want {
				t.Errorf("%d corrections, want %d (the changed paid entry; none of a source refused as a whole)", rep.Corrections, want)
			}
			db := rawLedger(t, e.led.Path())
			var got []string
			rows, err := db.Query(`SELECT r.entry_id, r.line, r.field, r.message FROM rejects r JOIN sources s ON s.id = r.source_id WHERE s.name <> 'earlier.ndjson' ORDER BY r.id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id, field, message string
				var line int
				if err := rows.Scan(&id, &line, &field, &message); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s:%d %s: %s", id, line, field, strings.ReplaceAll(message, "this message", "this file")))
			}
			// The entries' problems in order, then the pay parts'.
			for i, want := range []string{"dup:6 id: duplicate entry id in this file", "wire:7 "} {
				if i >= len(got) || !strings.HasPrefix(got[i], want) {
					t.Fatalf("rejects:\n%s\nwant, in order, %q, ...", strings.Join(got, "\n"), want)
				}
			}
			if len(got) != 2 {
				t.Errorf("rejects:\n%s\nwant 2", strings.Join(got, "\n"))
			}
			if rejects == nil {
				rejects = got
			} else if strings.Join(got, "\n") != strings.Join(rejects, "\n") {
				t.Errorf("rejects:\n%s\nthe file's:\n%s", strings.Join(got, "\n"), strings.Join(rejects, "\n"))
			}
			statuses := count(t, db, `SELECT count(*) FROM entries WHERE status = 'mapped' AND entry_id IN ('wasbad', 'wasskipped', 'dup')`)
			wire := count(t, db, `SELECT count(*) FROM entries WHERE status = 'rejected' AND entry_id = 'wire'`)
			// The paid entry changed is not taken as a new entry: it is one
			// entry with a new version (the file's, which the import's
			// reconcile took into the desired state: its line counts, the
			// earlier one no longer). A source refused as a whole adds none.
			if n := count(t, db, `SELECT count(*) FROM entries WHERE entry_id = 'changed'`); n != 1 {
				t.Errorf("the paid entry changed is %d entries, want 1 (a correction is a new version of it)", n)
			}
			versions := count(t, db, `SELECT count(*) FROM versions v JOIN entries e ON e.id = v.entry WHERE e.entry_id = 'changed'`)
			counting := count(t, db, `SELECT count(*) FROM lines l JOIN versions v ON v.id = l.version JOIN entries e ON e.id = v.entry
				JOIN sources s ON s.id = v.source_id WHERE e.entry_id = 'changed' AND l.counts = 1 AND s.name = ?`, map[bool]string{true: "new.ndjson", false: "earlier.ndjson"}[source == "file"])
			if want := map[bool]int{true: 2, false: 1}[source == "file"]; versions != want || counting != 1 {
				t.Errorf("the changed entry: %d versions, %d lines of the expected one count; want %d and 1", versions, counting, want)
			}
			if n := count(t, db, `SELECT count(*) FROM entry_corrections WHERE state = 'pending'`); n != 0 {
				t.Errorf("%d corrections still pending after the import's reconcile", n)
			}
			// What the reconcile planned: each group's entries once, the
			// changed one with its new hours only where the source was taken.
			if source == "file" {
				e.wantLive(t, "partial file", "MV8x|MV8xXzE=|T1|5", "MV8x|MV8xXzI=|T1|5", "MV8x|MV8xXzM=|T1|1")
			} else {
				e.wantLive(t, "refused as a whole", "MV8x|MV8xXzE=|T1|2", "MV8x|MV8xXzI=|T1|3")
			}
			if source == "file" {
				// The good entries are taken (also those rejected or skipped
				// before); the one only in a dropped pay part stays takeable.
				if rep.ImportID == 0 || rep.RejectedAs != 0 || statuses != 3 || wire != 1 || rep.PayParts == 0 {
					t.Errorf("partial file: import %d, rejected as %d, %d entries taken of 3, wire rejected %d, %d pay parts", rep.ImportID, rep.RejectedAs, statuses, wire, rep.PayParts)
				}
				return
			}
			if rep.ImportID != 0 || rep.RejectedAs == 0 || statuses != 0 || wire != 0 || rep.PayParts != 0 {
				t.Errorf("refused as a whole: import %d, rejected as %d, %d entries taken, wire stored %d, %d pay parts", rep.ImportID, rep.RejectedAs, statuses, wire, rep.PayParts)
			}
		})
	}
}
