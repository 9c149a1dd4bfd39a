package mapping

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewReader_Presets(t *testing.T) {
	runReadCases(t, []readCase{
		// BOM, quoted comma, comma-separated tags, 25:30:00, a repeated row.
		{file: "toggl_basic.csv", format: FormatToggl, want: []string{
			`@2 id=toggl-00ef818dc00a2d4a email=ann@example.com name=Ann Berg date=2024-03-04 hours=30600s type=Design project=Website tags=overtime|onsite billable=true description="Header, footer" fields={billable_amount=425.00, client=Acme, currency=EUR, end_date=2024-03-04, end_time=17:30:00, start_time=09:00:00}`,
			`@3 id=toggl-d7a698389cf932be email=ann@example.com name=Ann Berg date=2024-03-05 hours=1200s project=Website billable=false description="Standup" fields={billable_amount=0.00, client=Acme, currency=EUR, end_date=2024-03-05, end_time=09:20:00, start_time=09:00:00}`,
			`@4 id=toggl-b38133760fee9999 email=bo@example.com name=Bo Lund date=2024-03-05 hours=91800s type=On call project=Ops billable=false description="Night shift" fields={end_date=2024-03-06, end_time=23:30:00, start_time=22:00:00}`,
			`@5 id=toggl-d7a698389cf932be-2 email=ann@example.com name=Ann Berg date=2024-03-05 hours=1200s project=Website billable=false description="Standup" fields={billable_amount=0.00, client=Acme, currency=EUR, end_date=2024-03-05, end_time=09:20:00, start_time=09:00:00}`,
		}},
		// Another order, lower case, another currency, decimal durations, an extra column.
		{file: "toggl_reordered.csv", format: FormatToggl, want: []string{
			`@2 id=toggl-a3bf8c10f16771cf email=ann@example.com name=Ann Berg date=2024-03-04 hours=27000s type=Design project=Website billable=true description="Work" fields={billable_amount=750.00, currency=USD, invoice=INV-1}`,
			`@3 id=toggl-11de8a5a04d9249b email=ann@example.com name=Ann Berg date=2024-03-05 hours=4500s type=Design project=Website billable=false description="More"`,
		}},
		{file: "toggl_decimal_comma.csv", format: FormatToggl, opts: ReadOptions{DecimalComma: true}, want: []string{
			`@2 id=toggl-bd2c6b89acfe04df email=ann@example.com name=Ann Berg date=2024-03-04 hours=27000s type=Design project=Website tags=a billable=true description="Work" fields={billable_amount=1000,00, currency=DKK, end_date=2024-03-04, end_time=16:30:00, start_time=09:00:00}`,
		}},
		{file: "toggl_bad.csv", format: FormatToggl, want: []string{
			`@2 problem id=toggl-fdf7e26e8c229fb2 field=Start date ~"2024-03-32" is not a date in the format YYYY-MM-DD`,
			`@3 problem id=toggl-bd2c6b89acfe04df field=Duration ~"8h30" is not a decimal number`,
			`@4 problem ~row has 8 fields, header has 14`,
			`@5 problem ~bare quote`,
			`@6 problem id=toggl-e680d6556d3bd14a field=User ~no user or email`,
			`@7 id=toggl-bd2c6b89acfe04df-2 email=ann@example.com name=Ann Berg date=2024-03-04 hours=30600s type=Design project=Website description="Work" fields={billable=maybe, client=Acme, end_date=2024-03-04, end_time=17:30:00, start_time=09:00:00}`,
			`@8 id=toggl-bd2c6b89acfe04df-3 email=ann@example.com name=Ann Berg date=2024-03-04 hours=1200s type=Design project=Website billable=true description="Work" fields={client=Acme, end_date=2024-03-04, end_time=09:20:00, start_time=09:00:00}`,
		}},
		{file: "toggl_missing.csv", opts: ReadOptions{Format: FormatToggl}, newErr: "not a Toggl Track detailed report: missing columns Duration (header: User, Email, Project, Start date, Start time)"},
		// US dates with the workspace's format; Duration (h) is exact where
		// Duration (decimal) is rounded (0:20:00 is 1200 s, not 0.33 h).
		{file: "clockify_basic.csv", format: FormatClockify, opts: ReadOptions{DateFormat: "MM/DD/YYYY"}, want: []string{
			`@2 id=clockify-78cf7dcbf2c2d60e email=ann@example.com name=Ann Berg date=2024-03-04 hours=30600s type=Design project=Website tags=overtime|onsite billable=true description="Header work" fields={billable_amount=425.00, billable_rate=50.00, client=Acme, currency=USD, end_date=03/04/2024, end_time=05:30:00 PM, group=Team A, start_time=09:00:00 AM}`,
			`@3 id=clockify-24755d70c7eb6bd4 email=bo@example.com name=Bo Lund date=2024-03-05 hours=91800s project=Ops billable=false description="Night shift" fields={billable_amount=0.00, billable_rate=0.00, currency=USD, end_date=03/06/2024, end_time=11:30:00 PM, start_time=10:00:00 PM}`,
			`@4 id=clockify-498eadca78763199 email=bo@example.com name=Bo Lund date=2024-03-07 hours=1200s project=Ops billable=false description="Standup" fields={end_date=03/07/2024, end_time=09:20:00 AM, start_time=09:00:00 AM}`,
			`@5 id=clockify-2ee337366d015352 email=bo@example.com name=Bo Lund date=2024-03-08 hours=1800s project=Ops billable=false description="Standup" fields={end_date=03/08/2024, end_time=09:20:00 AM, start_time=09:00:00 AM}`,
		}},
		// Without the date format: each US date is a problem that says what to set.
		{file: "clockify_basic.csv", format: FormatClockify, want: []string{
			`@2 problem id=clockify-2cad576ac412777b field=Start Date ~"03/04/2024" is not a date in the format YYYY-MM-DD (Clockify writes dates in the workspace's date format: set --date-format`,
			`@3 problem id=clockify-426b9fb014c37366 field=Start Date ~--date-format`,
			`@4 problem id=clockify-c85e5877f23a42a7 field=Start Date ~--date-format`,
			`@5 id=clockify-2ee337366d015352 email=bo@example.com name=Bo Lund date=2024-03-08 hours=1800s project=Ops billable=false description="Standup" fields={end_date=03/08/2024, end_time=09:20:00 AM, start_time=09:00:00 AM}`,
		}},
		// ';', decimal comma, Duration (decimal) only, cost columns.
		{file: "clockify_decimal.csv", format: FormatClockify, opts: ReadOptions{DecimalComma: true, DateFormat: "DD.MM.YYYY"}, want: []string{
			`@2 id=clockify-8b17844d3b440054 email=ann@example.com name=Ann Berg date=2024-03-04 hours=27000s type=Design project=Website tags=a billable=true description="Work" fields={client=Acme, cost_amount=300,00, cost_rate=40,00, currency=EUR, end_date=04.03.2024, end_time=16:30, start_time=09:00}`,
			`@3 id=clockify-73f59df9300c669e email=ann@example.com name=Ann Berg date=2024-03-05 hours=1188s type=Design project=Website billable=true description="Work" fields={client=Acme, end_date=05.03.2024, end_time=09:20, start_time=09:00}`,
			`@4 problem id=clockify-d3b37b72e186840e field=Duration (decimal) ~"0.33": a decimal comma was configured, but the value has a dot`,
		}},
		{file: "clockify_missing.csv", opts: ReadOptions{Format: FormatClockify}, newErr: "not a Clockify detailed report: missing columns Duration (h) or Duration (decimal)"},
		// CRLF, Employee Id and Teams, M/D/YYYY, a quoted newline, the
		// same row three times (three real entries).
		{file: "harvest_basic.csv", format: FormatHarvest, want: []string{
			`@2 id=harvest-4980542d61efdff2 number=E-17 name=Ann Berg date=2024-03-04 hours=27000s type=Design project=Website billable=true approved=true description="Header, footer" fields={billable_amount=750, billable_rate=100, client=Acme, cost_amount=375, cost_rate=50, currency=Euro - EUR, employee=Yes, hours_rounded=7.5, invoiced=No, project_code=WEB, roles=Designer, teams=Team A}`,
			`@3 id=harvest-4980542d61efdff2-2 number=E-17 name=Ann Berg date=2024-03-04 hours=27000s type=Design project=Website billable=true approved=true description="Header, footer" fields={billable_amount=750, billable_rate=100, client=Acme, cost_amount=375, cost_rate=50, currency=Euro - EUR, employee=Yes, hours_rounded=7.5, invoiced=No, project_code=WEB, roles=Designer, teams=Team A}`,
			`@4 id=harvest-486233b09d2e5460 name=Bo Lund date=2024-03-05 hours=1188s type=Support project=Ops billable=false approved=false description="Line one\nline two" fields={billable_amount=0, billable_rate=0, client=Acme, cost_amount=13.2, cost_rate=40, currency=Euro - EUR, employee=Yes, external_reference_url=https://example.com/t/1, hours_rounded=0.5, invoiced=No, project_code=OPS}`,
			`@6 id=harvest-4980542d61efdff2-3 number=E-17 name=Ann Berg date=2024-03-04 hours=27000s type=Design project=Website billable=true approved=true description="Header, footer" fields={billable_amount=750, billable_rate=100, client=Acme, cost_amount=375, cost_rate=50, currency=Euro - EUR, employee=Yes, hours_rounded=7.5, invoiced=No, project_code=WEB, roles=Designer, teams=Team A}`,
		}},
		{file: "harvest_plain.csv", format: FormatHarvest, want: []string{
			`@2 id=harvest-6833c2acb8b16207 name=Ann Berg date=2024-03-04 hours=91800s type=Design project=Website billable=false approved=false fields={billable_amount=0, billable_rate=0, client=Acme, cost_amount=0, cost_rate=0, currency=Euro - EUR, employee=Yes, hours_rounded=25.5, invoiced=No, project_code=WEB}`,
			`@3 problem ~row has 22 fields, header has 21`,
			`@4 problem id=harvest-adc1463569885228 field=Date ~"2024-02-30" is not a date in the format YYYY-MM-DD or M/D/YYYY`,
			`@5 problem id=harvest-6833c2acb8b16207-2 field=Hours ~"1.5x" is not a decimal number`,
			`@6 problem id=harvest-5403ff74ef9ea509 field=First Name ~no first or last name`,
		}},
		{file: "harvest_missing.csv", opts: ReadOptions{Format: FormatHarvest}, newErr: "not a Harvest detailed time report: missing columns Last Name"},
	})
}

// Re-reading a file gives the same ids: the dedupe key must not change.
func TestNewReader_PresetIDsStable(t *testing.T) {
	for _, file := range []string{"toggl_basic.csv", "clockify_basic.csv", "harvest_basic.csv"} {
		read := func() []string {
			f, err := os.Open(filepath.Join("testdata", "read", file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, got, err := readAll(t, file, f, ReadOptions{DateFormat: "MM/DD/YYYY"})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		a, b := read(), read()
		checkResults(t, b, a)
	}
}

func TestOccurrences(t *testing.T) {
	var o occurrences
	for k := uint64(0); k < 5000; k++ {
		if n := o.add(k * 0x9E3779B97F4A7C15); n != 1 {
			t.Fatalf("key %d: first add returned %d", k, n)
		}
	}
	for k := uint64(0); k < 5000; k += 7 {
		if n := o.add(k * 0x9E3779B97F4A7C15); n != 2 {
			t.Fatalf("key %d: second add returned %d", k, n)
		}
	}
	if n := o.add(0); n != 3 {
		t.Fatalf("key 0 (stored as 1) third add returned %d", n)
	}
	if len(o.slots) != 8192 {
		t.Errorf("%d slots for 5000 keys, want 8192", len(o.slots))
	}
}

func TestFieldKey(t *testing.T) {
	for in, want := range map[string][2]string{
		"billable rate (usd)":    {"billable_rate", "USD"},
		"external reference url": {"external_reference_url", ""},
		"employee?":              {"employee", ""},
		"amount ()":              {"amount", ""},
		"cost (per hour)":        {"cost_per_hour", ""},
		"--":                     {"--", ""},
	} {
		k, c := fieldKey(in)
		if k != want[0] || c != want[1] {
			t.Errorf("fieldKey(%q) = %q, %q; want %q, %q", in, k, c, want[0], want[1])
		}
	}
}

// A Japanese Toggl workspace and a 2016 export: localized yes/no and
// unpadded dates are read; a yes/no the reader cannot read keeps the row,
// with the text in Fields for the mapper (which needs it only when a rule
// does).
func TestNewReader_PresetLenient(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"toggl japanese billable", "User,Email,Billable,Start date,Start time,Duration\nA,a@x,いいえ,2024-03-04,09:00:00,1:00:00\nA,a@x,はい,2024-03-05,09:00:00,1:00:00\n", []string{
			`@2 id=toggl-9d896244b014e3e5 email=a@x name=A date=2024-03-04 hours=3600s billable=false fields={start_time=09:00:00}`,
			`@3 id=toggl-bc7d182bd4435e82 email=a@x name=A date=2024-03-05 hours=3600s billable=true fields={start_time=09:00:00}`,
		}},
		{"toggl 2016 unpadded date", "User,Email,Billable,Start date,Start time,Duration\nA,a@x,No,2016-01-1,09:00:00,1:00:00\nA,a@x,No,2016-01-01,09:00:00,1:00:00\n", []string{
			`@2 id=toggl-2b09a52756001791 email=a@x name=A date=2016-01-01 hours=3600s billable=false fields={start_time=09:00:00}`,
			// One date, one natural key: the padded twin is a repeat.
			`@3 id=toggl-2b09a52756001791-2 email=a@x name=A date=2016-01-01 hours=3600s billable=false fields={start_time=09:00:00}`,
		}},
		{"clockify unknown billable kept", "User,Email,Billable,Start Date,Duration (h)\nA,a@x,Kanske,2024-03-04,1:00:00\n", []string{
			`@2 id=clockify-3034518ce87fce44 email=a@x name=A date=2024-03-04 hours=3600s fields={billable=Kanske}`,
		}},
		{"harvest localized and unknown", "Date,Hours,First Name,Last Name,Billable?,Approved?\n2024-3-4,1,A,B,Ja,peut-être\n3/5/2024,1,A,B,non,oui\n", []string{
			`@2 id=harvest-2d3784c0b4b813d9 name=A B date=2024-03-04 hours=3600s billable=true fields={approved=peut-être}`,
			`@3 id=harvest-d6128c6806b53240 name=A B date=2024-03-05 hours=3600s billable=false approved=true`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := readAll(t, "in.csv", strings.NewReader(tc.in), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, got, tc.want)
		})
	}
}
