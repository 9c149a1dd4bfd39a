package payroll

import (
	"testing"

	"github.com/shopspring/decimal"
)

func TestEncoding_Encode(t *testing.T) {
	tests := []struct {
		name    string
		enc     Encoding
		in      string
		want    string
		wantErr bool
	}{
		{"float simple", Encoding{Kind: Float}, "7.5", "7.5", false},
		{"float keeps exact text", Encoding{Kind: Float}, "215.50", "215.5", false},
		{"float tenth is exact decimal text", Encoding{Kind: Float}, "0.1", "0.1", false},
		{"float negative", Encoding{Kind: Float}, "-3.25", "-3.25", false},
		{"float integer", Encoding{Kind: Float}, "1000", "1000", false},
		{"float too many digits", Encoding{Kind: Float}, "0.12345678901234567890", "", true},
		{"float big but exact", Encoding{Kind: Float}, "12345678.91", "12345678.91", false},
		{"float 15 digits (fast path)", Encoding{Kind: Float}, "1234567890.12345", "1234567890.12345", false},
		{"float 16 digits that a double keeps", Encoding{Kind: Float}, "1234567890.123456", "1234567890.123456", false},
		{"float 17 digits a double loses", Encoding{Kind: Float}, "12345678901234567.5", "", true},
		{"float tiny with few digits", Encoding{Kind: Float}, "0.000000000000000000000000000000000000001", "0.000000000000000000000000000000000000001", false},
		{"int hundredths", Encoding{Kind: Int, Scale: 2}, "7.5", "750", false},
		{"int hundredths exact", Encoding{Kind: Int, Scale: 2}, "215.55", "21555", false},
		{"int negative", Encoding{Kind: Int, Scale: 2}, "-1.25", "-125", false},
		{"int third decimal refused", Encoding{Kind: Int, Scale: 2}, "7.125", "", true},
		{"int scale 0", Encoding{Kind: Int, Scale: 0}, "42", "42", false},
		{"int scale 0 fraction refused", Encoding{Kind: Int, Scale: 0}, "42.5", "", true},
		{"int max", Encoding{Kind: Int, Scale: 2}, "21474836.47", "2147483647", false},
		{"int overflow", Encoding{Kind: Int, Scale: 2}, "21474836.48", "", true},
		{"int underflow", Encoding{Kind: Int, Scale: 2}, "-21474836.49", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.enc.Encode(decimal.RequireFromString(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Encode(%s) err = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Fatalf("Encode(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestEncoding_Decode(t *testing.T) {
	tests := []struct {
		name  string
		enc   Encoding
		raw   string
		want  string
		valid bool
	}{
		{"float", Encoding{Kind: Float}, "7.5", "7.5", true},
		{"float exponent", Encoding{Kind: Float}, "1e+3", "1000", true},
		{"null", Encoding{Kind: Float}, "null", "", false},
		{"empty", Encoding{Kind: Int, Scale: 2}, "", "", false},
		{"int hundredths", Encoding{Kind: Int, Scale: 2}, "21555", "215.55", true},
		{"int negative", Encoding{Kind: Int, Scale: 2}, "-125", "-1.25", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.enc.Decode([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got.Valid != tt.valid {
				t.Fatalf("Valid = %v, want %v", got.Valid, tt.valid)
			}
			if tt.valid && !got.Decimal.Equal(decimal.RequireFromString(tt.want)) {
				t.Fatalf("Decode(%s) = %s, want %s", tt.raw, got.Decimal, tt.want)
			}
		})
	}
	if _, err := (Encoding{Kind: Float}).Decode([]byte(`"x"`)); err == nil {
		t.Fatal("Decode of a string: want error")
	}
}

// Every value the Int encoding accepts comes back unchanged.
func FuzzEncoding_RoundTrip(f *testing.F) {
	for _, s := range []string{"0", "7.5", "-0.01", "21474836.47", "1e2", "3.14159"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := decimal.NewFromString(s)
		if err != nil {
			return
		}
		for _, enc := range []Encoding{{Kind: Int, Scale: 2}, {Kind: Float}} {
			raw, err := enc.Encode(d)
			if err != nil {
				continue
			}
			back, err := enc.Decode(raw)
			if err != nil || !back.Valid || !back.Decimal.Equal(d) {
				t.Fatalf("%s: %s → %s → %v (%v)", enc, d, raw, back.Decimal, err)
			}
		}
	})
}
