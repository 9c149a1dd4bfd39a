package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/paysync/paysync/payroll"
)

// companyFor returns the --company flag, else PAYSYNC_COMPANY_ID, else the
// account's current company.
func companyFor(ctx context.Context, cfg *config, cl *payroll.Client) (string, error) {
	if cfg.CompanyID != "" {
		return cfg.CompanyID, nil
	}
	id, err := cl.CurrentCompany(ctx)
	if err != nil {
		return "", fmt.Errorf("find current company (set PAYSYNC_COMPANY_ID to skip): %w", err)
	}
	return id, nil
}

func runMeta(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON, showSchema bool
	s, err := apiSetup(ctx, "meta", "meta [--json] [--schema]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.BoolVar(&showSchema, "schema", false, "also print what the schema probe found")
	})
	if err != nil {
		return err
	}
	defer s.Close()
	cl := s.cl
	meta, err := cl.PayPartsMeta(ctx)
	if err != nil {
		return err
	}
	schema, err := cl.Schema(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := map[string]any{"pay_parts_meta": meta}
		if showSchema {
			out["schema"] = schema.DescribeDialect() + "; " + schema.Describe() + "; " + schema.DescribeEmployees()
		}
		return writeJSON(io.out, out)
	}
	if err := writeMeta(io.out, meta); err != nil {
		return err
	}
	if showSchema {
		fmt.Fprintf(io.out, "\nschema: %s; %s; %s\n", schema.DescribeDialect(), schema.Describe(), schema.DescribeEmployees())
	}
	return nil
}

func runCompanies(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON bool
	s, err := apiSetup(ctx, "companies", "companies [--json]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	defer s.Close()
	cs, err := s.cl.Companies(ctx, nil)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.out, cs)
	}
	t := newTable(io.out, "COMPANY ID", "NAME")
	for _, c := range cs {
		t.row(c.ID, c.Name)
	}
	return t.flush()
}

// companySetup is apiSetup for commands that work on one company: it adds
// --json and --company and resolves the company.
func companySetup(ctx context.Context, name string, args []string, io stdio, env lookupEnv) (s *session, companyID string, asJSON bool, err error) {
	var company string
	s, err = apiSetup(ctx, name, name+" [--company ID] [--json]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&company, "company", "", "company id (default PAYSYNC_COMPANY_ID, else the current company)")
	})
	if err != nil {
		return nil, "", false, err
	}
	if company != "" {
		s.cfg.CompanyID = company
		if err := s.useConnection(ctx, company, s.cfg.logger(io.err)); err != nil { // that company's connection (cmd_connect.go)
			s.Close()
			return nil, "", false, err
		}
	}
	companyID, err = companyFor(ctx, s.cfg, s.cl)
	if err != nil {
		s.Close()
	}
	return s, companyID, asJSON, err
}

func runEmployees(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	s, id, asJSON, err := companySetup(ctx, "employees", args, io, env)
	if err != nil {
		return err
	}
	defer s.Close()
	co, err := s.cl.Company(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.out, co)
	}
	schema, err := s.cl.Schema(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.out, "%s (%s): %d employees\n\n", co.Name, co.ID, len(co.Employees))
	return writeEmployees(io.out, co.Employees, schema.EmployeeNumberField != "", schema.EmployeeEmailField != "")
}

func runPayParts(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	s, id, asJSON, err := companySetup(ctx, "payparts", args, io, env)
	if err != nil {
		return err
	}
	defer s.Close()
	pps, err := s.cl.PayParts(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.out, pps)
	}
	return writePayParts(io.out, pps)
}
