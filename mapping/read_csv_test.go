package mapping

import (
	"strings"
	"testing"
)

func TestNewReader_CSV(t *testing.T) {
	dmy := ReadOptions{DecimalComma: true, DateFormat: "DD/MM/YYYY", Columns: map[string]string{
		"id": "Nr", "employee_id": "medarbejder", "date": "Dato", "hours": "Timer", "type": "Løntype",
		"tags": "Mærker", "billable": "Fakturerbar", "approved": "Godkendt"}}
	runReadCases(t, []readCase{
		{file: "csv_basic.csv", format: FormatCSV, want: []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=27000s type=normal project=Website",
			"@3 id=2 employee_id=E1 date=2024-03-05 hours=1200s type=normal project=Website",
			"@4 id=3 employee_id=E2 date=2024-03-05 hours=91800s type=oncall project=Ops",
			"@5 id=4 employee_id=E2 date=2024-02-29 hours=-4500s type=correction",
		}},
		// BOM, CRLF, blank lines, quoted comma, quoted newline and quotes.
		{file: "csv_bom_crlf.csv", format: FormatCSV, want: []string{
			`@3 id=a1 email=ann@example.com date=2024-03-04 hours=28800s type=normal tags=x|y description="Header, footer"`,
			`@5 id=a2 email=ann@example.com date=2024-03-05 hours=5400s type=normal tags=z description="Line one\nline two \"quoted\""`,
			`@7 id=a3 email=ann@example.com date=2024-03-06 hours=7200s type=normal description="plain"`,
		}},
		{file: "csv_decimal_comma.csv", opts: ReadOptions{DecimalComma: true, DateFormat: "DD.MM.YYYY"}, format: FormatCSV, want: []string{
			"@2 id=d1 number=17 date=2024-03-04 hours=27000s type=normal",
			"@3 id=d2 number=17 date=2024-03-05 units=2 rate=1234.56 type=km",
			"@4 id=d3 number=17 date=2024-03-06 hours=360s type=normal",
			"@5 problem id=d4 field=hours ~a decimal comma was configured, but the value has a dot",
		}},
		{file: "csv_missing_columns.csv", newErr: "missing columns: id, date (header: employee_id, day, hours, type"},
		{file: "csv_no_employee.csv", newErr: "missing columns: an employee column (employee_id, employee_number, email or name)"},
		{file: "csv_extra_column.csv", format: FormatCSV, want: []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=27000s type=normal fields={Cost Center=CC-1, km=12.5}",
			"@3 id=2 employee_id=E1 date=2024-03-05 hours=27000s type=normal fields={Cost Center=CC-2}",
		}},
		// Another order, other case, spaces around names.
		{file: "csv_reordered.csv", format: FormatCSV, want: []string{
			"@2 id=r1 employee_id=E1 date=2024-03-04 hours=27000s type=normal billable=false approved=true",
			"@3 id=r2 employee_id=E1 date=2024-03-05 hours=25200s type=normal billable=true",
		}},
		// Each bad row is a problem; reading goes on.
		{file: "csv_bad_rows.csv", format: FormatCSV, want: []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
			"@3 problem id=2 ~row has 4 fields, header has 5",
			"@4 problem id=3 field=date ~\"2024-13-05\" is not a date in the format YYYY-MM-DD (dates must be YYYY-MM-DD; set the date format (--date-format, PAYSYNC_DATE_FORMAT",
			"@5 problem id=4 field=hours ~\"7.5h\" is not a decimal number",
			"@6 problem ~bare quote",
			"@7 problem id=6 field=hours ~no hours, units, rate or amount",
			"@8 problem field=id ~no id",
			"@9 problem id=8 field=employee ~no employee reference",
			"@10 problem id=9 ~row has 6 fields, header has 5",
			"@11 id=10 employee_id=E1 date=2024-03-06 hours=3600s type=normal",
		}},
		{file: "csv_columns_map.csv", format: FormatCSV, opts: dmy, want: []string{
			"@2 id=m1 employee_id=E7 date=2024-03-04 hours=27000s type=normal tags=a|b|c billable=true approved=true",
			"@3 id=m5 employee_id=E7 date=2024-03-04 hours=27000s type=normal billable=true",
			"@4 id=m6 employee_id=E7 date=2024-03-04 hours=27000s type=normal fields={approved=måske, billable=vielleicht}",
			"@5 problem id=m2 field=Dato ~\"31/02/2024\" is not a date in the format DD/MM/YYYY or YYYY-MM-DD (dates must be DD/MM/YYYY",
			"@6 id=m3 employee_id=E7 date=2024-03-05 hours=27000s type=normal approved=true",
			"@7 id=m4 employee_id=E7 date=2024-03-06 hours=27000s type=normal billable=false approved=false",
			"@8 id=m7 employee_id=E7 date=2024-03-07 hours=27000s type=normal billable=false approved=true",
		}},
		{file: "csv_columns_map.csv", newErr: `missing columns: project (mapped to "Projekt") (header: Nr, Medarbejder,`,
			opts: ReadOptions{Columns: map[string]string{"id": "Nr", "employee_id": "medarbejder", "date": "Dato", "hours": "Timer", "project": "Projekt"}}},
		{file: "csv_columns_map.csv", newErr: `columns: "idd" is not an entry field`, opts: ReadOptions{Columns: map[string]string{"idd": "Nr"}}},
		{file: "csv_basic.csv", newErr: `date format "YYYY-MM"`, opts: ReadOptions{DateFormat: "YYYY-MM"}},
		{file: "csv_basic.csv", newErr: `unknown format "xml": want one of json, ndjson, csv, toggl, clockify, harvest`, opts: ReadOptions{Format: "xml"}},
		{file: "csv_tab.tsv", format: FormatCSV, want: []string{
			"@2 id=t1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
		}},
		{file: "csv_header_only.csv", format: FormatCSV},
		// A Toggl export forced through the generic reader lacks its columns.
		{file: "toggl_basic.csv", opts: ReadOptions{Format: FormatCSV}, newErr: "missing columns: id, date"},
	})
}

func TestNewReader_CSVInline(t *testing.T) {
	cases := []struct {
		name string
		in   string
		opts ReadOptions
		want []string
	}{
		{"blank rows and cells skipped", "id,employee_id,date,hours\n,,,\n1,E1,2024-03-04,1\n  \n", ReadOptions{}, []string{
			"@3 id=1 employee_id=E1 date=2024-03-04 hours=3600s",
		}},
		{"unterminated quote at the end", "id,employee_id,date,hours\n1,E1,2024-03-04,1\n2,\"E1,2024-03-04,1\n", ReadOptions{}, []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=3600s",
			"@3 problem ~stray or missing quote",
		}},
		{"no final newline", "id,employee_id,date,hours\r\n1,E1,2024-03-04,1", ReadOptions{}, []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=3600s",
		}},
		{"units rate amount only", "id,name,date,units,rate,amount,code\nx,Ann Berg,2024-03-04,3,0.1,,T1\n", ReadOptions{}, []string{
			"@2 id=x name=Ann Berg date=2024-03-04 units=3 rate=0.1 code=T1",
		}},
		{"explicit delimiter", "id|employee_id|date|hours\n1|E1|2024-03-04|1,5\n", ReadOptions{Delimiter: '|', DecimalComma: true}, []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=5400s",
		}},
		{"M/D/YYYY", "id,employee_id,date,hours\n1,E1,3/4/2024,1\n2,E1,12/31/2024,1\n3,E1,13/1/2024,1\n", ReadOptions{DateFormat: "M/D/YYYY"}, []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=3600s",
			"@3 id=2 employee_id=E1 date=2024-12-31 hours=3600s",
			"@4 problem id=3 field=date ~in the format M/D/YYYY or YYYY-MM-DD",
		}},
		{"unpadded dates", "id,employee_id,date,hours\n1,E1,2016-01-1,1\n2,E1,2016-1-01,1\n3,E1,2016-1-,1\n", ReadOptions{}, []string{
			"@2 id=1 employee_id=E1 date=2016-01-01 hours=3600s",
			"@3 id=2 employee_id=E1 date=2016-01-01 hours=3600s",
			"@4 problem id=3 field=date ~\"2016-1-\" is not a date in the format YYYY-MM-DD",
		}},
		{"unpadded dates, day first", "id,employee_id,date,hours\n1,E1,1/2/2026,1\n", ReadOptions{DateFormat: "DD/MM/YYYY"}, []string{
			"@2 id=1 employee_id=E1 date=2026-02-01 hours=3600s",
		}},
		{"unpadded dates, month first", "id,employee_id,date,hours\n1,E1,1/2/2026,1\n", ReadOptions{DateFormat: "MM/DD/YYYY"}, []string{
			"@2 id=1 employee_id=E1 date=2026-01-02 hours=3600s",
		}},
		{"configured column beats a default", "id,email,mail,date,hours\n1,a@x,b@x,2024-03-04,1\n", ReadOptions{Columns: map[string]string{"email": "mail"}}, []string{
			"@2 id=1 email=b@x date=2024-03-04 hours=3600s fields={email=a@x}",
		}},
		{"tags separators", "id,employee_id,date,hours,tags\n1,E1,2024-03-04,1,\"a, b;c |d,,\"\n", ReadOptions{}, []string{
			"@2 id=1 employee_id=E1 date=2024-03-04 hours=3600s tags=a|b|c|d",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Format = FormatCSV
			_, got, err := readAll(t, "in.csv", strings.NewReader(tc.in), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, got, tc.want)
		})
	}
}
