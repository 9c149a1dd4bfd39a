package mapping

import (
	"bytes"
	"io"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

const benchLines = 1_000_000

// benchCSV is a generic CSV of benchLines entries, made once.
var benchCSV = sync.OnceValue(func() []byte {
	types := []string{"normal", "overtime", "oncall"}
	hours := []string{"7.5", "8", "0:20:00", "1.25", "25:30:00", "4"}
	b := make([]byte, 0, 48*benchLines)
	b = append(b, "id,employee_id,date,hours,type,project\n"...)
	for i := range benchLines {
		b = strconv.AppendInt(b, int64(i+1), 10)
		b = append(b, ",E"...)
		b = strconv.AppendInt(b, int64(i%500), 10)
		b = append(b, ",2024-"...)
		b = append(b, byte('0'+(i/28%12+1)/10), byte('0'+(i/28%12+1)%10), '-')
		b = append(b, byte('0'+(i%28+1)/10), byte('0'+(i%28+1)%10), ',')
		b = append(b, hours[i%len(hours)]...)
		b = append(b, ',')
		b = append(b, types[i%len(types)]...)
		b = append(b, ",P"...)
		b = strconv.AppendInt(b, int64(i%50), 10)
		b = append(b, '\n')
	}
	return b
})

// BenchmarkReadCSV reads a million-line generic CSV per iteration.
func BenchmarkReadCSV(b *testing.B) {
	benchRead(b, benchCSV(), benchLines, ReadOptions{})
}

// BenchmarkReadNDJSON and BenchmarkReadToggl read 100,000 entries.
func BenchmarkReadNDJSON(b *testing.B) {
	var buf bytes.Buffer
	for i := range benchLines / 10 {
		buf.WriteString(`{"id":"`)
		buf.WriteString(strconv.Itoa(i))
		buf.WriteString(`","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal","project":"P1"}` + "\n")
	}
	benchRead(b, buf.Bytes(), benchLines/10, ReadOptions{})
}

func BenchmarkReadToggl(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("User,Email,Client,Project,Task,Description,Billable,Start date,Start time,End date,End time,Duration,Tags,Amount (EUR)\n")
	for i := range benchLines / 10 {
		buf.WriteString("Ann Berg,ann@example.com,Acme,Website,Design,Work ")
		buf.WriteString(strconv.Itoa(i))
		buf.WriteString(",Yes,2024-03-04,09:00:00,2024-03-04,17:30:00,08:30:00,\"a, b\",425.00\n")
	}
	benchRead(b, buf.Bytes(), benchLines/10, ReadOptions{})
}

func benchRead(b *testing.B, data []byte, lines int, opts ReadOptions) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		rd, _, err := NewReader("bench", bytes.NewReader(data), opts)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != lines {
			b.Fatalf("read %d entries, want %d", n, lines)
		}
	}
	runtime.ReadMemStats(&after)
	total := float64(b.N) * float64(lines)
	b.ReportMetric(total/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/line")
}
