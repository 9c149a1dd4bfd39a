package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
)

// targetFlags are revert's and replay's BATCH_ID | --import ID | --period
// PERIOD [--company C].
type targetFlags struct {
	importID        int64
	period, company string
}

func (f *targetFlags) register(fs *flag.FlagSet, op string) {
	fs.Int64Var(&f.importID, "import", 0, op+" this import (a file or a NATS message)")
	fs.StringVar(&f.period, "period", "", op+" the entries of PERIOD (2026-11, 2026-W45, 2026-11-02..2026-11-15), of every import and message")
	fs.StringVar(&f.company, "company", "", "with --period: only this company's")
}

// resolve checks that one target is named and returns it with its audit
// scope ("batch 12", "import 3", "period 2026-11").
func (f *targetFlags) resolve(ctx context.Context, l *ledger.Ledger, op string, pos []string) (ledger.Target, error) {
	named := 0
	for _, b := range []bool{f.importID != 0, f.period != "", len(pos) > 0} {
		if b {
			named++
		}
	}
	if named != 1 || len(pos) > 1 {
		return ledger.Target{}, usagef("%s: give one of BATCH_ID, --import ID or --period PERIOD", op)
	}
	if f.company != "" && f.period == "" {
		return ledger.Target{}, usagef("%s: --company goes with --period", op)
	}
	var batchID int64
	var period *paysync.Period
	if len(pos) == 1 {
		var err error
		if batchID, err = parseID(op, pos[0]); err != nil {
			return ledger.Target{}, err
		}
	}
	if f.period != "" {
		p, err := paysync.ParsePeriod(f.period)
		if err != nil {
			return ledger.Target{}, usagef("%s: --period: %v", op, err)
		}
		period = &p
	}
	return worker.TargetOf(ctx, l, batchID, f.importID, period, f.company)
}

func runRevert(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	return runOperation(ctx, false, args, io, env)
}

func runReplay(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	return runOperation(ctx, true, args, io, env)
}

// runOperation is `paysync revert` (undo) and `paysync replay` (redo): the
// desired state changed for the target, then the reconciler's plan
// applied and sent, shown first and confirmed.
func runOperation(ctx context.Context, replay bool, args []string, io stdio, env lookupEnv) error {
	op := "revert"
	if replay {
		op = "replay"
	}
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var dryRun, yes, asJSON bool
	var rulesFile string
	var tf targetFlags
	usage := op + " BATCH_ID | --import ID | --period PERIOD [--company C] [--rules FILE] [--dry-run] [--json] [--yes]"
	fs := newFlagSet(op, usage, io)
	cfg.apiFlags(fs)
	tf.register(fs, op)
	fs.BoolVar(&dryRun, "dry-run", false, "show what it touches and what would be sent, change nothing")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
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
	t, err := tf.resolve(ctx, s.led, op, pos)
	if err != nil {
		return err
	}
	if replay && t.Import != 0 {
		src, err := s.led.Source(ctx, t.Import)
		if err != nil {
			return err
		}
		if src.Status == paysync.SourceRejected {
			return maybeAudited(ctx, s, env, &io, dryRun, op, t.String(), func() (string, error) {
				return "", redriveRejected(ctx, s, &cfg, rules, src, dryRun, yes, asJSON, io)
			})
		}
	}
	return maybeAudited(ctx, s, env, &io, dryRun, op, t.String(), func() (string, error) {
		return operate(ctx, s, &cfg, rules, worker.Operation{Replay: replay, Target: t}, dryRun, yes, asJSON, io)
	})
}

// operate shows what op touches, asks, runs it and says what was sent.
func operate(ctx context.Context, s *session, cfg *config, rules *mapping.Rules, op worker.Operation, dryRun, yes, asJSON bool, io stdio) (string, error) {
	w := s.commandWaiter(io.err)
	d := s.deliverer(io)
	r, err := worker.NewReconciler(ctx, w, s.cl, s.led, rules, cfg.CompanyID, cfg.BatchSize)
	if err != nil {
		return "", s.startupErr(err)
	}
	ops := &worker.Operations{L: s.led, R: r, D: d}
	pv, err := ops.Preview(ctx, op)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	plan := pv.Plan
	if asJSON && dryRun {
		return "", writeJSON(io.out, map[string]any{"operation": op.String(), "entries": pv.Entries, "plan": planJSON(plan)})
	}
	if !asJSON {
		fmt.Fprintf(io.out, "%s: %s\n", op, plural(pv.Entries, "entry", "entries"))
		if plan.Refused != nil {
			fmt.Fprintf(io.out, "warning: %v\n", plan.Refused)
		}
		if len(plan.Changes) > 0 {
			fmt.Fprintln(io.out, "\nwhat payroll would hold, per group (before → after):")
			writePlan(io.out, plan)
		} else {
			fmt.Fprintln(io.out, "nothing to send: payroll would hold what it holds")
		}
	}
	if dryRun {
		return "", nil
	}
	if len(plan.Changes) > 0 {
		q := fmt.Sprintf("%s: send this to payroll?", op)
		if !plan.Sends() {
			q = fmt.Sprintf("%s: record it (nothing to send now: late or waiting)?", op)
		}
		if err := confirm(io, yes, q); err != nil {
			return "", err
		}
	}
	if err := w.Do(ctx, waitRecovery, d.Recover); err != nil {
		return "", s.startupErr(err)
	}
	n, batches, err := ops.Run(ctx, op)
	var refused *worker.RefusedError
	if errors.As(err, &refused) {
		err = nil // the rest was done: said after the summary
	}
	if errors.Is(err, ledger.ErrClosedPeriod) {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if err != nil {
		return "", err
	}
	unfinished, err := unfinishedOf(ctx, s.led, batches)
	if err != nil {
		return "", err
	}
	detail := fmt.Sprintf("%s: %s changed; %d deleted, %d created, %d rejected; %s", op, plural(n, "entry", "entries"),
		d.Stats.Deleted, d.Stats.Created, d.Stats.Rejected, plural(s.cl.Calls(), "API call", "API calls"))
	if asJSON {
		if err := writeJSON(io.out, map[string]any{"operation": op.String(), "entries": n, "batches": batches, "deleted": d.Stats.Deleted,
			"created": d.Stats.Created, "rejected": d.Stats.Rejected}); err != nil {
			return detail, err
		}
	} else {
		fmt.Fprintln(io.out, detail)
	}
	switch {
	case refused != nil:
		return detail, fmt.Errorf("%s: %w", op, refused)
	case d.Stats.Rejected > 0:
		return detail, fmt.Errorf("%s: %s rejected by payroll (paysync imports show, paysync batches)", op, plural(d.Stats.Rejected, "pay part", "pay parts"))
	case unfinished > 0:
		return detail, fmt.Errorf("%s: %s not finish; they stay pending and are sent by the next run (paysync batches --state failed)", op, plural(unfinished, "batch did", "batches did"))
	}
	return detail, nil
}

// redriveRejected imports the stored input of an import refused as a
// whole again, with the current rules (replay --import of such an import).
func redriveRejected(ctx context.Context, s *session, cfg *config, rules *mapping.Rules, src ledger.Source, dryRun, yes, asJSON bool, io stdio) error {
	w := s.commandWaiter(io.err)
	d := s.deliverer(io)
	r, err := worker.NewReconciler(ctx, w, s.cl, s.led, rules, cfg.CompanyID, cfg.BatchSize)
	if err != nil {
		return s.startupErr(err)
	}
	finishLeftovers := func() error { return s.startupErr(w.Do(ctx, waitRecovery, d.Recover)) }
	read, err := cfg.readOptions("", rules) // read again as the inbox and the NATS consumer read
	if err != nil {
		return err
	}
	drive := func(preview func(paysync.PlannedPayPart) error) (worker.Report, error) {
		if src.Kind == paysync.SourceNATS {
			mi := &worker.MessageImporter{L: s.led, Mapper: r.Mapper, Rules: rules, Wire: r.Wire, BatchSize: cfg.BatchSize, Read: read}
			return worker.RedriveMessage(ctx, s.led, mi, r, d, src, stream.CompanyOf(src.Name), preview)
		}
		im := &worker.Importer{L: s.led, D: d, Mapper: r.Mapper, Rules: rules, Wire: r.Wire, BatchSize: cfg.BatchSize, Read: read}
		return worker.Redrive(ctx, s.led, im, src, preview)
	}
	return redrive(ctx, s, d, finishLeftovers, src, drive, dryRun, yes, asJSON, io)
}

// runPlan is `paysync plan`: what the reconciler would send now, per
// company × period × employee × code, before → after.
func runPlan(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var asJSON, all bool
	var rulesFile, company, period string
	fs := newFlagSet("plan", "plan [--company ID] [--period P] [--all] [--json]", io)
	cfg.apiFlags(fs)
	fs.StringVar(&company, "company", "", "only this company")
	fs.StringVar(&period, "period", "", "only groups of this period (2026-11, 2026-W45, …)")
	fs.BoolVar(&all, "all", false, "every group, also those payroll holds as they must be")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rules, err := loadRulesFile(rulesFile)
	if err != nil {
		return err
	}
	f := worker.PlanFilter{Company: company, All: all}
	if period != "" {
		p, err := paysync.ParsePeriod(period)
		if err != nil {
			return usagef("plan: --period: %v", err)
		}
		f.Period = &p
	}
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := worker.NewReconciler(ctx, s.commandWaiter(io.err), s.cl, s.led, rules, cfg.CompanyID, cfg.BatchSize)
	if err != nil {
		return s.startupErr(err)
	}
	// On a copy of the ledger, what intake recorded taken in first: the
	// plan is what a reconcile would send now, and the ledger is left as it
	// is (plan only reads, whatever its --rules).
	var p worker.Plan
	if err := worker.OnCopy(ctx, s.led, func(cp *ledger.Ledger) error {
		rc := *r
		rc.L = cp
		if _, err := rc.Absorb(ctx); err != nil && !worker.Paused(err) {
			return err
		}
		var err error
		p, err = rc.Plan(ctx, f)
		return err
	}); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.out, planJSON(p))
	}
	if p.Legacy > 0 {
		fmt.Fprintf(io.out, "%s from before this version of paysync are not mapped yet: paysync run (or an import) maps them first\n", plural(p.Legacy, "entry version", "entry versions"))
	}
	if len(p.Changes) == 0 {
		fmt.Fprintln(io.out, "nothing to send: payroll holds what the entries that count make of it")
		return nil
	}
	writePlan(io.out, p)
	return nil
}

// changeJSON is one group's line of a plan.
type changeJSON struct {
	Company  string          `json:"company_id"`
	Period   string          `json:"period"`
	Employee string          `json:"employee_id"`
	Name     string          `json:"employee_name"`
	Code     string          `json:"code"`
	Rate     string          `json:"rate,omitempty"`
	Before   paysync.Numbers `json:"before"`
	After    paysync.Numbers `json:"after"`
	Entries  int             `json:"entries"`
	Change   string          `json:"change"`
	Why      string          `json:"why,omitempty"`
}

func planJSON(p worker.Plan) []changeJSON {
	out := []changeJSON{}
	for _, c := range p.Sorted() {
		g := c.Group
		rate := g.Key.Rate
		if rate == "-" {
			rate = ""
		}
		out = append(out, changeJSON{Company: g.Key.Company, Period: g.Key.Period.String(), Employee: g.Key.Employee, Name: g.EmployeeName,
			Code: g.Key.Code, Rate: rate, Before: c.Before, After: c.After, Entries: g.Lines, Change: string(c.Kind), Why: c.Why})
	}
	return out
}

// writePlan prints a plan as a table.
func writePlan(w io.Writer, p worker.Plan) { writePlanJSON(w, planJSON(p)) }

// writePlanJSON prints a plan's changes as a table.
func writePlanJSON(w io.Writer, cs []changeJSON) {
	t := newTable(w, "COMPANY", "PERIOD", "EMPLOYEE", "CODE", "RATE", "UNITS", "AMOUNT", "ENTRIES", "CHANGE")
	for _, c := range cs {
		what := c.Change
		if c.Why != "" {
			what += ": " + c.Why
		}
		t.row(c.Company, c.Period, c.Name, c.Code, c.Rate, num(c.Before.Units)+" → "+num(c.After.Units),
			num(c.Before.Amount)+" → "+num(c.After.Amount), fmt.Sprint(c.Entries), what)
	}
	_ = t.flush()
}

// changes are the plan's lines that change something.
func (r importReport) changes() []changeJSON {
	var out []changeJSON
	for _, c := range r.Plan {
		if c.Change != string(worker.ChangeNone) {
			out = append(out, c)
		}
	}
	return out
}
