package sandbox

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/template"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/trace/tracer"
	"github.com/shopspring/decimal"

	"github.com/paysync/paysync"
)

// sdlTemplate is the schema, with the wire types the options choose.
var sdlTemplate = template.Must(template.New("sdl").Parse(`schema { query: Query mutation: Mutation }
type Query {
  companies(company_ids: [ID]): [Company]
  pay_parts(company_id: ID!): [PayPart]
  pay_parts_meta: [PayPartMeta]
  current_company: CurrentCompany
}
type Mutation {
  create_pay_parts(company_id: ID!, pay_parts: [{{.Input}}]): [PayPart]
{{if not .NoDelete}}  delete_pay_parts(company_id: ID!, pay_part_ids: [ID]): Boolean
{{end}}}
type Company { id: ID! name: String employees(employee_ids: [ID]): [Employee] pay_parts: [PayPart] }
type Employee { id: ID! name: String{{with .Number}} {{.}}: String{{end}} email: String pay_parts: [PayPart] }
type PayPart { id: ID! code: String units: {{.Num}} rate: {{.Num}} amount: {{.Num}} employee: Employee }
type PayPartMeta { code: String! description: String units_allowed: {{.Rule}} rate_allowed: {{.Rule}} amount_allowed: {{.Rule}} }
type CurrentCompany { id: ID! }
input {{.Input}} { employee_id: ID! code: String! units: {{.Num}} rate: {{.Num}} amount: {{.Num}} }
{{if eq .Rule "PayPartFieldRule"}}enum PayPartFieldRule { MANDATORY OPTIONAL FORBIDDEN }
{{end}}`))

// camelTemplate is the camelCase dialect of Danløn's public doc: one
// input: object per call, lists wrapped in an object, createPayParts
// answering { createdPayParts }. Its names beyond the doc's examples
// (input and payload types, deletePayParts) are guesses.
var camelTemplate = template.Must(template.New("camel").Parse(`schema { query: Query mutation: Mutation }
type Query {
  companiesExt(input: CompaniesExtInput): CompaniesPayload
  payPartsMeta: PayPartsMetaPayload
  currentCompany: CurrentCompany
}
type Mutation {
  createPayParts(input: CreatePayPartsInput!): CreatePayPartsPayload
{{if not .NoDelete}}  deletePayParts(input: DeletePayPartsInput!): DeletePayPartsPayload
{{end}}}
input CompaniesExtInput { companyIds: [ID] }
input EmployeesInput { employeeIds: [ID] }
input CreatePayPartsInput { companyId: ID! payParts: [{{.Input}}] }
{{if not .NoDelete}}input DeletePayPartsInput { companyId: ID! payPartIds: [ID] }
{{end}}type CompaniesPayload { companies: [Company] }
type Company { id: ID! name: String employees(input: EmployeesInput): EmployeesPayload payParts: PayPartsPayload }
type EmployeesPayload { employees: [Employee] }
type Employee { id: ID! name: String{{with .Number}} {{.}}: String{{end}} email: String payParts: PayPartsPayload }
type PayPartsPayload { payParts: [PayPart] }
type PayPart { id: ID! code: String units: {{.Num}} rate: {{.Num}} amount: {{.Num}} employee: PayPartEmployee }
type PayPartEmployee { id: ID! name: String }
type PayPartsMetaPayload { payPartsMeta: [PayPartMeta] }
type PayPartMeta { code: String! description: String unitsAllowed: {{.Rule}} rateAllowed: {{.Rule}} amountAllowed: {{.Rule}} }
type CurrentCompany { id: ID! }
type CreatePayPartsPayload { createdPayParts: [PayPart] }
{{if not .NoDelete}}type DeletePayPartsPayload { deletedPayPartIds: [ID] }
{{end}}input {{.Input}} { employeeId: ID! code: String! units: {{.Num}} rate: {{.Num}} amount: {{.Num}} }
{{if eq .Rule "PayPartFieldRule"}}enum PayPartFieldRule { MANDATORY OPTIONAL FORBIDDEN }
{{end}}`))

// SDL returns the GraphQL schema the sandbox serves with opts (defaults
// filled as New fills them).
func SDL(opts Options) string {
	opts = opts.withDefaults()
	data := struct {
		Num, Rule, Input, Number string
		NoDelete                 bool
	}{Num: "Float", Rule: "Boolean", Input: opts.InputTypeName, Number: opts.EmployeeNumberField, NoDelete: opts.NoDelete}
	if data.Number == "none" {
		data.Number = ""
	}
	if opts.Numbers == NumbersInt {
		data.Num = "Int"
	}
	if opts.Allowed == AllowedEnum {
		data.Rule = "PayPartFieldRule"
	}
	tmpl := sdlTemplate
	if opts.Dialect == CamelCase {
		tmpl = camelTemplate
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("sandbox: render schema: %v", err)) // the template is a constant
	}
	return b.String()
}

// newSchema parses the SDL with resolvers whose Go types match the wire
// types: graph-gophers checks Float=float64, Int=int32 and enum=string at
// parse time.
func newSchema(st *store, opts Options, tr tracer.Tracer) *graphql.Schema {
	sdl := SDL(opts)
	schemaOpts := []graphql.SchemaOpt{graphql.UseFieldResolvers(), graphql.Tracer(tr)}
	scale := opts.IntScale
	intCodec := func(d decimal.Decimal) (int32, error) { return decimalToInt(d, scale) }
	intIn := func(v int32) (decimal.Decimal, error) { return decimal.New(int64(v), -scale), nil }
	boolRule := paysync.FieldRule.Allowed
	enumRule := paysync.FieldRule.String
	camel := opts.Dialect == CamelCase
	switch {
	case opts.Numbers == NumbersInt && opts.Allowed == AllowedEnum:
		return graphql.MustParseSchema(sdl, rootFor(camel, &schemaRoot[int32, string]{st, intIn, intCodec, enumRule}), schemaOpts...)
	case opts.Numbers == NumbersInt:
		return graphql.MustParseSchema(sdl, rootFor(camel, &schemaRoot[int32, bool]{st, intIn, intCodec, boolRule}), schemaOpts...)
	case opts.Allowed == AllowedEnum:
		return graphql.MustParseSchema(sdl, rootFor(camel, &schemaRoot[float64, string]{st, floatToDecimal, decimalToFloat, enumRule}), schemaOpts...)
	default:
		return graphql.MustParseSchema(sdl, rootFor(camel, &schemaRoot[float64, bool]{st, floatToDecimal, decimalToFloat, boolRule}), schemaOpts...)
	}
}

// rootFor is r, or r in the camelCase dialect's shapes.
func rootFor[N number, R ruleValue](camel bool, r *schemaRoot[N, R]) any {
	if camel {
		return &camelRoot[N, R]{r}
	}
	return r
}

// floatToDecimal converts through the shortest decimal representation
// of f, so 7.1 becomes exactly 7.1.
func floatToDecimal(f float64) (decimal.Decimal, error) {
	return decimal.NewFromString(strconv.FormatFloat(f, 'g', -1, 64))
}

func decimalToFloat(d decimal.Decimal) (float64, error) {
	return strconv.ParseFloat(d.String(), 64)
}

// decimalToInt scales d to an Int carrying scale decimal places.
func decimalToInt(d decimal.Decimal, scale int32) (int32, error) {
	s := d.Shift(scale)
	if !s.IsInteger() {
		return 0, fmt.Errorf("%s has more than %d decimal places", d, scale)
	}
	if s.LessThan(decimal.NewFromInt(math.MinInt32)) || s.GreaterThan(decimal.NewFromInt(math.MaxInt32)) {
		return 0, fmt.Errorf("%s does not fit a 32-bit Int with %d decimal places", d, scale)
	}
	return int32(s.IntPart()), nil
}

// number is the Go type of units, rate and amount on the wire.
type number interface{ float64 | int32 }

// ruleValue is the Go type of the *_allowed fields on the wire.
type ruleValue interface{ bool | string }

// schemaRoot resolves Query and Mutation, and carries the wire
// conversions to the resolvers below it.
type schemaRoot[N number, R ruleValue] struct {
	st      *store
	numIn   func(N) (decimal.Decimal, error)
	numOut  func(decimal.Decimal) (N, error)
	ruleOut func(paysync.FieldRule) R
}

// payPartInput is an element of create_pay_parts' pay_parts argument.
type payPartInput[N number] struct {
	EmployeeID graphql.ID
	Code       string
	Units      *N
	Rate       *N
	Amount     *N
}

func idList(ids *[]*graphql.ID) []string {
	if ids == nil {
		return nil
	}
	out := make([]string, 0, len(*ids))
	for _, id := range *ids {
		if id != nil {
			out = append(out, string(*id))
		}
	}
	return out
}

func (r *schemaRoot[N, R]) Companies(ctx context.Context, args struct{ CompanyIDs *[]*graphql.ID }) *[]*companyResolver[N, R] {
	cs := r.st.companiesOf(userFrom(ctx), idList(args.CompanyIDs))
	out := make([]*companyResolver[N, R], len(cs))
	for i, c := range cs {
		out[i] = &companyResolver[N, R]{r: r, c: c}
	}
	return &out
}

func (r *schemaRoot[N, R]) PayParts(ctx context.Context, args struct{ CompanyID graphql.ID }) (*[]*payPartResolver[N, R], error) {
	pps, err := r.st.visiblePayParts(userFrom(ctx), string(args.CompanyID))
	if err != nil {
		return nil, err
	}
	return r.payPartList(string(args.CompanyID), pps)
}

func (r *schemaRoot[N, R]) PayPartsMeta() *[]*metaResolver[R] {
	out := make([]*metaResolver[R], len(r.st.meta))
	for i, m := range r.st.meta {
		out[i] = &metaResolver[R]{m: m, ruleOut: r.ruleOut}
	}
	return &out
}

func (r *schemaRoot[N, R]) CurrentCompany(ctx context.Context) *currentCompanyResolver {
	cs := r.st.companiesOf(userFrom(ctx), nil)
	if len(cs) == 0 {
		return nil
	}
	return &currentCompanyResolver{id: cs[0].id}
}

func (r *schemaRoot[N, R]) CreatePayParts(ctx context.Context, args struct {
	CompanyID graphql.ID
	PayParts  *[]*payPartInput[N]
}) (*[]*payPartResolver[N, R], error) {
	var items []paysync.PayPartInput
	if args.PayParts != nil {
		items = make([]paysync.PayPartInput, len(*args.PayParts))
		for i, in := range *args.PayParts {
			if in == nil {
				return nil, invalidItem(i, "", "pay part is null")
			}
			items[i] = paysync.PayPartInput{EmployeeID: string(in.EmployeeID), Code: in.Code}
			for j, v := range []*N{in.Units, in.Rate, in.Amount} {
				f := paysync.Fields[j]
				if v == nil {
					continue
				}
				d, err := r.numIn(*v)
				if err != nil {
					return nil, invalidItem(i, string(f), "%s: %v", f, err)
				}
				items[i].Set(f, decimal.NewNullDecimal(d))
			}
		}
	}
	created, err := r.st.create(userFrom(ctx), string(args.CompanyID), items)
	if err != nil {
		return nil, err
	}
	if r.st.onCreate != nil {
		r.st.onCreate(string(args.CompanyID), created)
	}
	return r.payPartList(string(args.CompanyID), created)
}

func (r *schemaRoot[N, R]) DeletePayParts(ctx context.Context, args struct {
	CompanyID  graphql.ID
	PayPartIDs *[]*graphql.ID
}) (*bool, error) {
	if err := r.st.delete(userFrom(ctx), string(args.CompanyID), idList(args.PayPartIDs)); err != nil {
		return nil, err
	}
	ok := true
	return &ok, nil
}

// payPartList converts the numbers of pay parts to the wire up front: a
// field resolver that can fail makes graph-gophers resolve every element
// of a list in its own goroutine, which cost more than the rest of a
// create_pay_parts call of 100 items.
func (r *schemaRoot[N, R]) payPartList(companyID string, pps []paysync.PayPart) (*[]*payPartResolver[N, R], error) {
	out := make([]*payPartResolver[N, R], len(pps))
	for i, p := range pps {
		pr := &payPartResolver[N, R]{r: r, companyID: companyID, p: p}
		for j, f := range paysync.Fields {
			v := p.Get(f)
			if !v.Valid {
				continue
			}
			n, err := r.numOut(v.Decimal)
			if err != nil {
				return nil, fmt.Errorf("pay part %s: %s: %w", p.ID, f, err)
			}
			pr.nums[j] = &n
		}
		out[i] = pr
	}
	return &out, nil
}

type companyResolver[N number, R ruleValue] struct {
	r *schemaRoot[N, R]
	c companyView
}

func (c *companyResolver[N, R]) ID() graphql.ID { return graphql.ID(c.c.id) }
func (c *companyResolver[N, R]) Name() *string  { return &c.c.name }

func (c *companyResolver[N, R]) Employees(args struct{ EmployeeIDs *[]*graphql.ID }) *[]*employeeResolver[N, R] {
	es := c.r.st.employees(c.c.id, idList(args.EmployeeIDs))
	out := make([]*employeeResolver[N, R], len(es))
	for i, e := range es {
		out[i] = &employeeResolver[N, R]{r: c.r, companyID: c.c.id, e: e}
	}
	return &out
}

func (c *companyResolver[N, R]) PayParts() (*[]*payPartResolver[N, R], error) {
	return c.r.payPartList(c.c.id, c.r.st.payParts(c.c.id, ""))
}

type employeeResolver[N number, R ruleValue] struct {
	r         *schemaRoot[N, R]
	companyID string
	e         paysync.Employee
}

func (e *employeeResolver[N, R]) ID() graphql.ID { return graphql.ID(e.e.ID) }
func (e *employeeResolver[N, R]) Name() *string  { return &e.e.Name }
func (e *employeeResolver[N, R]) Email() *string { return optional(e.e.Email) }

// EmployeeNumber, DomainId and Number serve the number under each name of
// EmployeeNumberFields (graph-gophers matches employee_number and
// employeeNumber to EmployeeNumber, domainId and domain_id to DomainId);
// the schema has at most one of them.
func (e *employeeResolver[N, R]) EmployeeNumber() *string { return optional(e.e.Number) }
func (e *employeeResolver[N, R]) DomainId() *string       { return optional(e.e.Number) }
func (e *employeeResolver[N, R]) Number() *string         { return optional(e.e.Number) }

// optional is null for "".
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (e *employeeResolver[N, R]) PayParts() (*[]*payPartResolver[N, R], error) {
	return e.r.payPartList(e.companyID, e.r.st.payParts(e.companyID, e.e.ID))
}

type payPartResolver[N number, R ruleValue] struct {
	r         *schemaRoot[N, R]
	companyID string
	p         paysync.PayPart
	nums      [3]*N // units, rate, amount on the wire (payPartList), in paysync.Fields order
}

func (p *payPartResolver[N, R]) ID() graphql.ID { return graphql.ID(p.p.ID) }
func (p *payPartResolver[N, R]) Code() *string  { return &p.p.Code }
func (p *payPartResolver[N, R]) Units() *N      { return p.nums[0] }
func (p *payPartResolver[N, R]) Rate() *N       { return p.nums[1] }
func (p *payPartResolver[N, R]) Amount() *N     { return p.nums[2] }

func (p *payPartResolver[N, R]) Employee() *employeeResolver[N, R] {
	return &employeeResolver[N, R]{r: p.r, companyID: p.companyID, e: paysync.Employee{ID: p.p.EmployeeID, Name: p.p.EmployeeName}}
}

type metaResolver[R ruleValue] struct {
	m       paysync.PayPartMeta
	ruleOut func(paysync.FieldRule) R
}

func (m *metaResolver[R]) Code() string         { return m.m.Code }
func (m *metaResolver[R]) Description() *string { return &m.m.Description }
func (m *metaResolver[R]) UnitsAllowed() *R     { return m.rule(m.m.Units) }
func (m *metaResolver[R]) RateAllowed() *R      { return m.rule(m.m.Rate) }
func (m *metaResolver[R]) AmountAllowed() *R    { return m.rule(m.m.Amount) }
func (m *metaResolver[R]) rule(f paysync.FieldRule) *R {
	v := m.ruleOut(f)
	return &v
}

type currentCompanyResolver struct{ id string }

func (c *currentCompanyResolver) ID() graphql.ID { return graphql.ID(c.id) }
