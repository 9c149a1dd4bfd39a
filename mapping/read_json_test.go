package mapping

import (
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

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
			"@2 id=w-2 employee_id=E1 date=2024-03-04 hours=27000s",
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

// A tombstone, {"id": "...", "deleted": true}, removes an entry: it needs
// its id and nothing else, wherever JSON entries are read. In CSV a
// "deleted" column is just a further field.
func TestNewReader_Tombstones(t *testing.T) {
	const entry = `{"id":"e-1","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal"}`
	const entryRead = "@1 id=e-1 employee_id=E1 date=2024-03-04 hours=27000s type=normal"
	cases := []struct {
		name, in string
		format   Format
		want     []string
	}{
		{name: "array", format: FormatJSON,
			in: `[` + entry + `,{"id":"e-2","deleted":true},{"deleted":true},{"id":"e-4","deleted":true,"company_id":"C1","date":"2024-03-05"}]`,
			want: []string{
				entryRead,
				"@2 id=e-2 deleted",
				"#3 problem field=id ~a tombstone without an id",
				"@4 id=e-4 deleted company=C1 date=2024-03-05",
			}},
		{name: "wrapper", format: FormatJSON,
			in:   `{"source":"x","entries":[{"id":"e-1","deleted":true}]}`,
			want: []string{"@1 id=e-1 deleted"}},
		{name: "lone object", format: FormatJSON,
			in:   "{\n  \"id\": \"e-1\",\n  \"deleted\": true\n}\n",
			want: []string{"@1 id=e-1 deleted"}},
		{name: "lone object without id", format: FormatJSON,
			in:   "\n{\"deleted\": true}",
			want: []string{"@2 problem field=id ~a tombstone without an id"}},
		{name: "ndjson", format: FormatNDJSON,
			in: entry + "\n" + `{"id":"e-2","deleted":true}` + "\n" + `{"deleted":true,"hours":1}` + "\n" +
				`{"id":"","deleted":true}` + "\n" + `{"id":"e-5","deleted":true,"id":"e-6"}` + "\n",
			want: []string{
				entryRead,
				"@2 id=e-2 deleted",
				"@3 problem field=id ~a tombstone without an id",
				"@4 problem field=id ~a tombstone without an id",
				"@5 id=e-6 deleted",
			}},
		// A tombstone's other properties are still checked as usual.
		{name: "tombstone with a bad property", format: FormatNDJSON,
			in:   `{"id":"e-1","deleted":true,"date":"2024-02-30"}`,
			want: []string{`@1 problem id=e-1 field=date ~"2024-02-30" is not a date`}},
		// Entry's own JSON form of a tombstone (as `paysync publish` sends it).
		{name: "marshaled tombstone", format: FormatNDJSON,
			in:   `{"id":"e-1","deleted":true,"units":null,"rate":null,"amount":null}`,
			want: []string{"@1 id=e-1 deleted"}},
		// "deleted": false or null is an ordinary entry, with all it needs.
		{name: "deleted false", format: FormatNDJSON,
			in: `{"id":"e-1","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal","deleted":false}` + "\n" +
				`{"id":"e-2","deleted":false}` + "\n" + `{"id":"e-3","deleted":null}` + "\n" +
				`{"id":"e-4","deleted":true,"deleted":false,"employee_id":"E1"}`,
			want: []string{
				entryRead,
				"@2 problem id=e-2 field=date ~no date",
				"@3 problem id=e-3 field=date ~no date",
				"@4 problem id=e-4 field=date ~no date",
			}},
		{name: "deleted not a boolean", format: FormatNDJSON,
			in:   `{"id":"e-1","deleted":"true"}` + "\n" + `{"id":"e-2","deleted":1}`,
			want: []string{"@1 problem id=e-1 field=deleted ~must be true or false", "@2 problem id=e-2 field=deleted ~must be true or false"}},
		// Under "fields" it is a field like any other.
		{name: "deleted in fields", format: FormatNDJSON,
			in:   `{"id":"e-1","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal","fields":{"deleted":true}}`,
			want: []string{entryRead + " fields={deleted=true}"}},
		{name: "csv column", format: FormatCSV,
			in: "id,employee_id,date,hours,type,deleted\n1,E1,2024-03-04,7.5,normal,true\n2,E1,,,,true\n",
			want: []string{
				"@2 id=1 employee_id=E1 date=2024-03-04 hours=27000s type=normal fields={deleted=true}",
				"@3 problem id=2 field=date ~no date",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := readAll(t, "t.in", strings.NewReader(tc.in), ReadOptions{Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, got, tc.want)
		})
	}
}

// A tombstone's content hash differs from its entry's, and an ordinary
// entry's hash does not depend on the field's existence.
func TestEntryHash_Tombstone(t *testing.T) {
	e := paysync.Entry{ID: "e-1", EmployeeID: "E1", Date: "2024-03-04", Hours: paysync.HoursFromSeconds(3600), Type: "normal"}
	h, b, err := paysync.EntryHash(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "deleted") {
		t.Errorf("an ordinary entry's JSON names deleted: %s", b)
	}
	ht, bt, err := paysync.EntryHash(paysync.Entry{ID: "e-1", Deleted: true})
	if err != nil {
		t.Fatal(err)
	}
	if ht == h {
		t.Errorf("a tombstone hashes like its entry: %s", bt)
	}
	// The tombstone's own JSON reads back as a tombstone.
	_, got, err := readAll(t, "t.in", strings.NewReader(string(bt)), ReadOptions{Format: FormatJSON})
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, got, []string{"@1 id=e-1 deleted"})
}
