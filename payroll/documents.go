package payroll

import (
	"fmt"
	"strings"
)

// payPartSelection is what paysync reads of every pay part.
const payPartSelection = `{ id code units rate amount employee { id name } }`

// employeeSelection selects the employee number and e-mail the server
// has, under fixed aliases (number, email) whatever it calls them.
func employeeSelection(s Schema) string {
	var b strings.Builder
	if s.EmployeeNumberField != "" {
		b.WriteString(" number: " + s.EmployeeNumberField)
	}
	if s.EmployeeEmailField != "" {
		b.WriteString(" email: " + s.EmployeeEmailField)
	}
	return b.String()
}

// Operation names. Every document is constant for a given server schema:
// values always travel as variables.
const (
	opCompanies        = "Companies"
	opCompanyEmployees = "CompanyEmployees"
	opEmployeePayParts = "EmployeePayParts"
	opCompanyPayParts  = "CompanyPayParts"
	opPayParts         = "PayParts"
	opPayPartsMeta     = "PayPartsMeta"
	opCurrentCompany   = "CurrentCompany"
	opCreatePayParts   = "CreatePayParts"
	opDeletePayParts   = "DeletePayParts"
)

// documents holds the GraphQL text of every operation, built once from the
// server's schema (variable types must match its argument types exactly).
type documents map[string]string

func buildDocuments(s Schema) documents {
	if s.Dialect == Camel {
		return buildCamelDocuments(s)
	}
	docs := documents{
		opCompanies: fmt.Sprintf(
			`query Companies($company_ids: %s) { companies(company_ids: $company_ids) { id name } }`,
			s.CompanyIDsType),
		opCompanyEmployees: fmt.Sprintf(
			`query CompanyEmployees($company_ids: %s, $employee_ids: %s) { companies(company_ids: $company_ids) { id name employees(employee_ids: $employee_ids) { id name%s } } }`,
			s.CompanyIDsType, s.EmployeeIDsType, employeeSelection(s)),
		opEmployeePayParts: fmt.Sprintf(
			`query EmployeePayParts($company_ids: %s, $employee_ids: %s) { companies(company_ids: $company_ids) { id name employees(employee_ids: $employee_ids) { id name pay_parts %s } } }`,
			s.CompanyIDsType, s.EmployeeIDsType, payPartSelection),
		opCompanyPayParts: fmt.Sprintf(
			`query CompanyPayParts($company_ids: %s) { companies(company_ids: $company_ids) { id name pay_parts %s } }`,
			s.CompanyIDsType, payPartSelection),
		opPayPartsMeta:   `query PayPartsMeta { pay_parts_meta { code description units_allowed rate_allowed amount_allowed } }`,
		opCurrentCompany: fmt.Sprintf(`query CurrentCompany { %s { id } }`, aliased("current_company", s.Names.Current)),
		opCreatePayParts: fmt.Sprintf(
			`mutation CreatePayParts($company_id: %s, $pay_parts: %s) { create_pay_parts(company_id: $company_id, pay_parts: $pay_parts) %s }`,
			s.CreateCompanyID, s.PayPartsInputType, payPartSelection),
	}
	if s.Names.TopPayParts != "" {
		docs[opPayParts] = fmt.Sprintf(
			`query PayParts($company_id: %s) { pay_parts(company_id: $company_id) %s }`,
			s.PayPartsCompanyID, payPartSelection)
	}
	if s.Names.Delete != "" {
		docs[opDeletePayParts] = fmt.Sprintf(
			`mutation DeletePayParts($company_id: %s, $pay_part_ids: %s) { delete_pay_parts(company_id: $company_id, pay_part_ids: $pay_part_ids)%s }`,
			s.DeleteCompanyID, s.PayPartIDsType, prefixed(s.DeleteSelect))
	}
	return docs
}

// buildCamelDocuments builds the camelCase dialect's documents: one input
// variable per call, typed as the server types its input: argument, and
// lists unwrapped by a selection of their wrapper's field. Root fields
// carry the snake_case names as aliases, so one decoder reads both
// dialects.
func buildCamelDocuments(s Schema) documents {
	n := s.Names
	wrap := func(field, sel string) string {
		if w := s.Wraps[field]; w != "" {
			return "{ " + w + " " + sel + " }"
		}
		return sel
	}
	pp := wrap(n.PayParts, payPartSelection)
	companies := func(op, vars, inner string) string {
		return fmt.Sprintf(`query %s($input: %s%s) { companies: %s(input: $input) %s }`,
			op, s.Inputs[n.Companies], vars, n.Companies, wrap(n.Companies, "{ id name"+inner+" }"))
	}
	employees := func(inner string) string {
		return fmt.Sprintf(` %s(input: $employees) %s`, aliased("employees", n.Employees), wrap(n.Employees, "{ id name"+inner+" }"))
	}
	empVar := ", $employees: " + s.Inputs[n.Employees]
	meta := fmt.Sprintf("{ code description units_allowed: %s rate_allowed: %s amount_allowed: %s }", n.UnitsAllowed, n.RateAllowed, n.AmountAllowed)
	docs := documents{
		opCompanies:        companies(opCompanies, "", ""),
		opCompanyEmployees: companies(opCompanyEmployees, empVar, employees(employeeSelection(s))),
		opEmployeePayParts: companies(opEmployeePayParts, empVar, employees(" "+aliased("pay_parts", n.PayParts)+" "+pp)),
		opCompanyPayParts:  companies(opCompanyPayParts, "", " "+aliased("pay_parts", n.PayParts)+" "+pp),
		opPayPartsMeta:     fmt.Sprintf(`query PayPartsMeta { pay_parts_meta: %s %s }`, n.Meta, wrap(n.Meta, meta)),
		opCurrentCompany:   fmt.Sprintf(`query CurrentCompany { %s { id } }`, aliased("current_company", n.Current)),
		opCreatePayParts: fmt.Sprintf(`mutation CreatePayParts($input: %s) { create_pay_parts: %s(input: $input) %s }`,
			s.Inputs[n.Create], n.Create, wrap(n.Create, payPartSelection)),
	}
	if n.Delete != "" {
		docs[opDeletePayParts] = fmt.Sprintf(`mutation DeletePayParts($input: %s) { delete_pay_parts: %s(input: $input)%s }`,
			s.Inputs[n.Delete], n.Delete, prefixed(s.DeleteSelect))
	}
	return docs
}

// aliased is field under alias, or field alone when the names agree.
func aliased(alias, field string) string {
	if alias == field || field == "" {
		return alias
	}
	return alias + ": " + field
}

// prefixed is sel after a space, or "".
func prefixed(sel string) string {
	if sel == "" {
		return ""
	}
	return " " + sel
}
