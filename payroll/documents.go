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
	return documents{
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
		opPayParts: fmt.Sprintf(
			`query PayParts($company_id: %s) { pay_parts(company_id: $company_id) %s }`,
			s.PayPartsCompanyID, payPartSelection),
		opPayPartsMeta:   `query PayPartsMeta { pay_parts_meta { code description units_allowed rate_allowed amount_allowed } }`,
		opCurrentCompany: `query CurrentCompany { current_company { id } }`,
		opCreatePayParts: fmt.Sprintf(
			`mutation CreatePayParts($company_id: %s, $pay_parts: %s) { create_pay_parts(company_id: $company_id, pay_parts: $pay_parts) %s }`,
			s.CreateCompanyID, s.PayPartsInputType, payPartSelection),
		opDeletePayParts: fmt.Sprintf(
			`mutation DeletePayParts($company_id: %s, $pay_part_ids: %s) { delete_pay_parts(company_id: $company_id, pay_part_ids: $pay_part_ids) }`,
			s.DeleteCompanyID, s.PayPartIDsType),
	}
}
