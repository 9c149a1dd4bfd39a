package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// writeJSON prints v as indented JSON (the --json output of every command).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// table prints aligned columns for people.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(headers...)
	return t
}

// newKV returns a table of label/value rows without a header.
func newKV(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

func num(d decimal.NullDecimal) string {
	if !d.Valid {
		return "-"
	}
	return d.Decimal.String()
}

func rule(r paysync.FieldRule) string {
	if r == paysync.RuleUnknown {
		return "?"
	}
	return strings.ToLower(r.String())
}

func writeMeta(w io.Writer, meta []paysync.PayPartMeta) error {
	t := newTable(w, "CODE", "DESCRIPTION", "UNITS", "RATE", "AMOUNT")
	for _, m := range meta {
		t.row(m.Code, m.Description, rule(m.Units), rule(m.Rate), rule(m.Amount))
	}
	return t.flush()
}

func writeEmployees(w io.Writer, emps []paysync.Employee) error {
	t := newTable(w, "EMPLOYEE ID", "NAME")
	for _, e := range emps {
		t.row(e.ID, e.Name)
	}
	return t.flush()
}

func writePayParts(w io.Writer, pps []paysync.PayPart) error {
	if len(pps) == 0 {
		_, err := fmt.Fprintln(w, "(no pay parts)")
		return err
	}
	t := newTable(w, "PAY PART ID", "EMPLOYEE", "CODE", "UNITS", "RATE", "AMOUNT")
	for _, p := range pps {
		who := p.EmployeeName
		if who == "" {
			who = p.EmployeeID
		}
		t.row(p.ID, who, p.Code, num(p.Units), num(p.Rate), num(p.Amount))
	}
	return t.flush()
}
