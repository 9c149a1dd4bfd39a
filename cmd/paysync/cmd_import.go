package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// importFlags are the flags of `paysync import`.
type importFlags struct {
	dryRun       bool
	asJSON       bool
	format       string
	rules        string
	company      string
	delimiter    string
	decimalComma bool
	dateFormat   string
	noAggregate  bool
}

func (f *importFlags) register(fs *flag.FlagSet, cfg *config) {
	fs.BoolVar(&f.dryRun, "dry-run", false, "show what would be created, send nothing")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.StringVar(&f.format, "format", "", "input format: json, ndjson, csv, toggl, clockify, harvest (default: detect)")
	fs.StringVar(&f.rules, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING); entries carrying employee_id and code need none")
	fs.StringVar(&f.company, "company", "", "default company (default PAYSYNC_COMPANY_ID, else the current company)")
	fs.StringVar(&f.delimiter, "delimiter", "", "CSV delimiter (default: detect from the header)")
	fs.BoolVar(&f.decimalComma, "decimal-comma", false, "numbers use a decimal comma (7,5)")
	fs.StringVar(&f.dateFormat, "date-format", "", "date format of CSV files, e.g. DD/MM/YYYY (default YYYY-MM-DD)")
	fs.BoolVar(&f.noAggregate, "no-aggregate", false, "one pay part per entry instead of sums per employee × code × rate")
}

func (f *importFlags) readOptions() (mapping.ReadOptions, error) {
	o := mapping.ReadOptions{Format: mapping.Format(f.format), DecimalComma: f.decimalComma, DateFormat: f.dateFormat}
	if f.format != "" {
		ok := false
		for _, k := range mapping.Formats {
			ok = ok || k == o.Format
		}
		if !ok {
			return o, usagef("import: --format %q: want one of json, ndjson, csv, toggl, clockify, harvest", f.format)
		}
	}
	if f.delimiter != "" {
		d := f.delimiter
		if d == `\t` || d == "tab" {
			d = "\t"
		}
		r, n := utf8.DecodeRuneInString(d)
		if n != len(d) {
			return o, usagef("import: --delimiter %q: want one character", f.delimiter)
		}
		o.Delimiter = r
	}
	return o, nil
}

// importReport is the outcome of mapping a set of files.
type importReport struct {
	PayParts []paysync.PlannedPayPart `json:"pay_parts"`
	Problems []problemJSON            `json:"problems"`
	Summary  importSummary            `json:"summary"`
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
}

func runImport(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var f importFlags
	fs := newFlagSet("import", "import --dry-run [--rules FILE] [--format F] [--json] FILE... (or - for standard input)", io)
	cfg.apiFlags(fs)
	f.register(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	files := fs.Args()
	if len(files) == 0 {
		return usagef("import: name at least one file, or - for standard input")
	}
	opts, err := f.readOptions()
	if err != nil {
		return err
	}
	rules, err := loadRulesFile(f.rules)
	if err != nil {
		return err
	}
	if f.noAggregate {
		rules.Aggregate = false
	}
	if f.company != "" {
		cfg.CompanyID = f.company
	}
	s, err := cfg.connect(ctx, io, !f.dryRun)
	if err != nil {
		return err
	}
	defer s.Close()
	if !f.dryRun {
		return sendImport(ctx, s, rules, files, opts, f.asJSON, io)
	}
	rep, err := planImport(ctx, s.cl, rules, cfg.CompanyID, files, opts, io.in)
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
	if n := len(rep.Problems); n > 0 {
		return fmt.Errorf("import: %d problem(s); nothing was sent", n)
	}
	return nil
}

// planImport reads, maps and validates files into a report. Meta and
// employees are fetched once for the whole run.
func planImport(ctx context.Context, cl *payroll.Client, rules *mapping.Rules, company string, files []string, opts mapping.ReadOptions, stdin io.Reader) (importReport, error) {
	schema, err := cl.Schema(ctx)
	if err != nil {
		return importReport{}, err
	}
	if company, err = defaultCompany(ctx, cl, rules, company); err != nil {
		return importReport{}, err
	}
	cache := mapping.NewCache(cl)
	if _, err := cache.Meta(ctx); err != nil {
		return importReport{}, err
	}
	m := mapping.NewMapper(rules, cache, schema, company)
	p := mapping.NewPlanner(rules, schema)
	rep := importReport{Summary: importSummary{Skipped: map[string]int{}}}
	var probs []error
	for _, name := range files {
		rep.Summary.Files++
		if err := mapFile(ctx, name, stdin, opts, m, p, &rep.Summary, &probs); err != nil {
			return importReport{}, err
		}
	}
	pps, more := p.PayParts()
	probs = append(probs, more...)
	rep.PayParts = pps
	rep.Summary.PayParts = len(pps)
	for _, e := range probs {
		rep.Problems = append(rep.Problems, toProblemJSON(e)...)
	}
	rep.Summary.Problems = len(rep.Problems)
	if rep.PayParts == nil {
		rep.PayParts = []paysync.PlannedPayPart{}
	}
	if rep.Problems == nil {
		rep.Problems = []problemJSON{}
	}
	return rep, nil
}

// mapFile streams one file through the mapper into the planner. Problems
// are collected; an error is returned only for failures of the payroll
// API or the context, which end the run.
func mapFile(ctx context.Context, name string, stdin io.Reader, opts mapping.ReadOptions, m *mapping.Mapper, p *mapping.Planner, sum *importSummary, probs *[]error) error {
	var r io.Reader
	source := name
	if name == "-" {
		r, source = stdin, "stdin"
	} else {
		fh, err := os.Open(name)
		if err != nil {
			*probs = append(*probs, &mapping.Problem{Source: name, Msg: fmt.Sprintf("cannot open: %v", unwrapPath(err)), Hint: "check the path"})
			return nil
		}
		defer fh.Close()
		r = fh
	}
	rd, _, err := mapping.NewReader(source, r, opts)
	if err != nil {
		*probs = append(*probs, asProblem(source, err))
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var pr *mapping.Problem
		if errors.As(err, &pr) {
			sum.Entries++
			*probs = append(*probs, err)
			continue
		}
		if err != nil {
			*probs = append(*probs, asProblem(source, err))
			return nil
		}
		sum.Entries++
		lines, err := m.Map(ctx, e)
		if err != nil {
			if !mapping.OnlyProblems(err) {
				return err
			}
			*probs = append(*probs, err)
			continue
		}
		for _, l := range lines {
			if l.Skip != "" {
				sum.Skipped[l.Skip]++
				continue
			}
			if err := p.Add(l); err != nil {
				*probs = append(*probs, err)
			}
		}
		if len(lines) > 0 && lines[0].Skip == "" {
			sum.Mapped++
		}
	}
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func asProblem(source string, err error) error {
	var p *mapping.Problem
	if errors.As(err, &p) {
		return p
	}
	return &mapping.Problem{Source: source, Msg: err.Error(), Hint: "check the file and its --format"}
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
		fmt.Fprintf(w, "\n%d skipped%s, %d problems; %d pay parts\n", nSkipped, skipped, s.Problems, s.PayParts)
	} else {
		fmt.Fprintf(w, "\n%d entries in %d file(s): %d mapped, %d skipped%s, %d with problems; %d pay parts\n",
			s.Entries, s.Files, s.Mapped, nSkipped, skipped, s.Problems, s.PayParts)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "\nproblems (%d):\n", len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "  %s\n", p.Text)
		}
	}
	return nil
}
