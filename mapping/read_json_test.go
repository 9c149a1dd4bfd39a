package mapping

import "testing"

func TestNewReader_JSON(t *testing.T) {
	runReadCases(t, []readCase{
		// One pretty-printed object; an unknown scalar lands in Fields.
		{file: "json_single.json", format: FormatJSON, want: []string{
			"@1 id=e-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal project=Website approved=true fields={km=12.5}",
		}},
		// Concatenated objects keep their start lines.
		{file: "json_concat.json", format: FormatJSON, want: []string{
			"@1 id=c-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
			"@3 problem id=c-2 field=type ~must be a string",
			"@11 id=c-3 employee_id=E1 date=2024-03-06 hours=360s type=normal",
		}},
		// Array elements are records: a bad one is a problem, the rest read on.
		{file: "json_array.json", format: FormatJSON, want: []string{
			"@1 id=a-1 email=ann@example.com date=2024-03-04 hours=1200s type=normal",
			"@2 id=a-2 name=Ann Berg date=2024-03-04 units=0.1 rate=0.1 amount=1234567890.123456789 code=T1 tags=x|y billable=false fields={flag=true, km=12.50, note=hi}",
			`#3 problem id=a-3 field=date ~"2024-02-30" is not a date`,
			"#4 problem id=a-4 field=extra ~a nested object or array is not allowed here",
			`#5 problem id=a-5 field=hours ~"7,5" is not a decimal number`,
			"#6 problem field=id ~no id",
			"#7 problem ~not a JSON object",
			"@8 id=a-8 employee_id=E1 date=2024-03-04 amount=5 type=x fields={km=3, trip=2}",
			"#9 problem id=a-9 field=entries ~a nested object or array is not allowed here",
		}},
		{file: "json_wrapper.json", format: FormatJSON, want: []string{
			"@1 id=w-1 company=C1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
			"#2 problem id=w-2 field=type ~no type or code",
			"@3 id=w-3 employee_id=E1 date=2024-03-05 hours=4500s code=T1",
		}},
		// "entries" after other keys is still a wrapper.
		{file: "json_wrapper_late.json", format: FormatJSON, want: []string{
			"@1 id=l-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
		}},
		// Broken JSON syntax cannot be resynced: fatal.
		{file: "json_broken.json", format: FormatJSON, want: []string{
			"@1 id=b-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
			"fatal ~json_broken.json: line 2: invalid JSON: invalid character 'o'",
		}},
		// CRLF, blank lines, a broken line, nested values, two objects on a line.
		{file: "ndjson_basic.ndjson", format: FormatNDJSON, want: []string{
			"@1 id=n-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
			"@3 problem ~invalid JSON: unexpected end of JSON input",
			"@5 problem id=n-3 field=project ~must be a string",
			"@6 problem id=n-4 field=meta ~a nested object or array is not allowed here",
			"@7 problem ~invalid JSON: invalid character '{' after top-level value",
			"@8 problem ~not a JSON object",
			"@9 id=n-7 email=a@example.com date=2024-03-05 amount=0.1 code=T2 fields={km=12}",
		}},
		// NDJSON forced on a pretty-printed file: lines are problems, but for
		// the one that happens to be a whole entry.
		{file: "json_wrapper_late.json", opts: ReadOptions{Format: FormatNDJSON}, format: FormatNDJSON, want: []string{
			"@1 problem ~invalid JSON: unexpected end",
			"@2 problem ~invalid JSON: invalid character ':' after top-level value",
			"@3 problem ~invalid JSON: invalid character ':' after top-level value",
			"@4 id=l-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal",
			"@5 problem ~invalid JSON",
			"@6 problem ~invalid JSON",
		}},
		// JSON forced on CSV: fatal at the first byte.
		{file: "csv_basic.csv", opts: ReadOptions{Format: FormatJSON}, format: FormatJSON, want: []string{
			"fatal ~csv_basic.csv: line 1: invalid JSON",
		}},
	})
}
