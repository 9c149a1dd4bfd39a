package mapping

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fuzz targets feed arbitrary bytes to one reader. The property: no
// panic; the stream ends (every call consumes input, so there are at
// most len(data)+3 calls); each error is io.EOF, a *Problem naming the
// source, or a fatal error that stays; each entry has what its format
// requires.

func FuzzReadJSON(f *testing.F) {
	seedFuzz(f, "json_", "ndjson_")
	f.Fuzz(func(t *testing.T, data []byte, decimalComma bool) {
		for _, format := range []Format{FormatJSON, FormatNDJSON, FormatAuto} {
			fuzzRead(t, data, ReadOptions{Format: format, DecimalComma: decimalComma})
		}
	})
}

func FuzzReadCSV(f *testing.F) {
	seedFuzz(f, "csv_")
	f.Fuzz(func(t *testing.T, data []byte, decimalComma bool) {
		fuzzRead(t, data, ReadOptions{Format: FormatCSV, DecimalComma: decimalComma})
		fuzzRead(t, data, ReadOptions{Format: FormatCSV, DateFormat: "M/D/YYYY", Columns: map[string]string{"name": "user", "hours": "duration"}})
	})
}

func FuzzReadToggl(f *testing.F) {
	seedFuzz(f, "toggl_")
	f.Fuzz(func(t *testing.T, data []byte, decimalComma bool) {
		fuzzRead(t, data, ReadOptions{Format: FormatToggl, DecimalComma: decimalComma})
	})
}

func FuzzReadClockify(f *testing.F) {
	seedFuzz(f, "clockify_")
	f.Fuzz(func(t *testing.T, data []byte, decimalComma bool) {
		fuzzRead(t, data, ReadOptions{Format: FormatClockify, DecimalComma: decimalComma, DateFormat: "DD.MM.YYYY"})
	})
}

func FuzzReadHarvest(f *testing.F) {
	seedFuzz(f, "harvest_")
	f.Fuzz(func(t *testing.T, data []byte, decimalComma bool) {
		fuzzRead(t, data, ReadOptions{Format: FormatHarvest, DecimalComma: decimalComma})
	})
}

// seedFuzz adds the testdata files, those with the given prefixes with
// both option values.
func seedFuzz(f *testing.F, prefixes ...string) {
	files, err := filepath.Glob(filepath.Join("testdata", "read", "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		for _, p := range prefixes {
			if strings.HasPrefix(filepath.Base(name), p) {
				f.Add(data, true)
			}
		}
	}
}

func fuzzRead(t *testing.T, data []byte, opts ReadOptions) {
	const source = "fuzz.in"
	rd, format, err := NewReader(source, bytes.NewReader(data), opts)
	if err != nil {
		if !strings.Contains(err.Error(), source) {
			t.Fatalf("NewReader error does not name the source: %v", err)
		}
		return
	}
	limit := min(len(data)+3, 1_000_000)
	for calls := 0; ; calls++ {
		if calls > limit {
			t.Fatalf("%s: %d calls on %d bytes without end", format, calls, len(data))
		}
		e, err := rd.Next()
		var p *Problem
		switch {
		case err == io.EOF:
			if _, err := rd.Next(); err != io.EOF {
				t.Fatalf("%s: after EOF, Next returned %v", format, err)
			}
			return
		case errors.As(err, &p):
			if p.Source != source || p.Line < 0 || p.Msg == "" {
				t.Fatalf("%s: bad problem %#v", format, p)
			}
		case err != nil:
			if !strings.Contains(err.Error(), source) {
				t.Fatalf("%s: fatal error does not name the source: %v", format, err)
			}
			if _, err2 := rd.Next(); err2 == nil || err2 == io.EOF {
				t.Fatalf("%s: after fatal %v, Next returned %v", format, err, err2)
			}
			return
		case e.Deleted:
			if format != FormatJSON && format != FormatNDJSON || e.Source != source || e.Line < 1 || e.ID == "" {
				t.Fatalf("%s: bad tombstone %#v", format, e)
			}
		default:
			checkFuzzEntry(t, format, e.Source, e.Line, e.ID, e.Date, e.EmployeeID+e.EmployeeNumber+e.Email+e.Name,
				e.Hours.Valid || e.Units.Valid || e.Rate.Valid || e.Amount.Valid, e.Type+e.Code)
		}
	}
}

func checkFuzzEntry(t *testing.T, format Format, source string, line int, id, date, employee string, value bool, typ string) {
	t.Helper()
	if source != "fuzz.in" || line < 1 || id == "" || employee == "" || !value {
		t.Fatalf("%s: incomplete entry: line %d, id %q, employee %q, value %v", format, line, id, employee, value)
	}
	if d, ok := isoLayout.parse(date); !ok || d != date {
		t.Fatalf("%s: entry %s: date %q is not YYYY-MM-DD", format, id, date)
	}
	switch format {
	case FormatToggl, FormatClockify, FormatHarvest:
		if !strings.HasPrefix(id, string(format)+"-") {
			t.Fatalf("%s: id %q", format, id)
		}
	}
}
