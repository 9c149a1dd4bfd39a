package mapping_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestMapper_PayrollNumbers: an entry's employee_number resolves against
// payroll's own employee numbers in every sandbox variant that serves
// them, whatever the field is called.
func TestMapper_PayrollNumbers(t *testing.T) {
	variants := []struct {
		name    string
		numbers sandbox.NumberType
		allowed sandbox.AllowedType
	}{
		{"float-boolean", sandbox.NumbersFloat, sandbox.AllowedBoolean},
		{"float-enum", sandbox.NumbersFloat, sandbox.AllowedEnum},
		{"int-boolean", sandbox.NumbersInt, sandbox.AllowedBoolean},
		{"int-enum", sandbox.NumbersInt, sandbox.AllowedEnum},
	}
	for _, v := range variants {
		for _, field := range []string{"employee_number", "domainId"} {
			t.Run(v.name+"/"+field, func(t *testing.T) {
				cl, schema := directory(t, sandbox.Options{Numbers: v.numbers, Allowed: v.allowed, EmployeeNumberField: field})
				m := mapping.NewMapper(rules(t, "company: MV8x\nrules:\n  - {name: hourly, default: true, code: T1, units: hours}\n"), mapping.NewCache(cl), schema, "")
				lines, err := m.Map(context.Background(), entry("n", func(e *paysync.Entry) { e.Email = ""; e.EmployeeNumber = "10" }))
				if err != nil {
					t.Fatalf("Map: %v", err)
				}
				if len(lines) != 1 || lines[0].EmployeeID != sandbox.EmpMetteHansen || lines[0].EmployeeName != "Mette Hansen" {
					t.Fatalf("lines = %+v, want Mette Hansen", lines)
				}
			})
		}
	}
}

// TestMapper_MatchingOrder: the operator's tables first, then payroll's
// numbers and e-mails, then exact names; messages say what was tried.
func TestMapper_MatchingOrder(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{})
	clNone, schemaNone := directory(t, sandbox.Options{EmployeeNumberField: "none"})
	const base = "company: MV8x\nrules:\n  - {name: hourly, default: true, code: T1, units: hours}\n"
	tables := base + `employees:
  by_number: {"10": MV8xXzI=}
  by_email: {x@nordlys.dk: MV8xXzM=}
`
	tests := []struct {
		name      string
		none      bool // the sandbox serves no number field
		rules     string
		e         func(*paysync.Entry)
		want      string // employee id
		wantField string
		wantMsg   []string
		wantHint  string
	}{
		{name: "payroll number", rules: base, e: func(e *paysync.Entry) { e.Email = ""; e.EmployeeNumber = "11" }, want: sandbox.EmpLarsNielsen},
		{name: "by_number wins over payroll's number", rules: tables, e: func(e *paysync.Entry) { e.Email = ""; e.EmployeeNumber = "10" }, want: sandbox.EmpLarsNielsen},
		{name: "by_email wins over payroll's number", rules: tables, e: func(e *paysync.Entry) { e.Email = "X@nordlys.dk"; e.EmployeeNumber = "13" }, want: sandbox.EmpSofieJensen},
		{name: "payroll e-mail", rules: base, e: func(e *paysync.Entry) { e.Email = "Lars.Nielsen@Nordlys.dk" }, want: sandbox.EmpLarsNielsen},
		{name: "number and e-mail agree", rules: base, e: func(e *paysync.Entry) { e.Email = "lars.nielsen@nordlys.dk"; e.EmployeeNumber = "11" }, want: sandbox.EmpLarsNielsen},
		{name: "unknown number falls through to the e-mail", rules: base, e: func(e *paysync.Entry) { e.Email = "lars.nielsen@nordlys.dk"; e.EmployeeNumber = "E-17" }, want: sandbox.EmpLarsNielsen},
		{name: "number and e-mail disagree", rules: base, e: func(e *paysync.Entry) { e.Email = "lars.nielsen@nordlys.dk"; e.EmployeeNumber = "12" },
			wantField: "employee_number", wantMsg: []string{"payroll number 12 is " + sandbox.EmpSofieJensen + " (Sofie Jensen)", "e-mail lars.nielsen@nordlys.dk is " + sandbox.EmpLarsNielsen}, wantHint: "by_number"},
		{name: "unknown number", rules: base, e: func(e *paysync.Entry) { e.Email = ""; e.EmployeeNumber = "99" },
			wantField: "employee_number", wantMsg: []string{`no payroll employee for "#99"`, "tried employees.by_number", "payroll's employee numbers (none is 99)"}, wantHint: "paysync employees"},
		{name: "no number field", none: true, rules: base, e: func(e *paysync.Entry) { e.Email = ""; e.EmployeeNumber = "10" },
			wantField: "employee_number", wantMsg: []string{`no payroll employee for "#10"`, "payroll's employee numbers (payroll gives none for company MV8x", "PAYSYNC_EMPLOYEE_NUMBER_FIELD"}, wantHint: "by_number"},
		{name: "unknown e-mail, names off", rules: base, e: func(e *paysync.Entry) { e.Email = "who@nordlys.dk"; e.Name = "Who" },
			wantField: "email", wantMsg: []string{"tried employees.by_email", "payroll's e-mails (none is who@nordlys.dk)", "employees.by_name", "exact name (off: employees.match_names is false)"}, wantHint: "by_email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := cl, schema
			if tt.none {
				c, s = clNone, schemaNone
			}
			m := mapping.NewMapper(rules(t, tt.rules), mapping.NewCache(c), s, "")
			lines, err := m.Map(context.Background(), entry("x", tt.e))
			if tt.wantField != "" {
				var p *mapping.Problem
				if !errors.As(err, &p) {
					t.Fatalf("err = %v, want a problem", err)
				}
				for _, w := range tt.wantMsg {
					if !strings.Contains(p.Msg, w) {
						t.Errorf("message lacks %q:\n%s", w, p.Msg)
					}
				}
				if p.Field != tt.wantField || !strings.Contains(p.Hint, tt.wantHint) {
					t.Errorf("problem = %+v, want field %q hint ~%q", p, tt.wantField, tt.wantHint)
				}
				return
			}
			if err != nil {
				t.Fatalf("Map: %v", err)
			}
			if len(lines) != 1 || lines[0].EmployeeID != tt.want {
				t.Fatalf("lines = %+v, want employee %s", lines, tt.want)
			}
		})
	}
}
