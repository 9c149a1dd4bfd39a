package payroll_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestDialect_WithoutIntrospection: PAYSYNC_API_DIALECT=camel with the
// probe off uses the doc's shapes, and they pass the camelCase sandbox's
// validation; no introspection query is sent.
func TestDialect_WithoutIntrospection(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Dialect: sandbox.CamelCase, Numbers: sandbox.NumbersInt})
	cfg := e.config(t)
	cfg.Schema = payroll.SchemaOverrides{NoProbe: true, Dialect: payroll.Camel, Numbers: payroll.Int}
	c := newClient(t, cfg)
	ctx := ctxT(t)
	emps, err := c.Employees(ctx, sandbox.CompanyNordlys, []string{sandbox.EmpMetteHansen})
	if err != nil || len(emps) != 1 || emps[0].Number != "10" || emps[0].Email != "mette.hansen@nordlys.dk" {
		t.Fatalf("Employees = %+v, %v", emps, err)
	}
	created, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T2", "2.25", "310.40", "")})
	if err != nil {
		t.Fatalf("CreatePayParts: %v", err)
	}
	if got, err := c.PayParts(ctx, sandbox.CompanyNordlys); err != nil || !samePayParts(got, created) {
		t.Fatalf("PayParts = %+v, %v; want %+v", got, err, created)
	}
	if _, err := c.DeletePayParts(ctx, sandbox.CompanyNordlys, []string{created[0].ID}); err != nil {
		t.Fatalf("DeletePayParts: %v", err)
	}
	if left := stateParts(e.sb.State(), sandbox.CompanyNordlys); len(left) != 0 {
		t.Fatalf("the sandbox holds %+v", left)
	}
	if n := e.sb.State().Counters.Requests["__schema"]; n != 0 {
		t.Errorf("%d introspection requests with the probe off", n)
	}
}

// TestDialect_WrongDialectFailsValidation: snake_case documents sent to a
// camelCase server fail its schema validation, as on a real server.
func TestDialect_WrongDialectFailsValidation(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Dialect: sandbox.CamelCase})
	cfg := e.config(t)
	cfg.Schema = payroll.SchemaOverrides{NoProbe: true, Dialect: payroll.Snake}
	_, err := newClient(t, cfg).Companies(ctxT(t), nil)
	if err == nil || !strings.Contains(err.Error(), `request refused by schema validation: Cannot query field "companies" on type "Query"`) {
		t.Fatalf("snake_case Companies on a camelCase server = %v, want a validation error", err)
	}
}

// TestDialect_NoDelete: a server without a delete mutation, in either
// dialect: the probe says so, CanDelete and DeletePayParts return
// ErrNoDelete and no delete request is sent; the rest works.
func TestDialect_NoDelete(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			e := startSandbox(t, sandbox.Options{Dialect: d.sandbox, NoDelete: true})
			c := e.client(t)
			ctx := ctxT(t)
			s, err := c.Schema(ctx)
			if err != nil || s.Dialect != d.want || s.Names.Delete != "" {
				t.Fatalf("Schema = %s delete %q, %v", s.Dialect, s.Names.Delete, err)
			}
			if err := c.CanDelete(ctx, sandbox.CompanyNordlys); !errors.Is(err, payroll.ErrNoDelete) {
				t.Fatalf("CanDelete = %v, want ErrNoDelete", err)
			}
			created, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T1", "1", "", "")})
			if err != nil {
				t.Fatal(err)
			}
			calls := c.Calls()
			if _, err := c.DeletePayParts(ctx, sandbox.CompanyNordlys, []string{created[0].ID}); !errors.Is(err, payroll.ErrNoDelete) || payroll.ClassOf(err) != payroll.Rejected {
				t.Fatalf("DeletePayParts = %v, want ErrNoDelete", err)
			}
			if c.Calls() != calls {
				t.Errorf("DeletePayParts sent %d requests", c.Calls()-calls)
			}
			if got := stateParts(e.sb.State(), sandbox.CompanyNordlys); len(got) != 1 {
				t.Errorf("the sandbox holds %d pay parts, want 1", len(got))
			}
			check := c.ProbeSchema(ctx, payroll.SchemaProbe{})
			checkProbe(t, check, paysync.CheckOK, nil, []string{"dialect " + d.want.String(), "delete: not offered by this server"})
		})
	}
}
