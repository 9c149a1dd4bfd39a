package main

// Attacks on the desired-state model (a reviewer's tests), through the CLI
// or the daemon only; each asserts on what payroll (the sandbox) holds.
// At the commit that added them these FAIL (defects reproduced):
//
//	TestBreak_NoDeleteIncreaseIsSent, TestBreak_UpgradeWithChangedRateDoublePays,
//	TestBreak_CommandRejectsOtherCompanysHeldEntries,
//	TestBreak_RevokedCompanyBlocksOtherCompanysMerge,
//	TestBreak_ClosedPeriodDeleteInFlight, TestBreak_CutoffNotResumable,
//	TestBreak_GroupOfHoursAndUnitsLines, TestBreak_RenamedProductRuleDropsAmount,
//	TestBreak_ReplayPeriodRefusedCurrentVersionPaysStaleVersion,
//	TestBreak_EntryMovedOutOfClosedPeriodPaidTwice,
//	TestBreak_PlanWithDraftRulesDecidesHeldEntries
//
// and these pass (attacks that held): TestBreak_OutageAtAbsorbLeavesEntriesHeld,
// TestBreak_RevertImportSpanningClosedPeriod, TestBreak_NoAggregateSupplementCorrections,
// TestBreak_CorrectionWhileDeleteInFlight, TestBreak_CrashReplayPeriodAfterRateChange,
// TestBreak_UpgradeImportIntoLegacyGroups.
//
//	go test ./cmd/paysync -run TestBreak -count=1 -v

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// brTotals sums payroll per group key (company|employee|code|rate),
// whatever the number of pay parts.
func brTotals(sb *sandbox.Server) map[string]string {
	out := map[string]string{}
	for k, g := range scPayroll(sb) {
		out[k] = g.units.String()
	}
	return out
}

func brWantTotals(t *testing.T, sb *sandbox.Server, step string, want map[string]string) {
	t.Helper()
	got := scPayroll(sb)
	bad := len(got) != len(want)
	for k, w := range want {
		if g, ok := got[k]; !ok || !g.units.Equal(decimal.RequireFromString(w)) {
			bad = true
		}
	}
	if bad {
		t.Fatalf("%s: payroll holds %v, want (in total per group) %v", step, brTotals(sb), want)
	}
}

// On a payroll server without a delete mutation, an increase of a group
// that payroll already holds is a pay part of the difference (docs:
// "increases only; decreases wait"). e1 8 h paid; e2 2 h of the same
// group imported: payroll must hold 10 h in that group.
func TestBreak_NoDeleteIncreaseIsSent(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{Dialect: sandbox.CamelCase, NoDelete: true})
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "a.ndjson", scT1("e1", mette, "2026-11-02", "8")))
	brWantTotals(t, c.s.sb, "after e1", map[string]string{nordlys(mette, "T1", ""): "8"})
	r := c.any("import", writeLines(t, "b.ndjson", scT1("e2", mette, "2026-11-03", "2")))
	t.Logf("import b: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	c.settle()
	brWantTotals(t, c.s.sb, "after e2 (an increase of 2 h) and run --once", map[string]string{nordlys(mette, "T1", ""): "10"})
}

// A ledger from 313bf20 whose rules have changed since its pay parts were
// made (T2's rate 310.50 → 350: the operator changed it before the
// upgrade, or with it). The old pay parts were made under the old rules;
// the first command with rules maps the old entries under the current
// ones. Whatever it decides, payroll must never hold Mette's November
// overtime twice (2.67 h at 310.5 and 2.67 h again at 350).
func TestBreak_UpgradeWithChangedRateDoublePays(t *testing.T) {
	lp := loadLegacyPayroll(t)
	s := startSandbox(t, sandbox.Options{})
	seedLegacyPayroll(t, s.sb, lp)
	b, err := os.ReadFile(filepath.Join(legacyFixtureDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, bytes.Replace(b, []byte("rate: 310.50"), []byte("rate: 350"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	env := with(s.env, "PAYSYNC_LEDGER", copyLegacyLedger(t), "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys, "PAYSYNC_MAPPING", rules)
	delete(env, "PAYSYNC_TOKEN_FILE")
	// The first command with rules after the upgrade: an unrelated import
	// (December, Sofie), which reconciles.
	fix := writeLines(t, "dec.ndjson", `{"id":"x-1","employee_id":"`+sandbox.EmpSofieJensen+`","date":"2026-12-20","hours":"1","code":"T1"}`)
	r := runInProcess(t, env, "import", fix)
	t.Logf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r = runInProcess(t, env, "cutoff", "--yes")
	t.Logf("cutoff: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	const mette = sandbox.EmpMetteHansen
	got := scPayroll(s.sb)
	old, now := got[nordlys(mette, "T2", "310.5")], got[nordlys(mette, "T2", "350")]
	total := old.units.Add(now.units)
	t.Logf("Mette's T2: at 310.5 %s, at 350 %s", old, now)
	if !total.Equal(decimal.RequireFromString("2.67")) {
		t.Fatalf("payroll holds Mette's November overtime %s h in total (at 310.5: %s; at 350: %s), want 2.67 h once", total, old.units, now.units)
	}
}

// Held entries (PAYSYNC_SEND=cutoff) and payroll answering 503 to every
// read of a company's employees at the cutoff: the entries must stay
// held (the cutoff fails, or waits), never rejected; the next cutoff,
// payroll back, pays them.
func TestBreak_OutageAtAbsorbLeavesEntriesHeld(t *testing.T) {
	h, drv := scDaemon(t, "", "PAYSYNC_SEND", "cutoff", "PAYSYNC_CUTOFF", "0 0 1 1 *", "PAYSYNC_STARTUP_TIMEOUT", "3s")
	const mette = sandbox.EmpMetteHansen
	d := h.start(t)
	publishFor(t, drv, sandbox.CompanyNordlys, []paysync.Entry{scEntry("n1", mette, "2026-11-02", "8")})
	waitFor(t, "the stream drained", 20*time.Second, func() bool { return drv.drained(t) })
	d.stop(t)
	h.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "companies", Status: 503})
	r := scCmd(t, h, -1, "cutoff", "--yes")
	t.Logf("cutoff during the outage:\n%s%s", r.stdout, r.stderr)
	h.sb.SetFaults()
	r = scCmd(t, h, -1, "cutoff", "--yes")
	t.Logf("cutoff after the outage:\n%s%s", r.stdout, r.stderr)
	scWant(t, h.sb, "after the outage and another cutoff", map[string]string{nordlys(mette, "T1", ""): "8"})
}

// brDaemon is scDaemon over a sandbox with opts (newDaemonHarness with
// its own sandbox options).
func brDaemon(t *testing.T, opts sandbox.Options, kv ...string) (*daemonHarness, *natsDriver) {
	t.Helper()
	drv := newNATSDriver(t)
	s := startSandbox(t, opts)
	dir := t.TempDir()
	rules, err := filepath.Abs("testdata/corrections_daemon/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := with(s.env,
		"PAYSYNC_LEDGER", filepath.Join(dir, "ledger.db"),
		"PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys,
		"PAYSYNC_BATCH_LINGER", "100ms",
		"PAYSYNC_RATE_LIMIT", "1000",
		"PAYSYNC_LOG_LEVEL", "warn",
		"PAYSYNC_SHUTDOWN_GRACE", "20s",
		"PAYSYNC_MAPPING", rules,
	)
	delete(env, "PAYSYNC_TOKEN_FILE")
	for k, v := range drv.env() {
		env[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	h := &daemonHarness{sb: s.sb, drv: drv, env: env, home: t.TempDir(), prefix: "brk"}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range h.procs {
				t.Logf("paysync run #%d (%s):\nstdout:\n%s\nstderr:\n%s", i+1, p.exitDesc(), p.out.String(), p.errb.String())
			}
		}
	})
	return h, drv.(*natsDriver)
}

// Two companies, each with its own connection from paysync connect (the
// documented multi-company setup); PAYSYNC_SEND=cutoff holds their
// streamed entries. An operator looks at `paysync plan` (which sends
// nothing), then runs `paysync cutoff --yes`: both companies' entries
// must be paid. Nothing is revoked.
func TestBreak_CommandRejectsOtherCompanysHeldEntries(t *testing.T) {
	h, drv := scDaemon(t, "", "PAYSYNC_SEND", "cutoff", "PAYSYNC_CUTOFF", "0 0 1 1 *")
	delete(h.env, "PAYSYNC_REFRESH_TOKEN")
	h.env["PAYSYNC_MARKETPLACE_URL"] = h.sb.URL() + "/marketplace"
	connectCompany(t, h.env, sandbox.CompanyNordlys, "Nordlys ApS")
	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	const mette, jonas = sandbox.EmpMetteHansen, sandbox.EmpJonasLarsen
	d := h.start(t)
	publishFor(t, drv, sandbox.CompanyFjordtech, []paysync.Entry{scEntry("f1", jonas, "2026-11-02", "6")})
	publishFor(t, drv, sandbox.CompanyNordlys, []paysync.Entry{scEntry("n1", mette, "2026-11-02", "8")})
	waitFor(t, "the stream drained", 20*time.Second, func() bool { return drv.drained(t) })
	d.stop(t)
	scWant(t, h.sb, "while held", nil)
	r := scCmd(t, h, -1, "plan")
	t.Logf("plan:\n%s%s", r.stdout, r.stderr)
	r = scCmd(t, h, -1, "cutoff", "--yes")
	t.Logf("cutoff:\n%s%s", r.stdout, r.stderr)
	if r := scCmd(t, h, -1, "imports", "show", "1"); strings.Contains(r.stdout, "not visible") {
		t.Logf("import 1 (Fjordtech's message):\n%s", r.stdout)
	}
	// The command's connection is Nordlys's: Fjordtech's entry stays held
	// (not refused), and the daemon, which routes each company through its
	// own connection, pays it at its cutoff.
	scWant(t, h.sb, "after plan and cutoff", map[string]string{nordlys(mette, "T1", ""): "8"})
	h.env["PAYSYNC_CUTOFF"] = "@every 1s"
	d = h.start(t)
	scEventually(t, h.sb, "after the daemon's cutoff", 15*time.Second, map[string]string{
		nordlys(mette, "T1", ""): "8", scKey(sandbox.CompanyFjordtech, jonas, "T1", ""): "6"})
	d.stop(t)
}

// Two companies with a connection each. Their entries were held by a
// daemon with PAYSYNC_SEND=cutoff; Fjordtech's connection is then revoked
// (and its access token expires). The daemon is started again with
// PAYSYNC_SEND=immediate, whose merge takes the held entries in: Nordlys's
// entry must be paid while Fjordtech's waits for its connection.
func TestBreak_RevokedCompanyBlocksOtherCompanysMerge(t *testing.T) {
	h, drv := brDaemon(t, sandbox.Options{AccessTTL: 2 * time.Second}, "PAYSYNC_SEND", "cutoff", "PAYSYNC_CUTOFF", "0 0 1 1 *")
	delete(h.env, "PAYSYNC_REFRESH_TOKEN")
	h.env["PAYSYNC_MARKETPLACE_URL"] = h.sb.URL() + "/marketplace"
	connectCompany(t, h.env, sandbox.CompanyNordlys, "Nordlys ApS")
	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	const mette, jonas = sandbox.EmpMetteHansen, sandbox.EmpJonasLarsen
	d := h.start(t)
	publishFor(t, drv, sandbox.CompanyFjordtech, []paysync.Entry{scEntry("f1", jonas, "2026-11-02", "6")})
	publishFor(t, drv, sandbox.CompanyNordlys, []paysync.Entry{scEntry("n1", mette, "2026-11-02", "8")})
	waitFor(t, "the stream drained", 20*time.Second, func() bool { return drv.drained(t) })
	d.stop(t)
	scWant(t, h.sb, "while held", nil)
	if n := h.sb.RevokeCompany(sandbox.CompanyFjordtech); n != 1 {
		t.Fatalf("RevokeCompany ended %d sessions, want 1", n)
	}
	time.Sleep(2500 * time.Millisecond) // Fjordtech's access token expires
	h.env["PAYSYNC_SEND"] = "immediate"
	delete(h.env, "PAYSYNC_CUTOFF")
	h.launch(t)
	scEventually(t, h.sb, "Nordlys's held entry, merged by the daemon while Fjordtech's connection is revoked", 8*time.Second,
		map[string]string{nordlys(mette, "T1", ""): "8"})
	if r := scCmd(t, h, -1, "imports", "show", "1"); strings.Contains(r.stdout, "rejects:") {
		t.Errorf("Fjordtech's held entry was rejected while its connection was revoked:\n%s", r.stdout)
	}
}

// A plan's delete in flight when the period closes: e1 8 h paid; its
// correction (9 h) is planned and its delete of the 8 h pay part is held
// back by payroll (429, never executed) when the command is interrupted.
// Then 2026-11 is closed. Nothing may be created or deleted in 2026-11
// after the close: payroll must keep what it held at the close (the 8 h
// pay part, same payroll id), whatever runs next.
func TestBreak_ClosedPeriodDeleteInFlight(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	c.do(0, "import", writeLines(t, "v1.ndjson", scT1("e1", mette, "2026-11-02", "8"), scT1("e2", lars, "2026-11-03", "4")))
	scWant(t, c.s.sb, "after v1", map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "T1", ""): "4"})
	c.interrupted(c.stalled("delete_pay_parts"), "import", writeLines(t, "v2.ndjson", scT1("e1", mette, "2026-11-02", "9"), scT1("e2", lars, "2026-11-03", "4")))
	c.s.sb.SetFaults()
	atClose := scPayroll(c.s.sb)
	t.Logf("payroll at the close: %v", scTotals(atClose))
	c.do(0, "periods", "close", "2026-11")
	r := c.settle()
	t.Logf("paysync run --once after the close: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	scSame(t, c.s.sb, "after the close and run --once", atClose)
}

// replay --period after a rules change that refuses an entry's current
// version: e1 was imported as 8 h of work (T1), then corrected by a later
// import to 9 h of overtime (T2). The rules change: no rule takes
// overtime any more. replay --period 2026-11 maps the period's entries
// again under the current rules: e1's current version (the correction)
// is refused, so e1 no longer counts (model.md: an entry counts iff its
// current version, the latest of an import not reverted, was mapped).
// Payroll must not fall back to paying the 8 h of work that the
// correction replaced.
func TestBreak_ReplayPeriodRefusedCurrentVersionPaysStaleVersion(t *testing.T) {
	const mette = sandbox.EmpMetteHansen
	both := scRules(t, `rules:
  - name: overtime
    match: {type: [Overtime]}
    code: T2
    units: hours
    rate: 300
  - name: hourly
    match: {type: [work]}
    code: T1
    units: hours`)
	c := newSCCLI(t, sandbox.Options{}, "PAYSYNC_MAPPING", both)
	row := func(hours, typ string) string {
		return `{"id":"e1","employee_id":"` + mette + `","date":"2026-11-02","hours":"` + hours + `","type":"` + typ + `"}`
	}
	c.do(0, "import", writeLines(t, "v1.ndjson", row("8", "work")))
	scWant(t, c.s.sb, "after v1", map[string]string{nordlys(mette, "T1", ""): "8"})
	c.do(0, "import", writeLines(t, "v2.ndjson", row("9", "Overtime")))
	scWant(t, c.s.sb, "after v2 (the correction)", map[string]string{nordlys(mette, "T2", "300"): "9"})
	c.env["PAYSYNC_MAPPING"] = scRules(t, `rules:
  - name: hourly
    match: {type: [work]}
    code: T1
    units: hours`)
	r := c.any("replay", "--period", "2026-11", "--yes")
	t.Logf("replay --period 2026-11:\n%s%s", r.stdout, r.stderr)
	if got := scPayroll(c.s.sb)[nordlys(mette, "T1", "")]; len(got.ids) > 0 {
		t.Fatalf("after replay --period 2026-11 payroll pays e1's replaced version again (T1 %s h), want nothing of e1 (its current version is refused); payroll: %v",
			got.units, scTotals(scPayroll(c.s.sb)))
	}
}

// revert --import of an import spanning an open and a closed period: the
// open period's groups follow at once, the closed one's stay as they were
// until the period is opened; then they follow too.
func TestBreak_RevertImportSpanningClosedPeriod(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette, lars = sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen
	c.do(0, "import", writeLines(t, "a.ndjson", scT1("o1", mette, "2026-10-05", "8"), scT1("n1", lars, "2026-11-03", "4")))
	c.do(0, "import", writeLines(t, "b.ndjson", scT1("o2", mette, "2026-10-06", "1"), scT1("n2", lars, "2026-11-04", "2")))
	scWant(t, c.s.sb, "after the imports", map[string]string{nordlys(mette, "T1", ""): "9", nordlys(lars, "T1", ""): "6"})
	c.do(0, "periods", "close", "2026-10")
	atClose := scPayroll(c.s.sb)
	c.any("revert", "--import", "2", "--yes")
	c.settle()
	scSame(t, c.s.sb, "after revert --import 2 (October closed)", scWith(atClose, nordlys(lars, "T1", ""), scPayroll(c.s.sb)))
	scWant(t, c.s.sb, "after revert --import 2 (October closed)", map[string]string{nordlys(mette, "T1", ""): "9", nordlys(lars, "T1", ""): "4"})
	c.do(0, "periods", "open", "2026-10")
	c.any("cutoff", "--yes")
	scWant(t, c.s.sb, "after opening October and a cutoff", map[string]string{nordlys(mette, "T1", ""): "8", nordlys(lars, "T1", ""): "4"})
	c.any("replay", "--import", "2", "--yes")
	scWant(t, c.s.sb, "after replay --import 2", map[string]string{nordlys(mette, "T1", ""): "9", nordlys(lars, "T1", ""): "6"})
}

// brExampleRules is the example rules with old replaced by new.
func brExampleRules(t *testing.T, old, new string) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/examples/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("the example rules have no %q", old)
	}
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// aggregate: false with a continue: true supplement (amount product): an
// evening entry is T1 and a TILLAEG line; corrected to a daytime entry of
// 9 h, then to an evening one of 7 h again; reverted; replayed.
func TestBreak_NoAggregateSupplementCorrections(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{Numbers: sandbox.NumbersInt}, "PAYSYNC_MAPPING", brExampleRules(t, "aggregate: true", "aggregate: false"))
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "v1.ndjson", scRow("e1", mette, "2026-11-02", "8", "evening"), scRow("e2", mette, "2026-11-03", "2")))
	brWantTotals(t, c.s.sb, "after v1", map[string]string{nordlys(mette, "T1", ""): "10", nordlys(mette, "TILLAEG", "45"): "8"})
	c.do(0, "import", writeLines(t, "v2.ndjson", scRow("e1", mette, "2026-11-02", "9")))
	brWantTotals(t, c.s.sb, "after v2 (e1 daytime 9 h)", map[string]string{nordlys(mette, "T1", ""): "11"})
	c.do(0, "import", writeLines(t, "v3.ndjson", scRow("e1", mette, "2026-11-02", "7", "evening")))
	brWantTotals(t, c.s.sb, "after v3 (e1 evening 7 h)", map[string]string{nordlys(mette, "T1", ""): "9", nordlys(mette, "TILLAEG", "45"): "7"})
	c.do(0, "revert", "--import", "3", "--yes")
	brWantTotals(t, c.s.sb, "after revert --import 3", map[string]string{nordlys(mette, "T1", ""): "11"})
	c.do(0, "replay", "--import", "3", "--yes")
	brWantTotals(t, c.s.sb, "after replay --import 3", map[string]string{nordlys(mette, "T1", ""): "9", nordlys(mette, "TILLAEG", "45"): "7"})
	for _, co := range c.s.sb.State().Companies {
		for _, p := range co.PayParts {
			if p.Code == "TILLAEG" && (!p.Amount.Valid || !p.Amount.Decimal.Equal(decimal.RequireFromString("315"))) {
				t.Errorf("the supplement's amount is %v, want 315 (7 h × 45)", p.Amount)
			}
		}
	}
}

// One group (Mette, T1, no rate, 2026-11) of lines with different unit
// sources: e1 is 8 h under the rules' hourly wage (units from hours), e2
// carries its own code T1 and 2 units. The group's total is the sum of
// its lines: 10 units, in whichever order they come.
func TestBreak_GroupOfHoursAndUnitsLines(t *testing.T) {
	const mette = sandbox.EmpMetteHansen
	units := func(id string) string {
		return `{"id":"` + id + `","employee_id":"` + mette + `","date":"2026-11-04","code":"T1","units":"2"}`
	}
	t.Run("hours first", func(t *testing.T) {
		c := newSCCLI(t, sandbox.Options{})
		c.do(0, "import", writeLines(t, "a.ndjson", scRow("e1", mette, "2026-11-02", "8"), units("e2")))
		brWantTotals(t, c.s.sb, "after the import", map[string]string{nordlys(mette, "T1", ""): "10"})
	})
	t.Run("units first", func(t *testing.T) {
		c := newSCCLI(t, sandbox.Options{})
		c.do(0, "import", writeLines(t, "a.ndjson", units("e2"), scRow("e1", mette, "2026-11-02", "8")))
		brWantTotals(t, c.s.sb, "after the import", map[string]string{nordlys(mette, "T1", ""): "10"})
	})
}

// `paysync cutoff --yes` is resumable by running it again: e1 paid, the
// period closed, e2 recorded late, the period opened; the cutoff that
// sends the late change is interrupted while payroll holds its create
// back. Running `paysync cutoff --yes` again (as an operator does before
// the payroll run) must send it.
func TestBreak_CutoffNotResumable(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "a.ndjson", scT1("e1", mette, "2026-11-02", "8")))
	c.do(0, "periods", "close", "2026-11")
	c.any("import", writeLines(t, "b.ndjson", scT1("e2", mette, "2026-11-03", "2")))
	scWant(t, c.s.sb, "after the late change", map[string]string{nordlys(mette, "T1", ""): "8"})
	c.do(0, "periods", "open", "2026-11")
	c.interrupted(c.stalled("create_pay_parts"), "cutoff", "--yes")
	c.s.sb.SetFaults()
	r := c.any("cutoff", "--yes")
	t.Logf("cutoff again:\n%s%s", r.stdout, r.stderr)
	scWant(t, c.s.sb, "after the cutoff run again", map[string]string{nordlys(mette, "T1", ""): "10"})
}

// A correction arriving while a plan's delete is in flight (held back,
// the command interrupted), then another correction: payroll ends at the
// last one, once.
func TestBreak_CorrectionWhileDeleteInFlight(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "v1.ndjson", scT1("e1", mette, "2026-11-02", "8")))
	c.interrupted(c.stalled("delete_pay_parts"), "import", writeLines(t, "v2.ndjson", scT1("e1", mette, "2026-11-02", "9")))
	c.s.sb.SetFaults()
	c.any("import", writeLines(t, "v3.ndjson", scT1("e1", mette, "2026-11-02", "10")))
	c.settle()
	scWant(t, c.s.sb, "after v3", map[string]string{nordlys(mette, "T1", ""): "10"})
	c.do(0, "revert", "--import", "3", "--yes")
	scWant(t, c.s.sb, "after revert --import 3", map[string]string{nordlys(mette, "T1", ""): "9"})
}

// replay --period after a rate change, killed (SIGKILL) at random moments
// and run again until it finishes: payroll ends at the desired totals,
// each group as one pay part. Then revert --import 1, killed likewise.
func TestBreak_CrashReplayPeriodAfterRateChange(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	rules, err := filepath.Abs(brExampleRules(t, "rate: 310.50", "rate: 350"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Abs("../../deploy/examples/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	toggl, err := filepath.Abs(scToggl)
	if err != nil {
		t.Fatal(err)
	}
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := newRand(seed)
			c := newCrashEnv(t, sandbox.Options{Seed: seed})
			c.env["PAYSYNC_MAPPING"] = old
			c.env["PAYSYNC_COMPANY_ID"] = sandbox.CompanyNordlys
			c.finish(t, importRetryable, "import", toggl)
			scWant(t, c.sb, "after the import", scTogglGroups())
			c.env["PAYSYNC_MAPPING"] = rules
			c.sb.SetFaults(
				sandbox.Fault{Kind: sandbox.FaultLatency, Op: "delete_pay_parts", Delay: 20 * time.Millisecond},
				sandbox.Fault{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: 20 * time.Millisecond},
				sandbox.Fault{Kind: sandbox.FaultLatency, Op: "pay_parts", Delay: 5 * time.Millisecond},
				sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "delete_pay_parts", Probability: 0.3},
				sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts", Probability: 0.3},
			)
			noCheck := func(*testing.T, crashRun) {}
			args := []string{"replay", "--period", "2026-11", "--yes"}
			c.killRuns(t, rng, 3, 250*time.Millisecond, noCheck, args...)
			c.finish(t, func(crashRun) bool { return true }, args...)
			want := scTogglGroups()
			delete(want, nordlys(sandbox.EmpMetteHansen, "T2", "310.5"))
			want[nordlys(sandbox.EmpMetteHansen, "T2", "350")] = "2.67"
			scWant(t, c.sb, "after replay --period 2026-11", want)
			args = []string{"revert", "--import", "1", "--yes"}
			c.killRuns(t, rng, 3, 250*time.Millisecond, noCheck, args...)
			c.finish(t, func(crashRun) bool { return true }, args...)
			scWant(t, c.sb, "after revert --import 1", nil)
		})
	}
}

// brAmount is the amount payroll holds in group key.
func brAmount(sb *sandbox.Server, key string) decimal.Decimal { return scPayroll(sb)[key].amount }

// The evening supplement's amount is a product (units × rate). The rule is
// renamed in the rules file (nothing else changes); a later evening entry
// joins the group: the supplement must still carry its amount, 10 h × 45.
func TestBreak_RenamedProductRuleDropsAmount(t *testing.T) {
	c := newSCCLI(t, sandbox.Options{})
	const mette = sandbox.EmpMetteHansen
	k := nordlys(mette, "TILLAEG", "45")
	c.do(0, "import", writeLines(t, "a.ndjson", scRow("e1", mette, "2026-11-02", "8", "evening")))
	if a := brAmount(c.s.sb, k); !a.Equal(decimal.RequireFromString("360")) {
		t.Fatalf("after e1 the supplement's amount is %s, want 360", a)
	}
	c.env["PAYSYNC_MAPPING"] = brExampleRules(t, "name: evening supplement", "name: evening extra")
	r := c.do(0, "import", writeLines(t, "b.ndjson", scRow("e2", mette, "2026-11-03", "2", "evening")))
	t.Logf("import b:\n%s%s", r.stdout, r.stderr)
	r = c.any("plan", "--all")
	t.Logf("plan --all:\n%s%s", r.stdout, r.stderr)
	brWantTotals(t, c.s.sb, "after e2", map[string]string{nordlys(mette, "T1", ""): "10", k: "10"})
	if a := brAmount(c.s.sb, k); !a.Equal(decimal.RequireFromString("450")) {
		t.Fatalf("after e2 (the rule renamed) the supplement's amount is %s, want 450 (10 h × 45)", a)
	}
}

// A 313bf20 ledger (same rules): an import whose rows fall in groups
// holding pay parts from before (Mette's T1 of November and December,
// Sofie's supplement of December) and a correction of an old toggl row:
// each such group ends as one pay part of its new total.
func TestBreak_UpgradeImportIntoLegacyGroups(t *testing.T) {
	lp := loadLegacyPayroll(t)
	s := startSandbox(t, sandbox.Options{})
	seedLegacyPayroll(t, s.sb, lp)
	env := with(s.env, "PAYSYNC_LEDGER", copyLegacyLedger(t), "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys,
		"PAYSYNC_MAPPING", filepath.Join(legacyFixtureDir, "rules.yaml"))
	delete(env, "PAYSYNC_TOKEN_FILE")
	const mette, sofie = sandbox.EmpMetteHansen, sandbox.EmpSofieJensen
	f := writeLines(t, "more.ndjson",
		`{"id":"x-1","employee_id":"`+mette+`","date":"2026-11-20","hours":"1","type":"work"}`,
		`{"id":"x-2","employee_id":"`+mette+`","date":"2026-12-20","hours":"2","type":"work"}`,
		`{"id":"x-3","employee_id":"`+sofie+`","date":"2026-12-21","hours":"1","type":"work","tags":["evening"]}`)
	if r := runInProcess(t, env, "import", f); r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := map[string]string{}
	for k, v := range lp.LiveGroups {
		want[k] = v
	}
	want["MV8x|"+mette+"|T1|-|2026-11"] = "12.83"
	want["MV8x|"+mette+"|T1|-|2026-12"] = "19.5"
	want["MV8x|"+sofie+"|T1|-|2026-12"] = "6"
	want["MV8x|"+sofie+"|TILLAEG|45|2026-12"] = "6"
	got := map[string]string{}
	for k, v := range upgradeGroups(s.sb) {
		got[k] = v.String()
	}
	if !sameGroups(got, want) {
		t.Fatalf("payroll after the import: %v, want (summed over months) %v", got, want)
	}
}

// `paysync plan --rules DRAFT` shows what would be sent under a draft
// rules file: it sends nothing, and must change nothing that the real
// rules decide later. An entry is held by the daemon (PAYSYNC_SEND=cutoff);
// the operator tries a draft (one that has no rule for plain work, or one
// with another rate); then the cutoff with the real rules must pay the
// held entry as the real rules map it: 8 h of T1 without a rate.
func TestBreak_PlanWithDraftRulesDecidesHeldEntries(t *testing.T) {
	for _, tc := range []struct{ name, draft string }{
		{"draft refuses", "rules:\n  - name: sick\n    match: {tags: [sick]}\n    code: SYG\n    units: hours"},
		{"draft rate", "rules:\n  - name: hourly\n    default: true\n    code: T1\n    units: hours\n    rate: 999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, drv := scDaemon(t, "", "PAYSYNC_SEND", "cutoff", "PAYSYNC_CUTOFF", "0 0 1 1 *")
			const mette = sandbox.EmpMetteHansen
			d := h.start(t)
			publishFor(t, drv, sandbox.CompanyNordlys, []paysync.Entry{scEntry("n1", mette, "2026-11-02", "8")})
			waitFor(t, "the stream drained", 20*time.Second, func() bool { return drv.drained(t) })
			d.stop(t)
			draft, err := filepath.Abs(scRules(t, tc.draft))
			if err != nil {
				t.Fatal(err)
			}
			r := scCmd(t, h, -1, "plan", "--rules", draft)
			t.Logf("plan --rules draft:\n%s%s", r.stdout, r.stderr)
			r = scCmd(t, h, -1, "cutoff", "--yes")
			t.Logf("cutoff with the real rules:\n%s%s", r.stdout, r.stderr)
			scWant(t, h.sb, "after plan --rules DRAFT and a cutoff with the real rules", map[string]string{nordlys(mette, "T1", ""): "8"})
		})
	}
}

// An entry moved out of a closed period: e1 (8 h, October) paid, October
// closed, then e1 corrected to a November date. October's group is
// frozen (its 8 h stay: a late change); e1 must not be paid again in
// November while October still pays it: Mette's T1 must total 10 h
// (e1 once, e2 once), not 18.
func TestBreak_EntryMovedOutOfClosedPeriodPaidTwice(t *testing.T) {
	// The fix is issue 23's rules option late: next_period (the closed
	// group's −difference sent as a pay part of the first open period),
	// not built yet: this test shows the gap until it is.
	t.Skip("KNOWN GAP (issue 23, open): late: next_period is not built; the closed period's late −8 h is listed by paysync plan, not carried")
	c := newSCCLI(t, sandbox.Options{})
	const mette = sandbox.EmpMetteHansen
	c.do(0, "import", writeLines(t, "a.ndjson", scT1("e1", mette, "2026-10-30", "8"), scT1("e2", mette, "2026-11-03", "2")))
	brWantTotals(t, c.s.sb, "after the import", map[string]string{nordlys(mette, "T1", ""): "10"})
	c.do(0, "periods", "close", "2026-10")
	r := c.any("import", writeLines(t, "b.ndjson", scT1("e1", mette, "2026-11-02", "8")))
	t.Logf("import of e1 moved to November:\n%s%s", r.stdout, r.stderr)
	c.settle()
	brWantTotals(t, c.s.sb, "after e1 moved from closed October to November", map[string]string{nordlys(mette, "T1", ""): "10"})
}
