package main

// `paysync connect`, `connections` and `disconnect`: the partner connect
// flow for an operator, and the payroll connections it stores in the
// ledger, one per company chosen (payroll-api-facts §5). The daemon sends
// each company's pay parts through its own connection (payroll.Router);
// see the README, "Connect a real payroll account".

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
)

// connectionTokens keeps a connection's rotating refresh token in the
// ledger's credentials table (under the connection's name); its refreshes
// are serialized across processes by a lock file of its own.
type connectionTokens struct {
	l    *ledger.Ledger
	cred string
}

var _ payroll.TokenStore = connectionTokens{}
var _ payroll.Locker = connectionTokens{}

func (t connectionTokens) Load(ctx context.Context) (payroll.StoredToken, error) {
	rt, seed, at, err := t.l.Credentials(ctx, t.cred)
	if errors.Is(err, ledger.ErrNoCredentials) {
		return payroll.StoredToken{}, payroll.ErrNoStoredToken
	}
	if err != nil {
		return payroll.StoredToken{}, err
	}
	st := payroll.StoredToken{RefreshToken: rt, Seed: seed, UpdatedAt: at}
	if st.AccessToken, st.Issued, st.Expiry, err = t.l.AccessToken(ctx, t.cred); err != nil {
		return payroll.StoredToken{}, err
	}
	return st, nil
}

func (t connectionTokens) Save(ctx context.Context, st payroll.StoredToken) error {
	return t.l.SaveConnectionToken(ctx, t.cred, st.RefreshToken, st.AccessToken, st.Issued, st.Expiry)
}

func (t connectionTokens) Lock(ctx context.Context) (func(), error) {
	return payroll.LockFile(ctx, t.l.Path()+".token-lock-"+t.cred)
}

// memoryTokens is the token store of the final tokens before they are
// stored: connect reads the companies with them, and stores what it holds
// then (a refresh meanwhile may have rotated the refresh token).
type memoryTokens struct {
	mu sync.Mutex
	st payroll.StoredToken
}

func (m *memoryTokens) Load(context.Context) (payroll.StoredToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st, nil
}

func (m *memoryTokens) Save(_ context.Context, st payroll.StoredToken) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = st
	return nil
}

// connectConfig is the connect flow's configuration.
func (c *config) connectConfig() payroll.ConnectConfig {
	auth := c.AuthURL
	if auth == "" {
		auth = c.PayrollURL
	}
	return payroll.ConnectConfig{AuthURL: auth, Realm: c.AuthRealm, ClientID: c.ClientID, ClientSecret: string(c.ClientSecret),
		Marketplace: c.MarketplaceURL, HTTPClient: &http.Client{Timeout: c.HTTPTimeout}}
}

// connectionClient returns a client whose token source is store.
func (c *config) connectionClient(store payroll.TokenStore, log *slog.Logger) (*payroll.Client, error) {
	pc, err := c.payrollConfig(log)
	if err != nil {
		return nil, err
	}
	pc.RefreshToken, pc.Store, pc.OnCall = "", store, c.onCall
	return payroll.New(pc)
}

// defaultToken reports whether a refresh token is configured
// (PAYSYNC_REFRESH_TOKEN) or stored by `paysync auth` (the single-token
// setup): it then serves every company no connection serves.
func (s *session) defaultToken(ctx context.Context) bool {
	if s.cfg.RefreshToken != "" {
		return true
	}
	st, err := s.tokenStore().Load(ctx)
	return err == nil && st.RefreshToken != ""
}

// connectionFor returns the stored connection serving company, else (for
// company "") the oldest one; ok is false when there is none.
func connectionFor(ctx context.Context, l *ledger.Ledger, company string) (ledger.Connection, bool, error) {
	cs, err := l.Connections(ctx)
	if err != nil || len(cs) == 0 {
		return ledger.Connection{}, false, err
	}
	if company == "" {
		return cs[0], true, nil
	}
	for _, c := range cs {
		if c.Serves(company) {
			return c, true, nil
		}
	}
	return ledger.Connection{}, false, nil
}

// useConnection makes the session's client the connection of company
// (PAYSYNC_COMPANY_ID or --company; "": the oldest connection) when no
// refresh token is configured or stored: commands then work with the
// connection `paysync connect` stored, no PAYSYNC_REFRESH_TOKEN needed.
func (s *session) useConnection(ctx context.Context, company string, log *slog.Logger) error {
	if s.led == nil || s.defaultToken(ctx) {
		return nil
	}
	c, ok, err := connectionFor(ctx, s.led, company)
	if err != nil || !ok {
		return err
	}
	cl, err := s.cfg.connectionClient(connectionTokens{s.led, c.Credential}, log)
	if err != nil {
		return usagef("config: %v", err)
	}
	s.cl = cl
	return nil
}

// connectionRouter returns the router of the daemon when the ledger holds
// connections (nil otherwise: the single-token setup, unchanged). The
// configured or stored refresh token, when there is one, serves the
// companies no connection serves; each connection's state changes are
// recorded in the ledger and logged.
func (s *session) connectionRouter(ctx context.Context, log *slog.Logger) (*payroll.Router, error) {
	if s.led == nil {
		return nil, nil
	}
	cs, err := s.led.Connections(ctx)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	rc := payroll.RouterConfig{
		Load: func(ctx context.Context) ([]payroll.RouteInfo, error) {
			cs, err := s.led.Connections(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]payroll.RouteInfo, len(cs))
			for i, c := range cs {
				out[i] = payroll.RouteInfo{ID: c.Credential, Key: c.CreatedAt.Format(time.RFC3339Nano), State: payroll.ConnState(c.State)}
				for _, cc := range c.Companies {
					out[i].Companies = append(out[i].Companies, cc.ID)
				}
			}
			return out, nil
		},
		Client: func(cred string) (*payroll.Client, error) {
			return s.cfg.connectionClient(connectionTokens{s.led, cred}, log)
		},
		OnState: func(cred string, st payroll.ConnState, reason string) {
			args := []any{"connection", cred, "state", string(st), "reason", reason}
			if st == payroll.ConnActive {
				log.Info("payroll connection works again", args...)
			} else {
				log.Error("payroll connection "+string(st)+": its companies wait; run paysync connect for them", args...)
			}
			cs, err := s.led.Connections(context.Background())
			if err != nil {
				return
			}
			for _, c := range cs {
				if c.Credential == cred {
					_ = s.led.SetConnectionState(context.Background(), c.ID, string(st), reason)
				}
			}
		},
	}
	if s.defaultToken(ctx) {
		rc.Default = s.cl
	}
	return payroll.NewRouter(ctx, rc)
}

// ---- paysync connect ----

func runConnect(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	timeout, noBrowser := 10*time.Minute, false
	fs := newFlagSet("connect", "connect [--timeout 10m] [--no-browser]", io)
	fs.DurationVar(&timeout, "timeout", timeout, "give up (exit 1, nothing stored) when the flow is not done by then")
	fs.BoolVar(&noBrowser, "no-browser", false, "only print the authorization URL; do not try to open a browser")
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "ledger file the connection is stored in (PAYSYNC_LEDGER)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if timeout <= 0 {
		return usagef("connect: --timeout must be positive")
	}
	led, err := cfg.openLedger(ctx) // opened first: a flow whose token cannot be stored is not started
	if err != nil {
		return err
	}
	defer led.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("connect: listen on loopback: %w", err)
	}
	f := &connectFlow{cfg: &cfg, cc: cfg.connectConfig(), led: led, state: randomState(), done: make(chan error, 1),
		base: "http://" + ln.Addr().String(), log: cfg.logger(io.err)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", f.callback)
	mux.HandleFunc("GET /selected/{state}", f.selected)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // the browser gets its last page
	}()

	authURL := f.cc.AuthCodeURL(f.base+"/callback", f.state)
	fmt.Fprintln(io.err, "paysync: open this URL in a browser, log in to payroll and choose the company to connect:")
	fmt.Fprintln(io.out, authURL)
	if !noBrowser {
		openBrowser(authURL)
	}
	fmt.Fprintf(io.err, "paysync: waiting for the browser on %s (up to %s)\n", f.base, timeout)

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case err := <-f.done:
		if err != nil {
			return fmt.Errorf("connect: %w; nothing stored", err)
		}
	case <-wctx.Done():
		if ctx.Err() != nil {
			return fmt.Errorf("connect: interrupted; nothing stored")
		}
		return fmt.Errorf("connect: no answer from the browser within --timeout %s; nothing stored", timeout)
	}
	fmt.Fprintf(io.out, "connected %s; fingerprint %s\n", f.connected, f.fingerprint)
	return nil
}

// connectFlow is one run of the connect flow's loopback side.
type connectFlow struct {
	cfg   *config
	cc    payroll.ConnectConfig
	led   *ledger.Ledger
	state string
	base  string
	log   *slog.Logger
	done  chan error // the flow's end: nil once the connection is stored
	once  sync.Once

	mu                  sync.Mutex
	called, wasSelected bool // the step's first valid hit claimed it

	connected, fingerprint string
}

func (f *connectFlow) finish(err error) { f.once.Do(func() { f.done <- err }) }

// claim reports whether this hit is the first to claim the step: a browser
// may hit the callback again (a reload, a prefetch, a double click) while
// the flow goes on, and the authorization and select-company codes are
// single-use: a later hit must not end the flow.
func (f *connectFlow) claim(step *bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *step {
		return false
	}
	*step = true
	return true
}

// inProgress answers a step's later hits.
func inProgress(w http.ResponseWriter) {
	page(w, http.StatusConflict, "paysync: this connect is already in progress; continue in the tab where it started.")
}

// connectStoreTimeout bounds code2token and storing its tokens: they run
// detached from the browser's request, so that a tab closed meanwhile
// cannot leave an issued token neither stored nor revoked.
const connectStoreTimeout = 2 * time.Minute

var connectPage = template.Must(template.New("p").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>paysync</title></head><body><p>{{.}}</p></body></html>
`))

func page(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = connectPage.Execute(w, msg)
}

// callback receives the authorization code, exchanges it for the
// temporary tokens and sends the browser to select-company.
func (f *connectFlow) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("state") != f.state {
		page(w, http.StatusBadRequest, "paysync: this answer is not for this connect (state mismatch); nothing was stored.")
		f.finish(errors.New("the authorization answer's state does not match (a stale or forged callback)"))
		return
	}
	if e := q.Get("error"); e != "" {
		page(w, http.StatusBadRequest, "paysync: payroll refused the authorization: "+e)
		f.finish(fmt.Errorf("authorization refused: %s %s", e, q.Get("error_description")))
		return
	}
	if !f.claim(&f.called) {
		inProgress(w)
		return
	}
	tok, err := f.cc.Exchange(r.Context(), q.Get("code"), f.base+"/callback")
	if err != nil {
		page(w, http.StatusBadGateway, "paysync: "+err.Error())
		f.finish(err)
		return
	}
	http.Redirect(w, r, f.cc.SelectCompanyURL(tok.AccessToken, f.base+"/selected/"+f.state), http.StatusFound)
}

// selected receives select-company's code, trades it for the final tokens
// and stores them as the connection of the chosen company.
func (f *connectFlow) selected(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("state") != f.state {
		page(w, http.StatusBadRequest, "paysync: this answer is not for this connect; nothing was stored.")
		f.finish(errors.New("the select-company answer does not match this connect"))
		return
	}
	q := r.URL.Query()
	company := q.Get("company_id")
	if company == "" || q.Get("code") == "" {
		page(w, http.StatusBadRequest, "paysync: select-company answered without a company or code; nothing was stored.")
		f.finish(errors.New("select-company answered without company_id or code"))
		return
	}
	if !f.claim(&f.wasSelected) {
		inProgress(w)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), connectStoreTimeout)
	defer cancel()
	tok, err := f.cc.CodeToToken(ctx, q.Get("code"))
	if err != nil {
		page(w, http.StatusBadGateway, "paysync: "+err.Error())
		f.finish(err)
		return
	}
	// The companies the token sees (with their names), read with the
	// final tokens held in memory only.
	mem := &memoryTokens{st: payroll.StoredToken{RefreshToken: tok.RefreshToken, AccessToken: tok.AccessToken, Issued: time.Now(), Expiry: tok.Expiry}}
	companies := []ledger.ConnectionCompany{{ID: company}}
	if cl, err := f.cfg.connectionClient(mem, f.log); err == nil {
		if seen, err := cl.Companies(ctx, nil); err == nil && len(seen) > 0 {
			companies = companies[:0]
			for _, c := range seen {
				companies = append(companies, ledger.ConnectionCompany{ID: c.ID, Name: c.Name})
			}
			if !slices.ContainsFunc(companies, func(c ledger.ConnectionCompany) bool { return c.ID == company }) {
				companies = append(companies, ledger.ConnectionCompany{ID: company})
			}
		} else if err != nil {
			f.log.Warn("connect: could not read the company's name; storing the connection without it", "err", err)
		}
	}
	st, _ := mem.Load(ctx)
	c, replaced, err := f.led.AddConnection(ctx, companies, st.RefreshToken, st.AccessToken, st.Issued, st.Expiry)
	if err != nil {
		if rerr := f.cc.Revoke(ctx, st.RefreshToken); rerr != nil { // not kept: not left working either
			f.log.Warn("connect: could not revoke the token that was not stored", "err", rerr)
		}
		page(w, http.StatusInternalServerError, "paysync: could not store the connection: "+err.Error())
		f.finish(err)
		return
	}
	for _, rt := range replaced { // the connections it replaces: revoked, best effort
		if err := f.cc.Revoke(ctx, rt); err != nil {
			f.log.Warn("connect: could not revoke the connection this one replaces", "err", err)
		}
	}
	name := company
	for _, cc := range c.Companies {
		if cc.ID == company && cc.Name != "" {
			name = cc.Name
		}
	}
	f.connected = companyLabel(c.Companies)
	f.fingerprint = payroll.Fingerprint(st.RefreshToken)
	page(w, http.StatusOK, "connected to "+name+"; you can close this tab.")
	f.finish(nil)
}

// companyLabel is "Name (ID)" for each company, comma separated.
func companyLabel(cs []ledger.ConnectionCompany) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.ID
		if c.Name != "" {
			parts[i] = c.Name + " (" + c.ID + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func randomState() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// openBrowser tries to open u in the desktop's browser; failing is fine
// (the URL is printed).
func openBrowser(u string) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, u)
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }()
	}
}

// ---- paysync connections ----

type connectionRow struct {
	Connection  int64     `json:"connection"`
	CompanyID   string    `json:"company_id"`
	CompanyName string    `json:"company_name"`
	State       string    `json:"state"` // active, revoked, failing (refresh failing)
	Reason      string    `json:"reason,omitempty"`
	LastRefresh time.Time `json:"last_refresh"`
	Fingerprint string    `json:"fingerprint"`
}

// connectionRows lists the connections, one row per company served.
func connectionRows(ctx context.Context, l *ledger.Ledger) ([]connectionRow, error) {
	cs, err := l.Connections(ctx)
	if err != nil {
		return nil, err
	}
	out := []connectionRow{}
	for _, c := range cs {
		rt, _, _, err := l.Credentials(ctx, c.Credential)
		if err != nil && !errors.Is(err, ledger.ErrNoCredentials) {
			return nil, err
		}
		for _, cc := range c.Companies {
			out = append(out, connectionRow{Connection: c.ID, CompanyID: cc.ID, CompanyName: cc.Name, State: c.State, Reason: c.Reason,
				LastRefresh: c.LastRefresh, Fingerprint: payroll.Fingerprint(rt)})
		}
	}
	return out, nil
}

func stateWords(state string) string {
	if state == ledger.ConnectionFailing {
		return "refresh failing"
	}
	return state
}

func runConnections(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var asJSON bool
	fs := newFlagSet("connections", "connections [--json]", io)
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "ledger file (PAYSYNC_LEDGER)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	led, err := cfg.openLedger(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	rows, err := connectionRows(ctx, led)
	if err != nil {
		return fmt.Errorf("connections: %w", err)
	}
	if asJSON {
		return writeJSON(io.out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(io.out, "no payroll connections (paysync connect adds one)")
		return nil
	}
	t := newTable(io.out, "CONNECTION", "COMPANY", "NAME", "STATE", "LAST REFRESH", "FINGERPRINT")
	for _, r := range rows {
		t.row(strconv.FormatInt(r.Connection, 10), r.CompanyID, r.CompanyName, stateWords(r.State), utcTime(r.LastRefresh), r.Fingerprint)
	}
	return t.flush()
}

// ---- paysync disconnect ----

func runDisconnect(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var company string
	fs := newFlagSet("disconnect", "disconnect [--company ID]", io)
	fs.StringVar(&company, "company", "", "the company whose connection ends (needed when there are several)")
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "ledger file (PAYSYNC_LEDGER)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	led, err := cfg.openLedger(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	cs, err := led.Connections(ctx)
	if err != nil {
		return fmt.Errorf("disconnect: %w", err)
	}
	var c ledger.Connection
	switch {
	case company != "":
		i := slices.IndexFunc(cs, func(c ledger.Connection) bool { return c.Serves(company) })
		if i < 0 {
			return fmt.Errorf("disconnect: no payroll connection serves company %s (paysync connections lists them)", company)
		}
		c = cs[i]
	case len(cs) == 1:
		c = cs[0]
	case len(cs) == 0:
		return errors.New("disconnect: there is no payroll connection")
	default:
		var ids []string
		for _, c := range cs {
			for _, cc := range c.Companies {
				ids = append(ids, cc.ID)
			}
		}
		return usagef("disconnect: there are several connections: say which with --company (one of %s)", strings.Join(ids, ", "))
	}
	// Under the connection's token lock: a daemon refreshing now cannot
	// rotate the token between our read and the revoke.
	store := connectionTokens{led, c.Credential}
	unlock, err := store.Lock(ctx)
	if err != nil {
		return fmt.Errorf("disconnect: %w", err)
	}
	defer unlock()
	rt, _, _, err := led.Credentials(ctx, c.Credential)
	if err != nil && !errors.Is(err, ledger.ErrNoCredentials) {
		return fmt.Errorf("disconnect: %w", err)
	}
	if rt != "" {
		if err := cfg.connectConfig().Revoke(ctx, rt); err != nil {
			return fmt.Errorf("disconnect: %w; the connection is kept (try again: payroll would still show the access as granted)", err)
		}
	}
	if err := led.RemoveConnection(ctx, c.ID); err != nil {
		return fmt.Errorf("disconnect: %w", err)
	}
	fmt.Fprintf(io.out, "disconnected %s: the token was revoked at the token endpoint and the connection removed\n", companyLabel(c.Companies))
	return nil
}

// routeDaemon sends the daemon's payroll calls through the connections
// the ledger holds, each company through its own (nothing changes without
// connections). A revoked connection is then /readyz's "payroll
// connections" condition and paysync_connection_up{company} 0; the
// "payroll token" condition is the configured token's only.
func (s *session) routeDaemon(dc *worker.DaemonConfig, rm *runMetrics, log *slog.Logger) error {
	ctx := context.Background()
	rt, err := s.connectionRouter(ctx, log)
	if err != nil || rt == nil {
		return err
	}
	dc.Payroll, dc.Deliverer.P, dc.Connections = rt, rt, rt.Check
	if !s.defaultToken(ctx) {
		dc.TokenRevoked = nil
	}
	rm.m.RegisterConnections(rt.Up)
	rm.refreshes = rt.Refreshes
	return nil
}

// ---- doctor ----

// connectionStore is doctor's token store when no refresh token is
// configured or stored but the ledger holds connections: the oldest
// connection's (or PAYSYNC_COMPANY_ID's), so that the token, schema and
// company checks run through it. nil otherwise.
func (d *doctor) connectionStore(ctx context.Context) payroll.TokenStore {
	if d.led == nil || d.cfg.RefreshToken != "" {
		return nil
	}
	if st, err := d.tokenStore().Load(ctx); err == nil && st.RefreshToken != "" {
		return nil
	}
	c, ok, err := connectionFor(ctx, d.led, d.cfg.CompanyID)
	if err != nil || !ok {
		return nil
	}
	return connectionTokens{d.led, c.Credential}
}

// checkConnections reads each stored connection's companies through it
// (a refresh on the way is stored, as the daemon's) and reports each: a revoked one
// names its companies, which wait until `paysync connect` for them.
func (d *doctor) checkConnections(ctx context.Context) {
	const name = "payroll connections"
	if d.led == nil {
		return
	}
	cs, err := d.led.Connections(ctx)
	if err != nil {
		d.r.fail(name, "cannot read the connections: "+err.Error(), "check the ledger")
		return
	}
	if len(cs) == 0 {
		return // the single-token setup: nothing to say
	}
	var ok, bad []string
	for _, c := range cs {
		label := companyLabel(c.Companies)
		if d.payrollBlock != "" {
			ok = append(ok, label+" ("+stateWords(c.State)+", not checked)")
			continue
		}
		cl, err := d.cfg.connectionClient(connectionTokens{d.led, c.Credential}, d.cfg.logger(d.io.err))
		if err == nil { // a call, not only a token: a stored access token may be revoked with it
			_, err = cl.Companies(ctx, nil)
		}
		switch {
		case err == nil:
			_ = d.led.SetConnectionState(ctx, c.ID, ledger.ConnectionActive, "")
			ok = append(ok, label)
		case errors.Is(err, payroll.ErrRevoked):
			_ = d.led.SetConnectionState(ctx, c.ID, ledger.ConnectionRevoked, payroll.ErrorReason(err))
			bad = append(bad, label+": revoked")
		default:
			_ = d.led.SetConnectionState(ctx, c.ID, ledger.ConnectionFailing, payroll.ErrorReason(err))
			bad = append(bad, label+": refresh failing ("+payroll.ErrorReason(err)+")")
		}
	}
	if len(bad) > 0 {
		d.r.fail(name, strings.Join(bad, "; ")+"; working: "+plural(len(ok), "connection", "connections"),
			"run paysync connect for each company named (its batches wait meanwhile; the other companies' keep flowing)")
		return
	}
	d.r.ok(name, strings.Join(ok, "; "))
}
