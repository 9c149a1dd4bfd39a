package mapping

import (
	"fmt"
	"sort"

	"github.com/paysync/paysync"
)

// Codes returns the pay codes the rules use, each once, in the order of
// their first rule.
func (r *Rules) Codes() []string {
	var codes []string
	seen := map[string]bool{}
	for _, rule := range r.Rules {
		if !seen[rule.Code] {
			seen[rule.Code] = true
			codes = append(codes, rule.Code)
		}
	}
	return codes
}

// CheckRules compares the rules with the payroll's pay code table before
// any entry arrives: one Problem (naming the rule's line) for each rule
// whose code is not in meta. Mapping finds the same per entry; this finds
// it for every rule at once.
func CheckRules(rules *Rules, meta []paysync.PayPartMeta) []*Problem {
	known := make(map[string]bool, len(meta))
	for _, m := range meta {
		known[m.Code] = true
	}
	var out []*Problem
	for _, r := range rules.Rules {
		if !known[r.Code] {
			out = append(out, &Problem{Source: rules.Source, Line: r.Line, Field: fmt.Sprintf("rule %q", r.Name),
				Msg: fmt.Sprintf("code %q is not in pay_parts_meta", r.Code)})
		}
	}
	return out
}

// EmployeeRef is one entry of the rules' employee tables.
type EmployeeRef struct {
	Table string // by_number, by_email or by_name
	Key   string // the number, e-mail or name
	ID    string // the payroll employee id it names
}

func (e EmployeeRef) String() string { return fmt.Sprintf("%s %s → %s", e.Table, e.Key, e.ID) }

// EmployeeRefs lists the entries of the employee tables, sorted.
func (r *Rules) EmployeeRefs() []EmployeeRef {
	var refs []EmployeeRef
	for _, t := range []struct {
		name string
		m    map[string]string
	}{{"by_number", r.Employees.ByNumber}, {"by_email", r.Employees.ByEmail}, {"by_name", r.Employees.ByName}} {
		for k, id := range t.m {
			refs = append(refs, EmployeeRef{t.name, k, id})
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	return refs
}

// CheckEmployees returns the employee table entries that name no one of
// employees (the company's), sorted.
func CheckEmployees(rules *Rules, employees []paysync.Employee) []EmployeeRef {
	ids := make(map[string]bool, len(employees))
	for _, e := range employees {
		ids[e.ID] = true
	}
	var unknown []EmployeeRef
	for _, ref := range rules.EmployeeRefs() {
		if !ids[ref.ID] {
			unknown = append(unknown, ref)
		}
	}
	return unknown
}
