package sandbox

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

type typeRef struct {
	Name   *string  `json:"name"`
	Kind   string   `json:"kind"`
	OfType *typeRef `json:"ofType"`
}

// named returns the innermost type name.
func (t *typeRef) named() string {
	for t != nil {
		if t.Name != nil {
			return *t.Name
		}
		t = t.OfType
	}
	return ""
}

type introType struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Fields []struct {
		Name string  `json:"name"`
		Type typeRef `json:"type"`
	} `json:"fields"`
	InputFields []struct {
		Name string  `json:"name"`
		Type typeRef `json:"type"`
	} `json:"inputFields"`
	EnumValues []struct {
		Name string `json:"name"`
	} `json:"enumValues"`
}

func (it introType) fieldType(name string) string {
	for _, f := range it.Fields {
		if f.Name == name {
			return f.Type.named()
		}
	}
	for _, f := range it.InputFields {
		if f.Name == name {
			return f.Type.named()
		}
	}
	return ""
}

const introspectTypes = `query($pp: String!, $meta: String!, $in: String!, $rule: String!) {
  pp: __type(name: $pp) { name kind fields { name type { name kind ofType { name kind } } } }
  meta: __type(name: $meta) { name kind fields { name type { name kind ofType { name kind } } } }
  in: __type(name: $in) { name kind inputFields { name type { name kind ofType { name kind } } } }
  rule: __type(name: $rule) { name kind enumValues { name } }
}`

func TestServer_Variants(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		num, rule string
		units     any // 7.50 units as served
		t1Units   any // T1 units_allowed as served
		t1Amount  any
	}{
		{"float boolean", Options{}, "Float", "Boolean", 7.5, true, false},
		{"int boolean", Options{Numbers: NumbersInt}, "Int", "Boolean", 750.0, true, false},
		{"float enum", Options{Allowed: AllowedEnum}, "Float", "PayPartFieldRule", 7.5, "MANDATORY", "FORBIDDEN"},
		{"int enum", Options{Numbers: NumbersInt, Allowed: AllowedEnum}, "Int", "PayPartFieldRule", 750.0, "MANDATORY", "FORBIDDEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.opts)
			tok := e.accessToken()

			var d struct{ PP, Meta, In, Rule *introType }
			e.mustData(tok, introspectTypes, map[string]any{"pp": "PayPart", "meta": "PayPartMeta", "in": "PayPartInput", "rule": "PayPartFieldRule"}, &d)
			for _, f := range []string{"units", "rate", "amount"} {
				if got := d.PP.fieldType(f); got != tt.num {
					t.Errorf("PayPart.%s type = %s, want %s", f, got, tt.num)
				}
				if got := d.In.fieldType(f); got != tt.num {
					t.Errorf("PayPartInput.%s type = %s, want %s", f, got, tt.num)
				}
				if got := d.Meta.fieldType(f + "_allowed"); got != tt.rule {
					t.Errorf("PayPartMeta.%s_allowed type = %s, want %s", f, got, tt.rule)
				}
			}
			if tt.rule == "PayPartFieldRule" {
				var names []string
				for _, v := range d.Rule.EnumValues {
					names = append(names, v.Name)
				}
				if want := []string{"MANDATORY", "OPTIONAL", "FORBIDDEN"}; !reflect.DeepEqual(names, want) {
					t.Errorf("enum values = %v, want %v", names, want)
				}
			} else if d.Rule != nil {
				t.Errorf("enum PayPartFieldRule exists in a Boolean variant")
			}

			var meta struct {
				Meta []map[string]any `json:"pay_parts_meta"`
			}
			e.mustData(tok, `{ pay_parts_meta { code description units_allowed rate_allowed amount_allowed } }`, nil, &meta)
			if len(meta.Meta) != len(FixtureMeta()) || meta.Meta[0]["code"] != "T1" {
				t.Fatalf("meta = %v", meta.Meta)
			}
			if meta.Meta[0]["units_allowed"] != tt.t1Units || meta.Meta[0]["amount_allowed"] != tt.t1Amount {
				t.Errorf("T1 meta = %v, want units %v amount %v", meta.Meta[0], tt.t1Units, tt.t1Amount)
			}

			var created struct {
				Create []map[string]any `json:"create_pay_parts"`
			}
			e.mustData(tok, createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{
				map[string]any{"employee_id": EmpMetteHansen, "code": "T1", "units": tt.units},
			}}, &created)
			if got := created.Create[0]["units"]; got != tt.units {
				t.Errorf("created units = %v, want %v", got, tt.units)
			}
			var read struct {
				PayParts []map[string]any `json:"pay_parts"`
			}
			e.mustData(tok, `query($c: ID!) { pay_parts(company_id: $c) { units } }`, map[string]any{"c": CompanyNordlys}, &read)
			if got := read.PayParts[0]["units"]; got != tt.units {
				t.Errorf("read units = %v, want %v", got, tt.units)
			}
			if got := e.s.State().Companies[0].PayParts[0].Units; !got.Valid || got.Decimal.String() != "7.5" {
				t.Errorf("stored units = %v, want exactly 7.5", got)
			}
		})
	}
}

func TestServer_InputTypeName(t *testing.T) {
	e := newEnv(t, Options{InputTypeName: "TimeEntryInput"})
	tok := e.accessToken()
	var d struct {
		Schema struct {
			MutationType struct {
				Fields []struct {
					Name string `json:"name"`
					Args []struct {
						Name string  `json:"name"`
						Type typeRef `json:"type"`
					} `json:"args"`
				} `json:"fields"`
			} `json:"mutationType"`
		} `json:"__schema"`
	}
	e.mustData(tok, `{ __schema { mutationType { fields { name args { name type { name kind ofType { name kind } } } } } } }`, nil, &d)
	found := ""
	for _, f := range d.Schema.MutationType.Fields {
		for _, a := range f.Args {
			if f.Name == "create_pay_parts" && a.Name == "pay_parts" {
				found = a.Type.named()
			}
		}
	}
	if found != "TimeEntryInput" {
		t.Fatalf("create_pay_parts.pay_parts element type = %q, want TimeEntryInput", found)
	}
	vars := map[string]any{"c": CompanyNordlys, "pp": []any{t1(1)}}
	if r := e.gql(tok, createMutation, vars); len(r.Errors) == 0 {
		t.Fatal("a mutation declaring [PayPartInput] was accepted")
	}
	ok := strings.ReplaceAll(createMutation, "PayPartInput", "TimeEntryInput")
	if r := e.gql(tok, ok, vars); len(r.Errors) > 0 {
		t.Fatalf("mutation with the discovered type: %+v", r.Errors)
	}
	if got := e.s.State().Counters.Requests["__schema"]; got != 1 {
		t.Errorf("Requests[__schema] = %d, want 1", got)
	}
}

func TestServer_IntNumbers(t *testing.T) {
	e := newEnv(t, Options{Numbers: NumbersInt})
	tok := e.accessToken()
	for _, units := range []any{7.555, 3e9, "7.5"} {
		r := e.gql(tok, createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{
			map[string]any{"employee_id": EmpMetteHansen, "code": "T1", "units": units},
		}})
		if len(r.Errors) == 0 {
			t.Errorf("units %v accepted as Int", units)
		}
	}
	if r := e.gql(tok, `mutation { create_pay_parts(company_id: "MV8x", pay_parts: [{employee_id: "MV8xXzE=", code: "T1", units: 7.5}]) { id } }`, nil); len(r.Errors) == 0 {
		t.Error("literal 7.5 accepted as Int")
	}
	if n := e.payPartCount(); n != 0 {
		t.Fatalf("%d pay parts created by rejected requests", n)
	}

	// A pay part typed in by hand with more decimals than an Int carries
	// cannot go out: an error naming it and the field, not a rounded
	// number. The list fails as a whole (numbers are converted with the
	// list, so that graph-gophers resolves its elements without a
	// goroutine each).
	p, err := e.s.SeedPayPart(CompanyNordlys, paysync.PayPartInput{EmployeeID: EmpLarsNielsen, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("7.555"), Rate: paysync.Dec("200")}})
	if err != nil {
		t.Fatal(err)
	}
	r := e.gql(tok, `query($c: ID!) { pay_parts(company_id: $c) { id units rate } }`, map[string]any{"c": CompanyNordlys})
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Message, p.ID) || !strings.Contains(r.Errors[0].Message, "units") {
		t.Fatalf("errors = %+v, want one naming %s units", r.Errors, p.ID)
	}
	if strings.Contains(string(r.Data), `7.55`) || strings.Contains(string(r.Data), `756`) || strings.Contains(string(r.Data), `755`) {
		t.Errorf("data = %s: a rounded or cut number went out", r.Data)
	}
	// Without it, the same pay parts go out, the rate as 20000.
	if err := e.s.DeletePayPartDirect(CompanyNordlys, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.SeedPayPart(CompanyNordlys, paysync.PayPartInput{EmployeeID: EmpLarsNielsen, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("7.55"), Rate: paysync.Dec("200")}}); err != nil {
		t.Fatal(err)
	}
	r = e.gql(tok, `query($c: ID!) { pay_parts(company_id: $c) { id units rate } }`, map[string]any{"c": CompanyNordlys})
	if len(r.Errors) != 0 || !strings.Contains(string(r.Data), `"units":755,"rate":20000`) {
		t.Errorf("data = %s, errors %+v; want units 755 and rate 20000", r.Data, r.Errors)
	}
}

func TestServer_IntScale(t *testing.T) {
	e := newEnv(t, Options{Numbers: NumbersInt, IntScale: 3})
	tok := e.accessToken()
	e.mustData(tok, createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{t1(7505)}}, &struct{}{})
	if got := e.s.State().Companies[0].PayParts[0].Units.Decimal.String(); got != "7.505" {
		t.Fatalf("units = %s, want 7.505", got)
	}
}

func TestServer_Queries(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()
	var created struct {
		Create []struct{ ID string } `json:"create_pay_parts"`
	}
	e.mustData(tok, createMutation, map[string]any{"c": CompanyFjordtech, "pp": []any{
		map[string]any{"employee_id": EmpPeterMadsen2, "code": "BONUS", "amount": 1500.25},
		map[string]any{"employee_id": EmpJonasLarsen, "code": "KM", "units": 42},
	}}, &created)

	tests := []struct {
		name  string
		query string
		vars  map[string]any
		want  string // JSON of data
	}{
		{
			name:  "all companies",
			query: `{ companies { id name } }`,
			want:  `{"companies":[{"id":"MV8x","name":"Nordlys ApS"},{"id":"MV8y","name":"Fjordtech A/S"}]}`,
		},
		{
			name:  "companies by id, foreign id not returned",
			query: `query($ids: [ID]) { companies(company_ids: $ids) { id } }`,
			vars:  map[string]any{"ids": []string{CompanyFjordtech, CompanyHavblik, "bm9wZQ=="}},
			want:  `{"companies":[{"id":"MV8y"}]}`,
		},
		{
			name:  "null company_ids means all",
			query: `query($ids: [ID]) { companies(company_ids: $ids) { id } }`,
			vars:  map[string]any{"ids": nil},
			want:  `{"companies":[{"id":"MV8x"},{"id":"MV8y"}]}`,
		},
		{
			name:  "employees filtered, unknown ids skipped",
			query: `query($e: [ID]) { companies(company_ids: ["MV8y"]) { employees(employee_ids: $e) { id name } } }`,
			vars:  map[string]any{"e": []string{EmpPeterMadsen2, EmpPeterMadsen1, EmpMetteHansen}},
			want:  `{"companies":[{"employees":[{"id":"MV8yXzM=","name":"Peter Madsen"},{"id":"MV8yXzQ=","name":"Peter Madsen"}]}]}`,
		},
		{
			name:  "current company",
			query: `{ current_company { id } }`,
			want:  `{"current_company":{"id":"MV8x"}}`,
		},
		{
			name:  "pay parts three ways",
			query: `{ pay_parts(company_id: "MV8y") { id code amount employee { name } } companies(company_ids: ["MV8y"]) { pay_parts { code units } employees(employee_ids: ["MV8yXzE="]) { pay_parts { code units } } } }`,
			want: `{"pay_parts":[{"id":"` + created.Create[0].ID + `","code":"BONUS","amount":1500.25,"employee":{"name":"Peter Madsen"}},{"id":"` + created.Create[1].ID + `","code":"KM","amount":null,"employee":{"name":"Jonas Larsen"}}],` +
				`"companies":[{"pay_parts":[{"code":"BONUS","units":null},{"code":"KM","units":42}],"employees":[{"pay_parts":[{"code":"KM","units":42}]}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.gql(tok, tt.query, tt.vars)
			if len(r.Errors) > 0 {
				t.Fatalf("errors: %+v", r.Errors)
			}
			var got, want any
			_ = json.Unmarshal(r.Data, &got)
			_ = json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("data = %s\nwant   %s", r.Data, tt.want)
			}
		})
	}
	if got, want := created.Create[0].ID, base64.StdEncoding.EncodeToString([]byte("pp_1")); got != want {
		t.Errorf("first pay part id = %s, want %s", got, want)
	}
}

func TestServer_RejectsInvalidDocuments(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()
	item := []any{t1(1)}
	tests := []struct {
		name    string
		query   string
		vars    map[string]any
		wantMsg string
	}{
		{"unknown field", `{ pay_parts_meta { code foo } }`, nil, `Cannot query field "foo" on type "PayPartMeta"`},
		{"unknown root field", `{ employees { id } }`, nil, `Cannot query field "employees"`},
		{"bad syntax", `mutation { create_pay_parts(company_id: "MV8x" { id }`, nil, "syntax error"},
		{"wrong variable type", `mutation($c: ID!, $u: String) { create_pay_parts(company_id: $c, pay_parts: [{employee_id: "MV8xXzE=", code: "T1", units: $u}]) { id } }`,
			map[string]any{"c": CompanyNordlys, "u": "1"}, `Variable "$u" of type "String" used in position expecting type "Float"`},
		{"wrong variable value", createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{map[string]any{"employee_id": EmpMetteHansen, "code": "T1", "units": "one"}}}, ""},
		{"unknown input field", createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{map[string]any{"employee_id": EmpMetteHansen, "code": "T1", "units": 1, "hours": 1}}}, `"hours" is not defined`},
		{"missing required variable", createMutation, map[string]any{"pp": item}, `Variable "c"`},
		{"literal of wrong type", `mutation { create_pay_parts(company_id: "MV8x", pay_parts: [{employee_id: "MV8xXzE=", code: "T1", units: "1"}]) { id } }`, nil, "Float cannot represent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.gql(tok, tt.query, tt.vars)
			if len(r.Errors) == 0 {
				t.Fatalf("accepted; data = %s", r.Data)
			}
			if !strings.Contains(r.Errors[0].Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", r.Errors[0].Message, tt.wantMsg)
			}
		})
	}
	st := e.s.State()
	if n := e.payPartCount(); n != 0 {
		t.Errorf("%d pay parts created", n)
	}
	if len(st.Counters.Requests) != 0 {
		t.Errorf("Requests = %v, want nothing executed", st.Counters.Requests)
	}
}

func TestServer_CreatePayParts(t *testing.T) {
	tests := []struct {
		name    string
		company string
		items   []any
		wantMsg string
		wantExt map[string]any
	}{
		{
			name:    "forbidden field",
			items:   []any{t1(1), t1(2), t1(3), map[string]any{"employee_id": EmpMetteHansen, "code": "T1", "units": 1, "amount": 100}},
			wantMsg: "pay_parts[3]: amount is forbidden for code T1",
			wantExt: map[string]any{"code": "VALIDATION_ERROR", "index": 3.0, "field": "amount"},
		},
		{
			name:    "employee of another company",
			items:   []any{map[string]any{"employee_id": "MV8xXzk=", "code": "T1", "units": 1}},
			wantMsg: "pay_parts[0]: employee MV8xXzk= is not in company MV8x",
			wantExt: map[string]any{"code": "VALIDATION_ERROR", "index": 0.0, "field": "employee_id"},
		},
		{
			name:    "unknown code",
			items:   []any{t1(1), map[string]any{"employee_id": EmpMetteHansen, "code": "LOEN", "units": 1}},
			wantMsg: `pay_parts[1]: unknown code "LOEN"`,
			wantExt: map[string]any{"code": "VALIDATION_ERROR", "index": 1.0, "field": "code"},
		},
		{
			name:    "mandatory field missing",
			items:   []any{map[string]any{"employee_id": EmpMetteHansen, "code": "T2", "units": 1}},
			wantMsg: "pay_parts[0]: rate is mandatory for code T2",
			wantExt: map[string]any{"code": "VALIDATION_ERROR", "index": 0.0, "field": "rate"},
		},
		{
			name:    "null item",
			items:   []any{t1(1), nil},
			wantMsg: "pay_parts[1]: pay part is null",
			wantExt: map[string]any{"code": "VALIDATION_ERROR", "index": 1.0},
		},
		{
			name:    "empty list",
			items:   []any{},
			wantMsg: "pay_parts: at least one pay part is required",
			wantExt: map[string]any{"code": "VALIDATION_ERROR", "field": "pay_parts"},
		},
		{
			name:    "invisible company",
			company: CompanyHavblik,
			items:   []any{map[string]any{"employee_id": EmpIdaPoulsen, "code": "T1", "units": 1}},
			wantMsg: "company MV8z not found",
			wantExt: map[string]any{"code": "NOT_FOUND"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			tok := e.accessToken()
			company := CompanyNordlys
			if tt.company != "" {
				company = tt.company
			}
			before := e.s.State()
			r := e.gql(tok, createMutation, map[string]any{"c": company, "pp": tt.items})
			if len(r.Errors) != 1 {
				t.Fatalf("errors = %+v, want one", r.Errors)
			}
			if got := r.Errors[0]; got.Message != tt.wantMsg || !reflect.DeepEqual(got.Extensions, tt.wantExt) {
				t.Errorf("error = %q %v\nwant    %q %v", got.Message, got.Extensions, tt.wantMsg, tt.wantExt)
			}
			if after := e.s.State(); !reflect.DeepEqual(before.Companies, after.Companies) {
				t.Errorf("state changed by a rejected create")
			}
		})
	}

	t.Run("valid batch in input order", func(t *testing.T) {
		e := newEnv(t, Options{})
		tok := e.accessToken()
		var d struct {
			Create []struct {
				ID       string   `json:"id"`
				Code     string   `json:"code"`
				Units    *float64 `json:"units"`
				Amount   *float64 `json:"amount"`
				Employee struct{ ID, Name string }
			} `json:"create_pay_parts"`
		}
		e.mustData(tok, createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{
			map[string]any{"employee_id": EmpSofieJensen, "code": "TILLAEG", "amount": 312.5},
			t1(7.25),
			map[string]any{"employee_id": EmpLarsNielsen, "code": "DIAET", "units": 2, "rate": 0.1, "amount": 0.2},
		}}, &d)
		if len(d.Create) != 3 {
			t.Fatalf("created %d", len(d.Create))
		}
		for i, want := range []struct{ code, emp, name string }{
			{"TILLAEG", EmpSofieJensen, "Sofie Jensen"}, {"T1", EmpMetteHansen, "Mette Hansen"}, {"DIAET", EmpLarsNielsen, "Lars Nielsen"},
		} {
			got := d.Create[i]
			wantID := base64.StdEncoding.EncodeToString([]byte("pp_" + string(rune('1'+i))))
			if got.ID != wantID || got.Code != want.code || got.Employee.ID != want.emp || got.Employee.Name != want.name {
				t.Errorf("item %d = %+v, want id %s %v", i, got, wantID, want)
			}
		}
		pps := e.s.State().Companies[0].PayParts
		if len(pps) != 3 || pps[2].EmployeeName != "Lars Nielsen" || pps[2].Rate.Decimal.String() != "0.1" || pps[2].Amount.Decimal.String() != "0.2" {
			t.Errorf("state = %+v", pps)
		}
		if got := e.s.State().Counters.Requests["create_pay_parts"]; got != 1 {
			t.Errorf("Requests[create_pay_parts] = %d, want 1", got)
		}
	})
}

func TestServer_DeletePayParts(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()
	var d struct {
		Create []struct{ ID string } `json:"create_pay_parts"`
	}
	e.mustData(tok, createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{t1(1), t1(2)}}, &d)
	id1, id2 := d.Create[0].ID, d.Create[1].ID
	const del = `mutation($c: ID!, $ids: [ID]) { delete_pay_parts(company_id: $c, pay_part_ids: $ids) }`

	tests := []struct {
		name    string
		company string
		ids     any
		wantMsg string
	}{
		{"one unknown id", CompanyNordlys, []string{id1, "bm9wZQ=="}, "pay part bm9wZQ== not found in company MV8x"},
		{"id of another company", CompanyFjordtech, []string{id1}, "pay part " + id1 + " not found in company MV8y"},
		{"empty list", CompanyNordlys, []string{}, "pay_part_ids: at least one id is required"},
		{"null list", CompanyNordlys, nil, "pay_part_ids: at least one id is required"},
		{"invisible company", CompanyHavblik, []string{id1}, "company MV8z not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.gql(tok, del, map[string]any{"c": tt.company, "ids": tt.ids})
			if len(r.Errors) != 1 || r.Errors[0].Message != tt.wantMsg {
				t.Fatalf("errors = %+v, want %q", r.Errors, tt.wantMsg)
			}
			if n := e.payPartCount(); n != 2 {
				t.Fatalf("%d pay parts left, want 2 (nothing deleted)", n)
			}
		})
	}
	var ok struct {
		Delete bool `json:"delete_pay_parts"`
	}
	e.mustData(tok, del, map[string]any{"c": CompanyNordlys, "ids": []string{id1}}, &ok)
	if pps := e.s.State().Companies[0].PayParts; !ok.Delete || len(pps) != 1 || pps[0].ID != id2 {
		t.Fatalf("after delete: %v %+v", ok.Delete, pps)
	}
}

func TestServer_DirectEdits(t *testing.T) {
	e := newEnv(t, Options{})
	p, err := e.s.SeedPayPart(CompanyHavblik, paysync.PayPartInput{EmployeeID: EmpIdaPoulsen, Code: "BONUS", Numbers: paysync.Numbers{Amount: paysync.Dec("500")}})
	if err != nil || p.EmployeeName != "Ida Poulsen" {
		t.Fatalf("seed: %+v %v", p, err)
	}
	if _, err := e.s.SeedPayPart(CompanyNordlys, paysync.PayPartInput{EmployeeID: EmpIdaPoulsen, Code: "BONUS"}); err == nil {
		t.Error("seeded a pay part for an employee of another company")
	}
	if err := e.s.DeletePayPartDirect(CompanyNordlys, p.ID); err == nil {
		t.Error("deleted a pay part from the wrong company")
	}
	if err := e.s.DeletePayPartDirect(CompanyHavblik, p.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.payPartCount(); n != 0 {
		t.Fatalf("%d pay parts left", n)
	}
}

func TestServer_HTTPHandling(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()

	t.Run("gzip when asked", func(t *testing.T) {
		raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		defer raw.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, e.base+"/graphql", strings.NewReader(`{"query":"{ pay_parts_meta { code } }"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept-Encoding", "gzip, deflate, br")
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding = %q", resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(zr)
		if !bytes.Contains(b, []byte(`"code":"SYG"`)) {
			t.Fatalf("body = %s", b)
		}
	})
	t.Run("plain when not asked", func(t *testing.T) {
		resp, b, err := e.post(tok, map[string]any{"query": "{ current_company { id } }"}, http.Header{"Accept-Encoding": {"identity"}})
		if err != nil || resp.Header.Get("Content-Encoding") != "" || !bytes.Contains(b, []byte(CompanyNordlys)) {
			t.Fatalf("%v %v %s", err, resp.Header, b)
		}
	})
	t.Run("GET is 405", func(t *testing.T) {
		resp, err := e.hc.Get(e.base + "/graphql?query={current_company{id}}")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("status %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
	t.Run("oversized body is 413", func(t *testing.T) {
		resp, _, err := e.post(tok, map[string]any{"query": "{ current_company { id } }", "pad": strings.Repeat("x", maxGraphQLBody)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("malformed JSON is 400", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/graphql", strings.NewReader(`{"query":`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}
