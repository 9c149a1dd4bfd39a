package payroll

import (
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

func TestDecodeRule(t *testing.T) {
	tests := []struct {
		raw     string
		want    paysync.FieldRule
		wantErr bool
	}{
		{`true`, paysync.RuleOptional, false},
		{`false`, paysync.RuleForbidden, false},
		{`null`, paysync.RuleUnknown, false},
		{`"MANDATORY"`, paysync.RuleMandatory, false},
		{`"required"`, paysync.RuleMandatory, false},
		{`"Optional"`, paysync.RuleOptional, false},
		{`"allowed"`, paysync.RuleOptional, false},
		{`"FORBIDDEN"`, paysync.RuleForbidden, false},
		{`"not_allowed"`, paysync.RuleForbidden, false},
		{`"maybe"`, paysync.RuleUnknown, true},
		{`1`, paysync.RuleUnknown, true},
	}
	for _, tt := range tests {
		got, err := decodeRule([]byte(tt.raw))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("decodeRule(%s) = %s, %v; want %s, err %v", tt.raw, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestMatchCreated(t *testing.T) {
	a := paysync.PayPartInput{EmployeeID: "e1", Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("1")}}
	b := paysync.PayPartInput{EmployeeID: "e2", Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("2")}}
	pa := paysync.PayPart{ID: "p1", EmployeeID: "e1", Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("1.00")}}
	pb := paysync.PayPart{ID: "p2", EmployeeID: "e2", Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("2")}}
	got, err := matchCreated([]paysync.PayPartInput{a, b}, []paysync.PayPart{pb, pa}) // out of order
	if err != nil || got[0].ID != "p1" || got[1].ID != "p2" {
		t.Fatalf("matchCreated reordered = %+v, %v", got, err)
	}
	if _, err := matchCreated([]paysync.PayPartInput{a, b}, []paysync.PayPart{pa}); err == nil {
		t.Fatal("a missing result must be an error")
	}
	if _, err := matchCreated([]paysync.PayPartInput{a}, []paysync.PayPart{pb}); err == nil {
		t.Fatal("a foreign result must be an error")
	}
}

func TestParseIntrospection_PartialCamelCaseServer(t *testing.T) {
	data := []byte(`{"__schema":{"queryType":{"name":"Query"},"mutationType":{"name":"Mutation"},"types":[
	  {"kind":"OBJECT","name":"Query","fields":[{"name":"companiesExt","args":[],"type":{"kind":"OBJECT","name":"X"}}]},
	  {"kind":"OBJECT","name":"Mutation","fields":[]}]}}`)
	_, err := parseIntrospection(data, 0)
	if err == nil || !strings.Contains(err.Error(), "camelCase") {
		t.Fatalf("err = %v, want a camelCase hint", err)
	}
}
