package mapping_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
)

func TestLoadRules_Full(t *testing.T) {
	f, err := os.Open("testdata/rules/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := mapping.LoadRules("full.yaml", f)
	if err != nil {
		t.Fatalf("LoadRules: %v", err)
	}
	if r.Company != "MV8x" || !r.Aggregate || r.Rounding != paysync.HalfEven || r.Places != 2 {
		t.Errorf("top level = %+v", r)
	}
	if !r.Employees.MatchNames || r.Employees.ByNumber["1001"] != "MV8xXzE=" || r.Employees.ByEmail["lars.nielsen@nordlys.dk"] != "MV8xXzI=" ||
		r.Employees.ByName["sofie j."] != "MV8xXzM=" || !r.Employees.Ignore["robot@nordlys.dk"] {
		t.Errorf("employees = %+v", r.Employees)
	}
	if !r.Skip.Unapproved || r.Skip.ZeroHours {
		t.Errorf("skip = %+v", r.Skip)
	}
	if len(r.Rules) != 5 {
		t.Fatalf("%d rules", len(r.Rules))
	}
	ot := r.Rules[0]
	if ot.Name != "overtime" || ot.Line != 21 || ot.Code != "T2" || ot.Units.Kind != mapping.FromHours || ot.Rate.Const.String() != "310.4" {
		t.Errorf("overtime = %+v", ot)
	}
	if ev := r.Rules[2]; ev.Amount.Kind != mapping.FromProduct || ev.Amount.Operands[0].Kind != mapping.FromUnits || ev.Amount.Operands[1].Kind != mapping.FromRate {
		t.Errorf("evening amount = %v", ev.Amount)
	}
	if !r.Rules[4].Default {
		t.Error("last rule should be the default")
	}
}

func TestLoadRules_Errors(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		wantLine  int
		wantField string
		wantMsg   string
	}{
		{"unknown key", "rules:\n  - name: x\n    code: T1\n    unts: hours\n    default: true\n", 4, "unts", "unknown key"},
		{"misspelt top key", "compnay: MV8x\n", 1, "compnay", "unknown key"},
		{"wrong type", "aggregate: maybe\n", 1, "", "cannot unmarshal"},
		{"broken yaml", "rules: [\n", 1, "", "did not find"},
		{"rule without code", "rules:\n  - name: x\n    default: true\n    units: hours\n", 2, "rules[0].code", "has no code"},
		{"rule without match", "rules:\n  - name: x\n    code: T1\n    units: hours\n", 2, "rules[0].match", "has no match"},
		{"bad source", "rules:\n  - default: true\n    code: T1\n    units: minutes\n", 4, "rules[0].units", "not a value source"},
		{"ambiguous source", "rules:\n  - default: true\n    code: T1\n    rate: rate\n", 4, "rules[0].rate", "ambiguous"},
		{"field in product", "rules:\n  - default: true\n    code: T1\n    amount: {product: [hours, {field: km}]}\n", 4, "rules[0].amount", "product operands"},
		{"bad const", "rules:\n  - default: true\n    code: T1\n    rate: {const: abc}\n", 4, "rules[0].rate", "not a decimal"},
		{"bad rounding", "rounding: {mode: nearest}\n", 0, "rounding.mode", "nearest"},
		{"two defaults", "rules:\n  - {default: true, code: T1, units: hours}\n  - {default: true, code: T2, units: hours}\n", 0, "rules", "2 default rules"},
		{"no values", "rules:\n  - {default: true, code: T1}\n", 2, "rules[0]", "gives no units"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mapping.LoadRules("rules.yaml", strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatal("want an error")
			}
			var p *mapping.Problem
			if !errors.As(err, &p) {
				t.Fatalf("err = %v, want a *Problem", err)
			}
			if p.Source != "rules.yaml" || p.Line != tt.wantLine || p.Field != tt.wantField || !strings.Contains(p.Msg, tt.wantMsg) {
				t.Errorf("problem = %+v\nwant line %d field %q msg ~%q", p, tt.wantLine, tt.wantField, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") && !strings.Contains(tt.name, "two") {
				t.Logf("multi-line error: %v", err)
			}
		})
	}
}

func FuzzLoadRules(f *testing.F) {
	if b, err := os.ReadFile("testdata/rules/full.yaml"); err == nil {
		f.Add(string(b))
	}
	f.Add("rules:\n  - {default: true, code: T1, units: hours}\n")
	f.Add("rules: [{match: {type: [a, b]}, code: X, amount: {product: [units, rate]}}]")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := mapping.LoadRules("fuzz.yaml", strings.NewReader(s))
		if err == nil && r == nil {
			t.Fatal("nil rules without error")
		}
		if err != nil && r != nil {
			t.Fatal("rules and an error")
		}
	})
}
