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
	DeleteSelect      string // its selection set when it returns an object ("" for a scalar)

	// Dialect is the server's naming style, and Names its field and
	// argument names as found (Names.Delete and Names.TopPayParts ""
	// when the server has no such field).
	Dialect Dialect
	Names   Names
	// Inputs are the types of the input: arguments of the camelCase
	// dialect, by field (companiesExt → "CompaniesExtInput"); Wraps the
	// field holding a wrapped list, by field (companiesExt → "companies").
	Inputs map[string]string
	Wraps  map[string]string
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

// Dialect is the naming style of a payroll server's GraphQL API.
type Dialect int

// The dialects.
const (
	// Snake is the spec's: companies(company_ids:), pay_parts_meta,
	// create_pay_parts(company_id:, pay_parts:), bare lists.
	Snake Dialect = iota + 1
	// Camel is Danløn's public doc's: companiesExt(input: {companyIds})
	// { companies {…} }, payPartsMeta { payPartsMeta {…} },
	// createPayParts(input: {companyId, payParts}) { createdPayParts {…} }.
	Camel
)

func (d Dialect) String() string {
	switch d {
	case Snake:
		return "snake_case"
	case Camel:
		return "camelCase"
	}
	return "unknown"
}

// ParseDialect reads "snake" or "camel" ("" is 0: let the probe decide).
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return 0, nil
	case "snake", "snake_case":
		return Snake, nil
	case "camel", "camelcase":
		return Camel, nil
	}
	return 0, fmt.Errorf("parse dialect: %q is not snake or camel", s)
}

// Names are a dialect's field and argument names, and its shapes.
type Names struct {
	Companies, CompanyIDs     string // the companies query and its ids argument
	Employees, EmployeeIDs    string // Company's employees and their ids argument
	PayParts                  string // Company's and Employee's pay parts
	TopPayParts, TopCompanyID string // the top-level pay parts of a company and its argument; "" : none
	Meta                      string // the pay codes query
	UnitsAllowed, RateAllowed string
	AmountAllowed             string
	Current                   string // the current company query
	Create, CompanyID, Items  string // the create mutation, its company and items arguments
	EmployeeID                string // the item's employee field
	Created                   string // the payload field of the created pay parts ("" : a bare list)
	Delete, PayPartIDs        string // the delete mutation and its ids argument; "": none
	Input                     bool   // arguments travel in one input: object
}

// DialectNames is each dialect's vocabulary. The probe checks every name
// against the introspected schema; without introspection they are used
// as they stand.
var DialectNames = map[Dialect]Names{
	Snake: {
		Companies: "companies", CompanyIDs: "company_ids", Employees: "employees", EmployeeIDs: "employee_ids",
		PayParts: "pay_parts", TopPayParts: "pay_parts", TopCompanyID: "company_id", Meta: "pay_parts_meta",
		UnitsAllowed: "units_allowed", RateAllowed: "rate_allowed", AmountAllowed: "amount_allowed",
		Current: "current_company", Create: "create_pay_parts", CompanyID: "company_id", Items: "pay_parts",
		EmployeeID: "employee_id", Delete: "delete_pay_parts", PayPartIDs: "pay_part_ids",
	},
	Camel: {
		Companies: "companiesExt", CompanyIDs: "companyIds", Employees: "employees", EmployeeIDs: "employeeIds",
		PayParts: "payParts", Meta: "payPartsMeta",
		UnitsAllowed: "unitsAllowed", RateAllowed: "rateAllowed", AmountAllowed: "amountAllowed",
		Current: "currentCompany", Create: "createPayParts", CompanyID: "companyId", Items: "payParts",
		EmployeeID: "employeeId", Created: "createdPayParts", Delete: "deletePayParts", PayPartIDs: "payPartIds",
		Input: true,
	},
}

// CurrentCompanyFields are the names the probe looks for on Query for the
// current company, in this order, in either dialect (public clients use
// both against the same API).
var CurrentCompanyFields = []string{"current_company", "currentCompany"}

// dialectMarks is the probe's decision table: the first dialect whose
// query and mutation fields are all on the server is its dialect. A
// server with both is taken as camelCase, today's documented API.
var dialectMarks = []struct {
	Dialect  Dialect
	Query    []string
	Mutation []string
}{
	{Camel, []string{"companiesExt", "payPartsMeta"}, []string{"createPayParts"}},
	{Snake, []string{"companies", "pay_parts_meta"}, []string{"create_pay_parts"}},
}

// decideDialect picks the dialect from the root fields of Query and
// Mutation.
func decideDialect(query, mutation map[string]bool) (Dialect, error) {
	for _, m := range dialectMarks {
		ok := true
		for _, f := range m.Query {
			ok = ok && query[f]
		}
		for _, f := range m.Mutation {
			ok = ok && mutation[f]
		}
		if ok {
			return m.Dialect, nil
		}
	}
	var want []string
	for _, m := range dialectMarks {
		want = append(want, fmt.Sprintf("%s (%s; %s)", m.Dialect, strings.Join(m.Query, ", "), strings.Join(m.Mutation, ", ")))
	}
	return 0, fmt.Errorf("the server speaks neither dialect: want the fields of %s", strings.Join(want, " or "))
}

// DefaultSchema is the spec's reading: Float numbers, Boolean flags, and the
// argument types of the spec.
func DefaultSchema() Schema { return DefaultSchemaFor(Snake) }

// DefaultSchemaFor is DefaultSchema in dialect d. The camelCase dialect's
// input type names are guesses (Danløn's are not public), as the doc's
// shapes: CompaniesExtInput!, EmployeesInput!, CreatePayPartsInput!,
// DeletePayPartsInput! and a delete returning an object.
func DefaultSchemaFor(d Dialect) Schema {
	s := snakeDefaults()
	if d != Camel {
		return s
	}
	n := DialectNames[Camel]
	s.Dialect, s.Names = Camel, n
	s.Inputs = map[string]string{
		n.Companies: "CompaniesExtInput!", n.Employees: "EmployeesInput!",
		n.Create: "CreatePayPartsInput!", n.Delete: "DeletePayPartsInput!",
	}
	s.Wraps = map[string]string{n.Companies: "companies", n.Employees: "employees", n.PayParts: "payParts", n.Meta: "payPartsMeta", n.Create: n.Created}
	s.DeleteReturns, s.DeleteSelect = "DeletePayPartsPayload", "{ __typename }"
	s.EmployeeNumberField, s.EmployeeEmailField = "domainId", "email"
	return s
}

func snakeDefaults() Schema {
	enc := Encoding{Kind: Float}
	return Schema{
		Dialect:           Snake,
		Names:             DialectNames[Snake],
		Inputs:            map[string]string{},
		Wraps:             map[string]string{},
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
	NoProbe   bool       // do not introspect: start from DefaultSchemaFor(Dialect)
	Dialect   Dialect    // the server's dialect (0: the probe decides; without it, snake_case)
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

// DescribeDialect names the dialect and the delete mutation, for people.
func (s Schema) DescribeDialect() string {
	del := "delete: not offered by this server"
	if s.Names.Delete != "" {
		del = "delete: " + s.Names.Delete
	}
	return fmt.Sprintf("dialect %s (%s, %s, %s); %s", s.Dialect, s.Names.Companies, s.Names.Meta, s.Names.Create, del)
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

// parseIntrospection turns an introspection result into a Schema: the
// dialect (force, or the one decideDialect finds), then every operation's
// shape in it.
func parseIntrospection(data []byte, force Dialect) (Schema, error) {
	var in introspection
	if err := json.Unmarshal(data, &in); err != nil {
		return Schema{}, fmt.Errorf("decode introspection: %w", err)
	}
	types := map[string]*introType{}
	for i := range in.Schema.Types {
		types[in.Schema.Types[i].Name] = &in.Schema.Types[i]
	}
	fieldsOf := func(typ string) map[string]bool {
		out := map[string]bool{}
		if t := types[typ]; t != nil {
			for _, f := range t.Fields {
				out[f.Name] = true
			}
		}
		return out
	}
	q := in.Schema.QueryType.Name
	m := ""
	if in.Schema.MutationType != nil {
		m = in.Schema.MutationType.Name
	}
	d := force
	if d == 0 {
		var err error
		if d, err = decideDialect(fieldsOf(q), fieldsOf(m)); err != nil {
			return Schema{}, err
		}
	}
	if m == "" {
		return Schema{}, fmt.Errorf("schema has no mutation type")
	}
	n := DialectNames[d]
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
		return nil, fmt.Errorf("%s has no field %s (%s dialect)", typ, name, d)
	}
	arg := func(f *introField, name string) (*typeRef, error) {
		for _, a := range f.Args {
			if a.Name == name {
				return a.Type, nil
			}
		}
		return nil, fmt.Errorf("%s has no argument %s", f.Name, name)
	}

	s := Schema{In: map[paysync.Field]Encoding{}, Out: map[paysync.Field]Encoding{}, Source: "introspection",
		Dialect: d, Names: n, Inputs: map[string]string{}, Wraps: map[string]string{}}
	var err error
	keep := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	// call records how field f is called: plain arguments (their types
	// returned in argument order) or one input: object holding them
	// (its type recorded in s.Inputs), and whether its list is wrapped.
	call := func(f *introField, args ...string) []string {
		out := make([]string, len(args))
		if n.Input && len(args) > 0 {
			t, e := arg(f, "input")
			if e != nil {
				keep(e)
				return out
			}
			s.Inputs[f.Name] = t.String()
			inNamed := t.named()
			have := map[string]bool{}
			if inNamed != nil && types[*inNamed.Name] != nil {
				for _, inf := range types[*inNamed.Name].InputFields {
					have[inf.Name] = true
				}
			}
			for _, a := range args {
				if !have[a] {
					keep(fmt.Errorf("%s(input: %s) has no field %s", f.Name, t.String(), a))
				}
			}
		} else {
			for i, a := range args {
				t, e := arg(f, a)
				keep(e)
				out[i] = t.String()
			}
		}
		if w := wrapperOf(types, f.Type); w != "" {
			s.Wraps[f.Name] = w
		}
		return out
	}
	// elem is the named type of a field's list elements, through a wrapper.
	elem := func(f *introField) string {
		t := f.Type.named()
		if t == nil {
			return ""
		}
		if w := s.Wraps[f.Name]; w != "" {
			if wf, e := field(*t.Name, w); e == nil {
				t = wf.Type.named()
			}
		}
		if t == nil {
			return ""
		}
		return *t.Name
	}

	companies, e := field(q, n.Companies)
	if e != nil {
		return Schema{}, e
	}
	s.CompanyIDsType = call(companies, n.CompanyIDs)[0]
	companyType := elem(companies)
	emps, e := field(companyType, n.Employees)
	if e != nil {
		return Schema{}, e
	}
	s.EmployeeIDsType = call(emps, n.EmployeeIDs)[0]
	if et := elem(emps); types[et] != nil {
		s.employeeType, s.employeeFields = et, map[string]bool{}
		for _, f := range types[et].Fields {
			if nt := f.Type.named(); nt != nil && nt.Kind == "SCALAR" {
				s.employeeFields[f.Name] = true
			}
		}
		s.EmployeeNumberField = firstOf(s.employeeFields, EmployeeNumberFields)
		s.EmployeeEmailField = firstOf(s.employeeFields, EmployeeEmailFields)
		if pp, e := field(et, n.PayParts); e == nil {
			call(pp)
		}
	}
	if pp, e := field(companyType, n.PayParts); e == nil {
		call(pp)
	} else {
		keep(e)
	}
	s.Names.TopPayParts = ""
	if n.TopPayParts != "" {
		if pp, e := field(q, n.TopPayParts); e == nil {
			s.Names.TopPayParts = n.TopPayParts
			s.PayPartsCompanyID = call(pp, n.TopCompanyID)[0]
		}
	}
	s.Names.Current = firstOf(fieldsOf(q), CurrentCompanyFields)
	if s.Names.Current == "" {
		return Schema{}, fmt.Errorf("%s has none of the fields %s", q, strings.Join(CurrentCompanyFields, ", "))
	}
	meta, e := field(q, n.Meta)
	if e != nil {
		return Schema{}, e
	}
	call(meta)
	create, e := field(m, n.Create)
	if e != nil {
		return Schema{}, e
	}
	createArgs := call(create, n.CompanyID, n.Items)
	s.CreateCompanyID, s.PayPartsInputType = createArgs[0], createArgs[1]
	s.Names.Delete = ""
	if del, e := field(m, n.Delete); e == nil {
		s.Names.Delete = n.Delete
		delArgs := call(del, n.CompanyID, n.PayPartIDs)
		s.DeleteCompanyID, s.PayPartIDsType = delArgs[0], delArgs[1]
		s.DeleteReturns = del.Type.String()
		s.DeleteSelect = scalarSelection(types, del.Type)
	}
	if err != nil {
		return Schema{}, err
	}

	// Numbers in the items' input type.
	var items *typeRef
	if n.Input {
		if t, e := arg(create, "input"); e == nil && t.named() != nil && types[*t.named().Name] != nil {
			for _, f := range types[*t.named().Name].InputFields {
				if f.Name == n.Items {
					items = f.Type
				}
			}
		}
	} else {
		items, _ = arg(create, n.Items)
	}
	inNamed := items.named()
	if inNamed == nil || types[*inNamed.Name] == nil {
		return Schema{}, fmt.Errorf("%s(%s:) has no input type", n.Create, n.Items)
	}
	s.InputTypeName = *inNamed.Name
	s.PayPartsInputType = items.String()
	inFields := map[string]*typeRef{}
	for _, f := range types[s.InputTypeName].InputFields {
		inFields[f.Name] = f.Type
	}
	if _, ok := inFields[n.EmployeeID]; !ok {
		return Schema{}, fmt.Errorf("input %s has no field %s", s.InputTypeName, n.EmployeeID)
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
	outName := elem(create)
	for _, f := range paysync.Fields {
		s.Out[f] = s.In[f]
		if of, e := field(outName, string(f)); e == nil {
			if enc, e := numberEncoding(of.Type); e == nil {
				s.Out[f] = enc
			}
		}
	}

	// The allowed flags.
	metaName := elem(meta)
	for _, name := range []string{n.UnitsAllowed, n.RateAllowed, n.AmountAllowed} {
		f, e := field(metaName, name)
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
					return Schema{}, fmt.Errorf("%s.%s: enum %s value %s is not a known field rule", metaName, name, *t.Name, v.Name)
				}
				s.EnumValues = append(s.EnumValues, v.Name)
			}
			sort.Strings(s.EnumValues)
		default:
			return Schema{}, fmt.Errorf("%s.%s has unsupported type %s", metaName, name, f.Type.String())
		}
		if s.Allowed != 0 && s.Allowed != kind {
			return Schema{}, fmt.Errorf("%s flags have mixed types", n.Meta)
		}
		s.Allowed = kind
	}
	return s, nil
}

// wrapperOf returns the field holding the list when t is an object
// wrapping one list (companiesExt { companies {…} }), else "".
func wrapperOf(types map[string]*introType, t *typeRef) string {
	for t != nil && t.Kind == "NON_NULL" {
		t = t.OfType
	}
	if t == nil || t.Kind != "OBJECT" || t.Name == nil || types[*t.Name] == nil {
		return ""
	}
	list := ""
	for _, f := range types[*t.Name].Fields {
		ft := f.Type
		for ft != nil && ft.Kind == "NON_NULL" {
			ft = ft.OfType
		}
		if ft != nil && ft.Kind == "LIST" {
			if list != "" {
				return "" // more than one list: not a plain wrapper
			}
			list = f.Name
		}
	}
	return list
}

// scalarSelection is the selection set for a field of type t: "" for a
// scalar (or a list of them), else its scalar fields, or __typename
// when it has none.
func scalarSelection(types map[string]*introType, t *typeRef) string {
	n := t.named()
	if n == nil || n.Kind == "SCALAR" || n.Kind == "ENUM" || types[*n.Name] == nil {
		return ""
	}
	var names []string
	for _, f := range types[*n.Name].Fields {
		if ft := f.Type.named(); ft != nil && (ft.Kind == "SCALAR" || ft.Kind == "ENUM") && len(f.Args) == 0 {
			names = append(names, f.Name)
		}
	}
	if len(names) == 0 {
		names = []string{"__typename"}
	}
	return "{ " + strings.Join(names, " ") + " }"
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
	s, err := parseIntrospection(data, c.cfg.Schema.Dialect)
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
