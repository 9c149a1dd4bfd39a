package sandbox

import (
	"context"

	graphql "github.com/graph-gophers/graphql-go"
)

// camelRoot serves the camelCase dialect with the snake_case resolvers:
// it takes the arguments out of the input: objects and wraps the lists
// in their payload objects.
type camelRoot[N number, R ruleValue] struct {
	*schemaRoot[N, R]
}

type companiesInput struct{ CompanyIDs *[]*graphql.ID }

func (r *camelRoot[N, R]) CompaniesExt(ctx context.Context, args struct{ Input *companiesInput }) *companiesPayload[N, R] {
	var ids *[]*graphql.ID
	if args.Input != nil {
		ids = args.Input.CompanyIDs
	}
	cs := r.schemaRoot.Companies(ctx, struct{ CompanyIDs *[]*graphql.ID }{ids})
	out := make([]*camelCompany[N, R], len(*cs))
	for i, c := range *cs {
		out[i] = &camelCompany[N, R]{c}
	}
	return &companiesPayload[N, R]{&out}
}

func (r *camelRoot[N, R]) PayPartsMeta() *metaPayload[R] {
	return &metaPayload[R]{r.schemaRoot.PayPartsMeta()}
}

func (r *camelRoot[N, R]) CreatePayParts(ctx context.Context, args struct {
	Input struct {
		CompanyID graphql.ID
		PayParts  *[]*payPartInput[N]
	}
}) (*createdPayload[N, R], error) {
	created, err := r.schemaRoot.CreatePayParts(ctx, struct {
		CompanyID graphql.ID
		PayParts  *[]*payPartInput[N]
	}{args.Input.CompanyID, args.Input.PayParts})
	if err != nil {
		return nil, err
	}
	return &createdPayload[N, R]{created}, nil
}

func (r *camelRoot[N, R]) DeletePayParts(ctx context.Context, args struct {
	Input struct {
		CompanyID  graphql.ID
		PayPartIDs *[]*graphql.ID
	}
}) (*deletedPayload, error) {
	if _, err := r.schemaRoot.DeletePayParts(ctx, struct {
		CompanyID  graphql.ID
		PayPartIDs *[]*graphql.ID
	}{args.Input.CompanyID, args.Input.PayPartIDs}); err != nil {
		return nil, err
	}
	return &deletedPayload{args.Input.PayPartIDs}, nil
}

type companiesPayload[N number, R ruleValue] struct {
	list *[]*camelCompany[N, R]
}

func (p *companiesPayload[N, R]) Companies() *[]*camelCompany[N, R] { return p.list }

type camelCompany[N number, R ruleValue] struct {
	*companyResolver[N, R]
}

func (c *camelCompany[N, R]) Employees(args struct {
	Input *struct{ EmployeeIDs *[]*graphql.ID }
}) *employeesPayload[N, R] {
	var ids *[]*graphql.ID
	if args.Input != nil {
		ids = args.Input.EmployeeIDs
	}
	es := c.companyResolver.Employees(struct{ EmployeeIDs *[]*graphql.ID }{ids})
	out := make([]*camelEmployee[N, R], len(*es))
	for i, e := range *es {
		out[i] = &camelEmployee[N, R]{e}
	}
	return &employeesPayload[N, R]{&out}
}

func (c *camelCompany[N, R]) PayParts() (*payPartsPayload[N, R], error) {
	pps, err := c.companyResolver.PayParts()
	return &payPartsPayload[N, R]{pps}, err
}

type employeesPayload[N number, R ruleValue] struct {
	list *[]*camelEmployee[N, R]
}

func (p *employeesPayload[N, R]) Employees() *[]*camelEmployee[N, R] { return p.list }

type camelEmployee[N number, R ruleValue] struct {
	*employeeResolver[N, R]
}

func (e *camelEmployee[N, R]) PayParts() (*payPartsPayload[N, R], error) {
	pps, err := e.employeeResolver.PayParts()
	return &payPartsPayload[N, R]{pps}, err
}

type payPartsPayload[N number, R ruleValue] struct {
	list *[]*payPartResolver[N, R]
}

func (p *payPartsPayload[N, R]) PayParts() *[]*payPartResolver[N, R] { return p.list }

type metaPayload[R ruleValue] struct {
	list *[]*metaResolver[R]
}

func (p *metaPayload[R]) PayPartsMeta() *[]*metaResolver[R] { return p.list }

type createdPayload[N number, R ruleValue] struct {
	list *[]*payPartResolver[N, R]
}

func (p *createdPayload[N, R]) CreatedPayParts() *[]*payPartResolver[N, R] { return p.list }

type deletedPayload struct{ ids *[]*graphql.ID }

func (p *deletedPayload) DeletedPayPartIDs() *[]*graphql.ID { return p.ids }
