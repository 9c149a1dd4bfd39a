package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// ledgerSetup opens only the ledger (operator queries need no API).
func ledgerSetup(ctx context.Context, name, synopsis string, args []string, io stdio, env lookupEnv, more func(fs *flag.FlagSet)) (*ledger.Ledger, []string, error) {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	fs := newFlagSet(name, synopsis, io)
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "ledger file (PAYSYNC_LEDGER)")
	if more != nil {
		more(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	l, err := cfg.openLedger(ctx)
	if err != nil {
		return nil, nil, err
	}
	return l, pos, nil
}

func usageOrHelp(err error) error {
	if err == flag.ErrHelp {
		return err
	}
	return &usageError{err.Error()}
}

// parseSince reads an RFC 3339 time, a date, or a duration ago ("24h").
func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("--since %q: want a date (2026-11-01), a time (RFC 3339) or a duration (24h)", s)
}

func parseID(what, s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("%s: %q is not an id", what, s)
	}
	return id, nil
}

func runBatches(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON bool
	var state, since string
	l, rest, err := ledgerSetup(ctx, "batches", "batches [--json] [--state S] [--since T] | batches show ID [--json]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&state, "state", "", "only batches in this state: pending, sending, created, failed, split, reverting, reverted")
		fs.StringVar(&since, "since", "", "only batches created since (2026-11-01, RFC 3339, or a duration like 24h)")
	})
	if err != nil {
		return err
	}
	defer l.Close()
	if len(rest) > 0 && rest[0] == "show" {
		if len(rest) != 2 {
			return usagef("batches show: want one batch id")
		}
		id, err := parseID("batches show", rest[1])
		if err != nil {
			return err
		}
		return showBatch(ctx, l, id, asJSON, io)
	}
	if len(rest) > 0 {
		return usagef("batches: unexpected argument %q (did you mean 'batches show ID'?)", rest[0])
	}
	t, err := parseSince(since)
	if err != nil {
		return err
	}
	bs, err := l.ListBatches(ctx, ledger.BatchFilter{State: paysync.BatchState(state), Since: t})
	if err != nil {
		return err
	}
	if asJSON {
		if bs == nil {
			bs = []ledger.Batch{}
		}
		return writeJSON(io.out, bs)
	}
	if len(bs) == 0 {
		fmt.Fprintln(io.out, "(no batches)")
		return nil
	}
	tb := newTable(io.out, "BATCH", "IMPORT", "COMPANY", "STATE", "PAY PARTS", "CREATED", "REJECTED", "DELETED/GONE", "ATTEMPTS", "UPDATED", "LAST ERROR")
	for _, b := range bs {
		tb.row(fmt.Sprint(b.ID), fmt.Sprint(b.SourceID), b.CompanyID, string(b.State), fmt.Sprint(b.Items), fmt.Sprint(b.Created), fmt.Sprint(b.Rejected),
			fmt.Sprintf("%d/%d", b.Deleted, b.Gone), fmt.Sprint(b.Attempts), utcTime(b.UpdatedAt), truncate(b.LastError, 60))
	}
	return tb.flush()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func showBatch(ctx context.Context, l *ledger.Ledger, id int64, asJSON bool, io stdio) error {
	d, err := l.BatchDetail(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.out, d)
	}
	w := io.out
	fmt.Fprintf(w, "batch %d: company %s, import %d, state %s, %s", d.ID, d.CompanyID, d.SourceID, d.State, plural(d.Attempts, "attempt", "attempts"))
	if d.ParentID != 0 {
		fmt.Fprintf(w, ", split from batch %d", d.ParentID)
	}
	if d.ReplayOf != 0 {
		fmt.Fprintf(w, ", replay of batch %d", d.ReplayOf)
	}
	fmt.Fprintln(w)
	if d.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", d.LastError)
	}
	fmt.Fprintln(w)
	tb := newTable(w, "PAY PART", "PAYROLL ID", "STATE", "EMPLOYEE", "CODE", "UNITS", "RATE", "AMOUNT", "FROM")
	for _, it := range d.Items {
		var from []string
		for _, e := range it.Entries {
			from = append(from, fmt.Sprintf("%s:%d (%s)", e.Source, e.Line, e.EntryID))
		}
		tb.row(fmt.Sprint(it.ID), dash(it.PayrollID), string(it.State), it.EmployeeName, it.Code, num(it.Units), num(it.Rate), num(it.Amount), strings.Join(from, ", "))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if len(d.Log) > 0 {
		fmt.Fprintln(w, "\nattempts:")
		tb := newTable(w, "  #", "OP", "ITEMS", "STARTED", "OUTCOME", "ERROR")
		for _, a := range d.Log {
			tb.row(fmt.Sprintf("  %d", a.ID), string(a.Op), fmt.Sprint(a.Items), utcClock(a.StartedAt), string(a.Outcome), truncate(a.Error, 70))
		}
		return tb.flush()
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runImports(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON bool
	var since string
	l, rest, err := ledgerSetup(ctx, "imports", "imports [--json] [--since T] | imports show ID [--json]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&since, "since", "", "only imports since (2026-11-01, RFC 3339, or a duration like 24h)")
	})
	if err != nil {
		return err
	}
	defer l.Close()
	if len(rest) > 0 && rest[0] == "show" {
		if len(rest) != 2 {
			return usagef("imports show: want one import id")
		}
		id, err := parseID("imports show", rest[1])
		if err != nil {
			return err
		}
		return showImport(ctx, l, id, asJSON, io)
	}
	if len(rest) > 0 {
		return usagef("imports: unexpected argument %q (did you mean 'imports show ID'?)", rest[0])
	}
	t, err := parseSince(since)
	if err != nil {
		return err
	}
	ss, err := l.ListSources(ctx, t)
	if err != nil {
		return err
	}
	if asJSON {
		if ss == nil {
			ss = []ledger.Source{}
		}
		return writeJSON(io.out, ss)
	}
	if len(ss) == 0 {
		fmt.Fprintln(io.out, "(no imports)")
		return nil
	}
	tb := newTable(io.out, "IMPORT", "KIND", "NAME", "FORMAT", "ENTRIES", "DUPLICATES", "REJECTS", "RECEIVED")
	for _, s := range ss {
		tb.row(fmt.Sprint(s.ID), string(s.Kind), s.Name, s.Format, fmt.Sprint(s.Entries), fmt.Sprint(s.Duplicates), fmt.Sprint(s.Rejects), utcTime(s.ReceivedAt))
	}
	return tb.flush()
}

type importDetail struct {
	ledger.Source
	Batches     []ledger.Batch          `json:"batches"`
	Rejects     []ledger.Reject         `json:"rejects"`
	Corrections []ledger.CorrectionUnit `json:"corrections"` // the units the import brought
}

func showImport(ctx context.Context, l *ledger.Ledger, id int64, asJSON bool, io stdio) error {
	s, err := l.Source(ctx, id)
	if err != nil {
		return err
	}
	d := importDetail{Source: s}
	if d.Batches, err = l.BatchesOfSource(ctx, id); err != nil {
		return err
	}
	if d.Rejects, err = l.Rejects(ctx, id); err != nil {
		return err
	}
	if d.Corrections, err = l.ListCorrections(ctx, ledger.CorrectionFilter{SourceID: id}); err != nil {
		return err
	}
	slices.Reverse(d.Corrections) // oldest first, like the batches
	if asJSON {
		return writeJSON(io.out, d)
	}
	w := io.out
	fmt.Fprintf(w, "import %d: %s %s (%s, %d bytes, sha256 %.12s…), received %s\n", s.ID, s.Kind, s.Name, s.Format, s.Size, s.Hash, utcTime(s.ReceivedAt))
	if s.RetryOf != 0 {
		fmt.Fprintf(w, "the same content as import %d, taken again (that one had rejects)\n", s.RetryOf)
	}
	fmt.Fprintf(w, "%s, %s, %s\n\n", plural(s.Entries, "entry", "entries"), plural(s.Duplicates, "duplicate", "duplicates"), plural(s.Rejects, "reject", "rejects"))
	tb := newTable(w, "BATCH", "COMPANY", "STATE", "PAY PARTS", "CREATED", "REJECTED", "DELETED/GONE")
	for _, b := range d.Batches {
		tb.row(fmt.Sprint(b.ID), b.CompanyID, string(b.State), fmt.Sprint(b.Items), fmt.Sprint(b.Created), fmt.Sprint(b.Rejected), fmt.Sprintf("%d/%d", b.Deleted, b.Gone))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if len(d.Corrections) > 0 {
		fmt.Fprintln(w)
		for _, u := range d.Corrections {
			fmt.Fprintf(w, "correction %d: %s\n", u.ID, unitSummary(u))
		}
	}
	if len(d.Rejects) > 0 {
		fmt.Fprintln(w, "\nrejects:")
		for _, r := range d.Rejects {
			fmt.Fprintf(w, "  %s:%d: entry %s: %s: %s (%s)\n", s.Name, r.Line, r.EntryID, r.Field, r.Message, r.Hint)
		}
	}
	return nil
}

var ledgerFilterAll = ledger.BatchFilter{}
