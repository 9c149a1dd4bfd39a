package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

func runDemo(ctx context.Context, args []string, io stdio, _ lookupEnv) error {
	fs := newFlagSet("demo", "demo", io)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	start := time.Now()
	sb := sandbox.New(sandbox.Options{Rotate: true})
	base, err := sb.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: start sandbox: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sb.Close(cctx)
	}()
	dir, err := os.MkdirTemp("", "paysync-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)

	o := sb.Options()
	cl, err := payroll.New(payroll.Config{
		URL: base, AuthURL: base, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RefreshToken: sb.IssueRefreshToken(),
		Store:        &payroll.FileStore{Path: filepath.Join(dir, "token.json")},
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	w := io.out
	step := func(n int, title string) { fmt.Fprintf(w, "\n== %d. %s\n\n", n, title) }

	fmt.Fprintf(w, "paysync demo: an in-process payroll sandbox at %s (nothing leaves this machine)\n", base)
	company, err := cl.CurrentCompany(ctx)
	if err != nil {
		return err
	}
	s, err := cl.Schema(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "schema probe: %s\n", s.Describe())

	step(1, "pay codes (pay_parts_meta)")
	meta, err := cl.PayPartsMeta(ctx)
	if err != nil {
		return err
	}
	if err := writeMeta(w, meta); err != nil {
		return err
	}

	step(2, "employees of the current company")
	co, err := cl.Company(ctx, company)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (%s)\n\n", co.Name, co.ID)
	if err := writeEmployees(w, co.Employees); err != nil {
		return err
	}
	if len(co.Employees) == 0 {
		return fmt.Errorf("demo: company %s has no employees", company)
	}

	step(3, "create one pay part: 7.5 hours of T1 at 215.50")
	in := paysync.PayPartInput{EmployeeID: co.Employees[0].ID, Code: "T1",
		Numbers: paysync.Numbers{Units: paysync.Dec("7.5"), Rate: paysync.Dec("215.50")}}
	created, err := cl.CreatePayParts(ctx, company, []paysync.PayPartInput{in})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "created pay part %s for %s\n", created[0].ID, co.Employees[0].Name)

	step(4, "the company's pay parts")
	pps, err := cl.PayParts(ctx, company)
	if err != nil {
		return err
	}
	if err := writePayParts(w, pps); err != nil {
		return err
	}

	step(5, "delete it again")
	if _, err := cl.DeletePayParts(ctx, company, []string{created[0].ID}); err != nil {
		return err
	}
	pps, err = cl.PayParts(ctx, company)
	if err != nil {
		return err
	}
	if err := writePayParts(w, pps); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndone in %s: %d API calls, %d token refreshes\n", time.Since(start).Round(time.Millisecond), cl.Calls(), cl.Tokens().Refreshes())
	return nil
}
