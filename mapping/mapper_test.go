package mapping_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// directory serves a real sandbox over loopback HTTP through the real
// payroll client: the mapping's Directory and WireChecker.
func directory(t testing.TB, opts sandbox.Options) (*payroll.Client, payroll.Schema) {
	t.Helper()
	_, c, s := sandboxDirectory(t, opts)
	return c, s
}

// sandboxDirectory is directory with the sandbox, for tests that inject
// faults.
func sandboxDirectory(t testing.TB, opts sandbox.Options) (*sandbox.Server, *payroll.Client, payroll.Schema) {
	t.Helper()
	sb := sandbox.New(opts)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	o := sb.Options()
	c, err := payroll.New(payroll.Config{URL: srv.URL, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RefreshToken: sb.IssueRefreshToken(), Store: &payroll.FileStore{Path: filepath.Join(t.TempDir(), "t.json")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return sb, c, s
}

func rules(t testing.TB, y string) *mapping.Rules {
	t.Helper()
	r, err := mapping.LoadRules("rules.yaml", strings.NewReader(y))
	if err != nil {
		t.Fatalf("rules: %v", err)
	}
	return r
}

const testRules = `
company: MV8x
employees:
  match_names: true
  by_email: {mette.hansen@nordlys.dk: MV8xXzE=, ghost@nordlys.dk: MV8xXzk=}
  by_number: {"1002": MV8xXzI=}
  ignore: [robot@nordlys.dk]
rules:
  - name: overtime
    match: {type: overtime}
    code: T2
    units: hours
    rate: "310.40"
  - name: overtime without rate
    match: {type: overtime-norate}
    code: T2
    units: hours
  - name: evening
    match: {tags: evening}
    continue: true
    code: TILLAEG
    units: hours
    rate: 45
    amount: {product: [units, rate]}
  - name: mileage
    match: {type: mileage}
    code: KM
    units: {field: km}
  - name: typo
    match: {type: typo}
    code: T9
    units: hours
  - name: paid amount
    match: {type: paid}
    code: T1
    units: hours
    amount: 100
  - name: hourly
    default: true
    code: T1
    units: hours
`

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func entry(id string, mods ...func(*paysync.Entry)) paysync.Entry {
	e := paysync.Entry{ID: id, Source: "t.csv", Line: 7, Email: "mette.hansen@nordlys.dk", Date: "2026-11-02",
		Hours: paysync.HoursFromDecimal(paysync.Dec("7.5").Decimal)}
	for _, m := range mods {
		m(&e)
	}
	return e
}

func TestMapper_Map(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	m := mapping.NewMapper(rules(t, testRules), mapping.NewCache(cl), schema, "")
	ctx := context.Background()
	tests := []struct {
		name      string
		e         paysync.Entry
		wantCodes string // codes of the lines, comma separated
		wantSkip  string
		wantField string // of the first problem
		wantMsg   string
		wantHint  string
	}{
		{name: "default rule by email", e: entry("a"), wantCodes: "T1"},
		{name: "overtime", e: entry("b", func(e *paysync.Entry) { e.Type = "Overtime" }), wantCodes: "T2"},
		{name: "evening adds a supplement", e: entry("c", func(e *paysync.Entry) { e.Tags = []string{"Evening"} }), wantCodes: "TILLAEG,T1"},
		{name: "mileage from field", e: entry("d", func(e *paysync.Entry) { e.Type = "mileage"; e.Fields = map[string]string{"km": "42,5"} }), wantCodes: "KM"},
		{name: "by number", e: entry("e", func(e *paysync.Entry) { e.Email = ""; e.EmployeeNumber = "1002" }), wantCodes: "T1"},
		{name: "exact name", e: entry("f", func(e *paysync.Entry) { e.Email = ""; e.Name = "sofie  JENSEN" }), wantCodes: "T1"},
		{name: "own code, no rule", e: entry("g", func(e *paysync.Entry) { e.Code = "BONUS"; e.Hours = paysync.Hours{}; e.Amount = paysync.Dec("500") }), wantCodes: "BONUS"},
		{name: "unapproved", e: entry("h", func(e *paysync.Entry) { e.Approved = no() }), wantSkip: "unapproved"},
		{name: "approved", e: entry("h2", func(e *paysync.Entry) { e.Approved = yes() }), wantCodes: "T1"},
		{name: "zero hours", e: entry("i", func(e *paysync.Entry) { e.Hours = paysync.HoursFromSeconds(0) }), wantSkip: "zero hours"},
		{name: "ignored", e: entry("j", func(e *paysync.Entry) { e.Email = "Robot@Nordlys.dk" }), wantSkip: "ignored person"},
		{name: "unknown code", e: entry("k", func(e *paysync.Entry) { e.Type = "typo" }),
			wantField: "code", wantMsg: `unknown pay code "T9"`, wantHint: "rules.yaml:"},
		{name: "forbidden amount", e: entry("l", func(e *paysync.Entry) { e.Type = "paid" }),
			wantField: "amount", wantMsg: "code T1 does not take amount", wantHint: "remove amount"},
		{name: "forbidden amount on the entry", e: entry("l2", func(e *paysync.Entry) { e.Code = "T1"; e.Amount = paysync.Dec("5") }),
			wantField: "amount", wantMsg: "does not take amount"},
		{name: "mandatory rate missing", e: entry("m", func(e *paysync.Entry) { e.Type = "overtime-norate" }),
			wantField: "rate", wantMsg: "code T2 needs rate"},
		{name: "unknown person", e: entry("n", func(e *paysync.Entry) { e.Email = "who@nordlys.dk" }),
			wantField: "email", wantMsg: `no payroll employee for "who@nordlys.dk"`, wantHint: "employees.by_email"},
		{name: "unknown name", e: entry("o", func(e *paysync.Entry) { e.Email = ""; e.Name = "Nobody" }),
			wantField: "name", wantMsg: `named "Nobody"`},
		{name: "ambiguous name", e: entry("p", func(e *paysync.Entry) { e.Email = ""; e.Name = "Peter Madsen"; e.CompanyID = sandbox.CompanyFjordtech }),
			wantField: "name", wantMsg: sandbox.EmpPeterMadsen1 + ", " + sandbox.EmpPeterMadsen2, wantHint: "map this person"},
		{name: "employee not in company", e: entry("q", func(e *paysync.Entry) { e.Email = "ghost@nordlys.dk" }),
			wantField: "email", wantMsg: "is not in company MV8x"},
		{name: "missing field", e: entry("r", func(e *paysync.Entry) { e.Type = "mileage" }),
			wantField: "km", wantMsg: `field "km"`},
		{name: "rate the wire cannot carry", e: entry("s", func(e *paysync.Entry) { e.Code = "T1"; e.Rate = paysync.Dec("200.125") }),
			wantField: "rate", wantMsg: "more than 2 decimals"},
		{name: "invisible company", e: entry("u", func(e *paysync.Entry) { e.CompanyID = sandbox.CompanyHavblik }),
			wantField: "company_id", wantMsg: "company " + sandbox.CompanyHavblik},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, err := m.Map(ctx, tt.e)
			if tt.wantField != "" {
				var p *mapping.Problem
				if !errors.As(err, &p) {
					t.Fatalf("err = %v, want a problem", err)
				}
				if p.Source != "t.csv" || p.Line != 7 || p.EntryID != tt.e.ID || p.Field != tt.wantField ||
					!strings.Contains(p.Msg, tt.wantMsg) || !strings.Contains(p.Hint, tt.wantHint) || p.Hint == "" {
					t.Fatalf("problem = %+v\nwant field %q msg ~%q hint ~%q", p, tt.wantField, tt.wantMsg, tt.wantHint)
				}
				return
			}
			if err != nil {
				t.Fatalf("Map: %v", err)
			}
			if tt.wantSkip != "" {
				if len(lines) != 1 || lines[0].Skip != tt.wantSkip {
					t.Fatalf("lines = %+v, want skip %q", lines, tt.wantSkip)
				}
				return
			}
			var codes []string
			for _, l := range lines {
				if l.Skip != "" || l.EmployeeName == "" || l.CompanyID == "" {
					t.Errorf("line = %+v", l)
				}
				codes = append(codes, l.Code)
			}
			if got := strings.Join(codes, ","); got != tt.wantCodes {
				t.Fatalf("codes = %s, want %s", got, tt.wantCodes)
			}
		})
	}
}

func TestPlanner_Aggregates(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum})
	r := rules(t, testRules)
	m := mapping.NewMapper(r, mapping.NewCache(cl), schema, "")
	p := mapping.NewPlanner(r, schema)
	twenty, _ := paysync.ParseHours("0:20:00", false)
	ctx := context.Background()
	add := func(e paysync.Entry) {
		t.Helper()
		lines, err := m.Map(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			p.Place(l)
		}
	}
	// Three 20-minute entries are exactly one hour, not 0.99.
	for _, id := range []string{"1", "2", "3"} {
		add(entry(id, func(e *paysync.Entry) { e.Hours = twenty }))
	}
	// Evening: 2.5 h + 1.25 h supplements at 45 → units 3.75, amount 168.75.
	add(entry("4", func(e *paysync.Entry) {
		e.Tags = []string{"evening"}
		e.Hours = paysync.HoursFromDecimal(paysync.Dec("2.5").Decimal)
	}))
	add(entry("5", func(e *paysync.Entry) {
		e.Tags = []string{"evening"}
		e.Hours = paysync.HoursFromDecimal(paysync.Dec("1.25").Decimal)
	}))
	// Entries are deduped before they are planned (worker intake): the
	// planner sums what it is given.
	pps, probs := take(p)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	want := []struct {
		code, units, rate, amount string
		n                         int
	}{
		{"T1", "4.75", "", "", 5}, // 1 + 2.5 + 1.25
		{"TILLAEG", "3.75", "45", "168.75", 2},
	}
	if len(pps) != len(want) {
		t.Fatalf("%d pay parts: %+v", len(pps), pps)
	}
	for i, w := range want {
		pp := pps[i]
		if pp.Code != w.code || pp.Units.Decimal.String() != w.units || num(pp.Rate) != w.rate || num(pp.Amount) != w.amount || pp.entries != w.n {
			t.Errorf("pay part %d = %s units=%s rate=%s amount=%s entries=%d; want %+v", i, pp.Code, num(pp.Units), num(pp.Rate), num(pp.Amount), pp.entries, w)
		}
		if pp.EmployeeName != "Mette Hansen" || pp.CompanyID != "MV8x" || pp.Description == "" {
			t.Errorf("pay part %d = %+v", i, pp)
		}
	}
}

// planned is a pay part Take returned, with the number of lines it sums.
type planned struct {
	paysync.PlannedPayPart
	entries int
}

// take takes every pay part of p, and the problems of those that cannot
// be sent.
func take(p *mapping.Planner) ([]planned, []error) {
	var out []planned
	var probs []error
	for _, pl := range p.Take(true) {
		if len(pl.Problems) > 0 {
			probs = append(probs, pl.Problems...)
			continue
		}
		out = append(out, planned{pl.PayPart, pl.Entries})
	}
	return out, probs
}

func num(d decimal.NullDecimal) string {
	if !d.Valid {
		return ""
	}
	return d.Decimal.String()
}

func TestPlanner_RoundingAndNoAggregation(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	tests := []struct {
		rounding string
		want     []string
	}{
		{"half_up", []string{"0.13", "0.13"}},
		{"half_even", []string{"0.12", "0.12"}},
		{"down", []string{"0.12", "0.12"}},
		{"up", []string{"0.13", "0.13"}},
	}
	for _, tt := range tests {
		t.Run(tt.rounding, func(t *testing.T) {
			r := rules(t, "aggregate: false\nrounding: {mode: "+tt.rounding+"}\ncompany: MV8x\nemployees: {by_email: {mette.hansen@nordlys.dk: MV8xXzE=}}\nrules: [{default: true, code: T1, units: hours}]\n")
			m := mapping.NewMapper(r, mapping.NewCache(cl), schema, "")
			p := mapping.NewPlanner(r, schema)
			for _, id := range []string{"x", "y"} {
				lines, err := m.Map(context.Background(), entry(id, func(e *paysync.Entry) { e.Hours = paysync.HoursFromSeconds(450) })) // 0.125 h
				if err != nil {
					t.Fatal(err)
				}
				p.Place(lines[0])
			}
			pps, probs := take(p)
			if len(probs) > 0 || len(pps) != 2 {
				t.Fatalf("%d pay parts, %v", len(pps), probs)
			}
			for i, pp := range pps {
				if pp.Units.Decimal.String() != tt.want[i] {
					t.Errorf("units = %s, want %s", pp.Units.Decimal, tt.want[i])
				}
			}
		})
	}
}

// TestMapper_DirectoryOutage: a payroll failure while reading a company's
// employees is not a fault of the entry. It comes back as a plain error
// (the caller retries later), never as a Problem, and is not cached: once
// payroll answers again the same entry maps. A company payroll does not
// know is a fault of the entry.
func TestMapper_DirectoryOutage(t *testing.T) {
	sb, cl, schema := sandboxDirectory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	ctx := context.Background()
	m := mapping.NewMapper(rules(t, testRules), mapping.NewCache(cl), schema, "")

	transient := func(t *testing.T, e paysync.Entry, what string) {
		t.Helper()
		_, err := m.Map(ctx, e)
		if err == nil {
			t.Fatalf("%s: mapped; want an error", what)
		}
		if mapping.OnlyProblems(err) {
			t.Fatalf("%s: %v is an input problem; want a transient error", what, err)
		}
	}
	maps := func(t *testing.T, e paysync.Entry, what string) {
		t.Helper()
		lines, err := m.Map(ctx, e)
		if err != nil || len(lines) != 1 || lines[0].Code != "T1" {
			t.Fatalf("%s: lines %+v, err %v; want one T1 line", what, lines, err)
		}
	}

	sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "companies", Status: 500})
	transient(t, entry("out-1"), "during a 500 outage")
	transient(t, entry("out-2"), "the next entry of the same company")
	sb.SetFaults()
	// A failure is given again only for a moment (failing fast during an
	// outage), then payroll is asked again.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := m.Map(ctx, entry("out-1")); err == nil || time.Now().After(deadline) {
			break
		}
	}
	maps(t, entry("out-1"), "after the outage")

	// A company payroll does not know is the entry's fault.
	_, err := m.Map(ctx, entry("other-1", func(e *paysync.Entry) { e.CompanyID = sandbox.CompanyHavblik }))
	var p *mapping.Problem
	if !errors.As(err, &p) || p.Field != "company_id" {
		t.Fatalf("unknown company: got %v; want a company_id problem", err)
	}

	// A revoked connection is transient too: the operator re-connects.
	sb.RevokeAll()
	m2 := mapping.NewMapper(rules(t, testRules), mapping.NewCache(cl), schema, "")
	_, err = m2.Map(ctx, entry("rev-1"))
	if err == nil || mapping.OnlyProblems(err) {
		t.Fatalf("revoked: got %v; want a transient error", err)
	}
}

// TestMapper_OutageAsksOnce: during an outage, entry after entry of the same
// company does not each wait for its own failing read of the employees
// (each retried inside the client, honouring Retry-After): a failure is
// remembered, as a transient error, for a moment, and entries of the
// company fail fast until then. Concurrent lookups share one read.
func TestMapper_OutageAsksOnce(t *testing.T) {
	sb, cl, schema := sandboxDirectory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	ctx := context.Background()
	m := mapping.NewMapper(rules(t, testRules), mapping.NewCache(cl), schema, "")
	sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "companies", Status: 500})
	reads := func() int { return sb.State().Counters.Faults[sandbox.FaultErrorBefore] }
	_, err := m.Map(ctx, entry("o-0"))
	if err == nil || mapping.OnlyProblems(err) {
		t.Fatalf("first entry: %v; want a transient error", err)
	}
	one := reads()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := m.Map(ctx, entry(fmt.Sprintf("o-%d", i+1))); err == nil || mapping.OnlyProblems(err) {
				t.Errorf("entry %d: %v; want a transient error", i+1, err)
			}
		})
	}
	wg.Wait()
	t.Logf("one read: %d requests; 20 more entries: %d", one, reads()-one)
	if n := reads() - one; n > one {
		t.Errorf("20 more entries of the company made %d more employee reads (one read is %d requests); want them to fail fast", n, one)
	}
}

// TestPlanner_PerPeriod: a pay part sums the entries of one pay period
// (Rules.Period, month by default): entries of one employee and code in
// two months are two pay parts, in one month one; by week, two weeks of
// one month are two.
func TestPlanner_PerPeriod(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum})
	tests := []struct {
		name  string
		kind  paysync.PeriodKind
		dates []string
		want  []string // units per pay part, in order
	}{
		{"one month", paysync.PeriodMonth, []string{"2026-11-02", "2026-11-30"}, []string{"2"}},
		{"two months", paysync.PeriodMonth, []string{"2026-10-31", "2026-11-02", "2026-11-03"}, []string{"1", "2"}},
		{"two weeks", paysync.PeriodWeek, []string{"2026-11-01", "2026-11-02", "2026-11-08"}, []string{"1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rules(t, testRules)
			r.Period = tt.kind
			m := mapping.NewMapper(r, mapping.NewCache(cl), schema, "")
			p := mapping.NewPlanner(r, schema)
			for i, d := range tt.dates {
				lines, err := m.Map(context.Background(), entry(fmt.Sprint(i), func(e *paysync.Entry) {
					e.Date, e.Hours = d, paysync.HoursFromDecimal(paysync.Dec("1").Decimal)
				}))
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range lines {
					p.Place(l)
				}
			}
			var got []string
			for _, pl := range p.Take(true) {
				got = append(got, pl.PayPart.Units.Decimal.String())
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("pay parts %v, want %v", got, tt.want)
			}
		})
	}
}

// A yes/no the reader could not read (kept in Fields) fails the entry
// only when something uses it: a rule matching on it, or skip.unapproved.
func TestMapper_UnreadableYesNo(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	const billableRules = `
company: MV8x
employees: {by_email: {mette.hansen@nordlys.dk: MV8xXzE=}}
rules:
  - name: billable hours
    match: {billable: true}
    code: T2
    units: hours
    rate: "310.40"
  - name: hourly
    default: true
    code: T1
    units: hours
`
	const approvedRules = `
company: MV8x
employees: {by_email: {mette.hansen@nordlys.dk: MV8xXzE=}}
skip: {unapproved: false}
rules:
  - name: approved hours
    match: {approved: true}
    code: T2
    units: hours
    rate: "310.40"
  - name: hourly
    default: true
    code: T1
    units: hours
`
	const plain = "company: MV8x\nemployees: {by_email: {mette.hansen@nordlys.dk: MV8xXzE=}}\nskip: {unapproved: false}\nrules:\n  - name: hourly\n    default: true\n    code: T1\n    units: hours\n"
	const defaultSkip = "company: MV8x\nemployees: {by_email: {mette.hansen@nordlys.dk: MV8xXzE=}}\nrules:\n  - name: hourly\n    default: true\n    code: T1\n    units: hours\n"
	raw := func(k, v string) func(*paysync.Entry) {
		return func(e *paysync.Entry) { e.Fields = map[string]string{k: v} }
	}
	ctx := context.Background()
	tests := []struct {
		name, rules string
		e           paysync.Entry
		wantCodes   string
		wantField   string
		wantMsg     string
		wantHint    string
	}{
		{name: "unused billable", rules: plain, e: entry("a", raw("billable", "maybe")), wantCodes: "T1"},
		{name: "unused approved", rules: plain, e: entry("b", raw("approved", "maybe")), wantCodes: "T1"},
		{name: "billable rule", rules: billableRules, e: entry("c", raw("billable", "maybe")),
			wantField: "billable", wantMsg: `"maybe" is not yes or no`, wantHint: `rule "billable hours" matches on billable (rules.yaml:`},
		{name: "billable rule, readable", rules: billableRules, e: entry("d", func(e *paysync.Entry) { e.Billable = yes() }), wantCodes: "T2"},
		{name: "billable rule, no value", rules: billableRules, e: entry("e"), wantCodes: "T1"},
		{name: "approved rule", rules: approvedRules, e: entry("f", raw("approved", "peut-être")),
			wantField: "approved", wantMsg: `"peut-être" is not yes or no`, wantHint: `rule "approved hours"`},
		{name: "skip unapproved", rules: defaultSkip, e: entry("g", raw("approved", "maybe")),
			wantField: "approved", wantMsg: `"maybe" is not yes or no`, wantHint: "skip.unapproved"},
		{name: "own code ignores rules", rules: billableRules, e: entry("h", raw("billable", "maybe"), func(e *paysync.Entry) { e.Code = "T1" }), wantCodes: "T1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mapping.NewMapper(rules(t, tt.rules), mapping.NewCache(cl), schema, "")
			lines, err := m.Map(ctx, tt.e)
			if tt.wantField != "" {
				var p *mapping.Problem
				if !errors.As(err, &p) {
					t.Fatalf("err = %v, want a problem", err)
				}
				if p.EntryID != tt.e.ID || p.Field != tt.wantField || !strings.Contains(p.Msg, tt.wantMsg) || !strings.Contains(p.Hint, tt.wantHint) {
					t.Fatalf("problem = %+v\nwant field %q msg ~%q hint ~%q", p, tt.wantField, tt.wantMsg, tt.wantHint)
				}
				return
			}
			if err != nil {
				t.Fatalf("Map: %v", err)
			}
			var codes []string
			for _, l := range lines {
				codes = append(codes, l.Code)
			}
			if got := strings.Join(codes, ","); got != tt.wantCodes {
				t.Fatalf("codes = %s, want %s", got, tt.wantCodes)
			}
		})
	}
}
