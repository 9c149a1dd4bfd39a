package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
	"github.com/shopspring/decimal"
)

// companyEntries returns n entries of company's employees, ids
// prefix-0001..., each with its own number of hundredths.
func companyEntries(prefix, company string, employees []string, n int) []paysync.Entry {
	out := make([]paysync.Entry, n)
	for i := range out {
		k := i + 1
		out[i] = paysync.Entry{ID: fmt.Sprintf("%s-%04d", prefix, k), CompanyID: company, EmployeeID: employees[k%len(employees)],
			Date: "2026-11-02", Code: "T1", Hours: paysync.HoursFromSeconds(int64(36 * k))}
	}
	return out
}

// publishFor publishes entries on company's subject.
func publishFor(t *testing.T, d *natsDriver, company string, entries []paysync.Entry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, e := range entries {
		if _, err := stream.Publish(ctx, d.js, stream.Subject("timesheets", company, daemonSubjectSource), e); err != nil {
			t.Fatal(err)
		}
	}
}

// companyParts counts the pay parts payroll holds for company.
func companyParts(sb *sandbox.Server, company string) int {
	for _, c := range sb.State().Companies {
		if c.ID == company {
			return len(c.PayParts)
		}
	}
	return 0
}

// checkEachOnce: payroll holds exactly one pay part per entry, per
// company, and nothing else.
func checkEachOnce(t *testing.T, sb *sandbox.Server, want []paysync.Entry) {
	t.Helper()
	wantM, gotM := map[string]int{}, map[string]int{}
	for _, e := range want {
		units := e.Hours.Seconds.Div(decimal.NewFromInt(3600)).Round(2)
		wantM[e.CompanyID+"|"+e.EmployeeID+"|"+e.Code+"|"+paysync.Numbers{Units: decimal.NewNullDecimal(units)}.String()]++
	}
	got := payrollKeys(sb)
	for _, k := range got {
		gotM[k]++
	}
	missing, extra := diffMultisets(wantM, gotM)
	if len(missing) > 0 || len(extra) > 0 || len(got) != len(want) {
		t.Fatalf("payroll holds %d pay parts, want exactly %d once each; missing %s; extra %s", len(got), len(want), firstFew(missing), firstFew(extra))
	}
}

// TestDaemon_ConnectionsPerCompany: one daemon, two companies, each with
// its own connection from `paysync connect` (no PAYSYNC_REFRESH_TOKEN),
// NATS traffic for both. The user disconnects Fjordtech in payroll
// mid-run: Nordlys's entries all land, Fjordtech's wait (reported by
// /readyz, metrics and `paysync connections`; never failed or rejected)
// and land exactly once after `paysync connect` again.
func TestDaemon_ConnectionsPerCompany(t *testing.T) {
	drv := newNATSDriver(t).(*natsDriver)
	h := newDaemonHarness(t, drv, "conn")
	delete(h.env, "PAYSYNC_REFRESH_TOKEN")
	h.env["PAYSYNC_MARKETPLACE_URL"] = h.sb.URL() + "/marketplace"
	connectCompany(t, h.env, sandbox.CompanyNordlys, "Nordlys ApS")
	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	p := h.start(t)

	nordlys := []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}
	fjordtech := []string{sandbox.EmpJonasLarsen, sandbox.EmpEmmaChristensen, sandbox.EmpPeterMadsen1}
	n1, f1 := companyEntries("n1", sandbox.CompanyNordlys, nordlys, 30), companyEntries("f1", sandbox.CompanyFjordtech, fjordtech, 30)
	publishFor(t, drv, sandbox.CompanyNordlys, n1)
	publishFor(t, drv, sandbox.CompanyFjordtech, f1)
	waitFor(t, "both companies' first entries in payroll", 30*time.Second, func() bool {
		return companyParts(h.sb, sandbox.CompanyNordlys) == 30 && companyParts(h.sb, sandbox.CompanyFjordtech) == 30
	})

	// The user disconnects Fjordtech in payroll.
	if n := h.sb.RevokeCompany(sandbox.CompanyFjordtech); n != 1 {
		t.Fatalf("RevokeCompany ended %d sessions, want 1", n)
	}
	n2, f2 := companyEntries("n2", sandbox.CompanyNordlys, nordlys, 30), companyEntries("f2", sandbox.CompanyFjordtech, fjordtech, 30)
	publishFor(t, drv, sandbox.CompanyFjordtech, f2)
	waitFor(t, "/readyz to name Fjordtech's revoked connection", 30*time.Second, func() bool {
		code, body := httpGet("http://" + p.addr + "/readyz")
		return code == 503 && strings.Contains(body, "payroll connections") && strings.Contains(body, sandbox.CompanyFjordtech) && !strings.Contains(body, sandbox.CompanyNordlys)
	})
	// Sending goes on for Nordlys: well within the 30 s a revoked token
	// pauses the whole sending loop.
	publishFor(t, drv, sandbox.CompanyNordlys, n2)
	waitFor(t, "Nordlys's entries in payroll while Fjordtech's connection is revoked", 15*time.Second, func() bool {
		return companyParts(h.sb, sandbox.CompanyNordlys) == 60
	})
	_, metrics := httpGet("http://" + p.addr + "/metrics")
	for _, want := range []string{`paysync_connection_up{company="` + sandbox.CompanyFjordtech + `"} 0`, `paysync_connection_up{company="` + sandbox.CompanyNordlys + `"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if n := companyParts(h.sb, sandbox.CompanyFjordtech); n != 30 {
		t.Fatalf("payroll holds %d pay parts of Fjordtech while its connection is revoked, want 30", n)
	}
	states := map[string]string{}
	for _, c := range listConnections(t, h.env) {
		states[c.CompanyID] = c.State
	}
	if states[sandbox.CompanyFjordtech] != "revoked" || states[sandbox.CompanyNordlys] != "active" {
		t.Fatalf("paysync connections states = %v, want Fjordtech revoked and Nordlys active", states)
	}

	r := runBinary(t, h.env, "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "payroll connections") || !strings.Contains(r.stdout, "Fjordtech A/S ("+sandbox.CompanyFjordtech+"): revoked") {
		t.Errorf("paysync doctor = %d, want 1 and Fjordtech's connection named revoked:\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Connected again: the daemon picks the new connection up by itself.
	connectCompany(t, h.env, sandbox.CompanyFjordtech, "Fjordtech A/S")
	waitFor(t, "Fjordtech's waiting entries in payroll after connecting again", 30*time.Second, func() bool {
		return companyParts(h.sb, sandbox.CompanyFjordtech) >= 60
	})
	waitFor(t, "/readyz ready again", 30*time.Second, func() bool {
		code, _ := httpGet("http://" + p.addr + "/readyz")
		return code == 200
	})
	p.stop(t)
	all := append(append(append(n1, f1...), n2...), f2...)
	checkEachOnce(t, h.sb, all)
	h.checkLedger(t, len(all))
}
