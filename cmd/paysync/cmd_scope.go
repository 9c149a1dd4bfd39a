package main

import (
	"context"
	"fmt"

	"github.com/paysync/paysync/worker"
)

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
	r := &worker.Reconciler{L: s.led, Mapper: mapper, Rules: rules, Wire: schema, BatchSize: s.cfg.BatchSize}
	if _, err := r.Absorb(ctx); err != nil && !worker.Paused(err) {
		return fmt.Errorf("cutoff: %w", err)
	}
	p, err := r.Plan(ctx, worker.PlanFilter{})
	if err != nil {
		return fmt.Errorf("cutoff: %w", err)
	}
	if !p.Sends() {
		// What an earlier run left open is still sent.
		n, err := d.DeliverOpen(ctx, 0, nil)
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(io.out, "cutoff: finished %s an earlier run left open: %d deleted, %d created\n", plural(n, "batch", "batches"), d.Stats.Deleted, d.Stats.Created)
			return nil
		}
		fmt.Fprintln(io.out, "cutoff: nothing to send: payroll holds what the entries that count make of it")
		return nil
	}
	writePlan(io.out, p)
	if dryRun {
		return nil
	}
	if err := confirm(io, yes, "cutoff: send the plan to payroll?"); err != nil {
		return err
	}
	_, applyErr := r.Apply(ctx, 0)
	if applyErr != nil && !worker.Paused(applyErr) {
		return fmt.Errorf("cutoff: %w", applyErr)
	}
	// Every batch still open: this plan's, and an earlier run's (run
	// again after an interruption, cutoff finishes it).
	if _, err := d.DeliverOpen(ctx, 0, nil); err != nil {
		return err
	}
	if applyErr != nil {
		// Entries of a company this command's connection cannot read now
		// stay held (paysync run, which routes each company through its
		// connection, takes them; or run cutoff again).
		fmt.Fprintf(io.out, "cutoff: %d deleted, %d created; %s\n", d.Stats.Deleted, d.Stats.Created, plural(s.cl.Calls(), "API call", "API calls"))
		return fmt.Errorf("cutoff: %w", applyErr)
	}
	fmt.Fprintf(io.out, "cutoff: %d deleted, %d created; %s\n", d.Stats.Deleted, d.Stats.Created, plural(s.cl.Calls(), "API call", "API calls"))
	return nil
}
