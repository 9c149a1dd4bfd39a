package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
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

// target resolves BATCH_ID or --import ID (worker.RevertTargetOf).
func target(ctx context.Context, l *ledger.Ledger, what string, pos []string, importID int64) (worker.RevertTarget, error) {
	switch {
	case importID != 0 && len(pos) > 0:
		return worker.RevertTarget{}, usagef("%s: give a batch id or --import ID, not both", what)
	case importID != 0:
		return worker.RevertTargetOf(ctx, l, 0, importID)
	case len(pos) == 1:
		id, err := parseID(what, pos[0])
		if err != nil {
			return worker.RevertTarget{}, err
		}
		return worker.RevertTargetOf(ctx, l, id, 0)
	}
	return worker.RevertTarget{}, usagef("%s: want BATCH_ID or --import ID", what)
}

// confirm asks on a terminal; elsewhere (a pipe, /dev/null under cron or
// CI) there is no one to answer, and --yes is required.
func confirm(io stdio, yes bool, question string) error {
	if yes {
		return nil
	}
	f, ok := io.in.(*os.File)
	if !ok || !isTerminal(f) {
		return noTerminal(question)
	}
	fmt.Fprintf(io.err, "%s [y/N] ", question)
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" { // end of input: no answer
		return fmt.Errorf("cancelled (no answer): nothing changed; pass --yes to go ahead without being asked")
	}
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("cancelled: nothing changed")
	}
	return nil
}

// noTerminal says why nothing was asked and what to do.
func noTerminal(question string) error {
	return usagef("no terminal to ask %q: pass --yes to go ahead; nothing changed", question)
}

func runRevert(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var importID int64
	var dryRun, yes bool
	var sf scopeFlags
	fs := newFlagSet("revert", "revert BATCH_ID | --import ID | --period PERIOD [--source S] [--company C] [--dry-run] [--yes]", io)
	cfg.apiFlags(fs)
	fs.Int64Var(&importID, "import", 0, "revert every batch of this import")
	fs.BoolVar(&dryRun, "dry-run", false, "show what would be deleted, change nothing")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	sf.register(fs, "revert")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	sc, byPeriod, err := sf.scope("revert")
	if err != nil {
		return err
	}
	if byPeriod && (importID != 0 || len(pos) > 0) {
		return usagef("revert: give a batch id, --import ID or --period, one of them")
	}
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	if byPeriod {
		return maybeAudited(ctx, s, env, &io, dryRun, "revert", "period "+sc.String(), func() (string, error) {
			return "", runScope(ctx, s, "revert", sc, mapping.DefaultRules(), dryRun, yes, io)
		})
	}
	tg, err := target(ctx, s.led, "revert", pos, importID)
	if err != nil {
		return err
	}
	return maybeAudited(ctx, s, env, &io, dryRun, "revert", targetScope(pos, importID), func() (string, error) {
		return "", revertTarget(ctx, s, tg, dryRun, yes, io)
	})
}

// revertTarget reverts a batch or an import (tg), shown first, confirmed,
// then deleted from payroll.
func revertTarget(ctx context.Context, s *session, tg worker.RevertTarget, dryRun, yes bool, io stdio) error {
	if tg.Scope != nil {
		// A message's pay parts are in batches it shares with other
		// messages: its entries' pay parts are reverted, wherever they
		// were batched.
		return runScope(ctx, s, "revert", *tg.Scope, mapping.DefaultRules(), dryRun, yes, io)
	}
	// Read first: what still exists in payroll.
	w := s.commandWaiter(io.err)
	pv, err := worker.PreviewRevert(ctx, s.led, w, s.cl, tg.Batches)
	if err != nil {
		return s.startupErr(err)
	}
	ids, n := pv.Batches, pv.ToDelete
	tb := newTable(io.out, "BATCH", "PAYROLL ID", "EMPLOYEE", "CODE", "UNITS", "RATE", "AMOUNT", "IN PAYROLL")
	for _, r := range pv.Rows {
		tb.row(fmt.Sprint(r.BatchID), r.PayrollID, r.EmployeeName, r.Code, num(r.Units), num(r.Rate), num(r.Amount), r.Status())
	}
	if len(pv.Rows) > 0 {
		if err := tb.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(io.out, "\n%s\n", pv.Summary())
	if dryRun {
		return nil
	}
	if n > 0 {
		if err := confirm(io, yes, fmt.Sprintf("delete %s from payroll?", plural(n, "pay part", "pay parts"))); err != nil {
			return err
		}
	}
	d := s.deliverer(io)
	if err := w.Do(ctx, waitRecovery, d.Recover); err != nil {
		return s.startupErr(err)
	}
	if err := d.Revert(ctx, ids); err != nil {
		return err
	}
	fmt.Fprintf(io.out, "reverted: %d deleted, %s; %s\n", d.Stats.Deleted, plural(d.Stats.Gone, "was already gone", "were already gone"), plural(s.cl.Calls(), "API call", "API calls"))
	return nil
}

// targetScope names BATCH_ID or --import ID as the audit log does
// ("batch 12", "import 3"); target has checked them.
func targetScope(pos []string, importID int64) string {
	if importID != 0 {
		return fmt.Sprintf("import %d", importID)
	}
	id, _ := parseID("", pos[0])
	return fmt.Sprintf("batch %d", id)
}

// maybeAudited is audited unless this is a dry run (which changes nothing).
func maybeAudited(ctx context.Context, s *session, env lookupEnv, std *stdio, dryRun bool, action, scope string, fn func() (string, error)) error {
	if dryRun {
		_, err := fn()
		return err
	}
	return audited(ctx, s.led, env, std, action, scope, fn)
}

func runReplay(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var importID int64
	var dryRun, yes, force, asJSON bool
	var rulesFile string
	var sf scopeFlags
	fs := newFlagSet("replay", "replay BATCH_ID | --import ID | --period PERIOD [--source S] [--company C] [--rules FILE] [--dry-run] [--json] [--yes] [--force]", io)
	sf.register(fs, "replay")
	cfg.apiFlags(fs)
	fs.Int64Var(&importID, "import", 0, "replay every entry of this import (of one refused as a whole: import its stored input again)")
	fs.BoolVar(&dryRun, "dry-run", false, "show what would be sent, send nothing")
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	fs.BoolVar(&force, "force", false, "replay also the entries whose pay parts are in payroll (pays them again!)")
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
	if sc, byPeriod, err := sf.scope("replay"); err != nil {
		return err
	} else if byPeriod {
		if importID != 0 || len(pos) > 0 || force {
			return usagef("replay: --period goes alone (it replaces what changes, and never pays an entry twice: --force has no use)")
		}
		s, err := cfg.connect(ctx, io, true)
		if err != nil {
			return err
		}
		defer s.Close()
		return maybeAudited(ctx, s, env, &io, dryRun, "replay", "period "+sc.String(), func() (string, error) {
			return "", runScope(ctx, s, "replay", sc, rules, dryRun, yes, io)
		})
	}
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
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	return maybeAudited(ctx, s, env, &io, dryRun, "replay", targetScope(pos, importID), func() (string, error) {
		return replayTarget(ctx, s, &cfg, rules, batchID, importID, dryRun, yes, force, asJSON, io)
	})
}

// replayTarget replays a batch or an import (one refused as a whole: its
// stored input imported again), shown first, confirmed, then sent. With
// --json, it returns the summary the text would have printed last (the
// audit log's detail).
func replayTarget(ctx context.Context, s *session, cfg *config, rules *mapping.Rules, batchID, importID int64, dryRun, yes, force, asJSON bool, io stdio) (string, error) {
	w := s.commandWaiter(io.err)
	d := s.deliverer(io)
	r, err := worker.NewReplayer(ctx, w, s.cl, s.led, d, rules, cfg.CompanyID, cfg.BatchSize)
	if err != nil {
		return "", s.startupErr(err)
	}
	finishLeftovers := func() error { return s.startupErr(w.Do(ctx, waitRecovery, d.Recover)) }
	if importID != 0 {
		src, err := s.led.Source(ctx, importID)
		if err != nil {
			return "", err
		}
		if src.Status == paysync.SourceRejected {
			// Its input is taken again the way it came: a message as the
			// daemon takes messages (for the subject's company), a file as
			// the inbox takes files.
			read, err := cfg.readOptions("", rules) // read again as the inbox and the NATS consumer read
			if err != nil {
				return "", err
			}
			drive := func(preview func(paysync.PlannedPayPart) error) (worker.Report, error) {
				if src.Kind == paysync.SourceNATS {
					mi := &worker.MessageImporter{L: s.led, Mapper: r.Mapper, Rules: rules, Wire: r.Wire, BatchSize: cfg.BatchSize, Read: read}
					return worker.RedriveMessage(ctx, s.led, mi, d, src, stream.CompanyOf(src.Name), preview)
				}
				im := &worker.Importer{L: s.led, D: d, Mapper: r.Mapper, Rules: rules, Wire: r.Wire, BatchSize: cfg.BatchSize, Read: read}
				return worker.Redrive(ctx, s.led, im, src, preview)
			}
			return "", redrive(ctx, s, d, finishLeftovers, src, drive, dryRun, yes, asJSON, io)
		}
	}
	rep := replayReport{}
	if !dryRun {
		// What an earlier run left in flight is settled first, and what an
		// earlier replay of these entries left open is sent: an
		// interrupted replay is finished, not planned again.
		if err := finishLeftovers(); err != nil {
			return "", err
		}
		if rep.Resumed, err = r.Resume(ctx, batchID, importID); err != nil {
			return "", err
		}
		if len(rep.Resumed) > 0 && !asJSON {
			fmt.Fprintf(io.out, "finished batches %v left open by an earlier replay: %s created\n\n", rep.Resumed, plural(d.Stats.Created, "pay part", "pay parts"))
		}
	}
	plan, err := r.Plan(ctx, batchID, importID, force)
	if err != nil {
		return "", err
	}
	rep.PayParts, rep.InPayroll, rep.PaidAgain = plan.PayParts, plan.InPayroll, plan.Forced
	rep.Summary = importSummary{Skipped: plan.Skipped, PayParts: len(plan.PayParts)}
	for _, p := range plan.Problems {
		rep.Problems = append(rep.Problems, toProblemJSON(p)...)
	}
	rep.Summary.Problems = len(rep.Problems)
	if asJSON && dryRun {
		if err := writeJSON(io.out, rep); err != nil {
			return "", err
		}
		return "", dryRunDone("replay", rep.Summary.Problems)
	}
	if !asJSON {
		if err := writeImportReport(io.out, rep.importReport); err != nil {
			return "", err
		}
		writeLiveSkips(io.out, plan)
	}
	if dryRun {
		return "", dryRunDone("replay", rep.Summary.Problems)
	}
	unfinished, err := unfinishedOf(ctx, s.led, rep.Resumed)
	if err != nil {
		return "", err
	}
	var ids []int64
	if len(plan.PayParts) > 0 {
		if err := confirm(io, yes, fmt.Sprintf("send %s to payroll?", plural(len(plan.PayParts), "pay part", "pay parts"))); err != nil {
			return "", err
		}
		if ids, err = r.Run(ctx, plan); err != nil {
			return "", err
		}
		more, err := unfinishedOf(ctx, s.led, ids)
		if err != nil {
			return "", err
		}
		unfinished += more
	}
	detail := "nothing left to replay"
	if len(ids) > 0 {
		detail = fmt.Sprintf("replayed into batches %v: %s created, %d rejected", ids, plural(d.Stats.Created, "pay part", "pay parts"), d.Stats.Rejected)
	}
	if asJSON {
		if err := writeJSON(io.out, map[string]any{"batches": ids, "created": d.Stats.Created, "rejected": d.Stats.Rejected,
			"resumed_batches": rep.Resumed, "in_payroll_already": rep.InPayroll, "paid_again": rep.PaidAgain}); err != nil {
			return "", err
		}
	} else {
		fmt.Fprintln(io.out, detail)
	}
	switch {
	case d.Stats.Rejected > 0 || len(plan.Problems) > 0:
		return detail, fmt.Errorf("replay: %s, %d rejected by payroll", plural(len(plan.Problems), "problem", "problems"), d.Stats.Rejected)
	case unfinished > 0:
		return detail, fmt.Errorf("replay: %s not finish; they stay pending and are sent by the next replay, import or paysync run (paysync batches --state failed)", plural(unfinished, "batch did", "batches did"))
	}
	return detail, nil
}

// replayReport is a replay's plan: an import's report and the entries
// left out or paid again.
type replayReport struct {
	importReport
	InPayroll []worker.LiveSkip `json:"in_payroll_already,omitempty"`
	PaidAgain []worker.LiveSkip `json:"paid_again,omitempty"`
	Resumed   []int64           `json:"resumed_batches,omitempty"`
}

// writeLiveSkips says which entries a replay leaves out because an
// earlier replay has them in payroll, or pays again with --force.
func writeLiveSkips(w io.Writer, plan worker.ReplayPlan) {
	for _, n := range plan.Notes() {
		fmt.Fprintln(w, n)
	}
}

// unfinishedOf counts the batches among ids (and those they split into)
// that still owe work (worker.Unfinished).
func unfinishedOf(ctx context.Context, l *ledger.Ledger, ids []int64) (int, error) {
	return worker.Unfinished(ctx, l, ids)
}

// redrive imports the stored input of an import refused as a whole again,
// with the current rules, as a new import (paysync imports links it to the
// refused one); run again, it finds that import and finishes it.
func redrive(ctx context.Context, s *session, d *worker.Deliverer, finishLeftovers func() error, src ledger.Source, drive func(preview func(paysync.PlannedPayPart) error) (worker.Report, error), dryRun, yes, asJSON bool, io stdio) error {
	if dryRun {
		var pps []paysync.PlannedPayPart
		rep, err := drive(func(pp paysync.PlannedPayPart) error {
			pps = append(pps, pp)
			return nil
		})
		if err != nil {
			return err
		}
		out := importReport{PayParts: pps, Summary: importSummary{Files: 1, Entries: rep.Entries, Mapped: rep.Mapped, Skipped: rep.Skipped,
			PayParts: len(pps), AlreadyImported: rep.Duplicates, ProblemsOmitted: rep.ProblemsOmitted}}
		if rep.Duplicate {
			out.ImportedBefore = []importedBefore{{Source: src.Name, ImportID: rep.ImportID, At: rep.ImportedAt}}
		}
		for _, p := range rep.ProblemList() {
			out.Problems = append(out.Problems, toProblemJSON(p)...)
		}
		out.Summary.Problems = len(out.Problems) + rep.ProblemsOmitted
		if asJSON {
			if err := writeJSON(io.out, out); err != nil {
				return err
			}
			return dryRunDone("replay", out.Summary.Problems)
		}
		fmt.Fprintf(io.out, "import %d (%s) was refused as a whole; its stored input would be imported again with the current rules:\n\n", src.ID, src.Name)
		if err := writeImportReport(io.out, out); err != nil {
			return err
		}
		return dryRunDone("replay", out.Summary.Problems)
	}
	if err := confirm(io, yes, fmt.Sprintf("import the stored input of import %d (%s) again and send it to payroll?", src.ID, src.Name)); err != nil {
		return err
	}
	if err := finishLeftovers(); err != nil {
		return err
	}
	rep, runErr := drive(nil)
	sum := sendSummary{Imports: []worker.Report{rep}, Created: d.Stats.Created, Reconciled: d.Stats.Reconciled, Rejected: d.Stats.Rejected, APICalls: s.cl.Calls(),
		ProblemsOmitted: rep.ProblemsOmitted, Problems: []problemJSON{}}
	for _, p := range rep.ProblemList() {
		sum.Problems = append(sum.Problems, toProblemJSON(p)...)
	}
	if rep.ImportID != 0 && src.Kind != paysync.SourceNATS { // a message's pay parts join batches of others: RedriveMessage names them
		bs, err := s.led.BatchesOfSource(ctx, rep.ImportID)
		if err != nil {
			return err
		}
		rep.Batches = rep.Batches[:0]
		for _, b := range bs {
			if b.State != paysync.BatchSplit { // its children are listed
				rep.Batches = append(rep.Batches, b.ID)
			}
		}
		sum.Imports[0].Batches = rep.Batches
	}
	sum.Batches = len(rep.Batches)
	var err error
	if sum.Unfinished, err = unfinishedOf(ctx, s.led, rep.Batches); err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(io.out, sum); err != nil {
			return err
		}
	} else {
		if rep.RejectedAs != 0 {
			fmt.Fprintf(io.out, "%s: refused again as a whole (recorded as import %d)\n", src.Name, rep.RejectedAs)
			sum.Imports = nil
		}
		writeSendSummary(io.out, sum)
	}
	switch {
	case runErr != nil:
		return runErr
	case len(sum.Problems) > 0:
		return fmt.Errorf("replay: import %d still has %s: fix them (rules, payroll) and replay it again", src.ID, plural(len(sum.Problems)+sum.ProblemsOmitted, "problem", "problems"))
	case sum.Unfinished > 0:
		return fmt.Errorf("replay: %s not finish; they stay pending and are retried on the next run (paysync batches --state failed)", plural(sum.Unfinished, "batch did", "batches did"))
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
	if err == nil {
		err = mapping.Unconfirmed(rules) // a draft of rules init with guesses left
	}
	if err != nil {
		// One problem a line (report prints each line of a usage error).
		return nil, &usageError{"rules: " + strings.ReplaceAll(err.Error(), "\n", "\nrules: ")}
	}
	return rules, nil
}
