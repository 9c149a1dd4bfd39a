package mapping

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one bad input: where it is, which entry and field, what is
// wrong and what to do. Every reader, rule and validation error is one.
type Problem struct {
	Source  string // file name, "-" for stdin, or message subject
	Line    int    // line number (CSV, NDJSON) or record number (JSON arrays); 0 when unknown
	Record  bool   // Line counts records, not lines
	EntryID string // "" when the entry has no id (yet)
	Field   string // entry field, column, or rules-file key
	Msg     string // what is wrong
	Hint    string // what to do
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Source)
	switch {
	case p.Line > 0 && p.Record:
		fmt.Fprintf(&b, ": record %d", p.Line)
	case p.Line > 0:
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	if p.EntryID != "" {
		fmt.Fprintf(&b, ": entry %s", p.EntryID)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, ": %s", p.Field)
	}
	b.WriteString(": ")
	b.WriteString(p.Msg)
	if p.Hint != "" {
		b.WriteString(" (")
		b.WriteString(p.Hint)
		b.WriteString(")")
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// Flatten expands joined errors (errors.Join) into a flat list.
func Flatten(errs ...error) []error {
	var out []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			out = append(out, Flatten(j.Unwrap()...)...)
			continue
		}
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// OnlyProblems reports whether err consists only of *Problem values: bad
// input, as opposed to a failure of the payroll API or the context.
func OnlyProblems(err error) bool {
	list := Flatten(err)
	for _, e := range list {
		var p *Problem
		if !errors.As(e, &p) {
			return false
		}
	}
	return len(list) > 0
}
