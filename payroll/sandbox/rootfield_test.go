package sandbox

import "testing"

func TestRootField(t *testing.T) {
	tests := []struct {
		name, doc, op, want string
	}{
		{"shorthand", `{ companies { id } }`, "", "companies"},
		{"named mutation with variables", `mutation CreatePayParts($company_id:ID!$pay_parts:[PayPartInput!]!){create_pay_parts(company_id: $company_id, pay_parts: $pay_parts){id}}`, "", "create_pay_parts"},
		{"alias", `mutation { a: create_pay_parts(company_id: "x") { id } b: delete_pay_parts(company_id: "x") }`, "", "create_pay_parts"},
		{"operation name picks", `query A { companies { id } } mutation B { delete_pay_parts(company_id: "1") }`, "B", "delete_pay_parts"},
		{"first operation without name", `query A { companies { id } } query B { pay_parts_meta { code } }`, "", "companies"},
		{"unknown operation name", `query A { companies { id } }`, "Z", ""},
		{"introspection", "query IntrospectionQuery {\n  __schema { types { name } }\n}", "", "__schema"},
		{"comments and strings", "# create_pay_parts\nquery Q($d: String = \"{ create_pay_parts }\") @dir(a: \"}\") {\n  # x\n  pay_parts(company_id: \"}{\") { id } }", "", "pay_parts"},
		{"block string", `query Q($d: String = """ a \""" { b } """) { current_company { id } }`, "", "current_company"},
		{"fragment spread", `query { ...Root } fragment Root on Query { pay_parts_meta { code } }`, "", "pay_parts_meta"},
		{"fragment first", `fragment Root on Query { companies { id } } query Q { ...Root }`, "", "companies"},
		{"inline fragment", `{ ... on Query { current_company { id } } }`, "", "current_company"},
		{"default object value", `query($x: In = {a: {b: 1}}) { companies { id } }`, "", "companies"},
		{"bad syntax", `mutation { create_pay_parts(company_id: "MV8x" { id }`, "", "create_pay_parts"},
		{"garbage", `hello world`, "", ""},
		{"empty", ``, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rootField(tt.doc, tt.op); got != tt.want {
				t.Errorf("rootField = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzRootField(f *testing.F) {
	for _, s := range []string{`{ companies { id } }`, `query A { ...F } fragment F on Query { a }`, `"""`, `{ ... on`, `fragment`, `query ( { `} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, doc, op string) {
		_ = rootField(doc, op) // must not panic or loop
	})
}
