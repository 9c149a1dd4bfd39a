package paysync

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// Entry is one timesheet entry as a time-tracking system reports it,
// whatever format it came in. Mapping turns entries into pay parts.
type Entry struct {
	ID string `json:"id"` // unique per source: the dedupe key

	// Deleted makes the entry a tombstone, {"id": "...", "deleted": true}:
	// the entry with this ID is removed. It needs no other field. Only
	// JSON input (files, NDJSON, messages) has tombstones.
	Deleted bool `json:"deleted,omitempty"`

	// Where it came from, for error messages and audit.
	Source string `json:"-"` // file name or message subject
	Line   int    `json:"-"` // line (CSV, NDJSON) or record number (JSON arrays), 1-based

	CompanyID string `json:"company_id,omitempty"`

	// The employee, by payroll ID or by something to resolve.
	EmployeeID     string `json:"employee_id,omitempty"`
	EmployeeNumber string `json:"employee_number,omitempty"`
	Email          string `json:"email,omitempty"`
	Name           string `json:"name,omitempty"`

	Date  string `json:"date,omitempty"` // YYYY-MM-DD; empty only in a tombstone
	Hours Hours  `json:"hours,omitzero"`
	Numbers

	Type        string   `json:"type,omitempty"` // hour type, mapped to a code by rules
	Code        string   `json:"code,omitempty"` // explicit pay code: no rule needed
	Project     string   `json:"project,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Billable    *bool    `json:"billable,omitempty"`
	Approved    *bool    `json:"approved,omitempty"`
	Description string   `json:"description,omitempty"`

	// Fields holds further columns or properties by name, for rules that
	// take a value from an entry field (e.g. "km").
	Fields map[string]string `json:"fields,omitempty"`
}

// Where renders "source:line" for messages.
func (e Entry) Where() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d", e.Source, e.Line)
	}
	return e.Source
}

// Employee returns the reference a person would recognise.
func (e Entry) Employee() string {
	switch {
	case e.EmployeeID != "":
		return e.EmployeeID
	case e.Email != "":
		return e.Email
	case e.Name != "":
		return e.Name
	case e.EmployeeNumber != "":
		return "#" + e.EmployeeNumber
	}
	return ""
}

// Hours is an exact amount of time. It is kept in seconds so that clock
// durations add up exactly: 20 minutes is 1/3 hour, which no decimal
// carries, but 1200 seconds is exact. It becomes decimal hours only when
// a pay part is made, under an explicit rounding rule.
type Hours struct {
	Seconds decimal.Decimal
	Valid   bool
}

var secondsPerHour = decimal.NewFromInt(3600)

// HoursFromDecimal returns h decimal hours (7.5 → 27000 s).
func HoursFromDecimal(h decimal.Decimal) Hours {
	return Hours{Seconds: h.Mul(secondsPerHour), Valid: true}
}

// HoursFromSeconds returns s seconds.
func HoursFromSeconds(s int64) Hours {
	return Hours{Seconds: decimal.NewFromInt(s), Valid: true}
}

// ParseHours reads decimal hours ("7.5", "7,5" when decimalComma) or a
// clock duration ("7:30", "25:30:00").
func ParseHours(s string, decimalComma bool) (Hours, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Hours{}, fmt.Errorf("empty duration")
	}
	if strings.Contains(s, ":") {
		return parseClock(s)
	}
	d, err := ParseDecimal(s, decimalComma)
	if err != nil {
		return Hours{}, err
	}
	return HoursFromDecimal(d), nil
}

// parseClock reads H:MM or H:MM:SS (hours may exceed 24, and may be negative).
func parseClock(s string) (Hours, error) {
	neg := strings.HasPrefix(s, "-")
	parts := strings.Split(strings.TrimPrefix(s, "-"), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Hours{}, fmt.Errorf("duration %q is not H:MM or H:MM:SS", s)
	}
	var nums [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || p == "" || (i > 0 && (len(p) != 2 || n > 59)) || n > 1e9 {
			return Hours{}, fmt.Errorf("duration %q is not H:MM or H:MM:SS", s)
		}
		nums[i] = n
	}
	secs := nums[0]*3600 + nums[1]*60 + nums[2]
	if neg {
		secs = -secs
	}
	return HoursFromSeconds(secs), nil
}

// Add returns h + o.
func (h Hours) Add(o Hours) Hours {
	return Hours{Seconds: h.Seconds.Add(o.Seconds), Valid: h.Valid || o.Valid}
}

// IsZero reports whether h is absent (for `omitzero`).
func (h Hours) IsZero() bool { return !h.Valid }

// NoTime reports whether h is absent or zero.
func (h Hours) NoTime() bool { return !h.Valid || h.Seconds.IsZero() }

// Round returns h in decimal hours with places decimals under mode.
func (h Hours) Round(places int32, mode Rounding) decimal.Decimal {
	// Divide with spare precision, then round once under the rule.
	return mode.Round(h.Seconds.DivRound(secondsPerHour, places+12), places)
}

// Exact returns h in decimal hours if that is a finite decimal.
func (h Hours) Exact() (decimal.Decimal, bool) {
	q := h.Seconds.DivRound(secondsPerHour, 16)
	return q, q.Mul(secondsPerHour).Equal(h.Seconds)
}

// String renders decimal hours when exact, else H:MM:SS.
func (h Hours) String() string {
	if !h.Valid {
		return ""
	}
	if d, ok := h.Exact(); ok {
		return d.String()
	}
	s := h.Seconds.Round(0).IntPart()
	sign := ""
	if s < 0 {
		sign, s = "-", -s
	}
	return fmt.Sprintf("%s%d:%02d:%02d", sign, s/3600, s/60%60, s%60)
}

// MarshalJSON writes decimal hours as a string, or "H:MM:SS".
func (h Hours) MarshalJSON() ([]byte, error) {
	if !h.Valid {
		return []byte("null"), nil
	}
	return json.Marshal(h.String())
}

// UnmarshalJSON reads a JSON number, a decimal string or "H:MM:SS".
func (h *Hours) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		*h = Hours{}
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := ParseHours(s, false)
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// ParseDecimal reads a decimal number, with a decimal comma when asked
// ("1.234,5" with thousands dots is refused: ambiguous). No exponent, no
// spaces inside.
func ParseDecimal(s string, decimalComma bool) (decimal.Decimal, error) {
	t := strings.TrimSpace(s)
	if decimalComma {
		if strings.Contains(t, ".") {
			return decimal.Decimal{}, fmt.Errorf("%q: a decimal comma was configured, but the value has a dot", s)
		}
		t = strings.Replace(t, ",", ".", 1)
	}
	if t == "" || strings.ContainsAny(t, "eE_ ,") || strings.Count(t, ".") > 1 {
		return decimal.Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	d, err := decimal.NewFromString(t)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	return d, nil
}

// Rounding is how a value with too many decimals is brought to the wire's
// precision. It is always explicit, never binary floating point.
type Rounding string

// The rounding modes.
const (
	HalfUp   Rounding = "half_up"   // 0.125 → 0.13, -0.125 → -0.13 (away from zero)
	HalfEven Rounding = "half_even" // 0.125 → 0.12 (banker's)
	Down     Rounding = "down"      // toward zero
	Up       Rounding = "up"        // away from zero
)

// ParseRounding reads a rounding mode name.
func ParseRounding(s string) (Rounding, error) {
	switch r := Rounding(strings.ToLower(strings.TrimSpace(s))); r {
	case HalfUp, HalfEven, Down, Up:
		return r, nil
	case "":
		return HalfUp, nil
	}
	return "", fmt.Errorf("rounding %q: want half_up, half_even, down or up", s)
}

// Round rounds d to places decimals.
func (r Rounding) Round(d decimal.Decimal, places int32) decimal.Decimal {
	switch r {
	case HalfEven:
		return d.RoundBank(places)
	case Down:
		return d.RoundDown(places)
	case Up:
		return d.RoundUp(places)
	default:
		return d.Round(places) // half away from zero
	}
}

// EntryRef points at the source entry a pay part came from.
type EntryRef struct {
	Source string `json:"source"`
	Line   int    `json:"line"`
	ID     string `json:"id"`
}

// Ref returns e's reference.
func (e Entry) Ref() EntryRef { return EntryRef{Source: e.Source, Line: e.Line, ID: e.ID} }

// PlannedPayPart is a pay part paysync intends to create, with the entries
// it came from (one, or many when aggregated).
type PlannedPayPart struct {
	CompanyID string `json:"company_id"`
	PayPartInput
	EmployeeName string     `json:"employee_name"`
	Description  string     `json:"description"` // the pay code's description from meta
	Rule         string     `json:"rule"`        // the mapping rule that produced it
	Entries      []EntryRef `json:"entries"`
}
