package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker/inbox"
	"github.com/paysync/paysync/worker/stream"
)

// paysync doctor: a pre-flight that checks the configuration, the ledger,
// the payroll connection, the schema, the company, the rules, NATS and the
// inbox, and says for every problem what to do. Each check stands alone: a
// failure is reported and the others still run; checks that need something
// that failed are reported as skipped, with the reason. The ledger,
// payroll, NATS, inbox and rules checks are their adapters' probes
// (ledger.CheckPath and Ledger.Probe; payroll's ProbeToken, ProbeClient,
// ProbeSchema and ProbeCompany; stream.Probe, inbox.Probe,
// mapping.CheckRules): doctor runs them and adds the hint, naming the
// variable or command.

// doctorCheck is one line of the report (one element of --json).
type doctorCheck struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`   // passed (possibly with a warning)
	Warn    bool   `json:"warn"` // passed, but worth a look
	Skipped bool   `json:"skipped,omitempty"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix"` // what to do (for a warning: a note)
}

// doctorNameWidth aligns the details: the longest check name plus ':'.
const doctorNameWidth = len("metrics listener:")

// doctorReport writes one line per check (or collects them for --json).
type doctorReport struct {
	w       io.Writer
	asJSON  bool
	checks  []doctorCheck
	secrets []string // never printed, whatever a message carries
}

func (r *doctorReport) redact(s string) string {
	for _, sec := range r.secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	return oneLine(s)
}

func (r *doctorReport) add(c doctorCheck) {
	c.Detail, c.Fix = r.redact(c.Detail), r.redact(c.Fix)
	r.checks = append(r.checks, c)
	if r.asJSON {
		return
	}
	sym, label := "✓", ""
	switch {
	case c.Skipped:
		sym = "-"
		c.Detail = "skipped: " + c.Detail
	case !c.OK:
		sym, label = "✗", "fix"
	case c.Warn:
		sym, label = "!", "note"
	}
	line := fmt.Sprintf("%s %-*s %s", sym, doctorNameWidth, c.Name+":", c.Detail)
	if label != "" && c.Fix != "" {
		line += " — " + label + ": " + c.Fix
	}
	fmt.Fprintln(r.w, line)
}

func (r *doctorReport) ok(name, detail string) {
	r.add(doctorCheck{Name: name, OK: true, Detail: detail})
}

func (r *doctorReport) warn(name, detail, note string) {
	r.add(doctorCheck{Name: name, OK: true, Warn: true, Detail: detail, Fix: note})
}

func (r *doctorReport) fail(name, detail, fix string) {
	r.add(doctorCheck{Name: name, Detail: detail, Fix: fix})
}

func (r *doctorReport) skip(name, reason string) {
	r.add(doctorCheck{Name: name, Skipped: true, Detail: reason})
}

func (r *doctorReport) problems() int {
	n := 0
	for _, c := range r.checks {
		if !c.OK && !c.Skipped {
			n++
		}
	}
	return n
}

// doctor holds what the checks found, for the checks after them.
type doctor struct {
	cfg *config
	io  stdio
	r   *doctorReport

	badVars      map[string]bool // environment variables that did not parse
	configErrs   []doctorConfigErr
	payrollBlock string // why the payroll checks cannot run ("" = they can)

	led     *ledger.Ledger
	ledErr  error
	cl      *payroll.Client
	tokens  *payroll.TokenSource // cl's, kept when cl is dropped
	client  *payroll.TokenSource // no refresh token, no store: checks the client id and secret
	noConn  string               // why there is no payroll connection ("" = connected)
	current string               // the account's current company ("" = unknown)
	rules   *mapping.Rules
}

func runDoctor(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, bad, loadErrs := loadConfigLenient(ctx, env)
	var asJSON bool
	fs := newFlagSet("doctor", "doctor [--json] [--rules FILE]", io)
	cfg.apiFlags(fs)
	fs.BoolVar(&asJSON, "json", false, "print the checks as JSON")
	fs.StringVar(&cfg.Mapping, "rules", cfg.Mapping, "mapping rules file to check (PAYSYNC_MAPPING)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	d := &doctor{
		cfg:        &cfg,
		io:         io,
		badVars:    bad,
		configErrs: loadErrs,
		r: &doctorReport{w: io.out, asJSON: asJSON,
			secrets: []string{string(cfg.ClientSecret), string(cfg.RefreshToken)}},
	}
	defer func() {
		if d.led != nil {
			d.led.Close()
		}
	}()

	d.checkConfig()
	d.checkListener()
	d.checkLedger(ctx)
	d.checkBatches(ctx)
	d.connect(ctx)
	d.checkToken(ctx)
	d.checkConnections(ctx) // cmd_connect.go
	d.checkClient(ctx)
	d.checkSchema(ctx)
	d.checkCompany(ctx)
	if cfg.Mapping != "" {
		d.checkRules(ctx)
	}
	if cfg.NATSURL != "" {
		d.checkNATS(ctx)
	}
	if cfg.Inbox != "" {
		d.checkInbox()
	}

	if asJSON {
		if err := writeJSON(io.out, d.r.checks); err != nil {
			return err
		}
	}
	if n := d.r.problems(); n > 0 {
		return fmt.Errorf("doctor: %s", plural(n, "problem", "problems"))
	}
	return nil
}

// ---- configuration ----

// doctorConfigErr is one configuration problem and the variable it names
// ("" when none).
type doctorConfigErr struct {
	v, msg string
}

// loadConfigLenient is loadConfig that goes on past bad values: each
// variable that does not parse is reported and left at its default, so
// that the checks that do not depend on it can still run.
func loadConfigLenient(ctx context.Context, env lookupEnv) (config, map[string]bool, []doctorConfigErr) {
	bad := map[string]bool{}
	var errs []doctorConfigErr
	hide := func(k string) (string, bool) {
		if bad[k] {
			return "", false
		}
		return env(k)
	}
	for range reflect.TypeOf(config{}).NumField() + 1 {
		cfg, err := loadConfig(ctx, hide)
		if err == nil {
			return cfg, bad, errs
		}
		var ve *varError
		errors.As(err, &ve)
		ce := doctorConfigErr{msg: strings.TrimPrefix(err.Error(), "config: ")}
		if ve != nil {
			ce.v = ve.Var
		}
		errs = append(errs, ce)
		if ce.v == "" || bad[ce.v] {
			break
		}
		bad[ce.v] = true
	}
	// Not attributable to one variable: keep what can be read as it is.
	var cfg config
	for k, p := range map[string]*string{"PAYSYNC_LEDGER": &cfg.Ledger, "PAYSYNC_TOKEN_FILE": &cfg.TokenFile,
		"PAYSYNC_INBOX": &cfg.Inbox, "PAYSYNC_MAPPING": &cfg.Mapping} {
		*p, _ = env(k)
	}
	bad["*"] = true
	return cfg, bad, errs
}

// doctorVarGroup is the part of paysync a variable configures.
func doctorVarGroup(v string) string {
	switch {
	case v == "*":
		return "*"
	case strings.HasPrefix(v, "NATS_"), strings.HasPrefix(v, "PAYSYNC_NATS_"):
		return "nats"
	case v == "PAYSYNC_INBOX", v == "PAYSYNC_SCHEDULE", v == "PAYSYNC_FILE_POLICY":
		return "inbox"
	case v == "PAYSYNC_HTTP_ADDR":
		return "listener"
	case v == "PAYSYNC_LEDGER":
		return "ledger"
	case v == "PAYSYNC_BATCH_LINGER", v == "PAYSYNC_RATE_LIMIT", v == "PAYSYNC_IN_FLIGHT", v == "PAYSYNC_SHUTDOWN_GRACE":
		return "daemon"
	}
	return "payroll"
}

// blocked says which bad variable keeps the checks of group from running.
func (d *doctor) blocked(group string) string {
	var vs []string
	for v := range d.badVars {
		if g := doctorVarGroup(v); g == group || g == "*" {
			if v == "*" {
				v = "the configuration"
			}
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return ""
	}
	sort.Strings(vs)
	return strings.Join(vs, ", ") + " is invalid (see configuration)"
}

func (d *doctor) checkConfig() {
	cfg := d.cfg
	errs := d.configErrs
	addVar := func(v, msg string) {
		errs = append(errs, doctorConfigErr{v, msg})
		if v != "" {
			d.badVars[v] = true
		}
	}
	addErr := func(err error) {
		var ve *varError
		if errors.As(err, &ve) {
			addVar(ve.Var, strings.TrimPrefix(err.Error(), "config: "))
		} else {
			addVar("", strings.TrimPrefix(err.Error(), "config: "))
		}
	}
	payrollOK := true
	if err := cfg.validate(); err != nil {
		addErr(err)
		payrollOK = false
	} else if _, err := cfg.payrollConfig(cfg.logger(io.Discard)); err != nil {
		addErr(err)
		payrollOK = false
	}
	// What paysync run checks before it starts.
	if cfg.FilePolicy != "all-or-nothing" && cfg.FilePolicy != "partial" {
		addVar("PAYSYNC_FILE_POLICY", fmt.Sprintf("PAYSYNC_FILE_POLICY: %q is not all-or-nothing or partial", cfg.FilePolicy))
	}
	if cfg.BatchLinger < 0 {
		addVar("PAYSYNC_BATCH_LINGER", fmt.Sprintf("PAYSYNC_BATCH_LINGER: %s is negative", cfg.BatchLinger))
	}
	if cfg.RateLimit <= 0 {
		addVar("PAYSYNC_RATE_LIMIT", fmt.Sprintf("PAYSYNC_RATE_LIMIT: must be positive, got %v", cfg.RateLimit))
	}
	if cfg.InFlight < 1 {
		addVar("PAYSYNC_IN_FLIGHT", fmt.Sprintf("PAYSYNC_IN_FLIGHT: must be at least 1, got %d", cfg.InFlight))
	}
	if cfg.ShutdownGrace <= 0 {
		addVar("PAYSYNC_SHUTDOWN_GRACE", fmt.Sprintf("PAYSYNC_SHUTDOWN_GRACE: must be positive, got %s", cfg.ShutdownGrace))
	}
	if !payrollOK {
		d.payrollBlock = "the payroll settings are invalid (see configuration)"
	} else if why := d.blocked("payroll"); why != "" {
		d.payrollBlock = why
	}
	if len(errs) > 0 {
		var vars, msgs []string
		seen := map[string]bool{}
		for _, e := range errs {
			msgs = append(msgs, e.msg)
			if e.v != "" && !seen[e.v] {
				seen[e.v] = true
				vars = append(vars, e.v)
			}
		}
		fix := "correct the configuration (see README, Configuration)"
		if len(vars) > 0 {
			fix = "correct " + strings.Join(vars, ", ") + " (see README, Configuration; 'paysync sandbox' prints a working set to compare)"
		}
		d.r.fail("configuration", strings.Join(msgs, "; "), fix)
		return
	}
	secretSet := "not set"
	if cfg.ClientSecret != "" {
		secretSet = "set"
	}
	rt := "PAYSYNC_REFRESH_TOKEN not set (the stored token is used)"
	if cfg.RefreshToken != "" {
		rt = "refresh token fingerprint " + payroll.Fingerprint(string(cfg.RefreshToken))
	}
	auth := cfg.AuthURL
	if auth == "" {
		auth = cfg.PayrollURL
	}
	d.r.ok("configuration", fmt.Sprintf("payroll %s, auth %s (realm %s), client id %s, client secret %s, %s",
		doctorRedactURLs(cfg.PayrollURL), doctorRedactURLs(auth), cfg.AuthRealm, cfg.ClientID, secretSet, rt))
}

func (d *doctor) checkListener() {
	const name = "metrics listener"
	if why := d.blocked("listener"); why != "" {
		d.r.skip(name, why)
		return
	}
	addr := d.cfg.HTTPAddr
	if addr == "" {
		d.r.ok(name, "off (PAYSYNC_HTTP_ADDR is empty): paysync run serves no /metrics, /healthz or /readyz")
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		d.r.fail(name, fmt.Sprintf("PAYSYNC_HTTP_ADDR %q is not host:port", addr), "set PAYSYNC_HTTP_ADDR to e.g. 127.0.0.1:9480 (empty: off)")
		return
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		d.r.ok(name, "paysync run serves /metrics, /healthz and /readyz on "+addr+" (loopback)")
		return
	}
	where := host
	if host == "" || (ip != nil && ip.IsUnspecified()) {
		where = "every interface"
	}
	d.r.warn(name, fmt.Sprintf("PAYSYNC_HTTP_ADDR %s is not on loopback: /metrics, /healthz and /readyz are reachable on %s", addr, where),
		"use 127.0.0.1:"+port+" unless other machines are meant to scrape it (then keep it behind a firewall)")
}

// ---- ledger ----

func (d *doctor) checkLedger(ctx context.Context) {
	const name = "ledger"
	path := d.cfg.ledgerPath()
	_, statErr := os.Stat(path)
	existed := statErr == nil
	// openLedger creates the default ledger's directory.
	if err := ledger.CheckPath(path); err != nil && (d.cfg.Ledger != "" || !errors.Is(err, ledger.ErrNoDirectory)) {
		d.ledErr = err
		d.r.fail(name, err.Error(), doctorLedgerFix(err, path))
		return
	}
	l, err := d.cfg.openLedger(ctx)
	if err != nil {
		d.ledErr = err
		d.r.fail(name, err.Error(), doctorLedgerFix(err, path))
		return
	}
	d.led = l
	c := l.Probe(ctx, true)
	switch {
	case c.Level == paysync.CheckFail:
		d.r.fail(name, c.Detail, doctorLedgerFix(c.Err, path))
	case !existed:
		d.r.warn(name, c.Detail+"; it did not exist and was created now (new, empty)",
			"if paysync has run on this machine before, PAYSYNC_LEDGER points at the wrong file: a new ledger does not know what was already sent")
	default:
		d.r.ok(name, c.Detail)
	}
}

func doctorLedgerFix(err error, path string) string {
	switch {
	case errors.Is(err, ledger.ErrCorrupt):
		return "stop paysync, restore the ledger from a backup (or move it away to start a new one, which forgets what was sent)"
	case errors.Is(err, ledger.ErrNewerSchema):
		return "upgrade paysync to the version that wrote the ledger; never downgrade a ledger"
	case errors.Is(err, ledger.ErrLocked):
		return "another paysync process is writing to the ledger: try again when it is idle"
	case errors.Is(err, ledger.ErrNotPrivate):
		return "chmod 600 " + path
	case errors.Is(err, ledger.ErrNoDirectory):
		return "create the directory (mkdir -p " + filepath.Dir(path) + ") or correct PAYSYNC_LEDGER"
	case errors.Is(err, ledger.ErrNotWritable):
		return "let this user write the ledger and its directory (SQLite keeps its journal beside it), or correct PAYSYNC_LEDGER"
	}
	return "check PAYSYNC_LEDGER (" + path + ")"
}

func (d *doctor) checkBatches(ctx context.Context) {
	const name = "ledger batches"
	if d.led == nil {
		d.r.skip(name, "the ledger did not open (see ledger)")
		return
	}
	bl, err := d.led.Backlog(ctx)
	if err != nil {
		d.r.fail(name, err.Error(), doctorLedgerFix(err, d.led.Path()))
		return
	}
	failed, pending, unsettled := bl.Failed, bl.Pending, bl.Unsettled
	if len(failed) > 0 {
		ids := make([]string, 0, len(failed))
		for i, b := range failed {
			if i == 10 {
				ids = append(ids, "…")
				break
			}
			ids = append(ids, fmt.Sprint(b.ID))
		}
		detail := fmt.Sprintf("%s failed: %s", plural(len(failed), "batch", "batches"), strings.Join(ids, ", "))
		if last := failed[0].LastError; last != "" {
			detail += fmt.Sprintf(" (batch %d: %s)", failed[0].ID, last)
		}
		detail += fmt.Sprintf("; %s committed and not yet sent", plural(pending, "pay part", "pay parts"))
		d.r.fail(name, detail, fmt.Sprintf("see why with 'paysync batches --state failed' and 'paysync batches show %d'; once the cause is fixed the next 'paysync run' or import sends them again, or 'paysync revert %d' then 'paysync replay %d' maps their entries with the current rules",
			failed[0].ID, failed[0].ID, failed[0].ID))
		return
	}
	if pending > 0 || unsettled > 0 {
		detail := fmt.Sprintf("no failed batches; %s committed and not yet sent", plural(pending, "pay part", "pay parts"))
		if unsettled > 0 {
			detail += fmt.Sprintf("; %s left sending or reverting (a crash, or a paysync at work)", plural(unsettled, "batch", "batches"))
		}
		d.r.warn(name, detail, "'paysync run' (or the next import, revert or replay) settles and sends them; 'paysync batches --state pending' lists them")
		return
	}
	d.r.ok(name, "no failed batches, no pay parts waiting to be sent")
}

// ---- payroll ----

// connect builds the payroll client with the token store paysync uses
// (so that a rotated refresh token lands where the next run looks).
func (d *doctor) connect(ctx context.Context) {
	cfg := d.cfg
	if d.payrollBlock != "" {
		d.noConn = d.payrollBlock
		return
	}
	pc, err := cfg.payrollConfig(cfg.logger(d.io.err))
	if err != nil {
		d.noConn = "the payroll settings are invalid (see configuration)"
		return
	}
	// The client id and secret can be checked without the token store.
	probe := pc
	probe.Store, probe.RefreshToken = nil, ""
	if pcl, err := payroll.New(probe); err == nil {
		d.client = pcl.Tokens()
	}
	if cfg.TokenFile == "" && d.led == nil {
		d.noConn = "the refresh token is kept in the ledger, which did not open (see ledger)"
		return
	}
	pc.Store = d.tokenStore()
	if st := d.connectionStore(ctx); st != nil { // no token configured: a stored connection's (cmd_connect.go)
		pc.Store = st
	}
	if cfg.SchemaProbe {
		// Read the server's own number types, to compare them with
		// PAYSYNC_WIRE_NUMBERS.
		pc.Schema.Numbers = 0
	}
	cl, err := payroll.New(pc)
	if err != nil {
		d.noConn = "the payroll settings are invalid: " + err.Error()
		return
	}
	d.cl, d.tokens = cl, cl.Tokens()
}

// tokenConnection is the connection whose token the payroll checks use
// (connectionStore), if they use one.
func (d *doctor) tokenConnection(ctx context.Context) (ledger.Connection, bool) {
	if d.connectionStore(ctx) == nil {
		return ledger.Connection{}, false
	}
	c, ok, err := connectionFor(ctx, d.led, d.cfg.CompanyID)
	return c, ok && err == nil
}

func (d *doctor) tokenStore() payroll.TokenStore {
	if d.cfg.TokenFile == "" {
		return ledgerTokens{d.led}
	}
	return fileTokens{&payroll.FileStore{Path: d.cfg.TokenFile}}
}

func (d *doctor) tokenPlace() string {
	if d.cfg.TokenFile == "" {
		return "ledger " + d.led.Path()
	}
	return d.cfg.TokenFile
}

const doctorRevokedFix = "re-connect the payroll account (Danløn: Integrations → connect paysync), set PAYSYNC_REFRESH_TOKEN to the new refresh token, and run paysync doctor again"

func (d *doctor) checkToken(ctx context.Context) {
	const name = "payroll token"
	if d.cl == nil {
		d.r.skip(name, d.noConn)
		return
	}
	c := d.cl.ProbeToken(ctx, payroll.TokenProbe{Place: d.tokenPlace(), Configured: "PAYSYNC_REFRESH_TOKEN"})
	hint := doctorTokenHint(c.Err)
	if conn, ok := d.tokenConnection(ctx); ok { // a connection's token, not a configured one's successor
		label := companyLabel(conn.Companies)
		c.Detail = strings.Replace(c.Detail, "token store (rotated from the configured token)", "the connection of "+label+" (paysync connect)", 1)
		if errors.Is(c.Err, payroll.ErrRevoked) {
			hint = "run paysync connect and choose " + label + ", then run paysync doctor again"
		}
	}
	d.show(name, c.Check, hint)
	if !c.OK() {
		d.cl, d.noConn = nil, doctorNoToken(c.Err)
		return
	}
	d.current = c.Current
}

// doctorTokenHint says what to do about the token probe's failure err.
func doctorTokenHint(err error) string {
	var initial *payroll.InitialTokenError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &initial) && initial.Err == nil: // not sent: another store holds its successor
		return "point PAYSYNC_LEDGER (or PAYSYNC_TOKEN_FILE) at the store named here, or re-connect the payroll account and set PAYSYNC_REFRESH_TOKEN to the new refresh token"
	case errors.As(err, &initial):
		return doctorRevokedFix + "; or, if another ledger or token file used PAYSYNC_REFRESH_TOKEN before, point PAYSYNC_LEDGER (or PAYSYNC_TOKEN_FILE) at it"
	case errors.Is(err, payroll.ErrRevoked):
		return doctorRevokedFix
	case errors.Is(err, payroll.ErrRefresh):
		return doctorRefreshFix
	case errors.Is(err, payroll.ErrTokenStore):
		return "check the token store (PAYSYNC_TOKEN_FILE or the ledger): it must be readable by this user"
	case errors.Is(err, payroll.ErrNoRefreshToken):
		return "connect paysync to the payroll account and set PAYSYNC_REFRESH_TOKEN to the refresh token it gives"
	}
	return doctorRefreshFix
}

const doctorRefreshFix = "check PAYSYNC_AUTH_URL, PAYSYNC_AUTH_REALM, PAYSYNC_CLIENT_ID, PAYSYNC_CLIENT_SECRET and that the auth server is reachable"

// doctorNoToken is why the checks after a failed token probe have no
// payroll connection.
func doctorNoToken(err error) string {
	var initial *payroll.InitialTokenError
	switch {
	case errors.As(err, &initial) && initial.Err == nil:
		return "no refresh token of this store's own (see payroll token)"
	case errors.Is(err, payroll.ErrRevoked):
		return "the connection is revoked (see payroll token)"
	case errors.Is(err, payroll.ErrRefresh): // whatever it wraps
		return "no access token (see payroll token)"
	case errors.Is(err, payroll.ErrTokenStore):
		return "the token store cannot be read (see payroll token)"
	case errors.Is(err, payroll.ErrNoRefreshToken):
		return "no refresh token (see payroll token)"
	}
	return "no access token (see payroll token)"
}

// checkClient checks the client id and secret, also when the connection's
// refresh token cannot be used (payroll.TokenSource.ProbeClient).
func (d *doctor) checkClient(ctx context.Context) {
	const name = "payroll client"
	ts := cmp.Or(d.tokens, d.client)
	if ts == nil {
		why := d.payrollBlock
		if why == "" {
			why = "the payroll settings are invalid (see configuration)"
		}
		d.r.skip(name, why)
		return
	}
	c := ts.ProbeClient(ctx)
	if c.OK() && ts.Refreshes() > 0 {
		c.Detail += " (see payroll token)"
	}
	hint := ""
	switch {
	case errors.Is(c.Err, payroll.ErrClientRejected):
		hint = "set PAYSYNC_CLIENT_ID and PAYSYNC_CLIENT_SECRET to the OAuth2 client id and secret of the paysync integration"
	case c.Level == paysync.CheckWarn:
		hint = "the next refresh shows whether they are right ('paysync auth status' once the access token has expired)"
	case c.Level == paysync.CheckFail:
		hint = "check PAYSYNC_AUTH_URL and PAYSYNC_AUTH_REALM, and that the token endpoint is reachable from here: the next refresh needs it"
	}
	d.show(name, c, hint)
}

func (d *doctor) checkSchema(ctx context.Context) {
	const name = "schema"
	if d.cl == nil {
		d.r.skip(name, "no payroll connection: "+d.noConn)
		return
	}
	cfg := d.cfg
	o := payroll.SchemaProbe{OverridesName: "PAYSYNC_INPUT_TYPE / PAYSYNC_ID_TYPE", WantName: "PAYSYNC_WIRE_NUMBERS=" + cfg.WireNumbers}
	if cfg.WireNumbers != "auto" {
		o.Want, _ = payroll.ParseNumberKind(cfg.WireNumbers)
	}
	c := d.cl.ProbeSchema(ctx, o)
	hint := ""
	switch {
	case errors.Is(c.Err, payroll.ErrSchemaProbe):
		hint = "if the server disables introspection, set PAYSYNC_SCHEMA_PROBE=false and PAYSYNC_WIRE_NUMBERS=float or int"
	case errors.Is(c.Err, payroll.ErrSchemaUnverified):
		hint = "PAYSYNC_SCHEMA_PROBE=false: these are the spec's defaults with PAYSYNC_WIRE_NUMBERS=" + cfg.WireNumbers + ", not verified against the server"
	case errors.Is(c.Err, payroll.ErrWireMismatch):
		hint = "unset PAYSYNC_WIRE_NUMBERS (auto: take the probe's types), or set it to what the server says"
	case c.Level == paysync.CheckOK && strings.Contains(c.Detail, "delete: not offered by this server"):
		c.Level = paysync.CheckWarn // works, but nothing sent can be taken back through the API
		hint = "revert, corrections that replace sent pay parts and revert/replay of a period are refused: delete pay parts by hand in payroll"
	}
	d.show(name, c, hint)
}

// companies returns the names of the visible companies by id, and a
// list "ID (Name)" for messages.
func (d *doctor) companies(ctx context.Context) (map[string]string, []string, error) {
	cs, err := d.cl.Companies(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	names := map[string]string{}
	for _, c := range cs {
		names[c.ID] = c.Name
	}
	return names, doctorCompanyList(cs), nil
}

// doctorCompanyList is "ID (Name)" of each company, for messages.
func doctorCompanyList(cs []paysync.Company) []string {
	var list []string
	for _, c := range cs {
		list = append(list, fmt.Sprintf("%s (%s)", c.ID, c.Name))
	}
	return list
}

func (d *doctor) checkCompany(ctx context.Context) {
	const name = "company"
	if d.cl == nil {
		d.r.skip(name, "no payroll connection: "+d.noConn)
		return
	}
	c := d.cl.ProbeCompany(ctx, payroll.CompanyProbe{ID: d.cfg.CompanyID, IDName: "PAYSYNC_COMPANY_ID", Current: d.current})
	d.current = c.Current
	hint := ""
	switch {
	case errors.Is(c.Err, payroll.ErrNoCurrentCompany):
		hint = "set PAYSYNC_COMPANY_ID, or choose a current company in the payroll system"
	case errors.Is(c.Err, payroll.ErrCompanyNotFound):
		hint = "set PAYSYNC_COMPANY_ID to a company the account can see"
		if len(c.Visible) > 0 {
			hint += ": " + strings.Join(doctorCompanyList(c.Visible), ", ")
		}
	case errors.Is(c.Err, payroll.ErrNoEmployees):
		hint = "set PAYSYNC_COMPANY_ID to the company that pays these people, or add the employees in the payroll system"
	case c.Err != nil:
		hint = "check the payroll connection and PAYSYNC_COMPANY_ID"
	}
	d.show(name, c.Check, hint)
}

// ---- rules ----

// doctorLoadRules loads the rules file as run does.
func doctorLoadRules(path string) (*mapping.Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rules, err := mapping.LoadRules(path, f)
	if err == nil {
		err = mapping.Unconfirmed(rules) // a draft of rules init with guesses left
	}
	return rules, err
}

func (d *doctor) checkRules(ctx context.Context) {
	const name, coName, empName = "rules", "rules company", "rules employees"
	path := d.cfg.Mapping
	rules, err := doctorLoadRules(path)
	if err != nil {
		d.r.fail(name, strings.ReplaceAll(err.Error(), "\n", "; "), "correct the rules file (each problem names its line; deploy/examples/rules.yaml is a commented example)")
		d.r.skip(coName, "the rules file does not load")
		d.r.skip(empName, "the rules file does not load")
		return
	}
	d.rules = rules
	loaded := fmt.Sprintf("%s: %d rules", path, len(rules.Rules))
	if d.cl == nil {
		d.r.warn(name, loaded+" load; pay codes not checked", "no payroll connection: "+d.noConn)
		d.r.skip(coName, "no payroll connection: "+d.noConn)
		d.r.skip(empName, "no payroll connection: "+d.noConn)
		return
	}
	meta, err := d.cl.PayPartsMeta(ctx)
	if err != nil {
		d.r.fail(name, loaded+" load; pay_parts_meta: "+err.Error(), "check the payroll connection")
	} else if probs := mapping.CheckRules(rules, meta); len(probs) > 0 {
		var all, msgs []string
		for _, m := range meta {
			all = append(all, m.Code)
		}
		for _, p := range probs {
			msgs = append(msgs, p.Error())
		}
		d.r.fail(name, strings.Join(msgs, "; "), "use one of the codes of 'paysync meta': "+strings.Join(all, ", "))
	} else {
		d.r.ok(name, fmt.Sprintf("%s load; codes %s all in pay_parts_meta", loaded, strings.Join(rules.Codes(), ", ")))
	}

	// The rules file's company.
	names, list, err := d.companies(ctx)
	if err != nil {
		d.r.fail(coName, "list companies: "+err.Error(), "check the payroll connection")
		d.r.skip(empName, "the companies could not be listed")
		return
	}
	target := d.cfg.CompanyID
	switch {
	case rules.Company == "":
		if target == "" {
			target = d.current
		}
		d.r.ok(coName, fmt.Sprintf("none in the rules file: entries without company_id go to %s (%s)", target, names[target]))
	case names[rules.Company] == "":
		d.r.fail(coName, fmt.Sprintf("%s: company %s is not visible to this payroll account", path, rules.Company),
			"set company: in the rules file to one of "+strings.Join(list, ", "))
		if target == "" {
			d.r.skip(empName, "the rules file's company is not visible")
			return
		}
	case target != "" && target != rules.Company:
		d.r.warn(coName, fmt.Sprintf("%s (%s) is visible, but PAYSYNC_COMPANY_ID=%s overrides it", rules.Company, names[rules.Company], target),
			"unset PAYSYNC_COMPANY_ID if entries without company_id should go to the rules file's company")
	default:
		target = rules.Company
		d.r.ok(coName, fmt.Sprintf("%s (%s) is visible to the account", rules.Company, names[rules.Company]))
	}
	if target == "" {
		target = d.current
	}

	// The employee tables.
	refs := rules.EmployeeRefs()
	if len(refs) == 0 {
		d.r.ok(empName, "no employee tables in the rules file")
		return
	}
	if target == "" {
		d.r.skip(empName, "no company to check them against (set PAYSYNC_COMPANY_ID)")
		return
	}
	co, err := d.cl.Company(ctx, target)
	if err != nil {
		d.r.fail(empName, fmt.Sprintf("employees of %s: %v", target, err), "check the company (see company)")
		return
	}
	if unknown := mapping.CheckEmployees(rules, co.Employees); len(unknown) > 0 {
		var s []string
		for _, u := range unknown {
			s = append(s, u.String())
		}
		d.r.fail(empName, fmt.Sprintf("%s: %s no employee of %s (%s): %s", path, plural(len(unknown), "employee table entry names", "employee table entries name"), co.Name, co.ID, strings.Join(s, "; ")),
			fmt.Sprintf("correct the ids ('paysync employees --company %s' lists the employees)", co.ID))
		return
	}
	ids := map[string]bool{}
	for _, r := range refs {
		ids[r.ID] = true
	}
	d.r.ok(empName, fmt.Sprintf("%d table entries, %d distinct ids, all employees of %s (%s)", len(refs), len(ids), co.Name, co.ID))
}

// ---- NATS ----

// show adds c as the line name, with hint as its fix or note.
func (d *doctor) show(name string, c paysync.Check, hint string) {
	switch c.Level {
	case paysync.CheckOK:
		d.r.ok(name, c.Detail)
	case paysync.CheckWarn:
		d.r.warn(name, c.Detail, hint)
	case paysync.CheckSkipped:
		d.r.skip(name, c.Detail)
	default:
		d.r.fail(name, c.Detail, hint)
	}
}

func (d *doctor) checkNATS(ctx context.Context) {
	const name, stName, coName = "nats", "nats stream", "nats consumer"
	if why := d.blocked("nats"); why != "" {
		for _, n := range []string{name, stName, coName} {
			d.r.skip(n, why)
		}
		return
	}
	scfg := d.cfg.streamConfig(nil)
	scfg.Name = "paysync doctor"
	res := stream.Probe(ctx, scfg)
	d.show(name, res.Conn, doctorNATSHint(res.Conn, res))
	d.show(stName, res.Stream, doctorNATSHint(res.Stream, res))
	d.show(coName, res.Consumer, doctorNATSHint(res.Consumer, res))
}

// doctorNATSHint says what to do about c, one of res's checks.
func doctorNATSHint(c paysync.Check, res stream.ProbeResult) string {
	cfg, err := res.Config, c.Err
	sc := stream.StreamConfig(cfg)
	switch {
	case c.Level == paysync.CheckOK || c.Level == paysync.CheckSkipped:
		return ""
	case errors.Is(err, stream.ErrInvalidConfig):
		return "correct the NATS settings (NATS_*, PAYSYNC_NATS_*)"
	case errors.Is(err, stream.ErrConnect):
		return "check NATS_URL, NATS_CREDS / NATS_NKEY_SEED and NATS_CA / NATS_CERT / NATS_KEY"
	case errors.Is(err, stream.ErrNotConnected):
		return "check NATS_URL, that nats-server runs with JetStream (-js) and is reachable from here, and the credentials and TLS settings"
	case errors.Is(err, stream.ErrNoJetStream):
		return "enable JetStream on the server (nats-server -js) and for the account"
	case errors.Is(err, stream.ErrStreamMissing) && cfg.Bind:
		return fmt.Sprintf("PAYSYNC_NATS_BIND=true is set: create it (%s) or correct PAYSYNC_NATS_STREAM", doctorStreamAdd(sc))
	case errors.Is(err, stream.ErrStreamMissing):
		return fmt.Sprintf("paysync run will create it (subjects %s, %s storage, %s retention, %s duplicate window)",
			strings.Join(sc.Subjects, " "), strings.ToLower(sc.Storage.String()), strings.ToLower(sc.Retention.String()), doctorDuration(sc.Duplicates))
	case errors.Is(err, stream.ErrConsumerMissing) && cfg.Bind:
		return fmt.Sprintf("PAYSYNC_NATS_BIND=true is set: create a durable pull consumer %s with explicit acks on %s, or correct PAYSYNC_NATS_DURABLE", cfg.Durable, cfg.Stream)
	case errors.Is(err, stream.ErrConsumerMissing) && errors.Is(res.Stream.Err, stream.ErrStreamMissing):
		return "paysync run will create it with the stream"
	case errors.Is(err, stream.ErrConsumerMissing):
		return "paysync run will create it"
	case errors.Is(err, stream.ErrDeadLetterCaptured):
		return "set PAYSYNC_NATS_DEAD_LETTER to a subject outside the stream's subjects"
	case errors.Is(err, stream.ErrNoDeadLetterStream):
		dl := stream.DeadLetterStreamConfig(cfg)
		return fmt.Sprintf("create a stream for them (deploy/nats/deadletter.json: %s with subject %s, limits retention), or unset PAYSYNC_NATS_BIND so that paysync run creates it", dl.Name, cfg.DeadLetter)
	case errors.Is(err, stream.ErrNotExplicitAck):
		return "delete the consumer (paysync run re-creates it) or give it explicit acks"
	case errors.Is(err, stream.ErrFiniteMaxDeliver):
		return fmt.Sprintf("give the consumer unlimited deliveries (nats consumer edit %s %s --max-deliver=-1); meanwhile re-drive dead letters with 'paysync deadletters --redrive' once an outage is over", cfg.Stream, cfg.Durable)
	}
	return "check the NATS server and the account's JetStream permissions"
}

// doctorStreamAdd is the nats CLI command that creates sc.
func doctorStreamAdd(sc jetstream.StreamConfig) string {
	retention := map[jetstream.RetentionPolicy]string{jetstream.LimitsPolicy: "limits", jetstream.InterestPolicy: "interest", jetstream.WorkQueuePolicy: "work"}[sc.Retention]
	storage := "file"
	if sc.Storage == jetstream.MemoryStorage {
		storage = "memory"
	}
	return fmt.Sprintf("nats stream add %s --subjects '%s' --storage %s --retention %s --dupe-window %s", sc.Name, strings.Join(sc.Subjects, " "), storage, retention, doctorDuration(sc.Duplicates))
}

// doctorDuration is d without zero trailing units ("2m", not "2m0s").
func doctorDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// doctorRedactURLs hides user:password (or a token) in URLs.
func doctorRedactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if at := strings.LastIndex(p, "@"); at >= 0 {
			scheme := ""
			if j := strings.Index(p, "://"); j >= 0 && j < at {
				scheme = p[:j+3]
			}
			p = scheme + "***" + p[at:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// ---- inbox ----

func (d *doctor) checkInbox() {
	c := inbox.Probe(inbox.Config{Dir: d.cfg.Inbox, Schedule: d.cfg.Schedule})
	d.show("inbox", c, d.inboxHint(c.Err))
}

// inboxHint says what to do about the inbox's problem err.
func (d *doctor) inboxHint(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, inbox.ErrBadSchedule) {
		return "correct PAYSYNC_SCHEDULE (e.g. '@every 1m', '0 6 * * 1-5', 'CRON_TZ=Europe/Copenhagen 0 6 * * *')"
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return "let this user read the folder, or correct PAYSYNC_INBOX"
	}
	top, _ := filepath.Abs(d.cfg.Inbox)
	p := pe.Path
	switch {
	case errors.Is(err, inbox.ErrNoFolder):
		return fmt.Sprintf("create it (mkdir -p %s) or correct PAYSYNC_INBOX; paysync run does not create it", p)
	case errors.Is(err, inbox.ErrNotFolder) && p == top:
		return "point PAYSYNC_INBOX at a folder"
	case errors.Is(err, inbox.ErrNotFolder):
		return "move it away: paysync keeps " + filepath.Base(p) + " files in a real directory inside the inbox"
	case errors.Is(err, inbox.ErrNotWritable) && p == top:
		return "let the paysync user create files there (it moves files to processed/ and failed/ and writes reports)"
	case errors.Is(err, inbox.ErrNotWritable):
		return "let the paysync user create files in " + p
	}
	return "let the paysync user use " + p
}
