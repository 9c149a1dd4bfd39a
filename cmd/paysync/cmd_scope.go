package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker"
)

// scopeFlags are revert's and replay's --period, --source and --company.
type scopeFlags struct{ period, source, company string }

func (f *scopeFlags) register(fs *flag.FlagSet, op string) {
	fs.StringVar(&f.period, "period", "", op+" what payroll holds for the entries of PERIOD (2026-11, 2026-W45, 2026-11-02..2026-11-15), of every import and message")
	fs.StringVar(&f.source, "source", "", "with --period: only the entries of this source (a format or preset name, --source of the import, a NATS subject's source)")
	fs.StringVar(&f.company, "company", "", "with --period: only this company's pay parts")
}

func (f *scopeFlags) scope(op string) (ledger.Scope, bool, error) {
	if f.period == "" {
		if f.source != "" || f.company != "" {
			return ledger.Scope{}, false, usagef("%s: --source and --company go with --period", op)
		}
		return ledger.Scope{}, false, nil
	}
	p, err := paysync.ParsePeriod(f.period)
	if err != nil {
		return ledger.Scope{}, false, usagef("%s: --period: %v", op, err)
	}
	return ledger.Scope{Period: p, Origin: f.source, Company: f.company}, true, nil
}

// runScope is revert --period and replay --period: one correction unit
// for what payroll holds of the period (worker.Corrector), shown first,
// confirmed, then sent (its deletes first, ledger first).
func runScope(ctx context.Context, s *session, op string, sc ledger.Scope, rules *mapping.Rules, dryRun, yes bool, io stdio) error {
	w := s.commandWaiter(io.err)
	d := s.deliverer(io)
	corr := &worker.Corrector{L: s.led, Rules: rules, BatchSize: s.cfg.BatchSize}
	if op == "replay" {
		mapper, schema, err := worker.Begin(ctx, w, s.cl, rules, s.cfg.CompanyID, d)
		if err != nil {
			return s.startupErr(err)
		}
		corr.Mapper, corr.Wire = mapper, schema
	} else if err := s.startupErr(w.Do(ctx, waitRecovery, d.Recover)); err != nil {
		return err
	}
	run := corr.RevertScope
	if op == "replay" {
		run = corr.ReplayScope
	}
	res, err := run(ctx, sc, true)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	writeScope(io, op, sc, res)
	if dryRun || !res.Changes() {
		return nil
	}
	if err := confirm(io, yes, fmt.Sprintf("%s %s: delete %s and create %d?", op, sc, plural(len(res.Unit.Supersede), "pay part", "pay parts"), len(res.Unit.PayParts))); err != nil {
		return err
	}
	if res, err = run(ctx, sc, false); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, err := d.DeliverOpen(ctx, 0, nil); err != nil {
		return err
	}
	unfinished, err := unfinishedOf(ctx, s.led, res.Batches)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.out, "%s %s: %d deleted, %s, %d created; %s\n", op, sc, d.Stats.Deleted, plural(d.Stats.Gone, "was already gone", "were already gone"), d.Stats.Created, plural(s.cl.Calls(), "API call", "API calls"))
	if unfinished > 0 {
		return fmt.Errorf("%s: %s not finish; run it again (paysync batches --state failed)", op, plural(unfinished, "batch did", "batches did"))
	}
	return nil
}

// writeScope shows what a revert or replay of a period changes.
func writeScope(io stdio, op string, sc ledger.Scope, res worker.ScopeResult) {
	if !res.Changes() {
		fmt.Fprintf(io.out, "%s %s: nothing to change: payroll holds what the ledger's entries make of it\n", op, sc)
	}
	if res.Changes() {
		t := newTable(io.out, "", "COMPANY", "EMPLOYEE", "CODE", "UNITS", "RATE", "AMOUNT", "PAYROLL ID")
		for _, p := range res.Unit.Supersede {
			id := p.PayrollID
			if id == "" {
				id = "(not sent yet)"
			}
			t.row("delete", p.CompanyID, p.EmployeeName, p.Code, num(p.Units), num(p.Rate), num(p.Amount), id)
		}
		for _, p := range res.Unit.PayParts {
			t.row("create", p.CompanyID, p.EmployeeName, p.Code, num(p.Units), num(p.Rate), num(p.Amount), "")
		}
		_ = t.flush()
	}
	if res.Spanning > 0 {
		fmt.Fprintf(io.out, "%s entries of the period and of another one (imported before pay parts were per period): left alone; revert their import instead\n", plural(res.Spanning, "pay part sums", "pay parts sum"))
	}
}

// runCutoff is `paysync cutoff`: the cutoff of PAYSYNC_SEND=cutoff now
// (before a payroll run, or instead of the daemon's schedule): the held
// entries planned into their periods' pay parts, shown, then sent.
func runCutoff(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var dryRun, yes bool
	var rulesFile string
	fs := newFlagSet("cutoff", "cutoff [--dry-run] [--yes]", io)
	cfg.apiFlags(fs)
	fs.BoolVar(&dryRun, "dry-run", false, "show what the cutoff would send and replace, change nothing")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rules, err := loadRulesFile(rulesFile)
	if err != nil {
		return err
	}
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	d := s.deliverer(io)
	mapper, schema, err := worker.Begin(ctx, s.commandWaiter(io.err), s.cl, rules, s.cfg.CompanyID, d)
	if err != nil {
		return s.startupErr(err)
	}
	corr := &worker.Corrector{L: s.led, Mapper: mapper, Rules: rules, Wire: schema, BatchSize: s.cfg.BatchSize}
	res, err := corr.Cutoff(ctx, true)
	if err != nil {
		return fmt.Errorf("cutoff: %w", err)
	}
	if len(res.Periods) == 0 {
		fmt.Fprintln(io.out, "cutoff: no entries are held")
		return nil
	}
	for _, p := range res.Periods {
		writeScope(io, "cutoff", ledger.Scope{}, p)
	}
	if dryRun {
		return nil
	}
	if err := confirm(io, yes, fmt.Sprintf("cutoff: plan %s into their periods' pay parts and send them?", plural(res.Entries, "entry", "entries"))); err != nil {
		return err
	}
	if _, err := corr.Cutoff(ctx, false); err != nil {
		return fmt.Errorf("cutoff: %w", err)
	}
	if _, err := d.DeliverOpen(ctx, 0, nil); err != nil {
		return err
	}
	fmt.Fprintf(io.out, "cutoff: %d deleted, %d created; %s\n", d.Stats.Deleted, d.Stats.Created, plural(s.cl.Calls(), "API call", "API calls"))
	return nil
}
