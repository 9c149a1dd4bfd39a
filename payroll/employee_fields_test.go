package payroll_test

import (
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestSchema_EmployeeFields: the probe finds the server's employee number
// and e-mail fields (or an override names them), and Employees reads them.
func TestSchema_EmployeeFields(t *testing.T) {
	tests := []struct {
		name      string
		served    string // sandbox.Options.EmployeeNumberField
		overrides payroll.SchemaOverrides
		wantField string // Schema.EmployeeNumberField
		wantEmail string // Schema.EmployeeEmailField
		wantErr   string
	}{
		{name: "found employee_number", served: "employee_number", wantField: "employee_number", wantEmail: "email"},
		{name: "found domainId", served: "domainId", wantField: "domainId", wantEmail: "email"},
		{name: "found number", served: "number", wantField: "number", wantEmail: "email"},
		{name: "none served", served: "none", wantField: "", wantEmail: "email"},
		{name: "override none", served: "domainId", overrides: payroll.SchemaOverrides{EmployeeNumberField: "none"}, wantField: "", wantEmail: "email"},
		{name: "override agrees", served: "domainId", overrides: payroll.SchemaOverrides{EmployeeNumberField: "domainId"}, wantField: "domainId", wantEmail: "email"},
		{name: "override without introspection", served: "domainId",
			overrides: payroll.SchemaOverrides{NoProbe: true, EmployeeNumberField: "domainId", EmployeeEmailField: "email"}, wantField: "domainId", wantEmail: "email"},
		{name: "no introspection, no override", served: "domainId", overrides: payroll.SchemaOverrides{NoProbe: true}, wantField: "", wantEmail: ""},
		{name: "override names a field the server lacks", served: "employee_number", overrides: payroll.SchemaOverrides{EmployeeNumberField: "domainId"},
			wantErr: "PAYSYNC_EMPLOYEE_NUMBER_FIELD=domainId: Employee has no field domainId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startSandbox(t, sandbox.Options{EmployeeNumberField: tt.served})
			cfg := e.config(t)
			cfg.Schema = tt.overrides
			if cfg.Schema.NoProbe {
				cfg.Schema.Numbers = payroll.Float
			}
			c, err := payroll.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			s, err := c.Schema(ctx)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Schema err = %v, want ~%q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.EmployeeNumberField != tt.wantField || s.EmployeeEmailField != tt.wantEmail {
				t.Fatalf("probe found number %q, e-mail %q; want %q, %q", s.EmployeeNumberField, s.EmployeeEmailField, tt.wantField, tt.wantEmail)
			}
			emps, err := c.Employees(ctx, sandbox.CompanyNordlys, nil)
			if err != nil {
				t.Fatal(err)
			}
			var mette paysync.Employee
			for _, em := range emps {
				if em.ID == sandbox.EmpMetteHansen {
					mette = em
				}
			}
			wantNumber, wantMail := "", ""
			if tt.wantField != "" {
				wantNumber = "10"
			}
			if tt.wantEmail != "" {
				wantMail = "mette.hansen@nordlys.dk"
			}
			if mette.Number != wantNumber || mette.Email != wantMail {
				t.Fatalf("Mette Hansen read as %+v, want number %q, e-mail %q", mette, wantNumber, wantMail)
			}
		})
	}
}

// TestSchema_EmployeeNumberEveryVariant: the number field is read in all
// four wire variants.
func TestSchema_EmployeeNumberEveryVariant(t *testing.T) {
	for _, v := range variants {
		for _, field := range []string{"employee_number", "domainId"} {
			t.Run(v.name+"/"+field, func(t *testing.T) {
				e := startSandbox(t, sandbox.Options{Numbers: v.numbers, Allowed: v.allowed, EmployeeNumberField: field})
				emps, err := e.client(t).Employees(ctxT(t), sandbox.CompanyFjordtech, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, em := range emps {
					got[em.ID] = em.Number
				}
				if got[sandbox.EmpJonasLarsen] == "" || got[sandbox.EmpPeterMadsen1] == got[sandbox.EmpPeterMadsen2] {
					t.Fatalf("numbers read: %v", got)
				}
			})
		}
	}
}
