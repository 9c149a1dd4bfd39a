package mapping

import (
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
