package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
	"github.com/robfig/cron/v3"
	"github.com/sethvargo/go-envconfig"
)

// secret is a configuration value that must never be printed.
type secret string

func (s *secret) EnvDecode(v string) error { *s = secret(v); return nil }
func (s secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}
func (s secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// config is paysync's configuration: defaults, then the environment, then
// flags. Only this package reads the environment.
type config struct {
	PayrollURL   string        `env:"PAYSYNC_PAYROLL_URL"`
	AuthURL      string        `env:"PAYSYNC_AUTH_URL"`
	AuthRealm    string        `env:"PAYSYNC_AUTH_REALM, default=danlon"`
	ClientID     string        `env:"PAYSYNC_CLIENT_ID"`
	ClientSecret secret        `env:"PAYSYNC_CLIENT_SECRET"`
	RefreshToken secret        `env:"PAYSYNC_REFRESH_TOKEN"`
	CompanyID    string        `env:"PAYSYNC_COMPANY_ID"`
	TokenFile    string        `env:"PAYSYNC_TOKEN_FILE"`
	HTTPTimeout  time.Duration `env:"PAYSYNC_HTTP_TIMEOUT, default=30s"`
	CAFile       string        `env:"PAYSYNC_CA_FILE"`
	SchemaProbe  bool          `env:"PAYSYNC_SCHEMA_PROBE, default=true"`
	WireNumbers  string        `env:"PAYSYNC_WIRE_NUMBERS, default=auto"`
	WireIntScale int32         `env:"PAYSYNC_WIRE_INT_SCALE, default=2"`
	InputType    string        `env:"PAYSYNC_INPUT_TYPE"`
	APIDialect   string        `env:"PAYSYNC_API_DIALECT"` // snake or camel; "" : the probe decides (without it: snake)
	IDType       string        `env:"PAYSYNC_ID_TYPE"`
	LogLevel     string        `env:"PAYSYNC_LOG_LEVEL, default=info"`
	Mapping      string        `env:"PAYSYNC_MAPPING"`
	Ledger       string        `env:"PAYSYNC_LEDGER"`
	BatchSize    int           `env:"PAYSYNC_BATCH_SIZE, default=100"`
	// StartupTimeout bounds how long a command (import, replay, run
	// --once) waits for payroll's start-up reads through transient
	// failures; the daemon waits as long as it takes.
	StartupTimeout time.Duration `env:"PAYSYNC_STARTUP_TIMEOUT, default=1m"`

	// Employee fields read beside id and name ("none": not read), for
	// servers without introspection; default from the probe.
	EmployeeNumberField string `env:"PAYSYNC_EMPLOYEE_NUMBER_FIELD"`
	EmployeeEmailField  string `env:"PAYSYNC_EMPLOYEE_EMAIL_FIELD"`

	// The daemon (paysync run).
	Inbox      string `env:"PAYSYNC_INBOX"`
	Schedule   string `env:"PAYSYNC_SCHEDULE, default=@every 1m"`
	FilePolicy string `env:"PAYSYNC_FILE_POLICY, default=all-or-nothing"`
	// Period makes each inbox file the complete statement of its source's
	// entries for a period: a fixed one (2026-11, 2026-W45, a day range)
	// or each row's month or week ("month", "week").
	Period string `env:"PAYSYNC_PERIOD"`
	// Reader settings, the same for import, the inbox, publish and the NATS
	// consumer: flags override them, and they override the rules file's
	// read: block (mapping.EffectiveReadOptions). Empty: not set here.
	DateFormat   string `env:"PAYSYNC_DATE_FORMAT"`
	DecimalComma string `env:"PAYSYNC_DECIMAL_COMMA"` // true or false
	Delimiter    string `env:"PAYSYNC_DELIMITER"`
	Encoding     string `env:"PAYSYNC_ENCODING"`
	TimeZone     string `env:"PAYSYNC_TIME_ZONE"`
	// Send is when streamed entries become pay parts: immediate (as
	// batches seal) or cutoff (held, and planned per period at the
	// PAYSYNC_CUTOFF schedule).
	Send        string        `env:"PAYSYNC_SEND, default=immediate"`
	Cutoff      string        `env:"PAYSYNC_CUTOFF"`
	BatchLinger time.Duration `env:"PAYSYNC_BATCH_LINGER, default=2s"`
	RateLimit   float64       `env:"PAYSYNC_RATE_LIMIT, default=20"`
	InFlight    int           `env:"PAYSYNC_IN_FLIGHT, default=4"`
	HTTPAddr    string        `env:"PAYSYNC_HTTP_ADDR, default=127.0.0.1:9480"`

	// The operator console (paysync run, paysync console): off when the
	// address is empty. The password comes from the environment only: a
	// flag would show in ps and shell history.
	ConsoleAddr     string        `env:"PAYSYNC_CONSOLE_ADDR, default=127.0.0.1:8081"`
	ConsolePassword secret        `env:"PAYSYNC_CONSOLE_PASSWORD"`
	ConsoleTLSCert  string        `env:"PAYSYNC_CONSOLE_TLS_CERT"`
	ConsoleTLSKey   string        `env:"PAYSYNC_CONSOLE_TLS_KEY"`
	ShutdownGrace   time.Duration `env:"PAYSYNC_SHUTDOWN_GRACE, default=30s"`
	PProf           bool          `env:"PAYSYNC_PPROF, default=false"`
	NATSURL         string        `env:"NATS_URL"`
	NATSCreds       string        `env:"NATS_CREDS"`
	NATSNKey        string        `env:"NATS_NKEY_SEED"`
	NATSCA          string        `env:"NATS_CA"`
	NATSCert        string        `env:"NATS_CERT"`
	NATSKey         string        `env:"NATS_KEY"`
	NATSStream      string        `env:"PAYSYNC_NATS_STREAM, default=TIMESHEETS"`
	NATSSubject     string        `env:"PAYSYNC_NATS_SUBJECT, default=timesheets.>"`
	NATSDurable     string        `env:"PAYSYNC_NATS_DURABLE, default=paysync"`
	NATSDeadLetter  string        `env:"PAYSYNC_NATS_DEAD_LETTER, default=paysync.deadletter"`
	NATSBind        bool          `env:"PAYSYNC_NATS_BIND, default=false"`
	NATSAckWait     time.Duration `env:"PAYSYNC_NATS_ACK_WAIT, default=30s"`
	NATSFilter      string        `env:"PAYSYNC_NATS_FILTER"`

	// MarketplaceURL is where `paysync connect` sends the browser to
	// choose the company (select-company) and trades its code (code2token).
	MarketplaceURL string `env:"PAYSYNC_MARKETPLACE_URL, default=https://danlon.lessor.dk"`

	onCall func(op string, class payroll.Class, status int, d time.Duration) // metrics hook, set by run

}

// loadConfig reads the environment. Errors name the variable.
func loadConfig(ctx context.Context, env lookupEnv) (config, error) {
	var c config
	err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &c, Lookuper: lookuper(env)})
	if err != nil {
		name, msg := cleanEnvErr(err)
		return c, varErrorf(name, "config: %s", msg)
	}
	return c, nil
}

// varError is a configuration error of one environment variable (Var; ""
// when it names none): a usage error whose variable callers such as
// doctor read without parsing the message.
type varError struct {
	Var string
	err *usageError
}

func (e *varError) Error() string { return e.err.Error() }
func (e *varError) Unwrap() error { return e.err }

func varErrorf(name, format string, a ...any) error {
	return &varError{Var: name, err: &usageError{fmt.Sprintf(format, a...)}}
}

type lookuper lookupEnv

func (l lookuper) Lookup(key string) (string, bool) { return l(key) }

// cleanEnvErr puts envconfig's message on one line, naming the environment
// variable instead of the Go field, and returns the variable ("" if none).
func cleanEnvErr(err error) (name, msg string) {
	msg = oneLine(err.Error())
	t := reflect.TypeOf(config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name != "" && strings.HasPrefix(msg, f.Name+":") {
			return name, name + msg[len(f.Name):]
		}
	}
	return "", msg
}

// apiFlags registers the flags shared by commands that talk to the payroll
// API. Secrets have no flags: command lines are visible to other users.
func (c *config) apiFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PayrollURL, "payroll-url", c.PayrollURL, "payroll API base URL; GraphQL at {url}/graphql (PAYSYNC_PAYROLL_URL)")
	fs.StringVar(&c.AuthURL, "auth-url", c.AuthURL, "OAuth2 server base URL (PAYSYNC_AUTH_URL; default: the payroll URL)")
	fs.StringVar(&c.AuthRealm, "realm", c.AuthRealm, "OAuth2 realm (PAYSYNC_AUTH_REALM)")
	fs.StringVar(&c.ClientID, "client-id", c.ClientID, "OAuth2 client id (PAYSYNC_CLIENT_ID)")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file keeping the rotated refresh token, mode 0600 (PAYSYNC_TOKEN_FILE)")
	fs.DurationVar(&c.HTTPTimeout, "timeout", c.HTTPTimeout, "timeout of one API request (PAYSYNC_HTTP_TIMEOUT)")
	fs.StringVar(&c.Ledger, "ledger", c.Ledger, "ledger file (PAYSYNC_LEDGER; default $XDG_STATE_HOME/paysync/ledger.db)")
	fs.StringVar(&c.WireNumbers, "wire-numbers", c.WireNumbers, "units/rate/amount on the wire: auto (introspect), float or int (PAYSYNC_WIRE_NUMBERS)")
}

// validate checks the settings needed to reach the payroll API.
func (c *config) validate() error {
	if c.PayrollURL == "" {
		return varErrorf("PAYSYNC_PAYROLL_URL", "config: PAYSYNC_PAYROLL_URL is not set (the payroll API base URL; GraphQL is at {url}/graphql; 'paysync sandbox' prints one to try)")
	}
	if err := checkURL(c.PayrollURL); err != nil {
		return varErrorf("PAYSYNC_PAYROLL_URL", "config: PAYSYNC_PAYROLL_URL: %v", err)
	}
	if c.AuthURL != "" {
		if err := checkURL(c.AuthURL); err != nil {
			return varErrorf("PAYSYNC_AUTH_URL", "config: PAYSYNC_AUTH_URL: %v", err)
		}
	}
	if c.AuthRealm == "" || strings.ContainsAny(c.AuthRealm, "/?# ") {
		return varErrorf("PAYSYNC_AUTH_REALM", "config: PAYSYNC_AUTH_REALM: %q is not a realm name", c.AuthRealm)
	}
	if c.ClientID == "" {
		return varErrorf("PAYSYNC_CLIENT_ID", "config: PAYSYNC_CLIENT_ID is not set (the OAuth2 client id of the paysync integration)")
	}
	if c.HTTPTimeout <= 0 {
		return varErrorf("PAYSYNC_HTTP_TIMEOUT", "config: PAYSYNC_HTTP_TIMEOUT: must be positive, got %s", c.HTTPTimeout)
	}
	if c.StartupTimeout <= 0 {
		return varErrorf("PAYSYNC_STARTUP_TIMEOUT", "config: PAYSYNC_STARTUP_TIMEOUT: must be positive, got %s", c.StartupTimeout)
	}
	switch c.WireNumbers {
	case "auto", "float", "int":
	default:
		return varErrorf("PAYSYNC_WIRE_NUMBERS", "config: PAYSYNC_WIRE_NUMBERS: %q is not auto, float or int", c.WireNumbers)
	}
	if _, err := payroll.ParseDialect(c.APIDialect); err != nil {
		return varErrorf("PAYSYNC_API_DIALECT", "config: PAYSYNC_API_DIALECT: %q is not snake or camel", c.APIDialect)
	}
	if !c.SchemaProbe && c.WireNumbers == "auto" {
		return varErrorf("PAYSYNC_SCHEMA_PROBE", "config: PAYSYNC_SCHEMA_PROBE=false needs PAYSYNC_WIRE_NUMBERS=float or int (without introspection paysync cannot tell)")
	}
	if c.BatchSize < 1 || c.BatchSize > 1000 {
		return varErrorf("PAYSYNC_BATCH_SIZE", "config: PAYSYNC_BATCH_SIZE: %d is outside 1..1000", c.BatchSize)
	}
	if c.WireIntScale < 0 || c.WireIntScale > 6 {
		return varErrorf("PAYSYNC_WIRE_INT_SCALE", "config: PAYSYNC_WIRE_INT_SCALE: %d is outside 0..6", c.WireIntScale)
	}
	for _, f := range []struct{ env, v string }{{"PAYSYNC_EMPLOYEE_NUMBER_FIELD", c.EmployeeNumberField}, {"PAYSYNC_EMPLOYEE_EMAIL_FIELD", c.EmployeeEmailField}} {
		if err := payroll.CheckFieldOverride(f.v); err != nil {
			return varErrorf(f.env, "config: %s: %v", f.env, err)
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return varErrorf("PAYSYNC_LOG_LEVEL", "config: PAYSYNC_LOG_LEVEL: %v", err)
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

func (c *config) tokenFile() string {
	if c.TokenFile != "" {
		return c.TokenFile
	}
	return payroll.DefaultTokenPath()
}

// payrollConfig turns the settings into a payroll client configuration.
func (c *config) payrollConfig(log *slog.Logger) (payroll.Config, error) {
	pc := payroll.Config{
		URL:          c.PayrollURL,
		AuthURL:      c.AuthURL,
		Realm:        c.AuthRealm,
		ClientID:     c.ClientID,
		ClientSecret: string(c.ClientSecret),
		RefreshToken: string(c.RefreshToken),
		Store:        &payroll.FileStore{Path: c.tokenFile()}, // replaced by the ledger's store in apiSetup unless PAYSYNC_TOKEN_FILE is set
		Timeout:      c.HTTPTimeout,
		Logger:       log,
		Schema: payroll.SchemaOverrides{
			NoProbe:   !c.SchemaProbe,
			IntScale:  c.WireIntScale,
			InputType: c.InputType,
			IDType:    c.IDType,
			Dialect:   mustDialect(c.APIDialect), // checked by validate

			EmployeeNumberField: c.EmployeeNumberField,
			EmployeeEmailField:  c.EmployeeEmailField,
		},
	}
	if c.WireNumbers != "auto" {
		k, err := payroll.ParseNumberKind(c.WireNumbers)
		if err != nil {
			return pc, varErrorf("PAYSYNC_WIRE_NUMBERS", "config: PAYSYNC_WIRE_NUMBERS: %v", err)
		}
		pc.Schema.Numbers = k
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return pc, varErrorf("PAYSYNC_CA_FILE", "config: PAYSYNC_CA_FILE: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return pc, varErrorf("PAYSYNC_CA_FILE", "config: PAYSYNC_CA_FILE: %s holds no PEM certificate", c.CAFile)
		}
		pc.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return pc, nil
}

// validateRun checks what only `paysync run` needs.
func (c *config) validateRun() error {
	if c.Inbox == "" && c.NATSURL == "" {
		return usagef("run: nothing to run: set PAYSYNC_INBOX (a folder) and/or NATS_URL")
	}
	if c.FilePolicy != "all-or-nothing" && c.FilePolicy != "partial" {
		return usagef("config: PAYSYNC_FILE_POLICY: %q is not all-or-nothing or partial", c.FilePolicy)
	}
	if _, err := c.inboxStatement(); err != nil {
		return err
	}
	if _, err := c.cutoffSchedule(); err != nil {
		return err
	}
	if c.BatchLinger < 0 || c.RateLimit <= 0 || c.ShutdownGrace <= 0 || c.InFlight < 1 {
		return usagef("config: PAYSYNC_BATCH_LINGER, PAYSYNC_RATE_LIMIT, PAYSYNC_IN_FLIGHT and PAYSYNC_SHUTDOWN_GRACE must be positive")
	}
	return nil
}

// inboxStatement is PAYSYNC_PERIOD as the inbox's period statement (nil:
// files are not statements).
func (c *config) inboxStatement() (*worker.PeriodStatement, error) {
	if c.Period == "" {
		return nil, nil
	}
	if k, err := paysync.ParsePeriodKind(c.Period); err == nil {
		return &worker.PeriodStatement{Kind: k}, nil
	}
	p, err := paysync.ParsePeriod(c.Period)
	if err != nil {
		return nil, usagef("config: PAYSYNC_PERIOD: %v, or month or week (each row's)", err)
	}
	return &worker.PeriodStatement{Period: p}, nil
}

// readFlags registers the reader settings' flags on fs, overriding
// PAYSYNC_DATE_FORMAT, PAYSYNC_DECIMAL_COMMA, PAYSYNC_DELIMITER,
// PAYSYNC_ENCODING and PAYSYNC_TIME_ZONE.
func (c *config) readFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Delimiter, "delimiter", c.Delimiter, "CSV delimiter (PAYSYNC_DELIMITER, rules read.delimiter; default: detect from the header)")
	fs.Var(boolText{&c.DecimalComma}, "decimal-comma", "numbers use a decimal comma, 7,5 (PAYSYNC_DECIMAL_COMMA, rules read.decimal_comma)")
	fs.StringVar(&c.DateFormat, "date-format", c.DateFormat, "date format of CSV files, e.g. DD/MM/YYYY (PAYSYNC_DATE_FORMAT, rules read.date_format; default YYYY-MM-DD)")
	fs.StringVar(&c.Encoding, "encoding", c.Encoding, "text encoding: auto, utf-8, windows-1252 or iso-8859-1 (PAYSYNC_ENCODING, rules read.encoding; default auto)")
	fs.StringVar(&c.TimeZone, "time-zone", c.TimeZone, "IANA time zone deciding the date of timestamps with an offset, e.g. Europe/Copenhagen (PAYSYNC_TIME_ZONE, rules read.time_zone; default UTC)")
}

// boolText is a boolean flag kept as text, so that "not given" stays
// apart from false: the rules file's read: block decides then.
type boolText struct{ p *string }

func (b boolText) String() string {
	if b.p == nil {
		return ""
	}
	return *b.p
}

func (b boolText) Set(v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*b.p = v
	return nil
}

func (b boolText) IsBoolFlag() bool { return true }

// readSettings are the reader settings of flags and environment.
func (c *config) readSettings() (mapping.ReadSettings, error) {
	s := mapping.ReadSettings{DateFormat: c.DateFormat, Delimiter: c.Delimiter, Encoding: c.Encoding, TimeZone: c.TimeZone}
	if c.DecimalComma != "" {
		on, err := strconv.ParseBool(c.DecimalComma)
		if err != nil {
			return s, varErrorf("PAYSYNC_DECIMAL_COMMA", "config: PAYSYNC_DECIMAL_COMMA: %q is not true or false", c.DecimalComma)
		}
		s.DecimalComma = &on
	}
	return s, nil
}

// readOptions are the effective reader settings for format ("" detects
// it): flags over variables over the rules file's read: block, by the
// one function every path uses (mapping.EffectiveReadOptions).
func (c *config) readOptions(format string, rules *mapping.Rules) (mapping.ReadOptions, error) {
	if format != "" && !slices.Contains(mapping.Formats, mapping.Format(format)) {
		return mapping.ReadOptions{}, usagef("--format %q: want one of json, ndjson, csv, toggl, clockify, harvest", format)
	}
	s, err := c.readSettings()
	if err != nil {
		return mapping.ReadOptions{}, err
	}
	o, err := mapping.EffectiveReadOptions(mapping.Format(format), s, rules)
	if err != nil {
		return o, usagef("config: %v", err)
	}
	return o, nil
}

// cutoffSchedule is PAYSYNC_CUTOFF when PAYSYNC_SEND is cutoff (nil:
// immediate).
func (c *config) cutoffSchedule() (worker.Schedule, error) {
	switch c.Send {
	case "immediate":
		return nil, nil
	case "cutoff":
	default:
		return nil, usagef("config: PAYSYNC_SEND: %q is not immediate or cutoff", c.Send)
	}
	if c.Cutoff == "" {
		return nil, usagef("config: PAYSYNC_SEND=cutoff needs PAYSYNC_CUTOFF, a cron schedule such as \"0 18 * * *\" (before the payroll run)")
	}
	s, err := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(c.Cutoff)
	if err != nil {
		return nil, usagef("config: PAYSYNC_CUTOFF: %v", err)
	}
	return s, nil
}

// streamConfig is the NATS source of `paysync run`.
func (c *config) streamConfig(log *slog.Logger) stream.Config {
	return stream.Config{URL: c.NATSURL, CredsFile: c.NATSCreds, NKeySeedFile: c.NATSNKey, CAFile: c.NATSCA, CertFile: c.NATSCert, KeyFile: c.NATSKey,
		Stream: c.NATSStream, Subjects: []string{c.NATSSubject}, Durable: c.NATSDurable, DeadLetter: c.NATSDeadLetter, Bind: c.NATSBind, Logger: log,
		AckWait: c.NATSAckWait, Filter: c.NATSFilter}
}

// switchableLogger is logger with its level in a variable (SIGUSR2).
func (c *config) switchableLogger(w interface{ Write([]byte) (int, error) }) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	l, _ := parseLevel(c.LogLevel)
	level.Set(l)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText})), level
}

// logger returns a JSON logger on w at the configured level.
func (c *config) logger(w interface{ Write([]byte) (int, error) }) *slog.Logger {
	l, _ := parseLevel(c.LogLevel)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: durationsAsText}))
}

// session is what a command that talks to the payroll API holds: the
// configuration, the client, and (unless PAYSYNC_TOKEN_FILE keeps the token
// in a file) the ledger that stores the rotated refresh token.
type session struct {
	cfg    *config
	cl     *payroll.Client
	led    *ledger.Ledger // nil when not opened
	unlock func()
}

func (s *session) Close() {
	if s.led != nil {
		s.led.Close()
	}
	if s.unlock != nil {
		s.unlock()
	}
}

// lockWork makes this process the only one sending, reverting or
// replaying through the ledger.
func (s *session) lockWork(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	unlock, err := payroll.LockFile(lctx, s.led.Path()+".work-lock")
	if err != nil {
		return fmt.Errorf("ledger %s is in use by another paysync process (import, revert, replay or run): wait for it to finish", s.led.Path())
	}
	s.unlock = unlock
	return nil
}

// tokenStore returns the store of the rotated refresh token.
func (s *session) tokenStore() payroll.TokenStore {
	if s.led != nil && s.cfg.TokenFile == "" {
		return ledgerTokens{s.led}
	}
	return fileTokens{&payroll.FileStore{Path: s.cfg.tokenFile()}}
}

// apiSetup loads the configuration, parses the command's flags (after
// registering extra ones via more), opens the ledger when the token lives
// there or needLedger, and returns a payroll client. Close the session.
func apiSetup(ctx context.Context, name, synopsis string, args []string, io stdio, env lookupEnv, more func(fs *flag.FlagSet)) (*session, error) {
	return apiSetupLedger(ctx, name, synopsis, args, io, env, false, more)
}

func apiSetupLedger(ctx context.Context, name, synopsis string, args []string, io stdio, env lookupEnv, needLedger bool, more func(fs *flag.FlagSet)) (*session, error) {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return nil, err
	}
	fs := newFlagSet(name, synopsis, io)
	cfg.apiFlags(fs)
	if more != nil {
		more(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return cfg.connect(ctx, io, needLedger)
}

// connect validates the configuration and builds the session.
func (cfg *config) connect(ctx context.Context, io stdio, needLedger bool) (*session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pc, err := cfg.payrollConfig(cfg.logger(io.err))
	if err != nil {
		return nil, err
	}
	s := &session{cfg: cfg}
	if needLedger || cfg.TokenFile == "" {
		if s.led, err = cfg.openLedger(ctx); err != nil {
			return nil, err
		}
	}
	if needLedger {
		if err := s.lockWork(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	pc.Store = s.tokenStore()
	pc.OnCall = cfg.onCall
	if s.cl, err = payroll.New(pc); err != nil {
		s.Close()
		return nil, usagef("config: %v", err)
	}
	if err := s.useConnection(ctx, cfg.CompanyID, pc.Logger); err != nil { // no token configured: a stored connection (cmd_connect.go)
		s.Close()
		return nil, err
	}
	return s, nil
}

// mustDialect is PAYSYNC_API_DIALECT, already checked.
func mustDialect(s string) payroll.Dialect {
	d, _ := payroll.ParseDialect(s)
	return d
}
