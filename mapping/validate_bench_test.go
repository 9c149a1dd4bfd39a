package mapping_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
)

// BenchmarkMapper_Map maps and validates one entry (rules, employee,
// pay code rules, wire precision) against a warm cache: the per-entry cost
// of an import once meta and the company's employees are fetched. It
// reports entries/s and fails if the loop made any payroll call.
func BenchmarkMapper_Map(b *testing.B) {
	cl, schema := directory(b, sandbox.Options{Numbers: sandbox.NumbersInt, Allowed: sandbox.AllowedEnum})
	m := mapping.NewMapper(rules(b, testRules), mapping.NewCache(cl), schema, "")
	cases := []struct {
		name  string
		e     paysync.Entry
		codes string
	}{
		{"default-rule-by-email", entry("a"), "T1"},
		{"overtime-rate-wire-check", entry("b", func(e *paysync.Entry) { e.Type = "Overtime" }), "T2"},
		{"evening-supplement-two-lines", entry("c", func(e *paysync.Entry) { e.Tags = []string{"Evening"} }), "TILLAEG,T1"},
		{"name-match", entry("f", func(e *paysync.Entry) { e.Email = ""; e.Name = "sofie  JENSEN" }), "T1"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			// Outside the timing: warms the cache (meta, employees) and
			// checks the entry maps as expected.
			lines, err := m.Map(ctx, tc.e)
			if err != nil {
				b.Fatal(err)
			}
			if got := lineCodes(lines); got != tc.codes {
				b.Fatalf("codes = %s, want %s", got, tc.codes)
			}
			calls := cl.Calls()
			b.ReportAllocs()
			for b.Loop() {
				if lines, err = m.Map(ctx, tc.e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			if got := lineCodes(lines); got != tc.codes {
				b.Fatalf("codes = %s, want %s", got, tc.codes)
			}
			if d := cl.Calls() - calls; d != 0 {
				b.Fatalf("%d payroll calls in the loop: the cache was not warm", d)
			}
		})
	}
}

func lineCodes(lines []mapping.Line) string {
	codes := make([]string, len(lines))
	for i, l := range lines {
		codes[i] = l.Code
	}
	return strings.Join(codes, ",")
}

// BenchmarkPlanner_Aggregate100kLines aggregates 100,000 mapped lines
// (four employees, hourly, overtime and evening with a computed supplement)
// into pay parts: NewPlanner, Place for every line, then Take with the
// wire check. One op is all 100,000 lines; it reports lines/s.
func BenchmarkPlanner_Aggregate100kLines(b *testing.B) {
	const n = 100_000
	cl, schema := directory(b, sandbox.Options{Numbers: sandbox.NumbersInt, Allowed: sandbox.AllowedEnum})
	r := rules(b, benchRules)
	m := mapping.NewMapper(r, mapping.NewCache(cl), schema, "")

	// Real lines from the mapper for every employee × hours × type, then
	// repeated under fresh entry ids up to n lines.
	ctx := context.Background()
	var tmpl []mapping.Line
	groups := map[string]bool{}
	for i := range len(genEmployees) * len(genHours) * len(genTypes) {
		h, err := paysync.ParseHours(genHours[(i/len(genEmployees))%len(genHours)], false)
		if err != nil {
			b.Fatal(err)
		}
		e := paysync.Entry{ID: "t-" + strconv.Itoa(i), Source: "bench.csv", Line: i + 2, Date: "2026-11-02", Hours: h,
			EmployeeID: genEmployees[i%len(genEmployees)], Type: genTypes[i/(len(genEmployees)*len(genHours))]}
		lines, err := m.Map(ctx, e)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range lines {
			groups[strings.Join([]string{l.CompanyID, l.EmployeeID, l.Code, l.Rate.Decimal.String(), l.Rule}, "|")] = true
		}
		tmpl = append(tmpl, lines...)
	}
	lines := make([]mapping.Line, n)
	for i := range lines {
		l := tmpl[i%len(tmpl)]
		l.Ref.ID, l.Ref.Line = "e-"+strconv.Itoa(i), i+2
		lines[i] = l
	}

	var pps []mapping.Placed
	b.ReportAllocs()
	for b.Loop() {
		p := mapping.NewPlanner(r, schema)
		for _, l := range lines {
			p.Place(l)
		}
		pps = p.Take(true)
		for _, pl := range pps {
			if len(pl.Problems) > 0 {
				b.Fatal(pl.Problems)
			}
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "lines/s")

	refs := 0
	for _, pl := range pps {
		refs += pl.Entries
	}
	if len(pps) != len(groups) || refs != n {
		b.Fatalf("%d pay parts of %d lines, want %d pay parts of %d", len(pps), refs, len(groups), n)
	}
}
