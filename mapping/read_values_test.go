package mapping

import (
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// The fast paths give exactly what paysync.ParseDecimal and ParseHours
// give, errors included.
func TestParseDecimal_MatchesPaysync(t *testing.T) {
	inputs := []string{
		"0", "7", "7.5", "-7.5", "0.1", "007.50", "123456789012345678", "1234567890123456789",
		"12345678901234567.8", "-0", "7,5", "1.234,5", "1,234.5", ".5", "5.", "-", "", " 7.5 ", "+7.5",
		"7.5.1", "1e3", "abc", "7,5,1", "-,5", "0,000001", "99999999999999999999.5",
	}
	for _, in := range inputs {
		for _, comma := range []bool{false, true} {
			got, gotErr := parseDecimal(strings.TrimSpace(in), comma)
			want, wantErr := paysync.ParseDecimal(strings.TrimSpace(in), comma)
			if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && !got.Equal(want)) {
				t.Errorf("parseDecimal(%q, %v) = %v, %v; paysync: %v, %v", in, comma, got, gotErr, want, wantErr)
			}
			if gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("parseDecimal(%q, %v) error %q, paysync %q", in, comma, gotErr, wantErr)
			}
		}
	}
}

func TestParseHours_MatchesPaysync(t *testing.T) {
	inputs := []string{
		"0:20:00", "0:20", "25:30:00", "7:30", "-0:20", "-1:00:01", "123456789:59:59", "1234567890:00",
		"1:5", "1:60", "1:00:60", "1:00:00:00", ":30", "1:", "+1:00", "7.5", "7,5", "0.1", "-1.25",
		"1e2", "", "x", "1:3O", "٣:00",
	}
	for _, in := range inputs {
		for _, comma := range []bool{false, true} {
			got, gotErr := parseHours(in, comma)
			want, wantErr := paysync.ParseHours(in, comma)
			if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && (!got.Seconds.Equal(want.Seconds) || !got.Valid)) {
				t.Errorf("parseHours(%q, %v) = %v, %v; paysync: %v, %v", in, comma, got.Seconds, gotErr, want.Seconds, wantErr)
			}
		}
	}
	// Clock durations are exact seconds; no decimal rounding.
	for in, secs := range map[string]int64{"0:20:00": 1200, "25:30:00": 91800, "0:00:01": 1, "8:30": 30600} {
		h, err := parseHours(in, false)
		if err != nil || !h.Seconds.Equal(decimal.NewFromInt(secs)) {
			t.Errorf("parseHours(%q) = %v s, %v; want %d s", in, h.Seconds, err, secs)
		}
	}
}

// Values come through every reader exactly: decimals compared with Equal,
// hours by their seconds.
func TestNewReader_ExactValues(t *testing.T) {
	d := decimal.RequireFromString
	cases := []struct {
		name, in            string
		opts                ReadOptions
		secs                string // hours in seconds, "" when absent
		units, rate, amount string
	}{
		{"json numbers", `{"id":"1","name":"A","date":"2024-03-04","hours":0.1,"units":0.1,"rate":0.30000000000000004,"amount":1e-2,"code":"c"}`, ReadOptions{}, "360", "0.1", "0.30000000000000004", "0.01"},
		{"json strings", `{"id":"1","name":"A","date":"2024-03-04","hours":"0:20:00","units":"0.1","rate":"12345678901234567890.123456789","amount":"-0.5","code":"c"}`, ReadOptions{}, "1200", "0.1", "12345678901234567890.123456789", "-0.5"},
		{"json hours only", `{"id":"1","name":"A","date":"2024-03-04","hours":"7.25","code":"c"}`, ReadOptions{}, "26100", "", "", ""},
		{"csv", "id,name,date,hours,units,rate,amount\n1,A,2024-03-04,0:20:00,0.1,0.30000000000000004,123456789012345678901.5\n", ReadOptions{}, "1200", "0.1", "0.30000000000000004", "123456789012345678901.5"},
		{"csv decimal comma", "id;name;date;hours;units;rate;amount\n1;A;2024-03-04;0,1;0,1;1234,5;-0,01\n", ReadOptions{DecimalComma: true}, "360", "0.1", "1234.5", "-0.01"},
		{"toggl", "User,Email,Start date,Duration\nA,a@x,2024-03-04,0:20:00\n", ReadOptions{}, "1200", "", "", ""},
		{"clockify exact over decimal", "User,Email,Start Date,Duration (h),Duration (decimal)\nA,a@x,2024-03-04,00:20:00,0.33\n", ReadOptions{}, "1200", "", "", ""},
		{"harvest", "Date,Hours,First Name,Last Name\n2024-03-04,0.1,A,B\n", ReadOptions{}, "360", "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rd, _, err := NewReader("x", strings.NewReader(tc.in), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			e, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			if tc.secs == "" {
				if e.Hours.Valid {
					t.Errorf("hours %v, want none", e.Hours.Seconds)
				}
			} else if !e.Hours.Valid || !e.Hours.Seconds.Equal(d(tc.secs)) {
				t.Errorf("hours %v s, want %s s", e.Hours.Seconds, tc.secs)
			}
			for _, c := range []struct {
				name string
				got  decimal.NullDecimal
				want string
			}{{"units", e.Units, tc.units}, {"rate", e.Rate, tc.rate}, {"amount", e.Amount, tc.amount}} {
				if c.want == "" {
					if c.got.Valid {
						t.Errorf("%s %v, want none", c.name, c.got.Decimal)
					}
				} else if !c.got.Valid || !c.got.Decimal.Equal(d(c.want)) {
					t.Errorf("%s %v, want %s", c.name, c.got.Decimal, c.want)
				}
			}
		})
	}
}

func TestDateLayout(t *testing.T) {
	cases := []struct {
		layout string
		in     map[string]string // input → YYYY-MM-DD, "" when refused
	}{
		{"YYYY-MM-DD", map[string]string{"2024-03-04": "2024-03-04", "2024-02-29": "2024-02-29", "2023-02-29": "", "2000-02-29": "2000-02-29",
			"1900-02-29": "", "2024-04-31": "", "2024-00-10": "", "2024-01-00": "", "2024-03-04 ": "", "": "", "20240304": "",
			// Unpadded month or day: unambiguous between separators.
			"2016-01-1": "2016-01-01", "2016-1-01": "2016-01-01", "2024-3-4": "2024-03-04", "2024-2-30": "",
			"2024-003-04": "", "2024-03-004": "", "2024--4": "", "2024-3-": "", "2024-0-1": "", "24-3-4": "", "2024-3-4x": ""}},
		{"DD/MM/YYYY", map[string]string{"04/03/2024": "2024-03-04", "31/12/2024": "2024-12-31", "4/3/2024": "2024-03-04",
			"1/2/2026": "2026-02-01", "31/02/2024": "", "04/03/24": "", "1//2026": "", "1/13/2026": ""}},
		{"MM/DD/YYYY", map[string]string{"03/04/2024": "2024-03-04", "12/31/2024": "2024-12-31", "31/12/2024": "", "1/2/2026": "2026-01-02", "12/1/2026": "2026-12-01"}},
		{"DD.MM.YYYY", map[string]string{"04.03.2024": "2024-03-04", "04-03-2024": "", "4.3.2024": "2024-03-04"}},
		{"M/D/YYYY", map[string]string{"3/4/2024": "2024-03-04", "03/04/2024": "2024-03-04", "12/31/2024": "2024-12-31", "123/4/2024": "", "3//2024": ""}},
		{"d.m.yyyy", map[string]string{"4.3.2024": "2024-03-04"}},
		// Without separators an unpadded month or day is ambiguous: refused.
		{"YYYYMMDD", map[string]string{"20240304": "2024-03-04", "2024034": "", "202434": ""}},
		{"YYYYMM-DD", map[string]string{"202403-04": "2024-03-04", "202403-4": "2024-03-04", "20243-04": ""}},
	}
	for _, tc := range cases {
		l, err := parseDateLayout(tc.layout)
		if err != nil {
			t.Fatalf("%s: %v", tc.layout, err)
		}
		for in, want := range tc.in {
			got, ok := l.parse(in)
			if got != want || ok != (want != "") {
				t.Errorf("%s: parse(%q) = %q, %v; want %q", tc.layout, in, got, ok, want)
			}
		}
	}
	for _, bad := range []string{"YYYY-MM", "YY-MM-DD", "YYYY-MM-DD-DD", "YYYY-MMM-DD", "DD/MM/YYYY hh:mm", "YYYY-MM-DD2", "YYYY–MM–DD"} {
		if _, err := parseDateLayout(bad); err == nil {
			t.Errorf("parseDateLayout(%q) accepted", bad)
		}
	}
	if l, err := parseDateLayout(""); err != nil || !l.iso {
		t.Errorf("the empty layout is not ISO: %v", err)
	}
}

// A number that fails to parse because of its decimal separator names the
// setting that reads it (--decimal-comma).
func TestNewReader_DecimalCommaHint(t *testing.T) {
	cases := []struct {
		name, in string
		opts     ReadOptions
		want     string
	}{
		{"hours with a comma", "id,name,date,hours,type\n1,A,2024-03-04,\"7,5\",t\n", ReadOptions{}, "--decimal-comma"},
		{"rate with a comma", "id;name;date;hours;rate\n1;A;2024-03-04;7.5;215,75\n", ReadOptions{}, "--decimal-comma"},
		{"preset hours with a comma", "Date;Hours;First Name;Last Name\n2024-03-04;7,5;A;B\n", ReadOptions{}, "--decimal-comma"},
		{"a dot with the comma on", "id;name;date;hours\n1;A;2024-03-04;7.5\n", ReadOptions{DecimalComma: true}, "--decimal-comma"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rd, _, err := NewReader("x", strings.NewReader(tc.in), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = rd.Next()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Next() = %v, want a problem naming %s", err, tc.want)
			}
		})
	}
}

// Yes and no are read in the spellings the tools and their users write,
// without case; anything else is not a yes or no.
func TestParseYesNo(t *testing.T) {
	cases := map[string]int{ // 1 yes, 0 no, -1 refused
		"yes": 1, "Yes": 1, "YES": 1, "y": 1, "true": 1, "TRUE": 1, "1": 1, "ja": 1, "Ja": 1, "oui": 1, "sí": 1, "SÍ": 1, "si": 1, "はい": 1,
		"no": 0, "No": 0, "n": 0, "false": 0, "0": 0, "nej": 0, "Nej": 0, "nein": 0, "nei": 0, "non": 0, "いいえ": 0,
		"maybe": -1, "": -1, "2": -1, "yess": -1, "ja nej": -1, "x": -1, "-": -1,
	}
	for in, want := range cases {
		b, ok := parseYesNo(in)
		got := -1
		if ok {
			got = 0
			if b {
				got = 1
			}
		}
		if got != want {
			t.Errorf("parseYesNo(%q) = %v, %v; want %d", in, b, ok, want)
		}
	}
}
