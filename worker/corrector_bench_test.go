package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// BenchmarkCorrection is the cost of one correction, as issue 15 asks:
// an export of 1,000 entries (4 employees × 1 code: aggregated into 4 pay
// parts) is imported once; each iteration imports it again with one entry's
// hours changed, as `paysync import` would (commit, correct, deliver). It
// reports the payroll calls per correction (one delete and one create:
// the one aggregate the entry is in) and the time of the whole import.
func BenchmarkCorrection(b *testing.B) {
	e := setup(b, sandbox.Options{})
	rules := mapping.DefaultRules()
	m := mapping.NewMapper(rules, mapping.NewCache(e.cl), e.schema, sandbox.CompanyNordlys)
	im := &worker.Importer{L: e.led, D: e.deliverer(e.cl), Mapper: m, Rules: rules, Wire: e.schema, BatchSize: 100}
	emps := []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}
	// export has entries 0..changed-1 at 2 hours, the rest at 1: each
	// next export changes one entry more.
	export := func(changed int) []byte {
		var sb strings.Builder
		for i := range 1000 {
			h := "1"
			if i < changed {
				h = "2"
			}
			fmt.Fprintf(&sb, `{"id":"b-%d","employee_id":%q,"date":"2026-11-%02d","hours":%s,"code":"T1"}`+"\n", i, emps[i%4], 1+i%28, h)
		}
		return []byte(sb.String())
	}
	run := func(name string, payload []byte) {
		sum, err := im.ImportAll(ctx(b), e.led, []worker.Input{fileInput(b, name, payload)}, nil)
		if err != nil || sum.Unfinished != 0 {
			b.Fatalf("%s: %v %+v", name, err, sum)
		}
	}
	run("v0.ndjson", export(0))
	writes := func() int {
		r := e.sb.State().Counters.Requests
		return r["create_pay_parts"] + r["delete_pay_parts"]
	}
	before := writes()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i >= 1000 {
			b.Fatal("more than 1,000 corrections: run with -benchtime up to 1000x")
		}
		run(fmt.Sprintf("v%d.ndjson", i+1), export(i+1))
	}
	b.ReportMetric(float64(writes()-before)/float64(b.N), "calls/correction")
}
