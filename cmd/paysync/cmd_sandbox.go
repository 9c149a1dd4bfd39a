package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/paysync/paysync/payroll/sandbox"
)

// sandboxFaultsExample is a PUT /_sandbox/faults body (in --help and the
// README; a test PUTs it).
const sandboxFaultsExample = `[{"kind":"rate_limit","op":"create_pay_parts","times":2,"retry_after":"2s"},{"kind":"latency","delay":"300ms","probability":0.5}]`

// sandboxFaultsHelp ends `paysync sandbox --help`: the body of PUT
// /_sandbox/faults (sandbox.Fault's JSON shape).
const sandboxFaultsHelp = `
Faults at run time:
  GET /_sandbox/faults lists the armed faults. PUT /_sandbox/faults replaces them with the
  JSON list in its body ([] disarms all) and answers with the new list (400 names a bad one).
  Each fault is an object; unknown fields are refused:
    "kind"         required: latency (wait delay, then answer normally); error_before (answer
                   status, default 503, without executing); rate_limit (429 with Retry-After,
                   without executing); unauthorized (401 as for an expired token, without
                   executing); drop_after_commit (execute, then close the connection unanswered);
                   bad_gateway_after_commit (execute, then a proxy's 502 HTML page);
                   timeout_after_commit (execute, then hold the answer for delay, default 30s)
    "op"           the GraphQL root field to match: companies, pay_parts, pay_parts_meta,
                   current_company, create_pay_parts, delete_pay_parts, __schema, __type
                   (with --dialect camel the same names: companies is companiesExt, and so on);
                   omitted: every /graphql request
    "times"        fire on the next N matching requests, then disarm; omitted: on every one
    "delay"        a duration string such as "300ms" (a number is nanoseconds)
    "status"       the HTTP status of error_before (100-599)
    "retry_after"  a duration string: the Retry-After of error_before and rate_limit (whole
                   seconds; rate_limit's default 1s)
    "probability"  fire on a matching request with this probability, 0 < p <= 1; omitted:
                   always (draws seeded by --seed, restarted by every PUT)
  Latency faults all apply; of the other kinds, the first in the list that fires applies.
  Example: 429 on the next two create_pay_parts calls, half of all calls 300ms slower:
    curl -X PUT --data '` + sandboxFaultsExample + `' \
      http://127.0.0.1:8765/_sandbox/faults
  --fault takes the same fields: kind[:op][,times=N][,delay=D][,status=S][,retry_after=D][,probability=P].
`

// faultList collects repeated --fault flags.
type faultList []sandbox.Fault

func (f *faultList) String() string { return fmt.Sprint(len(*f)) }
func (f *faultList) Set(s string) error {
	ft, err := sandbox.ParseFault(s)
	if err != nil {
		return err
	}
	*f = append(*f, ft)
	return nil
}

func runSandbox(ctx context.Context, args []string, io stdio, _ lookupEnv) error {
	var (
		addr, numbers, allowed string
		dialect                string
		opts                   sandbox.Options
		faults                 faultList
	)
	fs := newFlagSet("sandbox", "sandbox [--addr 127.0.0.1:8765] [--dialect snake|camel] [--no-delete] [--numbers float|int] [--allowed boolean|enum] [--employee-number-field NAME|none] [--fault SPEC]...", io)
	fs.StringVar(&addr, "addr", "127.0.0.1:8765", "listen address (keep it on loopback: the sandbox has no real security)")
	fs.StringVar(&dialect, "dialect", "snake", "the API's names: snake (the spec's companies, create_pay_parts) or camel (Danløn's public doc's companiesExt(input:), createPayParts)")
	fs.BoolVar(&opts.NoDelete, "no-delete", false, "leave out the delete mutation, as a server that offers none")
	fs.StringVar(&numbers, "numbers", "float", "how units/rate/amount are typed: float, or int (hundredths)")
	fs.StringVar(&allowed, "allowed", "boolean", "how *_allowed is typed: boolean, or enum (MANDATORY/OPTIONAL/FORBIDDEN)")
	fs.StringVar(&opts.EmployeeNumberField, "employee-number-field", "", "the field employees serve their number under: employee_number (default with snake), domainId (Danløn's public doc; default with camel), "+
		"or none (also employeeNumber, domain_id, number)")
	fs.BoolVar(&opts.Rotate, "rotate", true, "rotate refresh tokens on every refresh (Keycloak 'Revoke Refresh Token')")
	fs.DurationVar(&opts.AccessTTL, "access-ttl", 5*time.Minute, "access token lifetime")
	fs.StringVar(&opts.Realm, "realm", "danlon-sandbox", "OAuth2 realm")
	fs.Int64Var(&opts.Seed, "seed", 1, "seed of the random source for probabilistic faults")
	fs.Var(&faults, "fault", "inject a fault: kind[:op][,times=N][,delay=D][,status=S][,retry_after=D][,probability=P]; kinds: latency, error_before, rate_limit, unauthorized, drop_after_commit, bad_gateway_after_commit, timeout_after_commit (repeatable; fields as in PUT /_sandbox/faults below)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(io.err, sandboxFaultsHelp)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch dialect {
	case "snake":
		opts.Dialect = sandbox.SnakeCase
	case "camel":
		opts.Dialect = sandbox.CamelCase
	default:
		return usagef("sandbox: --dialect %q: want snake or camel", dialect)
	}
	switch numbers {
	case "float":
		opts.Numbers = sandbox.NumbersFloat
	case "int":
		opts.Numbers = sandbox.NumbersInt
	default:
		return usagef("sandbox: --numbers %q: want float or int", numbers)
	}
	switch allowed {
	case "boolean":
		opts.Allowed = sandbox.AllowedBoolean
	case "enum":
		opts.Allowed = sandbox.AllowedEnum
	default:
		return usagef("sandbox: --allowed %q: want boolean or enum", allowed)
	}
	if f := opts.EmployeeNumberField; f != "" && f != "none" && !slices.Contains(sandbox.EmployeeNumberFields, f) {
		return usagef("sandbox: --employee-number-field %q: want none or one of %s", f, strings.Join(sandbox.EmployeeNumberFields, ", "))
	}
	if host, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("sandbox: --addr %q: %v", addr, err)
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		fmt.Fprintf(io.err, "paysync: warning: the sandbox listens on %s, beyond loopback; it is a test server with published credentials\n", addr)
	}
	opts.Faults = faults
	sb := sandbox.New(opts)
	base, err := sb.Start(addr)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	o := sb.Options()
	del := "with delete"
	if o.NoDelete {
		del = "no delete mutation"
	}
	fmt.Fprintf(io.out, "paysync sandbox: payroll API at %s/graphql (dialect %s, %s, numbers %s, allowed %s, employee number field %s, rotation %v, access tokens %s)\n",
		base, dialect, del, numbers, allowed, o.EmployeeNumberField, o.Rotate, o.AccessTTL)
	if len(faults) > 0 {
		var ks []string
		for _, f := range faults {
			ks = append(ks, string(f.Kind))
		}
		fmt.Fprintf(io.out, "faults: %s (change at run time: PUT %s/_sandbox/faults)\n", strings.Join(ks, ", "), base)
	}
	fmt.Fprintf(io.out, "\nUse it from another shell (test credentials of this sandbox only):\n\n")
	fmt.Fprintf(io.out, "  export PAYSYNC_PAYROLL_URL=%s\n", base)
	fmt.Fprintf(io.out, "  export PAYSYNC_AUTH_URL=%s\n", base)
	fmt.Fprintf(io.out, "  export PAYSYNC_AUTH_REALM=%s\n", o.Realm)
	fmt.Fprintf(io.out, "  export PAYSYNC_CLIENT_ID=%s\n", o.ClientID)
	fmt.Fprintf(io.out, "  export PAYSYNC_CLIENT_SECRET=%s\n", o.ClientSecret)
	fmt.Fprintf(io.out, "  export PAYSYNC_REFRESH_TOKEN=%s\n", sb.IssueRefreshToken())
	fmt.Fprintf(io.out, "  export PAYSYNC_TOKEN_FILE=$(mktemp -d)/token.json\n")
	fmt.Fprintf(io.out, "\nPassword grant user: %s / %s. State: GET %s/_sandbox/state. Ctrl-C stops.\n", o.Username, o.Password, base)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sb.Close(sctx); err != nil {
		return fmt.Errorf("sandbox: close: %w", err)
	}
	return nil
}
