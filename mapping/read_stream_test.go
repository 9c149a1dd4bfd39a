package mapping

import (
	"io"
	"runtime"
	"strconv"
	"testing"
)

// lineSource generates n lines on the fly: head, then line(i) for each i,
// then tail. It never holds more than one line.
type lineSource struct {
	head, tail string
	line       func(i int) string
	n, i       int
	buf        []byte
	done       bool
}

func (s *lineSource) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		switch {
		case s.head != "":
			s.buf, s.head = []byte(s.head), ""
		case s.i < s.n:
			s.buf = append(s.buf[:0], s.line(s.i)...)
			s.i++
		case !s.done:
			s.buf, s.done = []byte(s.tail), true
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// The readers stream: memory stays flat however long the input.
func TestNewReader_Streams(t *testing.T) {
	n := 200_000
	if testing.Short() || raceEnabled {
		n = 30_000
	}
	cases := map[string]*lineSource{
		"csv": {head: "id,employee_id,date,hours,type\n", line: func(i int) string {
			return strconv.Itoa(i) + ",E1,2024-03-04,7.5,normal\n"
		}},
		"ndjson": {line: func(i int) string {
			return `{"id":"` + strconv.Itoa(i) + `","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal"}` + "\n"
		}},
		"json array": {head: "[", tail: "]", line: func(i int) string {
			sep := ","
			if i == 0 {
				sep = ""
			}
			return sep + `{"id":"` + strconv.Itoa(i) + `","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal"}` + "\n"
		}},
		"json wrapper": {head: `{"entries": [`, tail: "]}", line: func(i int) string {
			sep := ","
			if i == 0 {
				sep = ""
			}
			return sep + `{"id":"` + strconv.Itoa(i) + `","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal"}` + "\n"
		}},
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			src.n = n
			rd, _, err := NewReader(name, src, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			base, peak := ms.HeapAlloc, ms.HeapAlloc
			count := 0
			for {
				_, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if count++; count%(n/10) == 0 {
					runtime.GC()
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapAlloc)
				}
			}
			if count != n {
				t.Fatalf("read %d entries, want %d", count, n)
			}
			if grow := int64(peak) - int64(base); grow > 2<<20 {
				t.Errorf("heap grew by %d KiB over %d entries", grow>>10, n)
			}
		})
	}
}
