package main

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
)

// inFlight stages what a crash leaves: a sealed batch of one pay part
// (employee, 1 h of T1) of company, its create attempt open (sending).
// executed says the call reached payroll before the crash: the pay part is
// there, and only reconciliation can tell it is ours.
func inFlight(t *testing.T, sb *sandbox.Server, l *ledger.Ledger, company, employee, id string, executed bool) int64 {
	t.Helper()
	b := commitWork(t, l, company, employee, id)
	if _, err := l.BeginAttempt(t.Context(), b, paysync.AttemptCreate, 1); err != nil {
		t.Fatal(err)
	}
	if executed {
		if _, err := sb.SeedPayPart(company, paysync.PayPartInput{EmployeeID: employee, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("1")}}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// companyEmployees counts company's pay parts in payroll per employee.
func companyEmployees(sb *sandbox.Server, company string) map[string]int {
	out := map[string]int{}
	for _, c := range sb.State().Companies {
		if c.ID == company {
			for _, p := range c.PayParts {
				out[p.EmployeeID]++
			}
		}
	}
	return out
}

// twoCompaniesInFlight is Nordlys and Fjordtech, each with its own
// connection, after a crash: a batch of each left in flight (Fjordtech's
// the oldest, its call executed; Nordlys's executed as said), a next
// batch of each sealed; then the user disconnects Fjordtech in payroll
// while paysync is down.
func twoCompaniesInFlight(t *testing.T, prefix string, nordlysExecuted bool) *daemonHarness {
	t.Helper()
	h := newDaemonHarness(t, newInboxDriver(t), prefix)
	delete(h.env, "PAYSYNC_REFRESH_TOKEN")
	h.env["PAYSYNC_MARKETPLACE_URL"] = h.sb.URL() + "/marketplace"
	connectCompany(t, h.env, sandbox.CompanyNordlys, "Nordlys ApS")
	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	l := openLedger(t, h.env["PAYSYNC_LEDGER"])
	inFlight(t, h.sb, l, sandbox.CompanyFjordtech, sandbox.EmpJonasLarsen, "f-doubt", true)
	inFlight(t, h.sb, l, sandbox.CompanyNordlys, sandbox.EmpMetteHansen, "n-doubt", nordlysExecuted)
	commitWork(t, l, sandbox.CompanyFjordtech, sandbox.EmpEmmaChristensen, "f-next")
	commitWork(t, l, sandbox.CompanyNordlys, sandbox.EmpLarsNielsen, "n-next")
	l.Close()
	if n := h.sb.RevokeCompany(sandbox.CompanyFjordtech); n != 1 {
		t.Fatalf("RevokeCompany ended %d sessions, want 1", n)
	}
	return h
}

// TestDaemon_RecoveryPerCompany: a crash left a batch of each of two
// companies in flight, each company with its own connection; Fjordtech's
// was revoked meanwhile. The daemon's start-up recovery must not wait for
// Fjordtech: Nordlys's batch is reconciled and its work lands. After
// `paysync connect` again, Fjordtech's batch is reconciled before its next
// batch goes, and everything lands exactly once.
func TestDaemon_RecoveryPerCompany(t *testing.T) {
	h := twoCompaniesInFlight(t, "recov", false)
	p := h.launch(t)
	waitFor(t, "Nordlys's batches in payroll while Fjordtech's connection is revoked", 30*time.Second, func() bool {
		if p.exited() {
			t.Fatalf("paysync run ended: %s\n%s", p.exitDesc(), p.errb.String())
		}
		got := companyEmployees(h.sb, sandbox.CompanyNordlys)
		return got[sandbox.EmpMetteHansen] == 1 && got[sandbox.EmpLarsNielsen] == 1
	})
	waitFor(t, "/readyz to name only Fjordtech's revoked connection", 30*time.Second, func() bool {
		code, body := httpGet("http://" + p.addr + "/readyz")
		return code == 503 && strings.Contains(body, "payroll connections") && strings.Contains(body, sandbox.CompanyFjordtech) &&
			!strings.Contains(body, "recovery")
	})
	if got := companyEmployees(h.sb, sandbox.CompanyFjordtech); got[sandbox.EmpJonasLarsen] != 1 || got[sandbox.EmpEmmaChristensen] != 0 {
		t.Fatalf("Fjordtech's pay parts while its connection is revoked = %v, want only the one the crashed call created", got)
	}

	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	waitFor(t, "Fjordtech's next batch in payroll after connecting again", 30*time.Second, func() bool {
		return companyEmployees(h.sb, sandbox.CompanyFjordtech)[sandbox.EmpEmmaChristensen] == 1
	})
	waitFor(t, "/readyz ready again", 30*time.Second, func() bool {
		code, _ := httpGet("http://" + p.addr + "/readyz")
		return code == 200
	})
	p.stop(t)

	want := map[string]map[string]int{
		sandbox.CompanyFjordtech: {sandbox.EmpJonasLarsen: 1, sandbox.EmpEmmaChristensen: 1},
		sandbox.CompanyNordlys:   {sandbox.EmpMetteHansen: 1, sandbox.EmpLarsNielsen: 1},
	}
	for company, w := range want {
		if got := companyEmployees(h.sb, company); !maps.Equal(got, w) {
			t.Errorf("payroll holds %v of company %s, want %v: each pay part exactly once", got, company, w)
		}
	}
	l := openLedger(t, h.env["PAYSYNC_LEDGER"])
	defer l.Close()
	bs, err := l.ListBatches(t.Context(), ledger.BatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.State != paysync.BatchCreated {
			t.Errorf("batch %d of company %s is %s, want created", b.ID, b.CompanyID, b.State)
		}
	}
}

// TestRunOnce_PausedCompany: `run --once` with Fjordtech's connection
// revoked sends Nordlys's work (its batch left in flight reconciled, the
// next one created), leaves Fjordtech's as it is, and says so: a line
// naming Fjordtech and paysync connect, and exit 1 (work left undone).
// Connected again, the next run --once reconciles and sends Fjordtech's,
// exactly once, and exits 0.
func TestRunOnce_PausedCompany(t *testing.T) {
	h := twoCompaniesInFlight(t, "once", true)

	r := runInProcess(t, h.env, "run", "--once")
	out := r.stdout + r.stderr
	if r.code != 1 || !strings.Contains(out, "Fjordtech A/S ("+sandbox.CompanyFjordtech+")") || !strings.Contains(out, "paysync connect") ||
		strings.Contains(out, "PAYSYNC_REFRESH_TOKEN") {
		t.Errorf("run --once with Fjordtech's connection revoked: exit %d, want 1 with a line naming Fjordtech and paysync connect (not PAYSYNC_REFRESH_TOKEN):\n%s", r.code, out)
	}
	assertClean(t, r)
	nordlys := map[string]int{sandbox.EmpMetteHansen: 1, sandbox.EmpLarsNielsen: 1}
	if got := companyEmployees(h.sb, sandbox.CompanyNordlys); !maps.Equal(got, nordlys) {
		t.Errorf("Nordlys's pay parts after run --once = %v, want %v", got, nordlys)
	}
	if got := companyEmployees(h.sb, sandbox.CompanyFjordtech); !maps.Equal(got, map[string]int{sandbox.EmpJonasLarsen: 1}) {
		t.Errorf("Fjordtech's pay parts while its connection is revoked = %v, want only the crashed call's", got)
	}

	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	if r := runInProcess(t, h.env, "run", "--once"); r.code != 0 {
		t.Fatalf("run --once after connecting again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fjordtech := map[string]int{sandbox.EmpJonasLarsen: 1, sandbox.EmpEmmaChristensen: 1}
	if got := companyEmployees(h.sb, sandbox.CompanyFjordtech); !maps.Equal(got, fjordtech) {
		t.Errorf("Fjordtech's pay parts after connecting again = %v, want %v: each exactly once", got, fjordtech)
	}
}

// TestConnections_RevokedHints: with a connection from paysync connect
// and no PAYSYNC_REFRESH_TOKEN, doctor words the token as the
// connection's, and a command refused as revoked says to run paysync
// connect for the company, not to set PAYSYNC_REFRESH_TOKEN.
func TestConnections_RevokedHints(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MARKETPLACE_URL", s.sb.URL()+"/marketplace")
	delete(env, "PAYSYNC_REFRESH_TOKEN")
	delete(env, "PAYSYNC_TOKEN_FILE")
	connectCompany(t, env, sandbox.CompanyNordlys, "Nordlys ApS")

	r := runInProcess(t, env, "doctor")
	_, line := doctorLine(t, r.stdout, "payroll token")
	if !strings.Contains(line, "Nordlys ApS ("+sandbox.CompanyNordlys+")") || !strings.Contains(line, "paysync connect") || strings.Contains(line, "configured token") {
		t.Errorf("doctor's payroll token line = %q, want it to name Nordlys's connection (paysync connect), not a configured token\n%s", line, r.stdout)
	}

	if n := s.sb.RevokeCompany(sandbox.CompanyNordlys); n != 1 {
		t.Fatalf("RevokeCompany ended %d sessions, want 1", n)
	}
	r = runInProcess(t, env, "companies")
	if out := r.stdout + r.stderr; r.code != 1 || !strings.Contains(out, "paysync connect") || !strings.Contains(out, sandbox.CompanyNordlys) || strings.Contains(out, "PAYSYNC_REFRESH_TOKEN") {
		t.Errorf("paysync companies with the connection revoked: exit %d, want 1 saying to run paysync connect for %s, not PAYSYNC_REFRESH_TOKEN:\n%s", r.code, sandbox.CompanyNordlys, out)
	}
	r = runInProcess(t, env, "doctor")
	if _, line := doctorLine(t, r.stdout, "payroll token"); r.code != 1 || !strings.Contains(line, "paysync connect") || !strings.Contains(line, sandbox.CompanyNordlys) || strings.Contains(line, "PAYSYNC_REFRESH_TOKEN") {
		t.Errorf("doctor's payroll token line with the connection revoked = %q (exit %d), want it to say to run paysync connect for %s, not PAYSYNC_REFRESH_TOKEN", line, r.code, sandbox.CompanyNordlys)
	}
}

// TestHarness_NoConsole: the test harness's `paysync run` serves no
// console unless a test asks for one, so that tests never depend on the
// shared default port 127.0.0.1:8081 (nor log that it is taken).
func TestHarness_NoConsole(t *testing.T) {
	h := newDaemonHarness(t, newInboxDriver(t), "noconsole")
	h.env["PAYSYNC_LOG_LEVEL"] = "info"
	p := h.start(t)
	p.stop(t)
	if log := p.errb.String(); strings.Contains(log, "console") {
		t.Errorf("paysync run with the harness's environment served (or tried to serve) the console:\n%s", log)
	}
}
