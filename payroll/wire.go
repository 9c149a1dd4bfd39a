package payroll

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/shopspring/decimal"
)

// NumberKind is how the server types units, rate and amount.
type NumberKind int

// The number kinds a payroll server may use.
const (
	// Float: sent as an exact decimal JSON number (7.5, not 7.4999…).
	Float NumberKind = iota + 1
	// Int: sent as a whole number of 10^-Scale units (hundredths by
	// default): 7.5 → 750.
	Int
)

func (k NumberKind) String() string {
	switch k {
	case Float:
		return "Float"
	case Int:
		return "Int"
	}
	return "unknown"
}

// ParseNumberKind reads "float" or "int" (any case).
func ParseNumberKind(s string) (NumberKind, error) {
	switch s {
	case "float", "Float", "FLOAT":
		return Float, nil
	case "int", "Int", "INT":
		return Int, nil
	}
	return 0, fmt.Errorf("parse number kind: %q is not float or int", s)
}

// Encoding says how one numeric field travels on the wire.
type Encoding struct {
	Kind  NumberKind
	Scale int32 // Int only: decimal places carried by the integer (2 = hundredths)
}

func (e Encoding) String() string {
	if e.Kind == Int {
		return fmt.Sprintf("Int×10^%d", e.Scale)
	}
	return e.Kind.String()
}

// Encode renders d as the JSON number the server expects. A value that
// cannot be carried exactly is an error, never rounded.
func (e Encoding) Encode(d decimal.Decimal) (json.RawMessage, error) {
	switch e.Kind {
	case Int:
		scaled := d.Shift(e.Scale)
		if !scaled.IsInteger() {
			return nil, fmt.Errorf("%s has more than %d decimals; the server takes Int in units of 10^-%d", d.String(), e.Scale, e.Scale)
		}
		if scaled.GreaterThan(decimal.NewFromInt(math.MaxInt32)) || scaled.LessThan(decimal.NewFromInt(math.MinInt32)) {
			return nil, fmt.Errorf("%s does not fit the server's 32-bit Int (as %s×10^-%d)", d.String(), scaled.String(), e.Scale)
		}
		return json.RawMessage(scaled.String()), nil
	case Float:
		s := d.String()
		// Up to 15 significant digits at a modest scale, a decimal always
		// reads back from a float64 unchanged: skip the round trip (the
		// hot path of every create_pay_parts).
		if d.NumDigits() <= 15 && d.Exponent() >= -30 && d.Exponent() <= 30 {
			return json.RawMessage(s), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s cannot be sent as Float", s)
		}
		// The server parses the text into a float64; it must read back as
		// the same decimal, or the value would change on the way.
		back, err := decimal.NewFromString(strconv.FormatFloat(f, 'f', -1, 64))
		if err != nil || !back.Equal(d) {
			return nil, fmt.Errorf("%s has more significant digits than a Float carries exactly", s)
		}
		return json.RawMessage(s), nil
	}
	return nil, fmt.Errorf("encode number: unknown number kind %d", e.Kind)
}

// Decode reads a JSON number (or null) sent by the server.
func (e Encoding) Decode(raw json.RawMessage) (decimal.NullDecimal, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return decimal.NullDecimal{}, nil
	}
	d, err := decimal.NewFromString(string(raw))
	if err != nil {
		return decimal.NullDecimal{}, fmt.Errorf("decode number %.40q: %w", raw, err)
	}
	if e.Kind == Int {
		d = d.Shift(-e.Scale)
	}
	return decimal.NewNullDecimal(d), nil
}
