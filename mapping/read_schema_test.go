package mapping

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileEntrySchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(EntrySchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("entry.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("entry.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The published schema and the JSON reader state the same rules: every
// entry one accepts the other accepts, every one one refuses the other
// refuses.
func TestEntrySchema_AgreesWithReader(t *testing.T) {
	schema := compileEntrySchema(t)
	const base = `"id":"1","employee_id":"E1","date":"2024-03-04"`
	valid := []string{
		`{` + base + `,"hours":7.5,"type":"normal"}`,
		`{` + base + `,"hours":"7.5","type":"normal"}`,
		`{` + base + `,"hours":"7:30","type":"normal"}`,
		`{` + base + `,"hours":"25:30:00","type":"normal"}`,
		`{` + base + `,"hours":"-1.5","code":"T1"}`,
		`{` + base + `,"hours":"-0:20","code":"T1"}`,
		`{` + base + `,"hours":1e1,"code":"T1"}`,
		`{` + base + `,"hours":-0.25E+2,"code":"T1"}`,
		`{` + base + `,"hours":"123456789:00","code":"T1"}`,
		`{` + base + `,"units":"2","rate":150.25,"amount":"0.1","code":"T1"}`,
		`{` + base + `,"amount":100,"code":"T1"}`,
		`{"id":"1","employee_number":"17","date":"2024-02-29","hours":1,"type":"t"}`,
		`{"id":"1","email":"a@example.com","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"1","name":"Ann Berg","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"1","name":"Ann Berg","email":"","employee_id":null,"date":"2024-03-04","hours":1,"type":"t"}`,
		`{` + base + `,"hours":1,"type":"t","code":""}`,
		`{` + base + `,"hours":1,"type":"t","km":12.5,"trip":"A-B","paid":true,"none":null}`,
		`{` + base + `,"hours":1,"units":null,"rate":null,"amount":null,"type":"t"}`,
		`{` + base + `,"hours":null,"units":3,"type":"t"}`,
		`{` + base + `,"hours":1,"type":"t","tags":["a","b"],"billable":true,"approved":false}`,
		`{` + base + `,"hours":1,"type":"t","tags":[],"billable":null,"approved":null,"tags2":"x"}`,
		`{` + base + `,"hours":1,"type":"t","company_id":"C1","project":"P","description":"d"}`,
		`{` + base + `,"hours":1,"type":"t","fields":{"km":"3","trip":2,"x":null}}`,
		`{` + base + `,"hours":1,"type":"t","fields":null,"tags":null,"project":null}`,
		`{` + base + `,"hours":1,"type":"t","entries":"x"}`,
		`{` + base + `,"hours":1,"type":"t","deleted":false}`,
		`{` + base + `,"hours":1,"type":"t","deleted":null}`,
		`{"id":"1","deleted":true}`,
		`{"id":"1","deleted":true,"date":"2024-03-04","company_id":"C1","km":3}`,
		`{"id":"1","deleted":true,"hours":null,"units":null,"rate":null,"amount":null}`,
		`{"id":"1","employee_id":"E1","start":"2026-11-02T23:30:00Z","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","start":"2026-11-02T23:30:00.5+01:00","hours":1,"type":"t"}`,
		`{` + base + `,"start":"09:00","hours":1,"type":"t"}`,
		// No type and no code: the rules decide (a rule on project or
		// tags, or the default rule), as for a preset's row.
		`{` + base + `,"hours":1}`,
		`{` + base + `,"hours":1,"type":""}`,
	}
	invalid := []string{
		`{"employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"","employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":1,"employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":null,"employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","start":"2026-11-02T23:30:00","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","start":"2026-11-02","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","start":null,"hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","date":"2024-02-30","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","date":"2023-02-29","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","date":"2024-3-4","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","date":"04.03.2024","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","date":"2024-03-04T00:00:00Z","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"E1","date":20240304,"hours":1,"type":"t"}`,
		`{"id":"1","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":"","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"1","employee_id":17,"date":"2024-03-04","hours":1,"type":"t"}`,
		`{` + base + `,"hours":1,"code":5}`,
		`{` + base + `,"type":"t"}`,
		`{` + base + `,"hours":null,"type":"t"}`,
		`{` + base + `,"hours":"7,5","type":"t"}`,
		`{` + base + `,"hours":"abc","type":"t"}`,
		`{` + base + `,"hours":"","type":"t"}`,
		`{` + base + `,"hours":" 7.5","type":"t"}`,
		`{` + base + `,"hours":"+7.5","type":"t"}`,
		`{` + base + `,"hours":".5","type":"t"}`,
		`{` + base + `,"hours":"7.","type":"t"}`,
		`{` + base + `,"hours":"7:5","type":"t"}`,
		`{` + base + `,"hours":"7:60","type":"t"}`,
		`{` + base + `,"hours":"7:30:60","type":"t"}`,
		`{` + base + `,"hours":"7:30:00:00","type":"t"}`,
		`{` + base + `,"hours":"1234567890:00","type":"t"}`,
		`{` + base + `,"hours":true,"type":"t"}`,
		`{` + base + `,"hours":[1],"type":"t"}`,
		`{` + base + `,"units":"1e3","type":"t"}`,
		`{` + base + `,"rate":"","type":"t"}`,
		`{` + base + `,"amount":[1],"type":"t"}`,
		`{` + base + `,"amount":"1:30","type":"t"}`,
		`{` + base + `,"hours":1,"type":"t","tags":"a,b"}`,
		`{` + base + `,"hours":1,"type":"t","tags":[1]}`,
		`{` + base + `,"hours":1,"type":"t","billable":"yes"}`,
		`{` + base + `,"hours":1,"type":"t","approved":1}`,
		`{` + base + `,"hours":1,"type":"t","project":5}`,
		`{` + base + `,"hours":1,"type":"t","extra":{"a":1}}`,
		`{` + base + `,"hours":1,"type":"t","extra":[1]}`,
		`{` + base + `,"hours":1,"type":"t","fields":{"a":{"b":1}}}`,
		`{` + base + `,"hours":1,"type":"t","fields":"x"}`,
		`{` + base + `,"hours":1,"type":"t","entries":{"a":1}}`,
		`{"id":"1","deleted":false}`,
		`{"id":"1","deleted":null}`,
		`{"deleted":true}`,
		`{"id":"","deleted":true}`,
		`{"id":1,"deleted":true}`,
		`{"id":"1","deleted":"true"}`,
		`{` + base + `,"hours":1,"type":"t","deleted":1}`,
		`{"id":"1","deleted":true,"date":"2024-02-30"}`,
		`{"id":"1","deleted":true,"hours":"7,5"}`,
		`{"id":"1","deleted":true,"extra":[1]}`,
		`"an entry"`,
		`42`,
		`null`,
	}
	check := func(doc string, wantValid bool) {
		t.Helper()
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		schemaErr := schema.Validate(inst)
		rd, _, err := NewReader("t.json", strings.NewReader(doc), ReadOptions{Format: FormatJSON})
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		e, readErr := rd.Next()
		var p *Problem
		if readErr != nil && !errors.As(readErr, &p) {
			t.Errorf("%s: reader: fatal %v, want an entry or a problem", doc, readErr)
		}
		if wantValid {
			if schemaErr != nil {
				t.Errorf("%s: schema refuses it: %v", doc, schemaErr)
			}
			if readErr != nil || e.ID == "" {
				t.Errorf("%s: reader refuses it: %v", doc, readErr)
			}
		} else {
			if schemaErr == nil {
				t.Errorf("%s: schema accepts it", doc)
			}
			if readErr == nil {
				t.Errorf("%s: reader accepts it", doc)
			}
		}
	}
	for _, doc := range valid {
		check(doc, true)
	}
	for _, doc := range invalid {
		check(doc, false)
	}
}

// On the lines of the NDJSON testdata too, the schema and the reader agree.
func TestEntrySchema_Testdata(t *testing.T) {
	schema := compileEntrySchema(t)
	data, err := os.ReadFile(filepath.Join("testdata", "read", "ndjson_basic.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err != nil {
			continue // not JSON at all
		}
		n++
		schemaOK := schema.Validate(inst) == nil
		rd, _, err := NewReader("t.ndjson", strings.NewReader(line), ReadOptions{Format: FormatNDJSON})
		if err != nil {
			t.Fatal(err)
		}
		_, readErr := rd.Next()
		if schemaOK != (readErr == nil) {
			t.Errorf("%s: schema accepts: %v, reader error: %v", line, schemaOK, readErr)
		}
	}
	if n < 5 {
		t.Fatalf("only %d JSON lines checked", n)
	}
}

// FuzzEntrySchema checks the schema and the reader against each other on
// arbitrary JSON: both accept an entry or both refuse it.
func FuzzEntrySchema(f *testing.F) {
	schema := compileEntrySchema(f)
	for _, doc := range []string{
		`{"id":"1","employee_id":"E1","date":"2024-03-04","hours":7.5,"type":"normal"}`,
		`{"id":"1","name":"A","date":"2024-02-29","hours":"25:30:00","code":"T1","tags":["a"],"km":1,"fields":{"x":true}}`,
		`{"id":"1","email":"a@x","date":"2024-03-04","units":"0.1","rate":null,"amount":-1e2,"type":"t","billable":false}`,
		`{"id":"1","employee_number":"7","date":"2023-02-29","hours":"7,5","type":"t","x":{"y":1}}`,
		`{"id":"1","id":2,"employee_id":"E1","date":"2024-03-04","hours":1,"type":"t"}`,
		`{"id":"1","deleted":true,"date":"2024-03-04"}`,
		`{"deleted":true,"id":"1","deleted":false}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return // not JSON
		}
		if m, ok := inst.(map[string]any); !ok {
			return // arrays are read as lists of entries; scalars are covered by the table
		} else if _, ok := m["entries"].([]any); ok {
			return // a wrapper, not an entry
		}
		schemaErr := schema.Validate(inst)
		rd, _, err := NewReader("t.json", bytes.NewReader(data), ReadOptions{Format: FormatJSON})
		if err != nil {
			t.Fatal(err)
		}
		_, readErr := rd.Next()
		var p *Problem
		if readErr != nil && !errors.As(readErr, &p) {
			t.Fatalf("%s: fatal %v on valid JSON", data, readErr)
		}
		if p != nil && strings.Contains(p.Msg, "out of range") {
			return // a number beyond the decimal type (exponent over 2^31): a documented difference
		}
		if (schemaErr == nil) != (readErr == nil) {
			t.Fatalf("%s:\nschema: %v\nreader: %v", data, schemaErr, readErr)
		}
	})
}
