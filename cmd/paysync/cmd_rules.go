package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/paysync/paysync/mapping"
)

// runRules dispatches the rules sub-commands. init drafts a rules file
// from real exports, since writing one by hand meant learning each
// export's columns and looking up payroll's ids.
func runRules(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	const synopsis = "rules init [--format F] [--company ID] [--out FILE [--force]] FILE..."
	if len(args) == 0 {
		return usagef("rules: name a sub-command: %s", synopsis)
	}
	switch args[0] {
	case "init":
		return runRulesInit(ctx, args[1:], io, env)
	case "-h", "--help", "help":
		fmt.Fprintf(io.err, "Usage: paysync %s\n\n  init  draft a commented rules file from exports and the live payroll (reads only; sends nothing)\n", synopsis)
		return flag.ErrHelp
	}
	return usagef("rules: unknown sub-command %q: want init", args[0])
}

// runRulesInit reads the exports and asks payroll (read only: the
// company, its employees, pay_parts_meta), and writes the draft to
// standard output or --out, which it never overwrites without --force.
func runRulesInit(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var format, company, out string
	var force bool
	fs := newFlagSet("rules init", "rules init [--format F] [--company ID] [--out FILE [--force]] FILE... (or - for standard input)", io)
	cfg.apiFlags(fs)
	fs.StringVar(&format, "format", "", "input format: json, ndjson, csv, toggl, clockify, harvest (default: detect per file)")
	fs.StringVar(&company, "company", "", "payroll company whose employees and pay codes to use (default PAYSYNC_COMPANY_ID, else the current company)")
	fs.StringVar(&out, "out", "", "write the draft to FILE instead of standard output")
	fs.BoolVar(&force, "force", false, "with --out: overwrite FILE if it exists")
	if err := fs.Parse(args); err != nil {
		return usageOrHelp(err)
	}
	files := fs.Args()
	if len(files) == 0 {
		return usagef("rules init: name at least one export, or - for standard input")
	}
	if force && out == "" {
		return usagef("rules init: --force goes with --out")
	}
	if out != "" && !force {
		if _, err := os.Stat(out); err == nil {
			return usagef("rules init: %s exists: choose another --out, or add --force to overwrite it", out)
		}
	}
	var inputs []mapping.DraftInput
	for _, f := range files {
		data, err := readExport(f, io.in)
		if err != nil {
			return fmt.Errorf("rules init: %w", err)
		}
		inputs = append(inputs, mapping.DraftInput{Name: f, Data: data})
	}
	if company != "" {
		cfg.CompanyID = company
	}
	// As a dry run: no ledger is created, a rotated token is kept.
	conn := cfg.dryRunConfig()
	s, err := conn.connect(ctx, io, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if company != "" {
		if err := s.useConnection(ctx, company, s.cfg.logger(io.err)); err != nil {
			return err
		}
	}
	id, err := companyFor(ctx, s.cfg, s.cl)
	if err != nil {
		return err
	}
	co, err := s.cl.Company(ctx, id)
	if err != nil {
		return fmt.Errorf("rules init: read company %s: %w", id, err)
	}
	meta, err := s.cl.PayPartsMeta(ctx)
	if err != nil {
		return fmt.Errorf("rules init: read the pay codes: %w", err)
	}
	name := out
	if name == "" {
		name = "rules.yaml"
	}
	draft, sum, err := mapping.Draft(inputs, mapping.DraftOptions{Format: mapping.Format(format), CompanyID: co.ID, CompanyName: co.Name,
		Employees: co.Employees, Meta: meta, RulesName: name})
	if err != nil {
		return fmt.Errorf("rules init: %w", err)
	}
	if out == "" {
		_, err := io.out.Write(draft)
		return err
	}
	if err := writeDraft(out, draft, force); err != nil {
		return fmt.Errorf("rules init: %w", err)
	}
	fmt.Fprintf(io.out, "wrote %s: %s (%d unmatched), %s, %s to confirm\nnext: paysync import --dry-run --rules %s %s\n",
		out, plural(sum.People, "person", "people"), sum.Unmatched, plural(sum.Rules, "rule", "rules"), plural(sum.Guesses, "guess", "guesses"),
		out, strings.Join(files, " "))
	return nil
}

// readExport reads one export, "-" being standard input.
func readExport(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(stdin, 256<<20))
	}
	return os.ReadFile(name)
}

// writeDraft writes the draft to path; without force, only if there is
// no such file (checked again at creation, not only before connecting).
func writeDraft(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(filepath.Clean(path), flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists: choose another --out, or add --force to overwrite it", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
