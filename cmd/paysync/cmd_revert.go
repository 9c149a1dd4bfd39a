package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/paysync/paysync"
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

// maybeAudited is audited unless this is a dry run (which changes nothing).
func maybeAudited(ctx context.Context, s *session, env lookupEnv, std *stdio, dryRun bool, action, scope string, fn func() (string, error)) error {
	if dryRun {
		_, err := fn()
		return err
	}
	return audited(ctx, s.led, env, std, action, scope, fn)
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
