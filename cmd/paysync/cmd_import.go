package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
)

// importFlags are the flags of `paysync import`.
type importFlags struct {
	dryRun      bool
	asJSON      bool
	format      string
	rules       string
	company     string
	noAggregate bool
	period      string
	source      string
}

func (f *importFlags) register(fs *flag.FlagSet, cfg *config) {
	fs.BoolVar(&f.dryRun, "dry-run", false, "show what would be created, send nothing")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.StringVar(&f.format, "format", "", "input format: json, ndjson, csv, toggl, clockify, harvest (default: detect)")
	fs.StringVar(&f.rules, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING); entries carrying employee_id and code need none")
	fs.StringVar(&f.company, "company", "", "default company (default PAYSYNC_COMPANY_ID, else the current company)")
	cfg.readFlags(fs)
	fs.BoolVar(&f.noAggregate, "no-aggregate", false, "one pay part per entry instead of sums per employee × code × rate")
	fs.StringVar(&f.period, "period", "", "the file is the complete statement of its source's entries for PERIOD (2026-11, 2026-W45 or 2026-11-02..2026-11-15): entries of that source and period no longer in it are removed from payroll, rows dated outside it are warnings")
	fs.StringVar(&f.source, "source", "", "the source the file is a statement of (default: the format or preset name)")
}

// scope is the Importer's origin and period statement the flags ask for.
func (f *importFlags) scope() (importScope, error) {
	sc := importScope{origin: f.source}
	if f.period != "" {
		p, err := paysync.ParsePeriod(f.period)
		if err != nil {
			return sc, usagef("import: --period: %v", err)
		}
		sc.statement = &worker.PeriodStatement{Period: p}
	}
	return sc, nil
}

// importScope is what an import is a statement of (--source, --period).
type importScope struct {
	origin    string
	statement *worker.PeriodStatement
}

func (sc importScope) apply(im *worker.Importer) { im.Origin, im.Statement = sc.origin, sc.statement }

// importReport is the outcome of mapping a set of files.
type importReport struct {
	PayParts       []paysync.PlannedPayPart `json:"pay_parts"`
	Problems       []problemJSON            `json:"problems"`
	ImportedBefore []importedBefore         `json:"imported_before,omitempty"` // files of the same content imported before: nothing of them again
	Warnings       []string                 `json:"warnings,omitempty"`        // rows a period statement does not import
	Notes          []string                 `json:"notes,omitempty"`           // how a file was read where detected (an encoding)
	// Plan is what the import would send, per company × period ×
	// employee × code: before → after (the reconciler's plan, as paysync
	// plan shows it).
	Plan    []changeJSON  `json:"plan"`
	Summary importSummary `json:"summary"`
}

type importedBefore struct {
	Source   string `json:"source"`
	ImportID int64  `json:"import_id"`
	At       string `json:"imported_at,omitempty"`
}

type problemJSON struct {
	Source  string `json:"source"`
	Line    int    `json:"line,omitempty"`
	Record  bool   `json:"record,omitempty"`
	EntryID string `json:"entry_id,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	Text    string `json:"text"`
}

type importSummary struct {
	Files    int            `json:"files"`
	Entries  int            `json:"entries"`
	Mapped   int            `json:"mapped"`
	Skipped  map[string]int `json:"skipped"`
	Problems int            `json:"problems"`
	PayParts int            `json:"pay_parts"`
	// AlreadyImported counts entries the ledger holds with the same
	// content: skipped, as the import would.
	AlreadyImported int `json:"already_imported,omitempty"`
	// Corrections counts entries paid before that come with other content
	// (or as tombstones): the import would replace the pay parts they are
	// in (not in the pay parts listed).
	Corrections int `json:"corrections,omitempty"`
	// Outside counts rows a period statement does not import (dated
	// outside its period; Warnings names them).
	Outside int `json:"outside_period,omitempty"`
	// ProblemsOmitted counts problems beyond the first 1,000 of a file,
	// not listed (Problems counts them).
	ProblemsOmitted int `json:"problems_omitted,omitempty"`
}

func runImport(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var f importFlags
	fs := newFlagSet("import", "import [--dry-run] [--rules FILE] [--format F] [--json] FILE... (or - for standard input)", io)
	cfg.apiFlags(fs)
	f.register(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return usageOrHelp(err)
	}
	files := fs.Args()
	if len(files) == 0 {
		return usagef("import: name at least one file, or - for standard input")
	}
	scope, err := f.scope()
	if err != nil {
		return err
	}
	rules, err := loadRulesFile(f.rules)
	if err != nil {
		return err
	}
	opts, err := cfg.readOptions(f.format, rules)
	if err != nil {
		return err
	}
	if f.noAggregate {
		rules.Aggregate = false
	}
	if f.company != "" {
		cfg.CompanyID = f.company
	}
	conn := cfg
	if f.dryRun {
		conn = cfg.dryRunConfig()
	}
	s, err := conn.connect(ctx, io, !f.dryRun)
	if err != nil {
		return err
	}
	defer s.Close()
	if !f.dryRun {
		return sendImport(ctx, s, rules, files, opts, scope, f.asJSON, io)
	}
	if s.led == nil {
		led, done, err := cfg.previewLedger(ctx)
		if err != nil {
			return err
		}
		defer done()
		s.led = led
	}
	rep, err := planImport(ctx, s, rules, cfg.CompanyID, files, opts, scope, io.in, io.err)
	if err != nil {
		return err
	}
	if f.asJSON {
		if err := writeJSON(io.out, rep); err != nil {
			return err
		}
	} else if err := writeImportReport(io.out, rep); err != nil {
		return err
	}
	return dryRunDone("import", rep.Summary.Problems)
}

// dryRunDone is how every dry run that lists problems ends (import,
// replay): exit 1 when it listed any, since the real run would not send
// those entries, so a script can gate the real run on it. (The dry runs
// of revert, --period and cutoff list no problems: they fail as errors.)
func dryRunDone(op string, problems int) error {
	if problems > 0 {
		return fmt.Errorf("%s: %s; nothing was sent", op, plural(problems, "problem", "problems"))
	}
	return nil
}

// planImport is a dry run: each file imported exactly as `paysync import`
// imports it, into a copy of the ledger in a private temporary directory
// (removed after), then the reconciler's plan of the copy: what the real
// import would send, per group, before → after, computed by the code that
// applies it. Nothing is committed to the ledger and nothing is sent.
// Meta and employees are fetched once for the run.
func planImport(ctx context.Context, s *session, rules *mapping.Rules, company string, files []string, opts mapping.ReadOptions, scope importScope, stdin io.Reader, stderr io.Writer) (importReport, error) {
	w := s.commandWaiter(stderr)
	schema, company, err := startupReads(ctx, w, s.cl, rules, company, func(string) {})
	if err != nil {
		return importReport{}, s.startupErr(err)
	}
	cache := mapping.NewCache(s.cl)
	if err := w.Do(ctx, "the pay codes", func(ctx context.Context) error { _, err := cache.Meta(ctx); return err }); err != nil {
		return importReport{}, s.startupErr(err)
	}
	var rep importReport
	err = worker.OnCopy(ctx, s.led, func(cp *ledger.Ledger) error {
		var err error
		rep, err = planImportOn(ctx, cp, s, rules, schema, cache, company, files, opts, scope, stdin)
		return err
	})
	return rep, err
}

// planImportOn is planImport on the ledger copy cp.
func planImportOn(ctx context.Context, cp *ledger.Ledger, s *session, rules *mapping.Rules, schema payroll.Schema, cache *mapping.Cache, company string, files []string, opts mapping.ReadOptions, scope importScope, stdin io.Reader) (importReport, error) {
	mapper := mapping.NewMapper(rules, cache, schema, company)
	im := &worker.Importer{L: cp, Mapper: mapper, Rules: rules, Wire: schema, Read: opts, BatchSize: s.cfg.BatchSize, Defer: true}
	scope.apply(im)
	rep := importReport{Summary: importSummary{Skipped: map[string]int{}}}
	omitted := 0
	for i, in := range inputsOf(files, stdin) {
		rep.Summary.Files++
		r, unreadable, err := in.Take(ctx, im.PlanFrom)
		if err != nil {
			return importReport{}, err
		}
		if unreadable != nil {
			rep.Problems = append(rep.Problems, unreadableProblem(files[i], unreadable)...)
			continue
		}
		if r.Duplicate {
			rep.ImportedBefore = append(rep.ImportedBefore, importedBefore{Source: r.Source, ImportID: r.ImportID, At: r.ImportedAt})
			continue
		}
		rep.Summary.Entries += r.Entries
		rep.Summary.Mapped += r.Mapped
		rep.Summary.AlreadyImported += r.Duplicates
		rep.Summary.Corrections += r.Corrections
		rep.Summary.Outside += r.Outside
		rep.Warnings = append(rep.Warnings, r.Warnings...)
		rep.Notes = append(rep.Notes, r.Notes...)
		for k, v := range r.Skipped {
			rep.Summary.Skipped[k] += v
		}
		// The import lists problems by phase (reading, entries, pay parts);
		// here they are in the file's line order.
		var probs []problemJSON
		for _, p := range r.ProblemList() {
			probs = append(probs, toProblemJSON(p)...)
		}
		sort.SliceStable(probs, func(i, j int) bool { return probs[i].Line < probs[j].Line })
		rep.Problems = append(rep.Problems, probs...)
		omitted += r.ProblemsOmitted
	}
	r := im.Reconciler()
	if _, err := r.Absorb(ctx); err != nil && !worker.Paused(err) {
		return importReport{}, err
	}
	plan, err := r.Plan(ctx, worker.PlanFilter{})
	if err != nil {
		return importReport{}, err
	}
	rep.Plan = planJSON(plan)
	for _, c := range plan.Changes {
		switch c.Kind {
		case worker.ChangeCreate, worker.ChangeReplace:
			rep.PayParts = append(rep.PayParts, *c.Desired)
		case worker.ChangeProblem:
			rep.Problems = append(rep.Problems, problemJSON{Message: c.Why, Text: fmt.Sprintf("%s %s %s %s: %s", c.Group.Key.Company, c.Group.Key.Period, c.Group.EmployeeName, c.Group.Key.Code, c.Why)})
		}
	}
	rep.Summary.PayParts = len(rep.PayParts)
	rep.Summary.Problems = len(rep.Problems) + omitted
	rep.Summary.ProblemsOmitted = omitted
	if rep.PayParts == nil {
		rep.PayParts = []paysync.PlannedPayPart{}
	}
	if rep.Problems == nil {
		rep.Problems = []problemJSON{}
	}
	return rep, nil
}

// dryRunConfig is the configuration a dry run connects with: the same,
// except that when the refresh token is kept in a ledger that does not
// exist, it is kept beside it (pendingTokenPath) until the ledger is
// created and takes it over. So a dry run never creates a ledger, and a
// token it rotates is neither lost nor spent again by the first real run.
func (c config) dryRunConfig() config {
	if c.TokenFile != "" {
		return c
	}
	p := c.ledgerPath()
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		return c // it exists (or opening it will say what is wrong)
	}
	dir := filepath.Dir(p)
	if c.Ledger == "" {
		_ = os.MkdirAll(dir, 0o700) // as opening the default ledger would
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return c // opening the ledger says that the directory is missing
	}
	c.TokenFile = pendingTokenPath(p)
	return c
}

// previewLedger is the ledger a dry run plans against when the session has
// none open: the configured one if it exists, else an empty one in a
// private temporary directory (removed by the returned func), so that a
// dry run never creates a ledger.
func (c *config) previewLedger(ctx context.Context) (*ledger.Ledger, func(), error) {
	if _, err := os.Stat(c.ledgerPath()); err == nil {
		l, err := ledger.Open(ctx, c.ledgerPath(), ledger.Options{})
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close() }, nil
	}
	dir, err := os.MkdirTemp("", "paysync-dry-run-") // 0700
	if err != nil {
		return nil, nil, err
	}
	l, err := ledger.Open(ctx, filepath.Join(dir, "ledger.db"), ledger.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return l, func() { l.Close(); os.RemoveAll(dir) }, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func toProblemJSON(err error) []problemJSON {
	var out []problemJSON
	for _, e := range mapping.Flatten(err) {
		var p *mapping.Problem
		if errors.As(e, &p) {
			out = append(out, problemJSON{Source: p.Source, Line: p.Line, Record: p.Record, EntryID: p.EntryID, Field: p.Field, Message: p.Msg, Hint: p.Hint, Text: p.Error()})
			continue
		}
		out = append(out, problemJSON{Message: e.Error(), Text: e.Error()})
	}
	return out
}

func writeImportReport(w io.Writer, rep importReport) error {
	if len(rep.PayParts) == 0 {
		fmt.Fprintln(w, "no pay parts would be created")
	} else {
		fmt.Fprintln(w, "pay parts that would be created:")
		fmt.Fprintln(w)
		t := newTable(w, "COMPANY", "EMPLOYEE", "CODE", "DESCRIPTION", "UNITS", "RATE", "AMOUNT", "ENTRIES")
		for _, pp := range rep.PayParts {
			t.row(pp.CompanyID, pp.EmployeeName, pp.Code, pp.Description, num(pp.Units), num(pp.Rate), num(pp.Amount), fmt.Sprint(len(pp.Entries)))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	s := rep.Summary
	var skips []string
	for k, v := range s.Skipped {
		skips = append(skips, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(skips)
	skipped := ""
	if len(skips) > 0 {
		skipped = " (" + strings.Join(skips, ", ") + ")"
	}
	nSkipped := 0
	for _, v := range s.Skipped {
		nSkipped += v
	}
	if s.Files == 0 { // a replay: the entries come from the ledger
		fmt.Fprintf(w, "\n%d skipped%s, %s; %s\n", nSkipped, skipped, plural(s.Problems, "problem", "problems"), plural(s.PayParts, "pay part", "pay parts"))
	} else {
		fmt.Fprintf(w, "\n%s in %s: %d mapped, %d skipped%s, %d with problems; %s\n",
			plural(s.Entries, "entry", "entries"), plural(s.Files, "file", "files"), s.Mapped, nSkipped, skipped, s.Problems, plural(s.PayParts, "pay part", "pay parts"))
	}
	if s.AlreadyImported > 0 {
		fmt.Fprintf(w, "%s in the ledger already with the same content: skipped, as the import would\n", plural(s.AlreadyImported, "entry is", "entries are"))
	}
	if changes := rep.changes(); len(changes) > 0 {
		fmt.Fprintln(w, "\nwhat payroll would hold, per group (before → after):")
		fmt.Fprintln(w)
		writePlanJSON(w, changes)
	}
	if s.Corrections > 0 {
		they := "they are"
		if s.Corrections == 1 {
			they = "it is"
		}
		fmt.Fprintf(w, "%s paid before with other content: a correction; the import would replace the pay parts %s in (as above)\n",
			plural(s.Corrections, "entry is", "entries are"), they)
	}
	for _, w2 := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", w2)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, d := range rep.ImportedBefore {
		when := ""
		if d.At != "" {
			when = " on " + d.At
		}
		fmt.Fprintf(w, "%s: the same content was imported before%s (import %d): nothing of it would be imported again\n", d.Source, when, d.ImportID)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "\nproblems (%d):\n", len(rep.Problems)+s.ProblemsOmitted)
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "  %s\n", p.Text)
		}
		if s.ProblemsOmitted > 0 {
			fmt.Fprintf(w, "  … and %d more, not listed here\n", s.ProblemsOmitted)
		}
	}
	return nil
}
