//go:build legacyfixture

package main

// TestGenerateLegacyFixture writes testdata/legacy-313bf20/: a ledger
// produced by this commit's paysync (313bf20) with imports, a correction
// unit, messages merged by the daemon, a revert and a closed period, and
// the payroll state that goes with it, so that a later paysync can be
// tested on upgrading it (history, pay-part ids, exactly-once). It does
// not run in the normal suite:
//
//	go test -tags legacyfixture -run TestGenerateLegacyFixture ./cmd/paysync
//
// Everything runs as real processes (the binary TestMain builds) against
// an in-process sandbox (sandbox.Options{}) and an embedded JetStream
// server. Running it again overwrites the fixture with an equivalent one
// (other timestamps, possibly other payroll ids if merges are timed
// differently); legacy_fixture_test.go checks whatever it wrote.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
	"github.com/shopspring/decimal"
)

// The fixture's inputs besides the two Toggl exports (copied as they are).
const (
	legacyOctober = `{"id":"oct-1","employee_id":"MV8xXzE=","date":"2026-10-26","hours":"7.5","type":"work"}
{"id":"oct-2","employee_id":"MV8xXzE=","date":"2026-10-27","hours":"8","type":"work"}
{"id":"oct-3","employee_id":"MV8xXzI=","date":"2026-10-28","hours":"1","type":"Mileage","km":"42.5"}
{"id":"oct-4","company_id":"MV8y","employee_id":"MV8yXzE=","date":"2026-10-29","hours":"6","type":"work"}
{"id":"oct-5","company_id":"MV8y","employee_id":"MV8yXzI=","date":"2026-10-30","hours":"3","type":"Overtime"}
`
	legacyAnders = `{"id":"and-1","employee_id":"MV8xXzQ=","date":"2026-11-09","hours":"6","type":"work"}
{"id":"and-2","employee_id":"MV8xXzQ=","date":"2026-11-10","hours":"7.25","type":"work"}
`
	legacyNATSSource = "timetracker"
)

func legacyEntry(id, emp, date, hours, typ string, tags ...string) paysync.Entry {
	return paysync.Entry{ID: id, EmployeeID: emp, Date: date, Type: typ, Tags: tags,
		Hours: paysync.HoursFromSeconds(decimal.RequireFromString(hours).Mul(decimal.NewFromInt(3600)).IntPart())}
}

// The messages, December 2026, in two rounds: the second adds to Mette's
// aggregate, corrects one of Lars's entries and deletes another.
var (
	legacyRound1 = []paysync.Entry{
		legacyEntry("n-1", sandbox.EmpMetteHansen, "2026-12-01", "7.5", "work"),
		legacyEntry("n-2", sandbox.EmpMetteHansen, "2026-12-02", "8", "work"),
		legacyEntry("n-3", sandbox.EmpLarsNielsen, "2026-12-01", "6", "work"),
		legacyEntry("n-4", sandbox.EmpLarsNielsen, "2026-12-03", "4", "Sick"),
		legacyEntry("n-5", sandbox.EmpSofieJensen, "2026-12-02", "5", "work", "evening"),
	}
	legacyRound2 = []paysync.Entry{
		legacyEntry("n-6", sandbox.EmpMetteHansen, "2026-12-03", "2", "work"),
		legacyEntry("n-3", sandbox.EmpLarsNielsen, "2026-12-01", "6.5", "work"),
		{ID: "n-4", Deleted: true},
	}
)

func nordlysKey(emp, code string, n paysync.Numbers) string {
	return sandbox.CompanyNordlys + "|" + emp + "|" + code + "|" + n.String()
}

func units(s string) paysync.Numbers { return paysync.Numbers{Units: paysync.Dec(s)} }

// legacyRun runs the built paysync in dir with exactly env (plus HOME and
// PATH) and expects exit code want.
func legacyRun(t *testing.T, dir, home string, env map[string]string, want int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("paysync %v: %v", args, err)
	}
	r := result{code, stdout.String(), stderr.String()}
	if code != want {
		t.Fatalf("paysync %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, r.stdout, r.stderr)
	}
	t.Logf("$ paysync %s\n%s", strings.Join(args, " "), r.stdout)
	return r
}

func copyFileTo(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}

// legacyWaitPayroll waits until payroll holds exactly want (as
// payrollKeys), with no write for a second.
func legacyWaitPayroll(t *testing.T, sb *sandbox.Server, step string, want []string) {
	t.Helper()
	want = slices.Clone(want)
	sort.Strings(want)
	writes := func() int {
		r := sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		w := writes()
		if slices.Equal(payrollKeys(sb), want) {
			time.Sleep(time.Second)
			if writes() == w && slices.Equal(payrollKeys(sb), want) {
				return
			}
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: payroll holds\n  %s\nwant\n  %s", step, strings.Join(payrollKeys(sb), "\n  "), strings.Join(want, "\n  "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGenerateLegacyFixture(t *testing.T) {
	out, err := filepath.Abs(legacyFixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	in := filepath.Join(work, "inputs") // the commands' working directory: sources are named as given
	ldir := filepath.Join(work, "ledger")
	home := filepath.Join(work, "home")
	for _, d := range []string{in, ldir, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	copyFileTo(t, "../../deploy/examples/rules.yaml", filepath.Join(in, "rules.yaml"), 0o600)
	copyFileTo(t, "../../deploy/examples/toggl.csv", filepath.Join(in, "toggl.csv"), 0o600)
	copyFileTo(t, "testdata/corrections/toggl-corrected.csv", filepath.Join(in, "toggl-corrected.csv"), 0o600)
	for name, body := range map[string]string{"october.ndjson": legacyOctober, "anders.ndjson": legacyAnders} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var msgs bytes.Buffer
	for _, e := range append(slices.Clone(legacyRound1), legacyRound2...) {
		_, b, err := paysync.EntryHash(e) // the message body stream.Publish sends
		if err != nil {
			t.Fatal(err)
		}
		msgs.Write(append(b, '\n'))
	}
	if err := os.WriteFile(filepath.Join(in, "nats-messages.ndjson"), msgs.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	s := startSandbox(t, sandbox.Options{})
	sb := s.sb
	// A pay part typed into payroll by hand before paysync's first send:
	// the ledger records it as foreign (never claimed).
	foreign, err := sb.SeedPayPart(sandbox.CompanyNordlys, paysync.PayPartInput{EmployeeID: sandbox.EmpSofieJensen, Code: "BONUS",
		Numbers: paysync.Numbers{Amount: paysync.Dec("500")}})
	if err != nil {
		t.Fatal(err)
	}
	ledgerPath := filepath.Join(ldir, "ledger.db")
	env := with(s.env,
		"PAYSYNC_LEDGER", ledgerPath,
		"PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys,
		"PAYSYNC_MAPPING", filepath.Join(in, "rules.yaml"),
		"PAYSYNC_LOG_LEVEL", "warn",
	)
	delete(env, "PAYSYNC_TOKEN_FILE") // the refresh token lives in the ledger, as by default
	cli := func(want int, args ...string) result { t.Helper(); return legacyRun(t, in, home, env, want, args...) }

	// (a) the Toggl export; (b) its corrected re-export: a correction unit.
	cli(0, "import", "--rules", "rules.yaml", "toggl.csv")
	r := cli(0, "import", "--rules", "rules.yaml", "toggl-corrected.csv")
	if !strings.Contains(r.stdout, "correction") {
		t.Errorf("the corrected re-export made no correction unit:\n%s", r.stdout)
	}
	// October, two companies: left fully created, its period closed below.
	cli(0, "import", "--rules", "rules.yaml", "october.ndjson")
	// November, Anders: reverted below.
	cli(0, "import", "--rules", "rules.yaml", "anders.ndjson")

	// (c) December by NATS, merged by the daemon (PAYSYNC_SEND=immediate).
	drv := newNATSDriver(t).(*natsDriver)
	denv := with(env, "NATS_URL", drv.url, "PAYSYNC_BATCH_LINGER", "1s", "PAYSYNC_SHUTDOWN_GRACE", "20s")
	h := &daemonHarness{sb: sb, drv: drv, env: denv, home: home, prefix: "legacy"}
	baseline := payrollKeys(sb)
	publish := func(entries []paysync.Entry) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, e := range entries {
			dup, err := stream.Publish(ctx, drv.js, stream.Subject("timesheets", sandbox.CompanyNordlys, legacyNATSSource), e)
			if err != nil || dup {
				t.Fatalf("publish %s: dup %v, %v", e.ID, dup, err)
			}
		}
	}
	d := h.start(t)
	publish(legacyRound1)
	legacyWaitPayroll(t, sb, "the first messages merged", append(slices.Clone(baseline),
		nordlysKey(sandbox.EmpMetteHansen, "T1", units("15.5")),
		nordlysKey(sandbox.EmpLarsNielsen, "T1", units("6")),
		nordlysKey(sandbox.EmpLarsNielsen, "SYG", units("4")),
		nordlysKey(sandbox.EmpSofieJensen, "T1", units("5")),
		nordlysKey(sandbox.EmpSofieJensen, "TILLAEG", paysync.Numbers{Units: paysync.Dec("5"), Rate: paysync.Dec("45"), Amount: paysync.Dec("225")}),
	))
	publish(legacyRound2)
	legacyWaitPayroll(t, sb, "the second messages merged", append(slices.Clone(baseline),
		nordlysKey(sandbox.EmpMetteHansen, "T1", units("17.5")),
		nordlysKey(sandbox.EmpLarsNielsen, "T1", units("6.5")),
		nordlysKey(sandbox.EmpSofieJensen, "T1", units("5")),
		nordlysKey(sandbox.EmpSofieJensen, "TILLAEG", paysync.Numbers{Units: paysync.Dec("5"), Rate: paysync.Dec("45"), Amount: paysync.Dec("225")}),
	))
	waitFor(t, "the stream drained", 30*time.Second, func() bool { return drv.drained(t) })
	d.stop(t)
	if p := drv.parked(t); len(p) > 0 {
		t.Fatalf("dead letters: %v", p)
	}

	// (d) a revert of the Anders import; (e) October closed.
	db := legacyDB(t, ledgerPath)
	var andersID int64
	if err := db.QueryRow(`SELECT id FROM sources WHERE name = 'anders.ndjson'`).Scan(&andersID); err != nil {
		t.Fatalf("the anders.ndjson import: %v", err)
	}
	db.Close()
	cli(0, "revert", "--import", fmt.Sprint(andersID), "--yes")
	cli(0, "periods", "close", "2026-10", "--note", "October 2026 payroll run")
	cli(0, "periods")
	cli(0, "batches")
	cli(0, "imports")
	cli(0, "corrections")

	// The ledger, checkpointed into its one file.
	db = legacyDB(t, ledgerPath)
	var busy, logFrames, checkpointed int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &checkpointed); err != nil || busy != 0 {
		t.Fatalf("wal_checkpoint(TRUNCATE): busy %d, %v", busy, err)
	}
	facts := legacyFacts(t, db)
	db.Close()
	for _, b := range facts.Batches {
		if (b[5] != "created" && b[5] != "reverted") || b[10] != "0" {
			t.Fatalf("batch %s is %s with %s pending: want every batch created or reverted", b[0], b[5], b[10])
		}
	}
	if fi, err := os.Stat(ledgerPath + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("%s-wal still holds %d bytes after the checkpoint", ledgerPath, fi.Size())
	}

	// Payroll: every pay part, and the ledger's live ones are exactly the
	// non-foreign ones.
	dump := legacyPayrollDump(t, sb, facts, foreign.ID)

	if err := os.MkdirAll(filepath.Join(out, "inputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFileTo(t, ledgerPath, filepath.Join(out, "ledger.db"), 0o600)
	copyFileTo(t, filepath.Join(in, "rules.yaml"), filepath.Join(out, "rules.yaml"), 0o644)
	for _, name := range []string{"toggl.csv", "toggl-corrected.csv", "october.ndjson", "anders.ndjson", "nats-messages.ndjson"} {
		copyFileTo(t, filepath.Join(in, name), filepath.Join(out, "inputs", name), 0o644)
	}
	b, err := json.MarshalIndent(dump, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "payroll.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "README.md"), []byte(legacyReadme(facts, dump)), 0o644); err != nil {
		t.Fatal(err)
	}

	// The copy opens with this commit's paysync once it is 0600, and its
	// pay parts are the payroll just dumped.
	lp := loadLegacyPayroll(t)
	s2 := startSandbox(t, sandbox.Options{})
	seedLegacyPayroll(t, s2.sb, lp)
	if got, want := payrollKeys(s2.sb), payrollKeys(sb); !slices.Equal(got, want) {
		t.Fatalf("payroll.json seeds\n%v\nwant\n%v", got, want)
	}
	env2 := with(s2.env, "PAYSYNC_LEDGER", copyLegacyLedger(t), "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys)
	legacyRun(t, in, home, env2, 0, "batches")
}

// legacyDB opens the ledger file with database/sql (every paysync
// process has ended).
func legacyDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// legacyLedgerFacts is what README.md records about the ledger.
type legacyLedgerFacts struct {
	UserVersion   int
	JournalMode   string
	Integrity     string
	Tables        []string
	Counts        map[string]int
	Sources       [][]string
	Batches       [][]string
	PayParts      [][]string
	Corrections   [][]string
	EntryCorr     [][]string
	Closed        [][]string
	Audit         [][]string
	Live          []legacyLivePart
	Groups        map[string]string
	PayrollIDs    []string // every payroll id the ledger ever recorded
	ForeignIDs    []string
	Credentials   []string
	EntriesByStat [][]string
}

func legacyRows(t *testing.T, db *sql.DB, q string) [][]string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "-"
			if v.Valid && v.String != "" {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func legacyFacts(t *testing.T, db *sql.DB) legacyLedgerFacts {
	t.Helper()
	var f legacyLedgerFacts
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&f.UserVersion); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&f.JournalMode); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&f.Integrity); err != nil || f.Integrity != "ok" {
		t.Fatalf("integrity_check: %q, %v", f.Integrity, err)
	}
	if fk := legacyRows(t, db, `PRAGMA foreign_key_check`); len(fk) > 0 {
		t.Fatalf("foreign_key_check: %v", fk)
	}
	for _, r := range legacyRows(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`) {
		f.Tables = append(f.Tables, r[0])
	}
	f.Counts = map[string]int{}
	for _, tb := range f.Tables {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM "` + tb + `"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		f.Counts[tb] = n
	}
	f.Sources = legacyRows(t, db, `SELECT id, kind, name, format, status, entries, duplicates, rejects, coalesce(replay_of, ''), coalesce(retry_of, '') FROM sources ORDER BY id`)
	f.EntriesByStat = legacyRows(t, db, `SELECT origin, substr(entry_date, 1, 7), status, note, count(*) FROM entries GROUP BY 1, 2, 3, 4 ORDER BY 2, 1, 3, 4`)
	f.Batches = legacyRows(t, db, `SELECT b.id, b.company_id, coalesce(b.source_id, ''), coalesce(s.name, ''), coalesce(b.correction_id, ''), b.state, b.sealed,
			(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id),
			(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'created'),
			(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'deleted'),
			(SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id AND p.state = 'pending')
		FROM batches b LEFT JOIN sources s ON s.id = b.source_id ORDER BY b.id`)
	f.PayParts = legacyRows(t, db, `SELECT p.id, p.batch_id, p.company_id, p.employee_name, p.code, coalesce(p.units, ''), coalesce(p.rate, ''), coalesce(p.amount, ''),
			p.state, coalesce(p.payroll_id, ''), coalesce(p.superseded_by, ''),
			(SELECT group_concat(e.entry_id, ' ') FROM pay_part_entries pe JOIN entries e ON e.id = pe.entry_id WHERE pe.pay_part_id = p.id)
		FROM pay_parts p ORDER BY p.id`)
	f.Corrections = legacyRows(t, db, `SELECT c.id, c.source_id, s.name, c.company_id, c.entries, c.superseded FROM corrections c JOIN sources s ON s.id = c.source_id ORDER BY c.id`)
	f.EntryCorr = legacyRows(t, db, `SELECT ec.id, e.entry_id, ec.source_id, ec.state, coalesce(ec.correction, '') FROM entry_corrections ec JOIN entries e ON e.id = ec.entry ORDER BY ec.id`)
	f.Closed = legacyRows(t, db, `SELECT period, first_day, last_day, closed_at, note FROM closed_periods ORDER BY first_day`)
	f.Audit = legacyRows(t, db, `SELECT id, actor, action, scope, result FROM audit_log ORDER BY id`)
	for _, r := range legacyRows(t, db, `SELECT name FROM credentials ORDER BY name`) {
		f.Credentials = append(f.Credentials, r[0])
	}
	for _, r := range legacyRows(t, db, `SELECT payroll_id FROM pay_parts WHERE payroll_id IS NOT NULL ORDER BY id`) {
		f.PayrollIDs = append(f.PayrollIDs, r[0])
	}
	for _, r := range legacyRows(t, db, `SELECT payroll_id FROM foreign_pay_parts ORDER BY company_id, payroll_id`) {
		f.ForeignIDs = append(f.ForeignIDs, r[0])
	}
	// Live: as PeriodTotals counts them (created or pending, not
	// superseded, not of a reverted or split batch), in the month of
	// their first entry.
	rows, err := db.Query(`SELECT p.id, p.batch_id, coalesce(p.payroll_id, ''), p.company_id, p.employee_id, p.code, coalesce(p.units, ''), coalesce(p.rate, ''), coalesce(p.amount, ''),
			substr(e.entry_date, 1, 7), p.state
		FROM pay_parts p
		JOIN pay_part_entries pe ON pe.pay_part_id = p.id AND pe.entry_id = (SELECT min(entry_id) FROM pay_part_entries WHERE pay_part_id = p.id)
		JOIN entries e ON e.id = pe.entry_id JOIN batches b ON b.id = p.batch_id
		WHERE p.state IN ('pending', 'created') AND p.superseded_by IS NULL AND b.state NOT IN ('reverted', 'split')
		ORDER BY p.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sums := map[string]decimal.Decimal{}
	for rows.Next() {
		var lp legacyLivePart
		if err := rows.Scan(&lp.LedgerID, &lp.BatchID, &lp.PayrollID, &lp.Company, &lp.Employee, &lp.Code, &lp.Units, &lp.Rate, &lp.Amount, &lp.Month, &lp.State); err != nil {
			t.Fatal(err)
		}
		f.Live = append(f.Live, lp)
		k := legacyGroupKey(lp.Company, lp.Employee, lp.Code, lp.Rate, lp.Month)
		u := decimal.Zero
		if lp.Units != "" {
			u = decimal.RequireFromString(lp.Units)
		}
		sums[k] = sums[k].Add(u)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	f.Groups = map[string]string{}
	for k, v := range sums {
		f.Groups[k] = v.String()
	}
	return f
}

func legacyPayrollDump(t *testing.T, sb *sandbox.Server, f legacyLedgerFacts, foreignID string) legacyPayroll {
	t.Helper()
	dump := legacyPayroll{
		Commit:         "313bf20",
		SandboxOptions: "sandbox.Options{} (snake_case, Float numbers, boolean *_allowed, no token rotation)",
		Foreign:        f.ForeignIDs,
		LiveGroups:     f.Groups,
		LedgerLive:     f.Live,
	}
	if !slices.Equal(f.ForeignIDs, []string{foreignID}) {
		t.Fatalf("the ledger's foreign pay parts are %v, want the hand-typed %s", f.ForeignIDs, foreignID)
	}
	seen := map[int]bool{}
	maxSeq := 0
	note := func(id string) {
		n, err := legacyPayPartSeq(id)
		if err != nil {
			t.Fatal(err)
		}
		seen[n] = true
		maxSeq = max(maxSeq, n)
	}
	inPayroll := map[string]paysync.PayPart{}
	for _, c := range sb.State().Companies {
		lc := legacyCompany{ID: c.ID, Name: c.Name, PayParts: []legacyPayPart{}}
		for _, p := range c.PayParts {
			note(p.ID)
			n, _ := legacyPayPartSeq(p.ID)
			inPayroll[p.ID] = p
			lc.PayParts = append(lc.PayParts, legacyPayPart{ID: p.ID, Seq: n, Foreign: slices.Contains(f.ForeignIDs, p.ID),
				PayPartInput: paysync.PayPartInput{EmployeeID: p.EmployeeID, Code: p.Code, Numbers: p.Numbers}})
		}
		dump.Companies = append(dump.Companies, lc)
	}
	for _, id := range f.PayrollIDs {
		note(id)
	}
	for n := 1; n <= maxSeq; n++ {
		if !seen[n] {
			t.Errorf("payroll id seq %d is neither in payroll nor in the ledger", n)
		}
	}
	dump.NextSeq = maxSeq + 1
	// The ledger's live pay parts are exactly payroll's non-foreign ones,
	// with the same numbers.
	live := map[string]bool{}
	for _, lp := range f.Live {
		if lp.State != "created" {
			t.Errorf("ledger pay part %d is live but %s", lp.LedgerID, lp.State)
			continue
		}
		live[lp.PayrollID] = true
		p, ok := inPayroll[lp.PayrollID]
		want := paysync.PayPartInput{EmployeeID: lp.Employee, Code: lp.Code, Numbers: paysync.Numbers{Units: legacyDec(lp.Units), Rate: legacyDec(lp.Rate), Amount: legacyDec(lp.Amount)}}
		if !ok || !p.Matches(want) {
			t.Errorf("ledger pay part %d (%s %v) is not in payroll as such (%v, %v)", lp.LedgerID, lp.PayrollID, want, p, ok)
		}
	}
	for id := range inPayroll {
		if !live[id] && !slices.Contains(f.ForeignIDs, id) {
			t.Errorf("payroll holds %s, which the ledger does not count live", id)
		}
	}
	return dump
}

func legacyDec(s string) decimal.NullDecimal {
	if s == "" {
		return decimal.NullDecimal{}
	}
	return paysync.Dec(s)
}

// legacyReadme renders README.md from what the run produced.
func legacyReadme(f legacyLedgerFacts, dump legacyPayroll) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	table := func(head []string, rows [][]string) {
		p("| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
		for _, r := range rows {
			p("| %s |\n", strings.Join(r, " | "))
		}
		p("\n")
	}
	p(`# Legacy ledger fixture: paysync 313bf20

A SQLite ledger written by paysync at commit 313bf20 (main on the day it was
made) and the payroll (sandbox) state that goes with it, for testing that a
later paysync opens it and keeps its history, its pay-part ids and
exactly-once through the migration.

**Generated, do not edit by hand.** Regenerate (overwrites this directory,
README included; timestamps change, and the payroll ids may if merges are
timed differently):

    go test -tags legacyfixture -run TestGenerateLegacyFixture ./cmd/paysync

The generator is cmd/paysync/legacy_fixture_gen_test.go (build tag
legacyfixture, so it is not in the normal suite); the loader and a check of
this fixture against this commit's paysync are in
cmd/paysync/legacy_fixture_test.go (normal suite).

## Files

| file | what |
|---|---|
| ledger.db | the ledger, after a clean stop of every process and PRAGMA wal_checkpoint(TRUNCATE): the one file holds everything (no -wal/-shm needed) |
| payroll.json | the sandbox's pay parts per company (id, employee_id, code, units, rate, amount; seq is the N of the id, base64 of "pp_N"), next_pay_part_seq, the foreign (hand-typed) ids, the ledger's live pay parts and the per-group totals it believes are live |
| rules.yaml | the rules used (a copy of deploy/examples/rules.yaml), for the imports (--rules) and the daemon (PAYSYNC_MAPPING) |
| inputs/ | the exact inputs: toggl.csv (deploy/examples), toggl-corrected.csv (testdata/corrections), october.ndjson, anders.ndjson, nats-messages.ndjson (the message bodies in publish order, each published with stream.Publish on timesheets.MV8x.%[2]s, Nats-Msg-Id = id:16 hex digits of its SHA-256) |

## File mode: copy it to 0600 first

The ledger refuses a file others can read (mode & 077 != 0: "readable by
others ... run chmod 600"), and git checks files out 0644. A test must copy
ledger.db into its own temporary directory with mode 0600 (the directory
must be writable too: SQLite creates ledger.db-wal and -shm beside it) and
point PAYSYNC_LEDGER there; never open it in testdata (it would be migrated
in place). copyLegacyLedger(t) in legacy_fixture_test.go does exactly that.

## How it was made

Against an in-process sandbox, sandbox.Options{} (snake_case API, Float
numbers, boolean *_allowed, no refresh-token rotation), and an embedded
JetStream server; every step is a real paysync process of this commit, with
PAYSYNC_COMPANY_ID=MV8x, PAYSYNC_MAPPING=rules.yaml, no PAYSYNC_TOKEN_FILE
(so the refresh token is kept in the ledger, as by default), commands run
in inputs/ so sources are named as the files:

0. one pay part typed into payroll by hand before anything: Sofie Jensen,
   BONUS, amount 500 (payroll id %[1]s). The first send to MV8x records it
   as foreign; it must never be claimed.
1. paysync import --rules rules.yaml toggl.csv (November 2026, 7 rows: 6
   mapped, the office account ignored): 7 pay parts.
2. paysync import --rules rules.yaml toggl-corrected.csv: Lars Nielsen's
   sick day 8 -> 8.5 hours: a correction unit replacing his SYG pay part
   (delete first, then create); the rest are duplicates.
3. paysync import --rules rules.yaml october.ndjson: October 2026, two
   companies (MV8x: Mette's hours, Lars's mileage; MV8y: Jonas T1, Emma
   overtime T2): left fully created; its period is closed in step 7.
4. paysync import --rules rules.yaml anders.ndjson: November 2026, Anders
   Pedersen T1 13.25 h: reverted in step 6.
5. paysync run with NATS (PAYSYNC_SEND=immediate, the default; rules
   aggregate; PAYSYNC_BATCH_LINGER=1s), subject timesheets.MV8x.%[2]s,
   December 2026: first n-1..n-5 (Mette T1 7.5 + 8, Lars T1 6, Lars Sick 4,
   Sofie 5 h tagged evening -> T1 and TILLAEG), merged into one pay part per
   employee x code x rate; then n-6 (Mette 2 h more), n-3 corrected 6 -> 6.5
   h and a tombstone of n-4: the correction and the tombstone are applied as
   correction units of their messages, n-6 by another merge; each replaces
   the aggregate it touches (delete first), the others keep their payroll
   ids (see the correction units below). Then SIGTERM (exit 0), the stream
   drained, no dead letters.
6. paysync revert --import N --yes for anders.ndjson's import.
7. paysync periods close 2026-10 --note "October 2026 payroll run".

Then the WAL was checkpointed (TRUNCATE) and the file copied; the generator
checked integrity_check = ok, foreign_key_check empty, that the ledger's live
pay parts are exactly payroll's non-foreign ones with the same numbers, that
every payroll id pp_1..pp_%[3]d is either in payroll or recorded in the ledger,
that payroll.json seeds an identical sandbox, and that this commit's
paysync batches opens a 0600 copy.

## The ledger

- PRAGMA user_version: **%[4]d** (migrations 0001..%04[4]d)
- journal_mode: %[5]s (persistent in the file; checkpointed, no -wal)
- credentials: %[6]s (the generation sandbox's refresh token and access
  token; worthless outside it. A test sets its own PAYSYNC_REFRESH_TOKEN: a
  different initial token starts over from it.)

Rows per table:

`, foreignIDOf(dump), legacyNATSSource, dump.NextSeq-1, f.UserVersion, f.JournalMode, strings.Join(f.Credentials, ", "))
	var counts [][]string
	for _, tb := range f.Tables {
		counts = append(counts, []string{tb, fmt.Sprint(f.Counts[tb])})
	}
	table([]string{"table", "rows"}, counts)
	p("### Imports (sources)\n\n")
	table([]string{"id", "kind", "name", "format", "status", "entries", "duplicates", "rejects", "replay_of", "retry_of"}, f.Sources)
	p("### Entries by origin, month, status, note\n\n")
	table([]string{"origin", "month", "status", "note", "entries"}, f.EntriesByStat)
	p("### Batches\n\n%s\n\n", legacyStateSummary(f))
	table([]string{"id", "company", "import", "import name", "correction", "state", "sealed", "pay parts", "created", "deleted", "pending"}, f.Batches)
	p("### Pay parts (ledger)\n\nState `created` with no superseded_by in a batch not reverted is live; `deleted` with superseded_by was replaced by that correction unit (a correction or a merge); `deleted` in a reverted batch was reverted.\n\n")
	table([]string{"id", "batch", "company", "employee", "code", "units", "rate", "amount", "state", "payroll id", "superseded_by", "entries"}, f.PayParts)
	p("### Correction units\n\n")
	table([]string{"id", "import", "import name", "company", "entries", "pay parts replaced"}, f.Corrections)
	p("### Entry corrections\n\n")
	table([]string{"id", "entry", "import", "state", "unit"}, f.EntryCorr)
	p("### Closed periods\n\n")
	table([]string{"period", "first day", "last day", "closed at", "note"}, f.Closed)
	p("### Audit log\n\n")
	table([]string{"id", "actor", "action", "scope", "result"}, f.Audit)

	p("## Payroll (payroll.json)\n\nnext_pay_part_seq = %d: the next pay part the sandbox creates must be pp_%d.\n\n", dump.NextSeq, dump.NextSeq)
	for _, c := range dump.Companies {
		p("### %s (%s): %d pay parts\n\n", c.ID, c.Name, len(c.PayParts))
		var rows [][]string
		for _, pp := range c.PayParts {
			rows = append(rows, []string{pp.ID, fmt.Sprint(pp.Seq), pp.EmployeeID, pp.Code, nd(pp.Units), nd(pp.Rate), nd(pp.Amount), fmt.Sprint(pp.Foreign)})
		}
		if len(rows) > 0 {
			table([]string{"id", "seq", "employee", "code", "units", "rate", "amount", "foreign"}, rows)
		}
	}
	p("### Live groups (company|employee|code|rate|month -> units)\n\nWhat the ledger believes payroll holds, from its live pay parts (each in the month of its first entry; rate - for none):\n\n")
	var keys []string
	for k := range dump.LiveGroups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rows [][]string
	for _, k := range keys {
		rows = append(rows, append(strings.Split(k, "|"), dump.LiveGroups[k]))
	}
	table([]string{"company", "employee", "code", "rate", "month", "units"}, rows)
	p(`## Loading it in a test

	lp := loadLegacyPayroll(t)                  // testdata/legacy-313bf20/payroll.json
	s := startSandbox(t, sandbox.Options{})     // a fresh sandbox: no pay part created yet
	seedLegacyPayroll(t, s.sb, lp)              // same ids, employees, codes, numbers, order
	env := with(s.env, "PAYSYNC_LEDGER", copyLegacyLedger(t), "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys)

seedLegacyPayroll needs no sandbox API beyond SeedPayPart and
DeletePayPartDirect: the sandbox numbers pay parts from one global
sequence (pp_1, pp_2, ...), so it seeds seq 1..next_pay_part_seq-1 in order,
seeding each pay part payroll.json holds into its company and a throw-away
pay part (seeded and deleted at once) for each seq that is gone; it fails if
the sandbox hands out another id. The sandbox then holds exactly these pay
parts, with these ids, in this order, and its next create is
pp_<next_pay_part_seq>. Employee names are the fixture's.

This leans on the sandbox numbering pay parts as at 313bf20 (base64 of
"pp_N" from one counter shared by all companies, starting at 1, no pay part
in the fixture companies at start). Should a later sandbox change that, the
smallest API that keeps the loader working would be an exported
SeedPayPartWithID(companyID string, p paysync.PayPart) error (a pay part
with its given id, appended in creation order) and SetNextPayPartSeq(n int)
(the counter's next value); at 313bf20 neither is needed.

TestLegacyFixture_313bf20 (legacy_fixture_test.go, normal suite) does the
above with this commit's paysync: periods --json equals the live groups per
company and month, nothing pending; toggl.csv, toggl-corrected.csv and
october.ndjson imported again are duplicates with no payroll call; a
correction of oct-1 is refused as dated in the closed 2026-10.
`)
	return b.String()
}

// legacyStateSummary says which batches and pay parts are created,
// reverted, replaced and pending.
func legacyStateSummary(f legacyLedgerFacts) string {
	batches := map[string][]string{}
	for _, b := range f.Batches {
		batches[b[5]] = append(batches[b[5]], b[0])
	}
	var live, reverted, replaced, pending, other []string
	revertedBatch := map[string]bool{}
	for _, id := range batches["reverted"] {
		revertedBatch[id] = true
	}
	for _, pp := range f.PayParts {
		id, batch, state, superseded := pp[0], pp[1], pp[8], pp[10]
		switch {
		case state == "created" && superseded == "-" && !revertedBatch[batch]:
			live = append(live, id)
		case state == "deleted" && revertedBatch[batch]:
			reverted = append(reverted, id)
		case state == "deleted" && superseded != "-":
			replaced = append(replaced, id)
		case state == "pending":
			pending = append(pending, id)
		default:
			other = append(other, id+" ("+state+")")
		}
	}
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	var states []string
	for st := range batches {
		states = append(states, st)
	}
	sort.Strings(states)
	var b strings.Builder
	fmt.Fprintf(&b, "Batches by state:")
	for _, st := range states {
		fmt.Fprintf(&b, " %s: %s;", st, list(batches[st]))
	}
	fmt.Fprintf(&b, " pending, sending or failed: none (nothing is left to send). Ledger pay parts (ids of the table below): live (created, in payroll): %s; reverted (deleted by the revert): %s; replaced (deleted by a correction unit): %s; pending: %s", list(live), list(reverted), list(replaced), list(pending))
	if len(other) > 0 {
		fmt.Fprintf(&b, "; other: %s", list(other))
	}
	b.WriteString(".")
	return b.String()
}

func nd(d decimal.NullDecimal) string {
	if !d.Valid {
		return "-"
	}
	return d.Decimal.String()
}

func foreignIDOf(dump legacyPayroll) string {
	if len(dump.Foreign) == 0 {
		return "-"
	}
	return strings.Join(dump.Foreign, ", ")
}
