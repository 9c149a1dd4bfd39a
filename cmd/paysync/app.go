package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/paysync/paysync/payroll"
)

// stdio is where a command reads and writes; tests pass buffers.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// lookupEnv reads one environment variable (os.LookupEnv in main).
type lookupEnv func(string) (string, bool)

// command is one subcommand.
type command struct {
	name  string
	usage string // one line
	run   func(ctx context.Context, args []string, io stdio, env lookupEnv) error
}

// usageError means the command line or configuration is wrong: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func commands() map[string]command {
	cs := []command{
		{"sandbox", "serve the local payroll API stand-in on loopback", runSandbox},
		{"meta", "list the pay codes (pay_parts_meta) and their field rules", runMeta},
		{"companies", "list the companies the payroll account can see", runCompanies},
		{"employees", "list a company's employees", runEmployees},
		{"payparts", "list a company's pay parts", runPayParts},
		{"auth", "auth status | auth password (test only)", runAuth},
		{"connect", "connect a payroll company: the partner connect flow in a browser; stores the connection in the ledger", runConnect},
		{"connections", "list the payroll connections: company, state, last refresh, fingerprint", runConnections},
		{"disconnect", "revoke a payroll connection at the token endpoint and remove it", runDisconnect},
		{"import", "map timesheet files to pay parts (--dry-run shows what would be sent)", runImport},
		{"rules", "rules init: draft a commented rules file from exports and the live payroll (sends nothing)", runRules},
		{"run", "the daemon: NATS JetStream and/or a cron-polled inbox, with metrics and health", runRun},
		{"publish", "publish timesheet entries to NATS JetStream (one message per entry, Nats-Msg-Id = entry id:content hash)", runPublish},
		{"deadletters", "list the NATS dead letters; --redrive sends them again to their subjects once the cause is fixed", runDeadLetters},
		{"batches", "list batches, or show one: its pay parts, payroll ids, source lines and attempts", runBatches},
		{"imports", "list imports, or show one with its batches and rejects", runImports},
		{"plan", "what the reconciler would send now: per company × period × employee × code, before → after (--company, --period, --json)", runPlan},
		{"cutoff", "with PAYSYNC_SEND=cutoff: reconcile now (before a payroll run): the plan shown, confirmed, sent", runCutoff},
		{"periods", "what payroll holds per company and period; close a period once payroll has run (nothing is sent into it, late changes are listed by plan), or open it again", runPeriods},
		{"corrections", "list correction units, or show one: per employee × code the total before → after, the pay parts replaced and created", runCorrections},
		{"revert", "undo a batch, an import or a --period: its entries stop counting, payroll follows (shown, confirmed)", runRevert},
		{"replay", "redo a batch, an import or a --period under the current rules: payroll follows (shown, confirmed)", runReplay},
		{"console", "serve the operator console in the browser (PAYSYNC_CONSOLE_ADDR, PAYSYNC_CONSOLE_PASSWORD) for the ledger", runConsole},
		{"demo", "run the whole flow against an in-process sandbox", runDemo},
		{"version", "print the version", runVersion},
		{"doctor", "pre-flight: check configuration, payroll connection, schema, rules, NATS, inbox, ledger", runDoctor},
		{"healthcheck", "probe a health URL (for container HEALTHCHECKs): exit 0 on HTTP 200", runHealthcheck},
	}
	m := map[string]command{}
	for _, c := range cs {
		m[c.name] = c
	}
	return m
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "paysync moves hours from time-tracking systems into payroll, exactly once.")
	fmt.Fprintln(w, "\nUsage: paysync <command> [flags]\n\nCommands:")
	cs := commands()
	names := make([]string, 0, len(cs))
	for n := range cs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cs[n].usage)
	}
	fmt.Fprintln(w, "\nRun 'paysync <command> --help' for a command's flags. Configuration comes from PAYSYNC_* environment variables (see README); flags override them.")
}

// run executes one command line and returns the process exit code:
// 0 success, 1 failure, 2 usage or configuration error.
func run(ctx context.Context, args []string, io stdio, env lookupEnv) int {
	if len(args) == 0 {
		printUsage(io.err)
		return 2
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		printUsage(io.out)
		return 0
	}
	if name == "--version" {
		name = "version"
	}
	c, ok := commands()[name]
	if !ok {
		fmt.Fprintf(io.err, "paysync: unknown command %q\n\n", name)
		printUsage(io.err)
		return 2
	}
	err := c.run(ctx, args[1:], io, env)
	return report(withConnectionHint(ctx, err, env), io.err)
}

// report prints err as one line (plus a hint where one helps) and maps it
// to an exit code.
func report(err error, w io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		// A usage error's lines are separate errors (a rules file's
		// problems): one line each.
		for _, l := range strings.Split(ue.msg, "\n") {
			if l = oneLine(l); l != "" {
				fmt.Fprintf(w, "paysync: %s\n", l)
			}
		}
		return 2
	}
	fmt.Fprintf(w, "paysync: %s\n", oneLine(err.Error()))
	var initial *payroll.InitialTokenError
	var conns *connectionsRevoked
	switch {
	case errors.As(err, &conns): // the ledger holds connections (revoked_hint.go)
		fmt.Fprintln(w, "paysync: what to do: "+conns.hint)
	case errors.Is(err, payroll.ErrRevoked) && !errors.As(err, &initial): // that one says what to do itself
		fmt.Fprintln(w, "paysync: what to do: "+revokedDefaultFix)
	}
	return 1
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, synopsis string, io stdio) *flag.FlagSet {
	fs := flag.NewFlagSet("paysync "+name, flag.ContinueOnError)
	fs.SetOutput(io.err)
	fs.Usage = func() {
		fmt.Fprintf(io.err, "Usage: paysync %s\n", synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 { // a command without flags shows no empty section
			fmt.Fprintln(io.err, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args; a bad flag is a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageOrHelp(err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
