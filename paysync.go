// Package paysync holds the shared vocabulary of paysync: pay parts, their
// metadata and field rules, companies and employees, and the states and
// outcomes the ledger records (states.go). It has no behaviour
// beyond parsing and printing these values; the adapters (payroll, ledger,
// mapping, worker) all speak it.
//
// Numbers (units, rate, amount) are exact decimals (shopspring/decimal),
// never float64. An absent number is a decimal.NullDecimal with Valid=false.
package paysync

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/shopspring/decimal"
)

// FieldRule says whether units, rate or amount may be sent for a pay code.
type FieldRule int8

// The three field rules. The zero value is RuleUnknown so that an
// unset rule is never mistaken for a permissive one.
const (
	RuleUnknown FieldRule = iota
	RuleForbidden
	RuleOptional
	RuleMandatory
)

// String returns the canonical upper-case name of the rule.
func (r FieldRule) String() string {
	switch r {
	case RuleForbidden:
		return "FORBIDDEN"
	case RuleOptional:
		return "OPTIONAL"
	case RuleMandatory:
		return "MANDATORY"
	default:
		return "UNKNOWN"
	}
}

// Allowed reports whether a value may be sent (optional or mandatory).
func (r FieldRule) Allowed() bool { return r == RuleOptional || r == RuleMandatory }

// ParseFieldRule decodes the string or enum spellings used by payroll
// servers, in any case: MANDATORY/REQUIRED, OPTIONAL/ALLOWED,
// FORBIDDEN/NOT_ALLOWED. Boolean flags are decoded by FieldRuleFromBool.
func ParseFieldRule(s string) (FieldRule, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "MANDATORY", "REQUIRED":
		return RuleMandatory, nil
	case "OPTIONAL", "ALLOWED":
		return RuleOptional, nil
	case "FORBIDDEN", "NOT_ALLOWED":
		return RuleForbidden, nil
	}
	return RuleUnknown, fmt.Errorf("parse field rule: unknown value %q (want MANDATORY, REQUIRED, OPTIONAL, ALLOWED, FORBIDDEN or NOT_ALLOWED)", s)
}

// FieldRuleFromBool decodes a Boolean *_allowed flag: true means the field
// may be sent (optional: a Boolean cannot say mandatory), false forbidden.
func FieldRuleFromBool(allowed bool) FieldRule {
	if allowed {
		return RuleOptional
	}
	return RuleForbidden
}

// MarshalText implements encoding.TextMarshaler.
func (r FieldRule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *FieldRule) UnmarshalText(b []byte) error {
	v, err := ParseFieldRule(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// PayPartMeta is one valid pay code and what it accepts.
type PayPartMeta struct {
	Code        string    `json:"code"`
	Description string    `json:"description"`
	Units       FieldRule `json:"units"`
	Rate        FieldRule `json:"rate"`
	Amount      FieldRule `json:"amount"`
}

// Field names the three numeric fields of a pay part.
type Field string

// The numeric fields of a pay part, as named on the wire.
const (
	FieldUnits  Field = "units"
	FieldRate   Field = "rate"
	FieldAmount Field = "amount"
)

// Fields lists the numeric fields in wire order.
var Fields = []Field{FieldUnits, FieldRate, FieldAmount}

// Rule returns the rule for field f.
func (m PayPartMeta) Rule(f Field) FieldRule {
	switch f {
	case FieldUnits:
		return m.Units
	case FieldRate:
		return m.Rate
	case FieldAmount:
		return m.Amount
	}
	return RuleUnknown
}

// Numbers carries the three optional numeric fields of a pay part.
type Numbers struct {
	Units  decimal.NullDecimal `json:"units"`
	Rate   decimal.NullDecimal `json:"rate"`
	Amount decimal.NullDecimal `json:"amount"`
}

// Get returns field f.
func (n Numbers) Get(f Field) decimal.NullDecimal {
	switch f {
	case FieldUnits:
		return n.Units
	case FieldRate:
		return n.Rate
	case FieldAmount:
		return n.Amount
	}
	return decimal.NullDecimal{}
}

// Set sets field f.
func (n *Numbers) Set(f Field, v decimal.NullDecimal) {
	switch f {
	case FieldUnits:
		n.Units = v
	case FieldRate:
		n.Rate = v
	case FieldAmount:
		n.Amount = v
	}
}

// Equal reports whether both hold the same present fields with equal values
// (1.50 equals 1.5).
func (n Numbers) Equal(o Numbers) bool {
	for _, f := range Fields {
		a, b := n.Get(f), o.Get(f)
		if a.Valid != b.Valid || (a.Valid && !a.Decimal.Equal(b.Decimal)) {
			return false
		}
	}
	return true
}

// String renders the present fields, e.g. "units=7.5 rate=200".
func (n Numbers) String() string {
	var parts []string
	for _, f := range Fields {
		if v := n.Get(f); v.Valid {
			parts = append(parts, string(f)+"="+v.Decimal.String())
		}
	}
	return strings.Join(parts, " ")
}

// Dec returns a present decimal; a convenience for literals in tests and
// fixtures. It panics on a malformed literal.
func Dec(s string) decimal.NullDecimal {
	return decimal.NewNullDecimal(decimal.RequireFromString(s))
}

// PayPartInput is one item of a create_pay_parts call.
type PayPartInput struct {
	EmployeeID string `json:"employee_id"`
	Code       string `json:"code"`
	Numbers
}

// PayPart is a pay part as the payroll system holds it.
type PayPart struct {
	ID           string `json:"id"`
	EmployeeID   string `json:"employee_id"`
	EmployeeName string `json:"employee_name,omitempty"`
	Code         string `json:"code"`
	Numbers
}

// Matches reports whether p has the employee, code and numbers of in.
func (p PayPart) Matches(in PayPartInput) bool {
	return p.EmployeeID == in.EmployeeID && p.Code == in.Code && p.Numbers.Equal(in.Numbers)
}

// Employee is a person on a company's payroll.
type Employee struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Number is payroll's own employee number (Danløn's medarbejdernummer;
	// "" when the server serves none), Email the e-mail payroll holds:
	// entries match people by them.
	Number   string    `json:"number,omitempty"`
	Email    string    `json:"email,omitempty"`
	PayParts []PayPart `json:"pay_parts,omitempty"`
}

// Company is a payroll company (CVR entity) the account can see.
type Company struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Employees []Employee `json:"employees,omitempty"`
	PayParts  []PayPart  `json:"pay_parts,omitempty"`
}

// version is set at build time with
// -ldflags "-X github.com/paysync/paysync.version=v1.2.3".
var version = ""

// Version returns the build's version: the linker-set value, else the
// module version from the build info, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
