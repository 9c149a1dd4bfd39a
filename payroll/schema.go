package payroll

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// AllowedKind is how the server types the *_allowed flags of pay_parts_meta.
type AllowedKind int

// The allowed-flag kinds.
const (
	AllowedBoolean AllowedKind = iota + 1 // true = allowed, false = forbidden
	AllowedEnum                           // an enum such as MANDATORY/OPTIONAL/FORBIDDEN
	AllowedString                         // a String carrying such words
)

func (k AllowedKind) String() string {
	switch k {
	case AllowedBoolean:
		return "Boolean"
	case AllowedEnum:
		return "enum"
	case AllowedString:
		return "String"
	}
	return "unknown"
}

// Schema is what paysync needs to know about the server's GraphQL schema.
// Probe discovers it by introspection; DefaultSchema is the spec's reading,
// for servers that disable introspection.
type Schema struct {
	// Wire encodings of units, rate and amount in PayPartInput (sent) and
	// PayPart (received).
	In  map[paysync.Field]Encoding
	Out map[paysync.Field]Encoding

	Allowed     AllowedKind
	AllowedEnum string   // enum type name when Allowed == AllowedEnum
	EnumValues  []string // its values

	// Variable types, exactly as the server declares the arguments.
	CompanyIDsType    string // companies(company_ids:)
	EmployeeIDsType   string // Company.employees(employee_ids:)
	PayPartsCompanyID string // pay_parts(company_id:)
	CreateCompanyID   string // create_pay_parts(company_id:)
	PayPartsInputType string // create_pay_parts(pay_parts:)
	DeleteCompanyID   string // delete_pay_parts(company_id:)
	PayPartIDsType    string // delete_pay_parts(pay_part_ids:)
	InputTypeName     string // the named input type inside PayPartsInputType
	DeleteReturns     string // the type delete_pay_parts returns
	// Fields of Employee paysync reads beside id and name, "" when the
	// server has none: the employee number (EmployeeNumberFields) and
	// the e-mail (EmployeeEmailFields).
	EmployeeNumberField string
	EmployeeEmailField  string
	Source              string          // "introspection" or "defaults"
	employeeType        string          // Employee's type name, by introspection
	employeeFields      map[string]bool // its scalar fields, by introspection
	intScaleOverridden  bool
}

// DefaultSchema is the spec's reading: Float numbers, Boolean flags, and the
// argument types of the spec.
func DefaultSchema() Schema {
	enc := Encoding{Kind: Float}
	return Schema{
		In:                map[paysync.Field]Encoding{paysync.FieldUnits: enc, paysync.FieldRate: enc, paysync.FieldAmount: enc},
		Out:               map[paysync.Field]Encoding{paysync.FieldUnits: enc, paysync.FieldRate: enc, paysync.FieldAmount: enc},
		Allowed:           AllowedBoolean,
		CompanyIDsType:    "[ID]",
		EmployeeIDsType:   "[ID]",
		PayPartsCompanyID: "ID!",
		CreateCompanyID:   "ID!",
		PayPartsInputType: "[PayPartInput]",
		DeleteCompanyID:   "ID!",
		PayPartIDsType:    "[ID]",
		InputTypeName:     "PayPartInput",
		DeleteReturns:     "Boolean",
		Source:            "defaults",
	}
}

// SchemaOverrides replace what the probe found (or the defaults when the
// probe is off). Zero values leave a setting alone.
type SchemaOverrides struct {
	NoProbe   bool       // do not introspect: start from DefaultSchema
	Numbers   NumberKind // force Float or Int for all three numbers, both ways
	IntScale  int32      // decimal places of Int numbers (default 2)
	InputType string     // name of the PayPartInput type
	IDType    string     // scalar of the ID arguments (e.g. "String" instead of "ID")
	// EmployeeNumberField and EmployeeEmailField name Employee's number
	// and e-mail fields ("none": read none), for servers without
	// introspection; with it, a field named here must exist.
	EmployeeNumberField string
	EmployeeEmailField  string
}

// EmployeeNumberFields and EmployeeEmailFields are the names the probe
// looks for on Employee, in this order: the spec's snake_case, camelCase,
// and Danløn's public doc's domainId.
var (
	EmployeeNumberFields = []string{"employee_number", "employeeNumber", "domainId", "domain_id", "number"}
	EmployeeEmailFields  = []string{"email", "e_mail", "email_address", "emailAddress"}
)

// Apply returns s with the overrides applied.
func (o SchemaOverrides) Apply(s Schema) Schema {
	s.In = cloneEnc(s.In)
	s.Out = cloneEnc(s.Out)
	scale := o.IntScale
	if scale == 0 {
		scale = 2
	}
	for _, m := range []map[paysync.Field]Encoding{s.In, s.Out} {
		for f, e := range m {
			if o.Numbers != 0 {
				e.Kind = o.Numbers
			}
			if e.Kind == Int {
				e.Scale = scale
			}
			m[f] = e
		}
	}
	if o.InputType != "" {
		s.PayPartsInputType = strings.Replace(s.PayPartsInputType, s.InputTypeName, o.InputType, 1)
		s.InputTypeName = o.InputType
	}
	for _, f := range []struct{ set, field *string }{{&o.EmployeeNumberField, &s.EmployeeNumberField}, {&o.EmployeeEmailField, &s.EmployeeEmailField}} {
		switch *f.set {
		case "":
		case "none":
			*f.field = ""
		default:
			*f.field = *f.set
		}
	}
	if o.IDType != "" {
		for _, p := range []*string{&s.CompanyIDsType, &s.EmployeeIDsType, &s.PayPartsCompanyID, &s.CreateCompanyID, &s.DeleteCompanyID, &s.PayPartIDsType} {
			*p = replaceNamed(*p, "ID", o.IDType)
		}
	}
	return s
}

func cloneEnc(m map[paysync.Field]Encoding) map[paysync.Field]Encoding {
	out := make(map[paysync.Field]Encoding, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// replaceNamed swaps the named type inside a type string: "[ID!]" → "[String!]".
func replaceNamed(t, from, to string) string {
	inner := strings.Trim(t, "[]!")
	if inner != from {
		return t
	}
	return strings.Replace(t, from, to, 1)
}

// Describe is a one-line summary for people.
func (s Schema) Describe() string {
	var nums []string
	for _, f := range paysync.Fields {
		nums = append(nums, fmt.Sprintf("%s=%s", f, s.In[f]))
	}
	allowed := s.Allowed.String()
	if s.Allowed == AllowedEnum {
		allowed = fmt.Sprintf("enum %s{%s}", s.AllowedEnum, strings.Join(s.EnumValues, ","))
	}
	return fmt.Sprintf("%s (from %s); *_allowed %s; pay_parts: %s", strings.Join(nums, " "), s.Source, allowed, s.PayPartsInputType)
}

// DescribeEmployees says which employee fields paysync reads beside id and
// name, for people.
func (s Schema) DescribeEmployees() string {
	number, email := s.EmployeeNumberField, s.EmployeeEmailField
	if number == "" {
		number = "none"
	}
	if email == "" {
		email = "none"
	}
	return fmt.Sprintf("employee number field %s, e-mail field %s", number, email)
}

const probeQuery = `query SchemaProbe {
  __schema {
    queryType { name }
    mutationType { name }
    types {
      kind
      name
      fields(includeDeprecated: true) { name args { name type { ...TypeRef } } type { ...TypeRef } }
      inputFields { name type { ...TypeRef } }
      enumValues(includeDeprecated: true) { name }
    }
  }
}
fragment TypeRef on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } }`

type typeRef struct {
	Kind   string   `json:"kind"`
	Name   *string  `json:"name"`
	OfType *typeRef `json:"ofType"`
}

// String renders the type as it is written in a variable declaration.
func (t *typeRef) String() string {
	if t == nil {
		return ""
	}
	switch t.Kind {
	case "NON_NULL":
		return t.OfType.String() + "!"
	case "LIST":
		return "[" + t.OfType.String() + "]"
	}
	if t.Name != nil {
		return *t.Name
	}
	return ""
}

// named returns the innermost named type.
func (t *typeRef) named() *typeRef {
	for t != nil && t.Name == nil {
		t = t.OfType
	}
	return t
}

type introField struct {
	Name string `json:"name"`
	Args []struct {
		Name string   `json:"name"`
		Type *typeRef `json:"type"`
	} `json:"args"`
	Type *typeRef `json:"type"`
}

type introType struct {
	Kind        string       `json:"kind"`
	Name        string       `json:"name"`
	Fields      []introField `json:"fields"`
	InputFields []struct {
		Name string   `json:"name"`
		Type *typeRef `json:"type"`
	} `json:"inputFields"`
	EnumValues []struct {
		Name string `json:"name"`
	} `json:"enumValues"`
}

type introspection struct {
	Schema struct {
		QueryType    struct{ Name string }  `json:"queryType"`
		MutationType *struct{ Name string } `json:"mutationType"`
		Types        []introType            `json:"types"`
	} `json:"__schema"`
}

// parseIntrospection turns an introspection result into a Schema.
func parseIntrospection(data []byte) (Schema, error) {
	var in introspection
	if err := json.Unmarshal(data, &in); err != nil {
		return Schema{}, fmt.Errorf("decode introspection: %w", err)
	}
	types := map[string]*introType{}
	for i := range in.Schema.Types {
		types[in.Schema.Types[i].Name] = &in.Schema.Types[i]
	}
	field := func(typ, name string) (*introField, error) {
		t := types[typ]
		if t == nil {
			return nil, fmt.Errorf("type %s missing", typ)
		}
		for i := range t.Fields {
			if t.Fields[i].Name == name {
				return &t.Fields[i], nil
			}
		}
		hint := ""
		if typ == in.Schema.QueryType.Name && types[typ] != nil {
			for _, f := range types[typ].Fields {
				if f.Name == "companiesExt" || f.Name == "payPartsMeta" {
					hint = " (this server speaks the camelCase API; paysync speaks the snake_case API of the spec)"
				}
			}
		}
		return nil, fmt.Errorf("%s has no field %s%s", typ, name, hint)
	}
	arg := func(f *introField, name string) (string, error) {
		for _, a := range f.Args {
			if a.Name == name {
				return a.Type.String(), nil
			}
		}
		return "", fmt.Errorf("%s has no argument %s", f.Name, name)
	}

	s := Schema{In: map[paysync.Field]Encoding{}, Out: map[paysync.Field]Encoding{}, Source: "introspection"}
	q := in.Schema.QueryType.Name
	if in.Schema.MutationType == nil {
		return Schema{}, fmt.Errorf("schema has no mutation type")
	}
	m := in.Schema.MutationType.Name
	var err error
	must := func(v string, e error) string {
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	companies, e := field(q, "companies")
	if e != nil {
		return Schema{}, e
	}
	s.CompanyIDsType = must(arg(companies, "company_ids"))
	companyType := companies.Type.named()
	if companyType == nil {
		return Schema{}, fmt.Errorf("companies has no named type")
	}
	emps, e := field(*companyType.Name, "employees")
	if e != nil {
		return Schema{}, e
	}
	s.EmployeeIDsType = must(arg(emps, "employee_ids"))
	if et := emps.Type.named(); et != nil && types[*et.Name] != nil {
		s.employeeType, s.employeeFields = *et.Name, map[string]bool{}
		for _, f := range types[*et.Name].Fields {
			if n := f.Type.named(); n != nil && n.Kind == "SCALAR" {
				s.employeeFields[f.Name] = true
			}
		}
		s.EmployeeNumberField = firstOf(s.employeeFields, EmployeeNumberFields)
		s.EmployeeEmailField = firstOf(s.employeeFields, EmployeeEmailFields)
	}
	pp, e := field(q, "pay_parts")
	if e != nil {
		return Schema{}, e
	}
	s.PayPartsCompanyID = must(arg(pp, "company_id"))
	if _, e := field(q, "current_company"); e != nil {
		return Schema{}, e
	}
	meta, e := field(q, "pay_parts_meta")
	if e != nil {
		return Schema{}, e
	}
	create, e := field(m, "create_pay_parts")
	if e != nil {
		return Schema{}, e
	}
	s.CreateCompanyID = must(arg(create, "company_id"))
	s.PayPartsInputType = must(arg(create, "pay_parts"))
	del, e := field(m, "delete_pay_parts")
	if e != nil {
		return Schema{}, e
	}
	s.DeleteCompanyID = must(arg(del, "company_id"))
	s.PayPartIDsType = must(arg(del, "pay_part_ids"))
	s.DeleteReturns = del.Type.String()
	if err != nil {
		return Schema{}, err
	}

	// Numbers in the input type.
	inNamed := create.Args[0].Type.named()
	for _, a := range create.Args {
		if a.Name == "pay_parts" {
			inNamed = a.Type.named()
		}
	}
	if inNamed == nil || types[*inNamed.Name] == nil {
		return Schema{}, fmt.Errorf("create_pay_parts(pay_parts:) has no input type")
	}
	s.InputTypeName = *inNamed.Name
	inFields := map[string]*typeRef{}
	for _, f := range types[s.InputTypeName].InputFields {
		inFields[f.Name] = f.Type
	}
	for _, f := range paysync.Fields {
		t, ok := inFields[string(f)]
		if !ok {
			return Schema{}, fmt.Errorf("input %s has no field %s", s.InputTypeName, f)
		}
		enc, e := numberEncoding(t)
		if e != nil {
			return Schema{}, fmt.Errorf("input %s.%s: %w", s.InputTypeName, f, e)
		}
		s.In[f] = enc
	}
	// Numbers in the output type (fall back to the input's).
	outNamed := create.Type.named()
	for _, f := range paysync.Fields {
		s.Out[f] = s.In[f]
		if outNamed == nil {
			continue
		}
		if of, e := field(*outNamed.Name, string(f)); e == nil {
			if enc, e := numberEncoding(of.Type); e == nil {
				s.Out[f] = enc
			}
		}
	}

	// *_allowed flags.
	metaNamed := meta.Type.named()
	if metaNamed == nil {
		return Schema{}, fmt.Errorf("pay_parts_meta has no named type")
	}
	for _, name := range []string{"units_allowed", "rate_allowed", "amount_allowed"} {
		f, e := field(*metaNamed.Name, name)
		if e != nil {
			return Schema{}, e
		}
		t := f.Type.named()
		var kind AllowedKind
		switch {
		case t.Kind == "SCALAR" && *t.Name == "Boolean":
			kind = AllowedBoolean
		case t.Kind == "SCALAR" && *t.Name == "String":
			kind = AllowedString
		case t.Kind == "ENUM":
			kind = AllowedEnum
			s.AllowedEnum = *t.Name
			s.EnumValues = nil
			for _, v := range types[*t.Name].EnumValues {
				if _, err := paysync.ParseFieldRule(v.Name); err != nil {
					return Schema{}, fmt.Errorf("%s.%s: enum %s value %s is not a known field rule", *metaNamed.Name, name, *t.Name, v.Name)
				}
				s.EnumValues = append(s.EnumValues, v.Name)
			}
			sort.Strings(s.EnumValues)
		default:
			return Schema{}, fmt.Errorf("%s.%s has unsupported type %s", *metaNamed.Name, name, f.Type.String())
		}
		if s.Allowed != 0 && s.Allowed != kind {
			return Schema{}, fmt.Errorf("pay_parts_meta flags have mixed types")
		}
		s.Allowed = kind
	}
	return s, nil
}

// CheckFieldOverride checks an employee field override: "" (the probe's),
// "none", or a GraphQL field name.
func CheckFieldOverride(name string) error {
	if name == "" || name == "none" {
		return nil
	}
	for i, r := range name {
		if r != '_' && !('a' <= r && r <= 'z') && !('A' <= r && r <= 'Z') && (i == 0 || !('0' <= r && r <= '9')) {
			return fmt.Errorf("%q is not a GraphQL field name or none", name)
		}
	}
	return nil
}

// firstOf returns the first of names in fields, or "".
func firstOf(fields map[string]bool, names []string) string {
	for _, name := range names {
		if fields[name] {
			return name
		}
	}
	return ""
}

// checkEmployeeFields refuses an override that names an employee field
// the introspected server does not have: every employee read would fail.
func (o SchemaOverrides) checkEmployeeFields(s Schema) error {
	for _, f := range []struct{ env, name string }{
		{"PAYSYNC_EMPLOYEE_NUMBER_FIELD", o.EmployeeNumberField}, {"PAYSYNC_EMPLOYEE_EMAIL_FIELD", o.EmployeeEmailField},
	} {
		if f.name == "" || f.name == "none" || s.employeeFields == nil || s.employeeFields[f.name] {
			continue
		}
		have := make([]string, 0, len(s.employeeFields))
		for k := range s.employeeFields {
			have = append(have, k)
		}
		sort.Strings(have)
		return fmt.Errorf("%s=%s: %s has no field %s (its fields: %s)", f.env, f.name, s.employeeType, f.name, strings.Join(have, ", "))
	}
	return nil
}

func numberEncoding(t *typeRef) (Encoding, error) {
	n := t.named()
	if n == nil || n.Kind != "SCALAR" {
		return Encoding{}, fmt.Errorf("type %s is not a scalar", t.String())
	}
	switch *n.Name {
	case "Float":
		return Encoding{Kind: Float}, nil
	case "Int":
		return Encoding{Kind: Int, Scale: 2}, nil
	}
	return Encoding{}, fmt.Errorf("unsupported number type %s (set PAYSYNC_WIRE_NUMBERS to float or int)", *n.Name)
}

// probe introspects the server.
func (c *Client) probe(ctx context.Context) (Schema, error) {
	data, err := c.exec(ctx, "SchemaProbe", probeQuery, nil)
	if err != nil {
		var pe *Error
		if asError(err, &pe) && pe.Class == NotApplied && strings.Contains(strings.ToLower(pe.Reason), "introspection") {
			pe.Reason += " (the server disables introspection: set PAYSYNC_SCHEMA_PROBE=false and PAYSYNC_WIRE_NUMBERS)"
		}
		return Schema{}, err
	}
	s, err := parseIntrospection(data)
	if err == nil {
		err = c.cfg.Schema.checkEmployeeFields(s)
	}
	if err != nil {
		return Schema{}, &Error{Op: "SchemaProbe", Class: Rejected, Index: -1, Reason: "unexpected schema: " + err.Error(), Err: err}
	}
	return s, nil
}

// CheckWire reports whether d can be sent exactly as field f.
func (s Schema) CheckWire(f paysync.Field, d decimal.Decimal) error {
	enc, ok := s.In[f]
	if !ok {
		return fmt.Errorf("%s: the server's input type has no such field", f)
	}
	if _, err := enc.Encode(d); err != nil {
		return fmt.Errorf("%s %w", f, err)
	}
	return nil
}
