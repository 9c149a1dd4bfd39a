package payroll

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	graphql "github.com/hasura/go-graphql-client"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"-1", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestClassifyGraphQLErrors(t *testing.T) {
	tests := []struct {
		name      string
		errs      graphql.Errors
		wantClass Class
		wantIndex int
		wantField string
	}{
		{"validation has no path", graphql.Errors{{Message: `Cannot query field "foo" on type "PayPart".`}}, NotApplied, -1, ""},
		{"extensions index", graphql.Errors{{Message: "bad item", Path: []any{"create_pay_parts"}, Extensions: map[string]any{"index": float64(3), "field": "amount"}}}, Rejected, 3, "amount"},
		{"path index", graphql.Errors{{Message: "bad", Path: []any{"create_pay_parts", float64(2)}}}, Rejected, 2, ""},
		{"message index", graphql.Errors{{Message: "pay_parts[7]: units is mandatory for code T1", Path: []any{"create_pay_parts"}}}, Rejected, 7, ""},
		{"no index", graphql.Errors{{Message: "company not found", Path: []any{"pay_parts"}}}, Rejected, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := classify("CreatePayParts", &callInfo{wrote: true, status: 200}, tt.errs)
			if e.Class != tt.wantClass || e.Index != tt.wantIndex || e.Field != tt.wantField {
				t.Fatalf("got class=%s index=%d field=%q, want %s %d %q (%v)", e.Class, e.Index, e.Field, tt.wantClass, tt.wantIndex, tt.wantField, e)
			}
		})
	}
}

func TestError_Is(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &Error{Op: "PayPartsMeta", Class: Revoked, Index: -1})
	if !errors.Is(err, ErrRevoked) {
		t.Fatal("a Revoked error must match ErrRevoked")
	}
	if errors.Is(&Error{Class: Ambiguous}, ErrRevoked) {
		t.Fatal("an Ambiguous error must not match ErrRevoked")
	}
	if got := ClassOf(err); got != Revoked {
		t.Fatalf("ClassOf = %s", got)
	}
}
