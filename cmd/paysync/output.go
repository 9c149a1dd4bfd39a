package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// isTerminal reports whether f is a terminal someone can answer on. A
// character device is not enough: /dev/null (cron, CI, `< /dev/null`) is
// one too.
func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

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

// plural is a count with its noun: "1 batch", "2 batches".
func plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Every time paysync prints for people (tables and messages) is UTC with
// the zone shown, whatever the machine's zone: the ledger, the logs and
// payroll's own records compare without guessing. JSON keeps RFC 3339.
const (
	timeLayout  = "2006-01-02 15:04 UTC"
	clockLayout = "15:04:05.000 UTC" // a batch's attempts, apart by milliseconds
)

// utcTime is t as people read it: "2026-11-24 06:51 UTC".
func utcTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// utcClock is the time of day of t to the millisecond: "06:51:03.120 UTC".
func utcClock(t time.Time) string { return t.UTC().Format(clockLayout) }

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

// writeEmployees lists employees, with payroll's employee number and
// e-mail when the server has them (number, email), so that a by_number
// table can be written from it.
func writeEmployees(w io.Writer, emps []paysync.Employee, number, email bool) error {
	cols := func(id, num, name, mail string) []string {
		out := []string{id}
		if number {
			out = append(out, num)
		}
		out = append(out, name)
		if email {
			out = append(out, mail)
		}
		return out
	}
	t := newTable(w, cols("EMPLOYEE ID", "NUMBER", "NAME", "E-MAIL")...)
	for _, e := range emps {
		t.row(cols(e.ID, e.Number, e.Name, e.Email)...)
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
