package sandbox

import (
	"strings"
	"testing"
)

// TestCamel_Validation: the camelCase sandbox, in all four variants,
// serves the doc's shapes, refuses the snake_case dialect's fields by
// schema validation (as a real server), and names faults and counters by
// the snake_case root fields.
func TestCamel_Validation(t *testing.T) {
	for _, numbers := range []NumberType{NumbersFloat, NumbersInt} {
		for _, allowed := range []AllowedType{AllowedBoolean, AllowedEnum} {
			e := newEnv(t, Options{Dialect: CamelCase, Numbers: numbers, Allowed: allowed})
			tok := e.accessToken()
			var got struct {
				CompaniesExt struct {
					Companies []struct {
						ID        string
						Employees struct {
							Employees []struct{ DomainID, Email string }
						}
					}
				}
			}
			e.mustData(tok, `query($input: CompaniesExtInput) { companiesExt(input: $input) { companies { id employees(input: {employeeIds: ["MV8xXzE="]}) { employees { domainId email } } } } }`,
				map[string]any{"input": map[string]any{"companyIds": []string{CompanyNordlys}}}, &got)
			if cs := got.CompaniesExt.Companies; len(cs) != 1 || len(cs[0].Employees.Employees) != 1 || cs[0].Employees.Employees[0].DomainID != "10" {
				t.Fatalf("companiesExt = %+v", got)
			}
			for _, snake := range []string{`{ companies { id } }`, `{ pay_parts_meta { code } }`, `mutation { create_pay_parts(company_id: "MV8x", pay_parts: []) { id } }`} {
				r := e.gql(tok, snake, nil)
				if len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, "Cannot query field") {
					t.Errorf("%s on the camelCase sandbox: %+v, want a validation error", snake, r)
				}
			}
			if n := e.s.State().Counters.Requests["companies"]; n != 1 {
				t.Errorf("companiesExt counted %d times as companies, want 1", n)
			}
		}
	}
}

// TestNoDelete_Schema: NoDelete leaves the delete mutation out of both
// dialects.
func TestNoDelete_Schema(t *testing.T) {
	for _, d := range []Dialect{SnakeCase, CamelCase} {
		sdl := SDL(Options{Dialect: d, NoDelete: true})
		if strings.Contains(sdl, "delete") || strings.Contains(sdl, "Delete") {
			t.Errorf("dialect %d without delete:\n%s", d, sdl)
		}
		if !strings.Contains(SDL(Options{Dialect: d}), "elete") {
			t.Errorf("dialect %d has no delete by default", d)
		}
	}
}
