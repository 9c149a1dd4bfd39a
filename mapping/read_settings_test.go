package mapping

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// readSettled reads every entry of input, returning the names, the dates,
// the notes and the first fatal error.
func readSettled(t *testing.T, input []byte, opts ReadOptions) (names, dates, notes []string, err error) {
	t.Helper()
	rd, _, err := NewReader("in", bytes.NewReader(input), opts)
	if err != nil {
		return nil, nil, nil, err
	}
	if n, ok := rd.(Noter); ok {
		notes = n.Notes()
	}
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return names, dates, notes, nil
		}
		var p *Problem
		if errors.As(err, &p) {
			return names, dates, notes, p
		}
		if err != nil {
			return names, dates, notes, err
		}
		names, dates = append(names, e.Name), append(dates, e.Date)
	}
}

// TestNewReader_Encoding: UTF-8 with or without a byte order mark,
// Windows-1252 and ISO-8859-1, detected or declared, and never a silent
// U+FFFD: invalid UTF-8 after the sniffed beginning stops the read with
// its line and the setting.
func TestNewReader_Encoding(t *testing.T) {
	const head = "id;name;date;hours;type\n"
	cp1252 := []byte(head + "1;S\xf8ren \xd8stergaard;2026-11-02;7;t\n")
	utf := []byte(head + "1;Søren Østergaard;2026-11-02;7;t\n")
	// Valid UTF-8 for more than the sniffed 64 KiB, then a Windows-1252 row.
	var late bytes.Buffer
	late.WriteString(head)
	n := 2
	for ; late.Len() < peekSize+1000; n++ {
		late.WriteString("1;Søren Østergaard;2026-11-02;7;t\n")
	}
	late.Write([]byte("2;S\xf8ren;2026-11-02;7;t\n"))
	for _, tc := range []struct {
		name     string
		in       []byte
		enc      Encoding
		wantName string
		wantNote string
		wantErr  []string
	}{
		{"utf-8", utf, EncodingAuto, "Søren Østergaard", "", nil},
		{"utf-8 with a byte order mark", append([]byte("\uFEFF"), utf...), EncodingAuto, "Søren Østergaard", "", nil},
		{"windows-1252 detected", cp1252, EncodingAuto, "Søren Østergaard", "in: read as Windows-1252 (detected); set --encoding, PAYSYNC_ENCODING or the rules' read.encoding to declare it", nil},
		{"windows-1252 declared", cp1252, EncodingWindows1252, "Søren Østergaard", "", nil},
		{"iso-8859-1 declared", cp1252, EncodingLatin1, "Søren Østergaard", "", nil},
		{"utf-8 declared, windows-1252 given", cp1252, EncodingUTF8, "", "", []string{"line 2: not valid UTF-8", "PAYSYNC_ENCODING", "read.encoding"}},
		{"invalid after the sniffed beginning", late.Bytes(), EncodingAuto, "", "", []string{"in: line " + itoa(n) + ": not valid UTF-8", "--encoding"}},
		{"a byte order mark with windows-1252 declared", append([]byte("\uFEFF"), utf...), EncodingWindows1252, "", "", []string{"byte order mark", "PAYSYNC_ENCODING"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, _, notes, err := readSettled(t, tc.in, ReadOptions{Encoding: tc.enc})
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; read %d names", len(names))
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				for _, nm := range names {
					if strings.ContainsRune(nm, '\uFFFD') {
						t.Errorf("read %q: a silent U+FFFD", nm)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(names) == 0 || names[0] != tc.wantName {
				t.Errorf("names %q, want %q", names, tc.wantName)
			}
			if got := strings.Join(notes, "\n"); got != tc.wantNote {
				t.Errorf("notes %q, want %q", got, tc.wantNote)
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// TestNewReader_TimeZone: a timestamp with an offset falls on its date in
// the time zone of the export (UTC by default): JSON "start" without a
// "date", and a CSV date cell.
func TestNewReader_TimeZone(t *testing.T) {
	cph, err := loadZone("Europe/Copenhagen")
	if err != nil {
		t.Fatal(err)
	}
	json := []byte(`{"id":"1","name":"A","start":"2026-11-02T23:30:00Z","hours":1,"type":"t"}` + "\n" +
		`{"id":"2","name":"A","start":"2026-11-02T23:30:00-05:00","hours":1,"type":"t"}` + "\n" +
		`{"id":"3","name":"A","date":"2026-11-02","start":"2026-11-02T23:30:00Z","hours":1,"type":"t"}` + "\n")
	csv := []byte("id,name,date,hours\n1,A,2026-11-02T23:30:00Z,1\n2,A,2026-11-02,1\n")
	for _, tc := range []struct {
		name string
		in   []byte
		opts ReadOptions
		want string
	}{
		{"json, UTC", json, ReadOptions{}, "2026-11-02 2026-11-03 2026-11-02"},
		{"json, Copenhagen", json, ReadOptions{TimeZone: cph}, "2026-11-03 2026-11-03 2026-11-02"},
		{"csv, UTC", csv, ReadOptions{}, "2026-11-02 2026-11-02"},
		{"csv, Copenhagen", csv, ReadOptions{TimeZone: cph}, "2026-11-03 2026-11-02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dates, _, err := readSettled(t, tc.in, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(dates, " "); got != tc.want {
				t.Errorf("dates %s, want %s", got, tc.want)
			}
		})
	}
	_, _, _, err = readSettled(t, []byte(`{"id":"1","name":"A","start":"2026-11-02T23:30:00","hours":1,"type":"t"}`), ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "not a time with a UTC offset") {
		t.Errorf("start without an offset and no date: %v", err)
	}
}

// TestEffectiveReadOptions: flag or variable over the rules' block for
// the format read over its general block over the defaults, per setting;
// NewReader applies the format's block once it has detected the format.
func TestEffectiveReadOptions(t *testing.T) {
	rules, err := LoadRules("rules.yaml", strings.NewReader(`
read:
  date_format: DD.MM.YYYY
  decimal_comma: true
  clockify:
    date_format: MM/DD/YYYY
rules:
  - {name: all, default: true, code: T1, units: hours}
`))
	if err != nil {
		t.Fatal(err)
	}
	off := false
	for _, tc := range []struct {
		name     string
		format   Format
		override ReadSettings
		date     string
		comma    bool
	}{
		{"general block", FormatCSV, ReadSettings{}, "DD.MM.YYYY", true},
		{"format block", FormatClockify, ReadSettings{}, "MM/DD/YYYY", true},
		{"override over the format block", FormatClockify, ReadSettings{DateFormat: "YYYY-MM-DD", DecimalComma: &off}, "YYYY-MM-DD", false},
		{"detected later", FormatAuto, ReadSettings{}, "DD.MM.YYYY", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := EffectiveReadOptions(tc.format, tc.override, rules)
			if err != nil {
				t.Fatal(err)
			}
			o = o.ForFormat(tc.format)
			if o.DateFormat != tc.date || o.DecimalComma != tc.comma {
				t.Errorf("date_format %q decimal_comma %t, want %q %t", o.DateFormat, o.DecimalComma, tc.date, tc.comma)
			}
		})
	}
	// Detected: a Clockify export with US dates reads by its block.
	o, _ := EffectiveReadOptions(FormatAuto, ReadSettings{}, rules)
	clockify := "Project,Description,User,Email,Start Date,Start Time,Duration (h)\nP,D,Ann,ann@example.com,11/13/2026,09:00:00 AM,\"1,5\"\n"
	_, dates, _, err := readSettled(t, []byte(clockify), o)
	if err != nil || strings.Join(dates, " ") != "2026-11-13" {
		t.Errorf("detected Clockify: dates %v, %v; want 2026-11-13", dates, err)
	}
	if _, err := EffectiveReadOptions(FormatAuto, ReadSettings{TimeZone: "Mars/Olympus"}, rules); err == nil ||
		!strings.Contains(err.Error(), "--time-zone, PAYSYNC_TIME_ZONE or the rules' read.time_zone") {
		t.Errorf("a bad time zone: %v", err)
	}
}

// TestLoadRules_ReadBlock: each bad read: setting is a problem with its
// line and key.
func TestLoadRules_ReadBlock(t *testing.T) {
	_, err := LoadRules("rules.yaml", strings.NewReader(`read:
  date_format: YYYY-QQ-DD
  decimal_comma: maybe
  delimiter: ";;"
  encoding: ebcdic
  time_zone: Mars/Olympus
  colour: blue
  toggl:
    encoding: utf-16
  csv: [1]
rules:
  - {name: all, default: true, code: T1, units: hours}
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"rules.yaml:2: read.date_format:", "rules.yaml:3: read.decimal_comma:", "rules.yaml:4: read.delimiter:",
		"rules.yaml:5: read.encoding:", "rules.yaml:6: read.time_zone:", `rules.yaml:7: read.colour: unknown key "colour"`,
		"rules.yaml:9: read.toggl.encoding:", "rules.yaml:10: read.csv:",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
