package mapping_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
)

// csvGen produces a generic CSV of n lines on the fly, so that the input
// itself never sits in memory and peak heap measures paysync alone.
type csvGen struct {
	n, i int
	buf  []byte
	hdr  bool
}

var (
	genEmployees = []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}
	genHours     = []string{"7.5", "8", "0:20:00", "1.25", "3:45:00", "4"}
	genTypes     = []string{"regular", "overtime", "regular", "evening"}
)

func (g *csvGen) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.i < g.n {
		if !g.hdr {
			g.buf = append(g.buf, "id,employee_id,date,hours,type,project\n"...)
			g.hdr = true
		}
		i := g.i
		g.buf = append(g.buf, "e-"...)
		g.buf = strconv.AppendInt(g.buf, int64(i), 10)
		g.buf = append(g.buf, ',')
		g.buf = append(g.buf, genEmployees[i%len(genEmployees)]...)
		g.buf = append(g.buf, ",2026-11-"...)
		g.buf = append(g.buf, byte('0'+(i%28+1)/10), byte('0'+(i%28+1)%10), ',')
		g.buf = append(g.buf, genHours[i%len(genHours)]...)
		g.buf = append(g.buf, ',')
		g.buf = append(g.buf, genTypes[i%len(genTypes)]...)
		g.buf = append(g.buf, ",Havnen\n"...)
		g.i++
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf)
	g.buf = g.buf[:copy(g.buf, g.buf[n:])]
	return n, nil
}

const benchRules = `
company: MV8x
rules:
  - name: evening
    match: {type: evening}
    continue: true
    code: TILLAEG
    units: hours
    rate: 45
    amount: {product: [units, rate]}
  - name: overtime
    match: {type: overtime}
    code: T2
    units: hours
    rate: "310.50"
  - name: hourly
    default: true
    code: T1
    units: hours
`

// BenchmarkReadMapValidate streams a CSV through reader, mapper and
// validation (meta, employees, wire precision), as an import does before
// aggregation. It reports lines/s and the peak heap; the peak must not
// grow with the number of lines.
func BenchmarkReadMapValidate(b *testing.B) {
	cl, schema := directory(b, sandbox.Options{Numbers: sandbox.NumbersInt, Allowed: sandbox.AllowedEnum})
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n)+"-lines", func(b *testing.B) {
			m := mapping.NewMapper(rules(b, benchRules), mapping.NewCache(cl), schema, "")
			ctx := context.Background()
			b.ReportAllocs()
			var peak uint64
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse // other benchmarks' data may live in this process
			start := time.Now()
			lines := 0
			for b.Loop() {
				rd, _, err := mapping.NewReader("bench.csv", &csvGen{n: n}, mapping.ReadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for {
					e, err := rd.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Map(ctx, e); err != nil {
						b.Fatal(err)
					}
					lines++
					if lines%50_000 == 0 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapInuse)
					}
				}
			}
			el := time.Since(start)
			b.ReportMetric(float64(lines)/el.Seconds(), "lines/s")
			b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "peak-heap-MB")
		})
	}
}
