package mapping

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestNewReader_Detect(t *testing.T) {
	const (
		toggl    = "User,Email,Client,Project,Task,Description,Billable,Start date,Start time,End date,End time,Duration,Tags,Amount (EUR)\n"
		clockify = "Project,Client,Description,Task,User,Group,Email,Tags,Billable,Start Date,Start Time,End Date,End Time,Duration (h),Duration (decimal),Billable Rate (USD),Billable Amount (USD)\n"
		harvest  = "Date,Client,Project,Project Code,Task,Notes,Hours,Hours Rounded,Billable?,Invoiced?,Approved?,First Name,Last Name,Roles,Employee?,Billable Rate,Billable Amount,Cost Rate,Cost Amount,Currency,External Reference URL\n"
		entry    = `{"id":"1","employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}`
	)
	cases := []struct {
		name   string
		in     string
		opts   ReadOptions
		want   Format
		newErr string
	}{
		{name: "array", in: "[" + entry + "]", want: FormatJSON},
		{name: "array after BOM and space", in: "\uFEFF \n\t[" + entry + "]", want: FormatJSON},
		{name: "wrapper", in: `{"entries": [` + entry + `]}`, want: FormatJSON},
		{name: "wrapper pretty", in: "{\n  \"entries\":\n [" + entry + "]}", want: FormatJSON},
		{name: "wrapper key later", in: `{"source": "x", "entries": [` + entry + "]}", want: FormatJSON},
		{name: "ndjson", in: entry + "\n" + entry + "\n", want: FormatNDJSON},
		{name: "ndjson crlf with BOM", in: "\uFEFF" + entry + "\r\n" + entry, want: FormatNDJSON},
		{name: "one object on one line", in: entry, want: FormatNDJSON},
		{name: "pretty object", in: "{\n  \"id\": \"1\"\n}\n", want: FormatJSON},
		{name: "object split over lines", in: `{"id": "1",` + "\n" + `"date": "2024-03-04"}`, want: FormatJSON},
		{name: "two objects on a line", in: entry + entry + "\n", want: FormatJSON},
		{name: "toggl", in: toggl, want: FormatToggl},
		{name: "toggl with BOM", in: "\uFEFF" + toggl, want: FormatToggl},
		{name: "toggl lower case, semicolons", in: strings.ToLower(strings.ReplaceAll(toggl, ",", ";")), want: FormatToggl},
		{name: "toggl tabs, CRLF", in: strings.ReplaceAll(strings.ReplaceAll(toggl, ",", "\t"), "\n", "\r\n"), want: FormatToggl},
		{name: "clockify", in: clockify, want: FormatClockify},
		{name: "clockify decimal only", in: "User;Email;Start Date;Duration (decimal)\n", want: FormatClockify},
		{name: "harvest", in: harvest, want: FormatHarvest},
		{name: "harvest with employee id", in: strings.TrimSuffix(harvest, "\n") + ",Employee Id,Teams\n", want: FormatHarvest},
		{name: "generic", in: "id,employee_id,date,hours\n", want: FormatCSV},
		{name: "generic after blank lines", in: "\n\n id;employee_id;date;hours\n", want: FormatCSV},
		{name: "forced csv", in: "id,employee_id,date,hours,User,Email,Start date,Duration\n", opts: ReadOptions{Format: FormatCSV}, want: FormatCSV},
		{name: "forced toggl, name in other case", in: toggl, opts: ReadOptions{Format: " Toggl "}, want: FormatToggl},
		{name: "forced ndjson on empty input", in: "", opts: ReadOptions{Format: FormatNDJSON}, want: FormatNDJSON},
		{name: "empty", in: "", newErr: "in: empty input"},
		{name: "only a BOM", in: "\uFEFF", newErr: "in: empty input"},
		{name: "only white space", in: " \r\n\t", newErr: "in: empty input"},
		{name: "forced json on empty input", in: "\n", opts: ReadOptions{Format: FormatJSON}, newErr: "in: empty input"},
		{name: "forced csv on empty input", in: "", opts: ReadOptions{Format: FormatCSV}, newErr: "in: empty input: want a CSV header"},
		{name: "unknown format", in: entry, opts: ReadOptions{Format: "yaml"}, newErr: `in: unknown format "yaml": want one of json, ndjson, csv, toggl, clockify, harvest`},
		{name: "bad delimiter", in: "id,employee_id,date,hours\n", opts: ReadOptions{Delimiter: '"'}, newErr: "delimiter"},
		{name: "unreadable", in: "", opts: ReadOptions{Format: "x"}, newErr: "unknown format"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, f, err := NewReader("in", strings.NewReader(tc.in), tc.opts)
			if tc.newErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.newErr) {
					t.Fatalf("error %v, want one with %q", err, tc.newErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f != tc.want {
				t.Errorf("format %q, want %q", f, tc.want)
			}
		})
	}
}

// Detection reads no more than it needs: one byte at a time is enough,
// and a source that fails is a fatal error naming it.
func TestNewReader_DetectSlowAndFailingInput(t *testing.T) {
	in := `{"id":"1","employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}` + "\n"
	rd, f, err := NewReader("slow", iotest.OneByteReader(strings.NewReader(in+in)), ReadOptions{})
	if err != nil || f != FormatNDJSON {
		t.Fatalf("format %q, error %v", f, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("got %v, want EOF", err)
	}

	_, _, err = NewReader("broken", iotest.ErrReader(io.ErrClosedPipe), ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "broken: io: read/write on closed pipe") {
		t.Fatalf("error %v", err)
	}
	// A failure after the header is fatal too, and sticks.
	r := io.MultiReader(strings.NewReader("id,employee_id,date,hours\n1,E1,2024-03-04,1\n"), iotest.ErrReader(io.ErrClosedPipe))
	rd, _, err = NewReader("broken", r, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := rd.Next(); err == nil || err == io.EOF || !strings.Contains(err.Error(), "broken") {
			t.Fatalf("got %v, want the read error", err)
		}
	}
}

func TestDetectDelimiter(t *testing.T) {
	for in, want := range map[string]rune{
		"a,b,c":         ',',
		"a;b;c":         ';',
		"a\tb\tc":       '\t',
		"a;b,c;d":       ';',
		"abc":           ',',
		`"a,b";c;d`:     ';',
		"a,b;c":         ',', // a tie goes to the comma
		"x\ty,z\tw,v\t": '\t',
	} {
		if got := detectDelimiter([]byte(in)); got != want {
			t.Errorf("detectDelimiter(%q) = %q, want %q", in, got, want)
		}
	}
}

// A record larger than maxRecordBytes (an unbalanced quote swallowing the
// file, a line without end) is fatal instead of filling memory.
func TestNewReader_RecordTooLarge(t *testing.T) {
	defer func(n int64) { maxRecordBytes = n }(maxRecordBytes)
	maxRecordBytes = 256 << 10
	big := bytes.Repeat([]byte("x"), 1<<20)
	cases := map[string]string{
		"csv":             "id,employee_id,date,hours\n1,E1,2024-03-04,1\n2,\"" + string(big) + "\n",
		"csv first field": "id,employee_id,date,hours\n1,E1,2024-03-04,1\n\"" + string(big) + "\n",
		"ndjson":          `{"id":"1","employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}` + "\n" + `{"id":"` + string(big) + "\n",
		"json":            `[{"id":"1","employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}, {"id":"` + string(big) + `"}]`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, got, err := readAll(t, "big", strings.NewReader(in), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || !strings.HasPrefix(got[0], "@") || !strings.Contains(got[1], "fatal ~big") || !strings.Contains(got[1], "larger than") {
				t.Fatalf("got %q", got)
			}
		})
	}
}

// Lines longer than the read buffer are read whole.
func TestNewReader_LongLines(t *testing.T) {
	long := strings.Repeat("y", 200<<10)
	in := `{"id":"1","employee_id":"E1","date":"2024-03-04","hours":1,"type":"t","note":"` + long + `"}` + "\n" +
		`{"id":"2","employee_id":"E1","date":"2024-03-04","hours":2,"type":"t"}`
	rd, f, err := NewReader("long", strings.NewReader(in), ReadOptions{})
	if err != nil || f != FormatJSON { // the first line does not fit the peek
		t.Fatalf("format %q, error %v", f, err)
	}
	for i, want := range []int{1, 2} {
		e, err := rd.Next()
		if err != nil || e.Line != want || (i == 0 && e.Fields["note"] != long) {
			t.Fatalf("entry %d: line %d, error %v", i, e.Line, err)
		}
	}
	rd, _, err = NewReader("long", strings.NewReader(in), ReadOptions{Format: FormatNDJSON})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 2} {
		e, err := rd.Next()
		if err != nil || e.Line != want || (i == 0 && e.Fields["note"] != long) {
			t.Fatalf("ndjson entry %d: line %d, error %v", i, e.Line, err)
		}
	}
	csvIn := "id,employee_id,date,hours,note\n1,E1,2024-03-04,1," + long + "\n2,E1,2024-03-04,1,x\n"
	_, got, err := readAll(t, "long.csv", strings.NewReader(csvIn), ReadOptions{})
	if err != nil || len(got) != 2 || !strings.HasPrefix(got[1], "@3 id=2") {
		t.Fatalf("csv: %v %.100q", err, got)
	}
}
