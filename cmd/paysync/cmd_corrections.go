package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/shopspring/decimal"
)

// runCorrections lists correction units, or shows one as a delta: a
// corrected entry replaces the pay parts it was in, and the operator sees
// what went out of payroll and what came in instead.
func runCorrections(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON bool
	var importID int64
	var company, since string
	l, rest, err := ledgerSetup(ctx, "corrections", "corrections [--import N] [--company C] [--since T] [--json] | corrections show ID [--json]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.Int64Var(&importID, "import", 0, "only the corrections this import brought")
		fs.StringVar(&company, "company", "", "only corrections of this company")
		fs.StringVar(&since, "since", "", "only corrections since (2026-11-01, RFC 3339, or a duration like 24h)")
	})
	if err != nil {
		return err
	}
	defer l.Close()
	if len(rest) > 0 && rest[0] == "show" {
		if len(rest) != 2 {
			return usagef("corrections show: want one correction id")
		}
		id, err := parseID("corrections show", rest[1])
		if err != nil {
			return err
		}
		d, err := l.CorrectionDetail(ctx, id)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(io.out, d)
		}
		return writeCorrection(io.out, d)
	}
	if len(rest) > 0 {
		return usagef("corrections: unexpected argument %q (did you mean 'corrections show ID'?)", rest[0])
	}
	t, err := parseSince(since)
	if err != nil {
		return err
	}
	us, err := l.ListCorrections(ctx, ledger.CorrectionFilter{SourceID: importID, CompanyID: company, Since: t})
	if err != nil {
		return err
	}
	if asJSON {
		if us == nil {
			us = []ledger.CorrectionUnit{}
		}
		return writeJSON(io.out, us)
	}
	if len(us) == 0 {
		fmt.Fprintln(io.out, "(no corrections)")
	} else {
		tb := newTable(io.out, "UNIT", "IMPORT", "FROM", "COMPANY", "ENTRIES", "REPLACED", "NEW", "BATCHES", "STATE", "RECORDED")
		for _, u := range us {
			tb.row(fmt.Sprint(u.ID), fmt.Sprint(u.SourceID), truncate(filepath.Base(u.ImportName), 40), u.CompanyID, fmt.Sprint(u.Entries), fmt.Sprint(u.Replaced),
				fmt.Sprint(u.New), dash(joinIDs(u.Batches)), string(u.State), utcTime(u.CreatedAt))
		}
		if err := tb.flush(); err != nil {
			return err
		}
	}
	return writeWaitingCorrections(ctx, io.out, l)
}

// waitingShown is how many waiting corrections the list names.
const waitingShown = 20

// writeWaitingCorrections names the corrections recorded and not applied
// yet, and why they wait when the corrector said so.
func writeWaitingCorrections(ctx context.Context, w io.Writer, l *ledger.Ledger) error {
	n, ws, err := l.WaitingCorrections(ctx, waitingShown)
	if err != nil || n == 0 {
		return err
	}
	fmt.Fprintf(w, "\nwaiting: %s not applied yet (applied by the daemon's next look, or the next paysync import):\n", plural(n, "correction", "corrections"))
	for _, c := range ws {
		why := c.Why
		if why == "" {
			why = "not tried yet"
		}
		fmt.Fprintf(w, "  entry %s (import %d, %s:%d), since %s: %s\n", c.EntryID, c.SourceID, c.SourceName, c.Line, utcTime(c.Since), why)
	}
	if n > len(ws) {
		fmt.Fprintf(w, "  … and %d more\n", n-len(ws))
	}
	return nil
}

// unitSummary is a unit in one line: "1 entry changed, 1 pay part
// replaced (batch 7): done".
func unitSummary(u ledger.CorrectionUnit) string {
	var b strings.Builder
	b.WriteString(plural(u.Entries, "entry", "entries") + " changed, ")
	parts := func(n int) string { return plural(n, "pay part", "pay parts") }
	switch {
	case u.Replaced == 0 && u.New == 0:
		b.WriteString("no pay part changed")
	case u.New == 0:
		b.WriteString(parts(u.Replaced) + " deleted")
	case u.Replaced == 0:
		b.WriteString(parts(u.New) + " created")
	case u.New == u.Replaced:
		b.WriteString(parts(u.Replaced) + " replaced")
	default:
		fmt.Fprintf(&b, "%s replaced by %d", parts(u.Replaced), u.New)
	}
	switch len(u.Batches) {
	case 0:
	case 1:
		fmt.Fprintf(&b, " (batch %d)", u.Batches[0])
	default:
		fmt.Fprintf(&b, " (batches %s)", joinIDs(u.Batches))
	}
	b.WriteString(": " + string(u.State))
	var left []string
	if u.ToDelete > 0 {
		left = append(left, fmt.Sprintf("%d to delete", u.ToDelete))
	}
	if u.NotSent > 0 {
		left = append(left, fmt.Sprintf("%d to create", u.NotSent))
	}
	if u.Rejected > 0 {
		left = append(left, fmt.Sprintf("%d rejected by payroll", u.Rejected))
	}
	if len(left) > 0 {
		b.WriteString(" (" + strings.Join(left, ", ") + ")")
	}
	return b.String()
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// writeCorrection shows a unit as a delta (per employee × code, the total
// before → after), then the entries it changed and the pay parts it
// replaced and created.
func writeCorrection(w io.Writer, d ledger.CorrectionDetail) error {
	fmt.Fprintf(w, "correction %d: import %d (%s %s), company %s, recorded %s\n", d.ID, d.SourceID, d.Import.Kind, d.ImportName, d.CompanyID,
		utcTime(d.CreatedAt))
	fmt.Fprintln(w, unitSummary(d.CorrectionUnit))
	if len(d.Delta) > 0 {
		fmt.Fprintln(w)
		tb := newTable(w, "EMPLOYEE", "CODE", "UNITS", "AMOUNT", "REPLACED → CREATED")
		for _, x := range d.Delta {
			who := x.EmployeeName
			if who == "" {
				who = x.EmployeeID
			}
			tb.row(who, x.Code, change(x.UnitsBefore, x.UnitsAfter), change(x.AmountBefore, x.AmountAfter), dash(joinIDs(x.Replaced))+" → "+dash(joinIDs(x.Created)))
		}
		if err := tb.flush(); err != nil {
			return err
		}
	}
	if len(d.Corrected) > 0 {
		fmt.Fprintln(w, "\nentries:")
		for _, c := range d.Corrected {
			what := strings.Join(entryChanges(c.Before.Entry, c.After.Entry), ", ")
			if c.After.Statement {
				what = "no longer in its period statement"
			}
			fmt.Fprintf(w, "  %s: %s → %s: %s\n", c.EntryID, where(c.Before.Source, c.Before.Line), where(c.After.Source, c.After.Line), what)
		}
	}
	parts := func(title string, items []ledger.ItemDetail, state func(i int) string) error {
		if len(items) == 0 {
			return nil
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		tb := newTable(w, "PAY PART", "PAYROLL ID", "BATCH", "STATE", "EMPLOYEE", "CODE", "UNITS", "RATE", "AMOUNT", "FROM")
		for i, it := range items {
			var from []string
			for _, e := range it.Entries {
				from = append(from, fmt.Sprintf("%s (%s)", where(e.Source, e.Line), e.EntryID))
			}
			who := it.EmployeeName
			if who == "" {
				who = it.EmployeeID
			}
			tb.row(fmt.Sprint(it.ID), dash(it.PayrollID), fmt.Sprint(it.BatchID), state(i), who, it.Code, num(it.Units), num(it.Rate), num(it.Amount), strings.Join(from, ", "))
		}
		return tb.flush()
	}
	replaced := make([]ledger.ItemDetail, len(d.ReplacedParts))
	for i, r := range d.ReplacedParts {
		replaced[i] = r.ItemDetail
	}
	if err := parts("pay parts replaced (deleted from payroll before anything of the unit is created)", replaced, func(i int) string {
		return strings.ReplaceAll(string(d.ReplacedParts[i].Status), "_", " ")
	}); err != nil {
		return err
	}
	return parts("pay parts created instead", d.NewParts, func(i int) string { return string(d.NewParts[i].State) })
}

// where renders "file:line", or the file alone when no row is meant (a
// period statement's tombstone).
func where(source string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", source, line)
	}
	return source
}

// change renders "8 → 8.5", "-" when neither side has a value.
func change(before, after decimal.NullDecimal) string {
	if !before.Valid && !after.Valid {
		return "-"
	}
	return num(before) + " → " + num(after)
}

// entryChanges names what differs between two versions of an entry:
// "hours 8 → 8.5", "deleted".
func entryChanges(a, b paysync.Entry) []string {
	if b.Deleted {
		return []string{"deleted (tombstone)"}
	}
	var out []string
	diff := func(what, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %s → %s", what, dash(x), dash(y)))
		}
	}
	flag := func(p *bool) string {
		if p == nil {
			return ""
		}
		return fmt.Sprint(*p)
	}
	diff("company", a.CompanyID, b.CompanyID)
	diff("employee", a.Employee(), b.Employee())
	diff("date", a.Date, b.Date)
	diff("hours", a.Hours.String(), b.Hours.String())
	diff("units", optNum(a.Units), optNum(b.Units))
	diff("rate", optNum(a.Rate), optNum(b.Rate))
	diff("amount", optNum(a.Amount), optNum(b.Amount))
	diff("type", a.Type, b.Type)
	diff("code", a.Code, b.Code)
	diff("project", a.Project, b.Project)
	diff("tags", strings.Join(a.Tags, ", "), strings.Join(b.Tags, ", "))
	diff("billable", flag(a.Billable), flag(b.Billable))
	diff("approved", flag(a.Approved), flag(b.Approved))
	diff("description", a.Description, b.Description)
	var keys []string
	for k := range a.Fields {
		keys = append(keys, k)
	}
	for k := range b.Fields {
		if _, ok := a.Fields[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		diff(k, a.Fields[k], b.Fields[k])
	}
	if len(out) == 0 {
		out = []string{"content changed"}
	}
	return out
}

func optNum(d decimal.NullDecimal) string {
	if !d.Valid {
		return ""
	}
	return d.Decimal.String()
}
