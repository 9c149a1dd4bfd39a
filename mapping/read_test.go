package mapping

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

var dumpReads = flag.Bool("dump-reads", false, "print what the reader tests read, to write expectations")

// readAll reads every entry, problem and the final error of a source,
// rendered one per string.
func readAll(t testing.TB, source string, r io.Reader, opts ReadOptions) (Format, []string, error) {
	t.Helper()
	rd, f, err := NewReader(source, r, opts)
	if err != nil {
		return "", nil, err
	}
	var got []string
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatalf("%s: no end after 10000 calls", source)
		}
		e, err := rd.Next()
		if err == io.EOF {
			return f, got, nil
		}
		var p *Problem
		switch {
		case errors.As(err, &p):
			if p.Source != source {
				t.Errorf("problem source %q, want %q", p.Source, source)
			}
			if p.Hint == "" || p.Msg == "" {
				t.Errorf("problem without message or hint: %v", p)
			}
			got = append(got, renderProblem(p))
		case err != nil:
			if !strings.Contains(err.Error(), source) {
				t.Errorf("fatal error does not name the source %q: %v", source, err)
			}
			if _, err2 := rd.Next(); err2 == nil || err2 == io.EOF {
				t.Errorf("after the fatal error %v, Next returned %v", err, err2)
			}
			got = append(got, "fatal ~"+err.Error())
			return f, got, nil
		default:
			if e.Source != source {
				t.Errorf("entry source %q, want %q", e.Source, source)
			}
			got = append(got, renderEntry(e))
		}
	}
}

func renderEntry(e paysync.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%d id=%s", e.Line, e.ID)
	if e.Deleted {
		b.WriteString(" deleted")
	}
	add := func(k, v string) {
		if v != "" {
			b.WriteString(" " + k + "=" + v)
		}
	}
	add("company", e.CompanyID)
	add("employee_id", e.EmployeeID)
	add("number", e.EmployeeNumber)
	add("email", e.Email)
	add("name", e.Name)
	add("date", e.Date)
	if e.Hours.Valid {
		add("hours", e.Hours.Seconds.String()+"s")
	}
	if e.Units.Valid {
		add("units", e.Units.Decimal.String())
	}
	if e.Rate.Valid {
		add("rate", e.Rate.Decimal.String())
	}
	if e.Amount.Valid {
		add("amount", e.Amount.Decimal.String())
	}
	add("type", e.Type)
	add("code", e.Code)
	add("project", e.Project)
	add("tags", strings.Join(e.Tags, "|"))
	if e.Billable != nil {
		add("billable", fmt.Sprint(*e.Billable))
	}
	if e.Approved != nil {
		add("approved", fmt.Sprint(*e.Approved))
	}
	if e.Description != "" {
		add("description", fmt.Sprintf("%q", e.Description))
	}
	if len(e.Fields) > 0 {
		keys := make([]string, 0, len(e.Fields))
		for k := range e.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + "=" + e.Fields[k]
		}
		add("fields", "{"+strings.Join(keys, ", ")+"}")
	}
	return b.String()
}

func renderProblem(p *Problem) string {
	at := "@"
	if p.Record {
		at = "#"
	}
	s := fmt.Sprintf("%s%d problem", at, p.Line)
	if p.EntryID != "" {
		s += " id=" + p.EntryID
	}
	if p.Field != "" {
		s += " field=" + p.Field
	}
	return s + " ~" + p.Msg + " (" + p.Hint + ")"
}

// match compares a rendered result with an expectation: equal, or with
// " ~text" equal up to there and containing text after.
func match(got, want string) bool {
	i := strings.Index(want, " ~")
	if i < 0 {
		if strings.HasPrefix(want, "fatal ~") {
			return strings.HasPrefix(got, "fatal ~") && strings.Contains(got, want[len("fatal ~"):])
		}
		return got == want
	}
	j := strings.Index(got, " ~")
	return j >= 0 && got[:j] == want[:i] && strings.Contains(got[j:], want[i+2:])
}

func checkResults(t *testing.T, got, want []string) {
	t.Helper()
	if *dumpReads {
		for _, g := range got {
			fmt.Printf("\t\t\t%q,\n", g)
		}
	}
	n := max(len(got), len(want))
	for i := range n {
		switch {
		case i >= len(got):
			t.Errorf("missing result %d: %s", i, want[i])
		case i >= len(want):
			t.Errorf("unexpected result %d: %s", i, got[i])
		case !match(got[i], want[i]):
			t.Errorf("result %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

type readCase struct {
	file   string
	opts   ReadOptions
	format Format   // detected or chosen
	want   []string // entries and problems, in order; "fatal ~text" last
	newErr string   // NewReader fails with this text
}

func runReadCases(t *testing.T, cases []readCase) {
	t.Helper()
	for _, tc := range cases {
		name := strings.TrimSuffix(tc.file, filepath.Ext(tc.file))
		if tc.opts.Format != FormatAuto {
			name += "/" + string(tc.opts.Format)
		}
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "read", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			format, got, err := readAll(t, tc.file, f, tc.opts)
			if tc.newErr != "" || err != nil {
				if err == nil || tc.newErr == "" || !strings.Contains(err.Error(), tc.newErr) {
					t.Fatalf("NewReader error %v, want one with %q", err, tc.newErr)
				}
				if !strings.Contains(err.Error(), tc.file) {
					t.Errorf("error does not name the source: %v", err)
				}
				return
			}
			if format != tc.format {
				t.Errorf("format %q, want %q", format, tc.format)
			}
			checkResults(t, got, tc.want)
		})
	}
}
