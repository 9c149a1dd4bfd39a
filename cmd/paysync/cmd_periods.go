package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// runPeriods is `paysync periods`: what payroll holds per company, source
// and period (from the ledger), and `periods close|open PERIOD` to freeze a
// period once payroll has run (nothing is sent into it; late changes wait).
func runPeriods(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON bool
	var note string
	l, pos, err := ledgerSetup(ctx, "periods", "periods [--json] | periods close PERIOD [--note TEXT] | periods open PERIOD", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&note, "note", "", "why the period is closed (periods close), e.g. the payroll run")
	})
	if err != nil {
		return err
	}
	defer l.Close()
	if len(pos) == 0 {
		return listPeriods(ctx, l, asJSON, io)
	}
	if len(pos) != 2 || (pos[0] != "close" && pos[0] != "open") {
		return usagef("periods: want no argument (list), close PERIOD or open PERIOD")
	}
	p, err := paysync.ParsePeriod(pos[1])
	if err != nil {
		return usagef("periods %s: %v", pos[0], err)
	}
	return audited(ctx, l, env, &io, pos[0], "period "+p.String(), func() (string, error) {
		return "", closeOrOpen(ctx, l, pos[0], p, note, io)
	})
}

// closeOrOpen is periods close|open PERIOD.
func closeOrOpen(ctx context.Context, l *ledger.Ledger, op string, p paysync.Period, note string, io stdio) error {
	if op == "close" {
		changed, err := l.ClosePeriod(ctx, p, note)
		if err != nil {
			return err
		}
		if !changed {
			fmt.Fprintf(io.out, "period %s was closed already\n", p)
			return nil
		}
		fmt.Fprintf(io.out, "period %s closed: nothing is sent into it from now on; late changes are listed by paysync plan (paysync periods open %s reopens it)\n", p, p)
		return nil
	}
	changed, err := l.ReopenPeriod(ctx, p)
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(io.out, "period %s was not closed\n", p)
		return nil
	}
	fmt.Fprintf(io.out, "period %s reopened: its late changes are sent at the next reconcile (paysync run, or paysync cutoff --yes now)\n", p)
	return nil
}

func listPeriods(ctx context.Context, l *ledger.Ledger, asJSON bool, io stdio) error {
	totals, err := l.PeriodTotals(ctx)
	if err != nil {
		return err
	}
	closed, err := l.ClosedPeriods(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if totals == nil {
			totals = []ledger.PeriodTotal{}
		}
		if closed == nil {
			closed = []ledger.ClosedPeriod{}
		}
		return writeJSON(io.out, struct {
			Periods []ledger.PeriodTotal  `json:"periods"`
			Closed  []ledger.ClosedPeriod `json:"closed"`
		}{totals, closed})
	}
	if len(totals) == 0 {
		fmt.Fprintln(io.out, "no pay parts in the ledger yet")
	} else {
		t := newTable(io.out, "PERIOD", "COMPANY", "SOURCE", "PAY PARTS", "PENDING", "ENTRIES", "UNITS", "AMOUNT", "LAST IMPORT", "STATUS")
		for _, p := range totals {
			t.row(p.Period, p.CompanyID, p.Origin, fmt.Sprint(p.PayParts), fmt.Sprint(p.Pending), fmt.Sprint(p.Entries),
				p.Units.String(), p.Amount.String(), utcTime(p.LastImport), p.Status)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, c := range closed {
		note := ""
		if c.Note != "" {
			note = ": " + c.Note
		}
		fmt.Fprintf(io.out, "closed: %s (%s..%s) on %s%s\n", c.Period, c.Period.First().Format(time.DateOnly), c.Period.Last().Format(time.DateOnly),
			utcTime(c.ClosedAt), note)
	}
	return nil
}
