package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestCLI_EmployeesNumbers: `paysync employees` shows payroll's employee
// numbers and e-mails when the server has them, and only then.
func TestCLI_EmployeesNumbers(t *testing.T) {
	tests := []struct {
		field    string // sandbox.Options.EmployeeNumberField
		header   string // of the table
		noHeader string
		number   string // Mette Hansen's in --json
	}{
		{field: "employee_number", header: "NUMBER", number: "10"},
		{field: "domainId", header: "NUMBER", number: "10"},
		{field: "none", header: "E-MAIL", noHeader: "NUMBER"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			s := startSandbox(t, sandbox.Options{EmployeeNumberField: tt.field})
			r := runBinary(t, s.env, "employees", "--json")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			var co struct {
				Employees []struct{ ID, Name, Number, Email string }
			}
			if err := json.Unmarshal([]byte(r.stdout), &co); err != nil {
				t.Fatalf("%v:\n%s", err, r.stdout)
			}
			if len(co.Employees) == 0 || co.Employees[0].ID != sandbox.EmpMetteHansen ||
				co.Employees[0].Number != tt.number || co.Employees[0].Email != "mette.hansen@nordlys.dk" {
				t.Fatalf("employees --json:\n%s", r.stdout)
			}
			r = runBinary(t, s.env, "employees")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.header) || !strings.Contains(r.stdout, "mette.hansen@nordlys.dk") ||
				(tt.noHeader != "" && strings.Contains(r.stdout, tt.noHeader)) {
				t.Fatalf("employees:\n%s", r.stdout)
			}
			if tt.number != "" && !strings.Contains(r.stdout, " 10 ") {
				t.Fatalf("employees lacks number 10:\n%s", r.stdout)
			}
		})
	}
}
