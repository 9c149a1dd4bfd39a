package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker"
)

// parseInterspersed parses flags that may come after positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageOrHelp(err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// targets resolves BATCH_ID or --import ID to batches (with split children).
func targets(ctx context.Context, l *ledger.Ledger, what string, pos []string, importID int64) ([]ledger.Batch, error) {
	switch {
	case importID != 0 && len(pos) > 0:
		return nil, usagef("%s: give a batch id or --import ID, not both", what)
	case importID != 0:
		if _, err := l.Source(ctx, importID); err != nil {
			return nil, err
		}
		return l.BatchesOfSource(ctx, importID)
	case len(pos) == 1:
		id, err := parseID(what, pos[0])
		if err != nil {
			return nil, err
		}
		if _, err := l.Batch(ctx, id); err != nil {
			return nil, err
		}
		return l.Family(ctx, id)
	}
	return nil, usagef("%s: want BATCH_ID or --import ID", what)
}

// confirm asks on a terminal; elsewhere --yes is required.
func confirm(io stdio, yes bool, question string) error {
	if yes {
		return nil
	}
	f, ok := io.in.(*os.File)
	if !ok {
		return usagef("refusing to change payroll without --yes when not on a terminal")
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return usagef("refusing to change payroll without --yes when not on a terminal")
	}
	fmt.Fprintf(io.err, "%s [y/N] ", question)
	line, _ := bufio.NewReader(f).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("cancelled: nothing changed")
	}
	return nil
}

func runRevert(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var importID int64
	var dryRun, yes bool
	fs := newFlagSet("revert", "revert BATCH_ID | --import ID [--dry-run] [--yes]", io)
	cfg.apiFlags(fs)
	fs.Int64Var(&importID, "import", 0, "revert every batch of this import")
	fs.BoolVar(&dryRun, "dry-run", false, "show what would be deleted, change nothing")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	bs, err := targets(ctx, s.led, "revert", pos, importID)
	if err != nil {
		return err
	}
	var ids []int64
	var items []ledger.Item
	for _, b := range bs {
		if b.State == ledger.BatchSplit {
			continue
		}
		ids = append(ids, b.ID)
		its, err := s.led.Items(ctx, b.ID)
		if err != nil {
			return err
		}
		for _, it := range its {
			if it.State == ledger.PartCreated {
				items = append(items, it)
			}
		}
	}
	// Read first: what still exists in payroll.
	exists := map[string]bool{}
	companies := map[string]bool{}
	for _, it := range items {
		if !companies[it.CompanyID] {
			companies[it.CompanyID] = true
			pps, err := s.cl.PayParts(ctx, it.CompanyID)
			if err != nil {
				return err
			}
			for _, p := range pps {
				exists[p.ID] = true
			}
		}
	}
	tb := newTable(io.out, "BATCH", "PAYROLL ID", "EMPLOYEE", "CODE", "UNITS", "RATE", "AMOUNT", "IN PAYROLL")
	n := 0
	for _, it := range items {
		in := "gone (deleted by hand)"
		if exists[it.PayrollID] {
			in, n = "yes: will be deleted", n+1
		}
		tb.row(fmt.Sprint(it.BatchID), it.PayrollID, it.EmployeeName, it.Code, num(it.Units), num(it.Rate), num(it.Amount), in)
	}
	if len(items) > 0 {
		if err := tb.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(io.out, "\n%d pay parts of batches %v: %d to delete, %d already gone\n", len(items), ids, n, len(items)-n)
	if dryRun {
		return nil
	}
	if n > 0 {
		if err := confirm(io, yes, fmt.Sprintf("delete %d pay parts from payroll?", n)); err != nil {
			return err
		}
	}
	d := s.deliverer(io)
	if err := d.Recover(ctx); err != nil {
		return err
	}
	if err := d.Revert(ctx, ids); err != nil {
		return err
	}
	fmt.Fprintf(io.out, "reverted: %d deleted, %d were already gone; %d API calls\n", d.Stats.Deleted, d.Stats.Gone, s.cl.Calls())
	return nil
}

func runReplay(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var importID int64
	var dryRun, yes, force, asJSON bool
	var rulesFile string
	fs := newFlagSet("replay", "replay BATCH_ID | --import ID [--dry-run] [--yes] [--force]", io)
	cfg.apiFlags(fs)
	fs.Int64Var(&importID, "import", 0, "replay every entry of this import")
	fs.BoolVar(&dryRun, "dry-run", false, "show what would be sent, send nothing")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	fs.BoolVar(&force, "force", false, "replay even though the original's pay parts still exist in payroll (pays again!)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
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
	var batchID int64
	if importID == 0 {
		if len(pos) != 1 {
			return usagef("replay: want BATCH_ID or --import ID")
		}
		if batchID, err = parseID("replay", pos[0]); err != nil {
			return err
		}
	} else if len(pos) > 0 {
		return usagef("replay: give a batch id or --import ID, not both")
	}
	schema, err := s.cl.Schema(ctx)
	if err != nil {
		return err
	}
	company, err := defaultCompany(ctx, s.cl, rules, cfg.CompanyID)
	if err != nil {
		return err
	}
	d := s.deliverer(io)
	if err := d.Recover(ctx); err != nil {
		return err
	}
	r := &worker.Replayer{L: s.led, D: d, Mapper: mapping.NewMapper(rules, mapping.NewCache(s.cl), schema, company), Rules: rules, Wire: schema, BatchSize: cfg.BatchSize}
	plan, err := r.Plan(ctx, batchID, importID, force)
	if err != nil {
		return err
	}
	rep := importReport{PayParts: plan.PayParts, Summary: importSummary{Skipped: plan.Skipped, PayParts: len(plan.PayParts)}}
	for _, p := range plan.Problems {
		rep.Problems = append(rep.Problems, toProblemJSON(p)...)
	}
	rep.Summary.Problems = len(rep.Problems)
	if asJSON && dryRun {
		return writeJSON(io.out, rep)
	}
	if !asJSON {
		if err := writeImportReport(io.out, rep); err != nil {
			return err
		}
	}
	if dryRun || len(plan.PayParts) == 0 {
		return nil
	}
	if err := confirm(io, yes, fmt.Sprintf("send %d pay parts to payroll?", len(plan.PayParts))); err != nil {
		return err
	}
	ids, err := r.Run(ctx, plan)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.out, map[string]any{"batches": ids, "created": d.Stats.Created, "rejected": d.Stats.Rejected})
	}
	fmt.Fprintf(io.out, "replayed into batches %v: %d pay parts created, %d rejected\n", ids, d.Stats.Created, d.Stats.Rejected)
	if d.Stats.Rejected > 0 || len(plan.Problems) > 0 {
		return fmt.Errorf("replay: %d problem(s), %d rejected by payroll", len(plan.Problems), d.Stats.Rejected)
	}
	return nil
}

// loadRulesFile loads a rules file, or the default rules for "".
func loadRulesFile(path string) (*mapping.Rules, error) {
	if path == "" {
		return mapping.DefaultRules(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("rules: %v", err)
	}
	defer f.Close()
	rules, err := mapping.LoadRules(path, f)
	if err != nil {
		return nil, &usageError{"rules: " + strings.ReplaceAll(err.Error(), "\n", "\npaysync: rules: ")}
	}
	return rules, nil
}
