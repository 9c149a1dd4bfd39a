package payroll

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	graphql "github.com/graph-gophers/graphql-go"
)

// introspect runs the probe's query against the schema in
// testdata/dialect/<name>.graphql (graph-gophers, no resolvers).
func introspect(t *testing.T, name string) []byte {
	t.Helper()
	sdl, err := os.ReadFile(filepath.Join("testdata", "dialect", name+".graphql"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := graphql.ParseSchema(string(sdl), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, err := schema.ToJSON() // the standard introspection query's result
	if err != nil {
		t.Fatalf("%s: introspection: %v", name, err)
	}
	return data
}

// TestDecideDialect is the probe's decision table over the root fields.
func TestDecideDialect(t *testing.T) {
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	for _, tc := range []struct {
		name            string
		query, mutation map[string]bool
		want            Dialect
		err             string
	}{
		{"snake", set("companies", "pay_parts_meta", "current_company"), set("create_pay_parts"), Snake, ""},
		{"camel", set("companiesExt", "payPartsMeta"), set("createPayParts"), Camel, ""},
		{"both: camel, today's documented API", set("companies", "pay_parts_meta", "companiesExt", "payPartsMeta"), set("create_pay_parts", "createPayParts"), Camel, ""},
		{"camel reads, snake create: snake", set("companies", "pay_parts_meta", "companiesExt", "payPartsMeta"), set("create_pay_parts"), Snake, ""},
		{"camel without its create", set("companiesExt", "payPartsMeta"), set(), 0, "neither dialect"},
		{"neither", set("employees"), set("noop"), 0, "neither dialect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideDialect(tc.query, tc.mutation)
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("decideDialect = %s, %v; want %s, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestParseIntrospection_Dialects: what the probe records per operation
// for schemas of each dialect.
func TestParseIntrospection_Dialects(t *testing.T) {
	for _, tc := range []struct {
		sdl     string
		force   Dialect
		dialect Dialect
		// the fields found, the delete's selection, the input types and
		// the wrapped lists, the items' input type, numbers and flags
		current, del, delSelect, top string
		inputs, wraps                map[string]string
		itemType, items              string
		numbers                      NumberKind
		allowed                      AllowedKind
		number                       string
		err                          string
	}{
		{sdl: "snake", dialect: Snake, current: "current_company", del: "delete_pay_parts", top: "pay_parts",
			inputs: map[string]string{}, wraps: map[string]string{}, itemType: "PayPartInput", items: "[PayPartInput]",
			numbers: Float, allowed: AllowedBoolean, number: "employee_number"},
		{sdl: "snake-nodelete", dialect: Snake, current: "currentCompany",
			inputs: map[string]string{}, wraps: map[string]string{}, itemType: "NewPayPart", items: "[NewPayPart!]!",
			numbers: Int, allowed: AllowedEnum, number: "number"},
		{sdl: "camel", dialect: Camel, current: "currentCompany", del: "deletePayParts",
			inputs:   map[string]string{"companiesExt": "CompaniesInput!", "employees": "EmployeesInput", "createPayParts": "CreateInput!", "deletePayParts": "DeleteInput!"},
			wraps:    map[string]string{"companiesExt": "companies", "employees": "employees", "payParts": "payParts", "payPartsMeta": "payPartsMeta", "createPayParts": "createdPayParts"},
			itemType: "PayPartIn", items: "[PayPartIn!]!", numbers: Int, allowed: AllowedBoolean, number: "domainId"},
		{sdl: "both-nodelete", dialect: Camel, current: "current_company",
			inputs:   map[string]string{"companiesExt": "CompaniesInput!", "employees": "EmployeesInput", "createPayParts": "CreateInput!"},
			wraps:    map[string]string{"companiesExt": "companies", "employees": "employees", "payParts": "payParts", "payPartsMeta": "payPartsMeta", "createPayParts": "createdPayParts"},
			itemType: "PayPartIn", items: "[PayPartIn!]!", numbers: Int, allowed: AllowedBoolean, number: "domainId"},
		{sdl: "both-nodelete", force: Snake, dialect: Snake, current: "current_company", err: "employees has no argument employee_ids"},
		{sdl: "camel", force: Snake, err: "Query has no field companies (snake_case dialect)"},
		{sdl: "neither", err: "the server speaks neither dialect"},
	} {
		t.Run(tc.sdl+"/"+tc.force.String(), func(t *testing.T) {
			s, err := parseIntrospection(introspect(t, tc.sdl), tc.force)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(map[string]any{"dialect": s.Dialect.String(), "current": s.Names.Current, "delete": s.Names.Delete,
				"top": s.Names.TopPayParts, "inputs": s.Inputs, "wraps": s.Wraps, "itemType": s.InputTypeName, "items": s.PayPartsInputType,
				"numbers": s.In["units"].Kind.String(), "allowed": s.Allowed.String(), "number": s.EmployeeNumberField})
			want, _ := json.Marshal(map[string]any{"dialect": tc.dialect.String(), "current": tc.current, "delete": tc.del,
				"top": tc.top, "inputs": tc.inputs, "wraps": tc.wraps, "itemType": tc.itemType, "items": tc.items,
				"numbers": tc.numbers.String(), "allowed": tc.allowed.String(), "number": tc.number})
			if string(got) != string(want) {
				t.Errorf("probe found\n %s\nwant\n %s", got, want)
			}
			// The documents built from it are valid for the schema.
			for op, doc := range buildDocuments(s) {
				if strings.Contains(doc, "%!") {
					t.Errorf("%s: %s", op, doc)
				}
			}
		})
	}
}
