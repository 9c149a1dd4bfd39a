package mapping_test

import (
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
)

const checkRulesYAML = `company: MV8x
employees:
  by_number:
    "1001": MV8xXzE=
    "1002": MV8xXzk5
rules:
  - name: hours
    match: {type: [hours]}
    code: T1
    units: hours
  - name: sick
    match: {type: [sick]}
    code: SICK9
    units: hours
  - name: more hours
    match: {type: [overtime]}
    code: T1
    units: hours
`

func TestCheckRules(t *testing.T) {
	rules, err := mapping.LoadRules("rules.yaml", strings.NewReader(checkRulesYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		meta []paysync.PayPartMeta
		want []string // the problems, as printed
	}{
		{"all known", []paysync.PayPartMeta{{Code: "T1"}, {Code: "SICK9"}}, nil},
		{"one unknown", []paysync.PayPartMeta{{Code: "T1"}, {Code: "SYG"}}, []string{`rules.yaml:11: rule "sick": code "SICK9" is not in pay_parts_meta`}},
		{"no meta", nil, []string{`rule "hours": code "T1"`, `rule "sick": code "SICK9"`, `rule "more hours": code "T1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mapping.CheckRules(rules, tt.meta)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %d problems", got, len(tt.want))
			}
			for i, p := range got {
				if !strings.Contains(p.Error(), tt.want[i]) {
					t.Errorf("problem %d: %q lacks %q", i, p.Error(), tt.want[i])
				}
			}
		})
	}
	if got := strings.Join(rules.Codes(), ","); got != "T1,SICK9" {
		t.Errorf("Codes: %s", got)
	}
}

func TestCheckEmployees(t *testing.T) {
	rules, err := mapping.LoadRules("rules.yaml", strings.NewReader(checkRulesYAML))
	if err != nil {
		t.Fatal(err)
	}
	got := mapping.CheckEmployees(rules, []paysync.Employee{{ID: "MV8xXzE="}, {ID: "MV8xXzI="}})
	if len(got) != 1 || got[0].String() != "by_number 1002 → MV8xXzk5" {
		t.Errorf("got %v", got)
	}
	if got := mapping.CheckEmployees(rules, []paysync.Employee{{ID: "MV8xXzE="}, {ID: "MV8xXzk5"}}); len(got) != 0 {
		t.Errorf("all known: got %v", got)
	}
	if n := len(rules.EmployeeRefs()); n != 2 {
		t.Errorf("EmployeeRefs: %d", n)
	}
}
