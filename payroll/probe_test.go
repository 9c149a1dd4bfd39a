package payroll_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

// probeSandbox is startSandbox with the sandbox's handler wrapped (nil: as
// it is), for answers the sandbox's faults cannot give.
func probeSandbox(t *testing.T, opts sandbox.Options, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	sb := sandbox.New(opts)
	h := sb.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{sb: sb, url: srv.URL, rec: &recorder{bodies: map[string][]byte{}}, opts: sb.Options()}
}

func newClient(t *testing.T, cfg payroll.Config) *payroll.Client {
	t.Helper()
	c, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// refreshed makes the store of cfg hold a rotated refresh token and a
// valid access token, as an earlier run leaves them.
func refreshed(t *testing.T, cfg payroll.Config) {
	t.Helper()
	if _, err := newClient(t, cfg).CurrentCompany(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// storedSecrets are the tokens a file store holds.
func storedSecrets(t *testing.T, cfg payroll.Config) []string {
	fs, ok := cfg.Store.(*payroll.FileStore)
	if !ok {
		return nil
	}
	st, err := fs.Load(context.Background())
	if err != nil {
		return nil
	}
	return []string{st.RefreshToken, st.AccessToken}
}

// checkProbe compares a probe's check with the wanted level, cause (nil:
// none) and parts of its detail, and checks that no secret is in it.
func checkProbe(t *testing.T, c paysync.Check, level paysync.CheckLevel, cause error, has []string, secrets ...string) {
	t.Helper()
	t.Logf("%s: %s (%v)", c.Level, c.Detail, c.Err)
	if c.Level != level {
		t.Errorf("level %s, want %s", c.Level, level)
	}
	if (cause == nil) != (c.Err == nil) || (cause != nil && !errors.Is(c.Err, cause)) {
		t.Errorf("Err = %v, want %v", c.Err, cause)
	}
	for _, h := range has {
		if !strings.Contains(c.Detail, h) {
			t.Errorf("detail lacks %q", h)
		}
	}
	for _, s := range secrets {
		if len(s) >= 4 && strings.Contains(c.Detail, s) {
			t.Errorf("a secret is in the detail: %s", c.Detail)
		}
	}
}

// leakyStore fails to load with an error that shows the token it read.
type leakyStore struct{ rt string }

func (s leakyStore) Load(context.Context) (payroll.StoredToken, error) {
	return payroll.StoredToken{RefreshToken: s.rt, AccessToken: "access-" + s.rt}, fmt.Errorf("cannot parse %q (access-%s)", s.rt, s.rt)
}
func (s leakyStore) Save(context.Context, payroll.StoredToken) error { return nil }

func TestProbeToken(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, e *env, cfg *payroll.Config) // before the client is made
		probe  payroll.TokenProbe
		level  paysync.CheckLevel
		cause  error
		has    []string
		hasNot []string
	}{
		{name: "refresh works", level: paysync.CheckOK, has: []string{
			"refresh token from the configured refresh token", "refreshed and rotated: fingerprint ", ", saved in the token store", "access token valid until ",
		}},
		{name: "stored access token still valid", setup: func(t *testing.T, e *env, cfg *payroll.Config) { refreshed(t, *cfg) },
			level: paysync.CheckOK, has: []string{"refresh token from token store (rotated from the configured token)", "stored access token still valid, no refresh needed"}},
		{name: "named as configured", probe: payroll.TokenProbe{Place: "ledger /var/lib/paysync/ledger.db", Configured: "PAYSYNC_REFRESH_TOKEN"},
			level: paysync.CheckOK, has: []string{"refresh token from PAYSYNC_REFRESH_TOKEN", "saved in ledger /var/lib/paysync/ledger.db"}},
		{name: "a new configured token replaces the stored one", setup: func(t *testing.T, e *env, cfg *payroll.Config) {
			refreshed(t, *cfg)
			cfg.RefreshToken = e.sb.IssueRefreshToken()
		}, level: paysync.CheckOK, has: []string{"refresh token from the configured refresh token", "refreshed and rotated",
			"the configured refresh token differs from the one the stored token descends from: it replaced it (a re-connect)"}},
		{name: "revoked", setup: func(t *testing.T, e *env, cfg *payroll.Config) {
			refreshed(t, *cfg)
			e.sb.RevokeAll()
		}, level: paysync.CheckFail, cause: payroll.ErrRevoked, has: []string{"connection revoked"}},
		{name: "revoked before the first refresh", setup: func(t *testing.T, e *env, cfg *payroll.Config) { e.sb.RevokeAll() },
			level: paysync.CheckFail, cause: payroll.ErrRevoked, has: []string{"the payroll server refused the refresh token: invalid_grant"}},
		{name: "wrong client", setup: func(t *testing.T, e *env, cfg *payroll.Config) { cfg.ClientSecret = "not-the-client-secret" },
			level: paysync.CheckFail, cause: payroll.ErrRefresh, has: []string{"refresh failed: token endpoint: invalid_client"}},
		{name: "token endpoint unreachable", setup: func(t *testing.T, e *env, cfg *payroll.Config) { cfg.AuthURL = deadURL(t) },
			level: paysync.CheckFail, cause: payroll.ErrRefresh, has: []string{"refresh failed: Post ", "connection refused"}},
		{name: "no refresh token", setup: func(t *testing.T, e *env, cfg *payroll.Config) { cfg.RefreshToken = "" },
			level: paysync.CheckFail, cause: payroll.ErrNoRefreshToken,
			has: []string{"no refresh token: the configured refresh token is not set and none is stored in the token store"}},
		{name: "token store unreadable", setup: func(t *testing.T, e *env, cfg *payroll.Config) {
			dir := filepath.Join(t.TempDir(), "token.json")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg.Store = &payroll.FileStore{Path: dir}
		}, level: paysync.CheckFail, cause: payroll.ErrTokenStore, has: []string{"token store: ", "is a directory"}},
		{name: "a store error showing the token is redacted", setup: func(t *testing.T, e *env, cfg *payroll.Config) {
			cfg.Store = leakyStore{rt: cfg.RefreshToken}
		}, level: paysync.CheckFail, cause: payroll.ErrTokenStore, has: []string{`cannot parse "***" (access-***)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := probeSandbox(t, sandbox.Options{Rotate: true}, nil)
			cfg := e.config(t)
			if tt.setup != nil {
				tt.setup(t, e, &cfg)
			}
			c := newClient(t, cfg)
			res := c.ProbeToken(ctxT(t), tt.probe)
			secrets := append([]string{cfg.ClientSecret, cfg.RefreshToken, e.opts.ClientSecret}, storedSecrets(t, cfg)...)
			checkProbe(t, res.Check, tt.level, tt.cause, tt.has, secrets...)
			if want := map[bool]string{true: sandbox.CompanyNordlys}[res.OK()]; res.Current != want {
				t.Errorf("Current = %q, want %q", res.Current, want)
			}
		})
	}
}

func TestProbeClient(t *testing.T) {
	// A token endpoint that answers a refresh grant neither way.
	unclear := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/token") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":"invalid_request","error_description":"try later"}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	tests := []struct {
		name  string
		wrap  func(http.Handler) http.Handler
		setup func(t *testing.T, e *env, cfg *payroll.Config) // before the client is made
		use   bool                                            // the client makes a call first
		level paysync.CheckLevel
		cause error
		has   []string
		grant bool // a refresh grant may be made
	}{
		{name: "a refresh proves them", use: true, grant: true, level: paysync.CheckOK,
			has: []string{"client id paysync-sandbox and its secret accepted: the token endpoint granted a refresh with them"}},
		{name: "asked without the refresh token", setup: func(t *testing.T, e *env, cfg *payroll.Config) { refreshed(t, *cfg) }, use: true,
			level: paysync.CheckOK, has: []string{"accepted by the token endpoint", "the connection's refresh token was not sent"}},
		{name: "wrong secret while the stored access token works", setup: func(t *testing.T, e *env, cfg *payroll.Config) {
			refreshed(t, *cfg)
			cfg.ClientSecret = "not-the-client-secret"
		}, use: true, level: paysync.CheckFail, cause: payroll.ErrClientRejected,
			has: []string{"the token endpoint refused client id paysync-sandbox with the configured secret", "invalid_client", "the stored access token still works until "}},
		{name: "wrong client id", setup: func(t *testing.T, e *env, cfg *payroll.Config) { cfg.ClientID = "someone-else" },
			level: paysync.CheckFail, cause: payroll.ErrClientRejected, has: []string{"refused client id someone-else"}},
		{name: "token endpoint unreachable", setup: func(t *testing.T, e *env, cfg *payroll.Config) { cfg.AuthURL = deadURL(t) },
			level: paysync.CheckFail, cause: payroll.ErrClientUnchecked, has: []string{"could not check client id paysync-sandbox and its secret: token endpoint: Post "}},
		{name: "an answer that says neither", wrap: unclear, level: paysync.CheckWarn, cause: payroll.ErrClientUnchecked,
			has: []string{"could not check client id paysync-sandbox and its secret without spending the refresh token", "HTTP 400 invalid_request"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := probeSandbox(t, sandbox.Options{Rotate: true}, tt.wrap)
			cfg := e.config(t)
			if tt.setup != nil {
				tt.setup(t, e, &cfg)
			}
			c := newClient(t, cfg)
			if tt.use {
				if _, err := c.CurrentCompany(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			}
			grants := e.sb.State().Counters.TokenGrants["refresh_token"]
			got := c.Tokens().ProbeClient(ctxT(t))
			checkProbe(t, got, tt.level, tt.cause, tt.has, append([]string{cfg.ClientSecret, cfg.RefreshToken}, storedSecrets(t, cfg)...)...)
			if g := e.sb.State().Counters.TokenGrants["refresh_token"] - grants; g != 0 {
				t.Errorf("%d refresh grants during the probe, want none", g)
			}
		})
	}
}

func TestProbeSchema(t *testing.T) {
	float := "units=Float rate=Float amount=Float (from introspection); *_allowed Boolean; pay_parts: [PayPartInput]; input type PayPartInput; id arguments ID!, [ID]"
	tests := []struct {
		name   string
		opts   sandbox.Options
		schema payroll.SchemaOverrides
		probe  payroll.SchemaProbe
		level  paysync.CheckLevel
		cause  error
		has    []string
	}{
		{name: "the server's dialect", level: paysync.CheckOK, has: []string{float}},
		{name: "wanted numbers disagree", probe: payroll.SchemaProbe{Want: payroll.Int}, level: paysync.CheckFail, cause: payroll.ErrWireMismatch,
			has: []string{"wire numbers Int disagrees with the server: units is Float, rate is Float, amount is Float (dialect snake_case (companies, pay_parts_meta, create_pay_parts); delete: delete_pay_parts; " + float + ")"}},
		{name: "wanted numbers agree", probe: payroll.SchemaProbe{Want: payroll.Float, WantName: "PAYSYNC_WIRE_NUMBERS=float"}, level: paysync.CheckOK,
			has: []string{float + "; PAYSYNC_WIRE_NUMBERS=float agrees"}},
		{name: "an Int server", opts: sandbox.Options{Numbers: sandbox.NumbersInt, Allowed: sandbox.AllowedEnum}, probe: payroll.SchemaProbe{Want: payroll.Int},
			level: paysync.CheckOK, has: []string{"units=Int×10^2 rate=Int×10^2 amount=Int×10^2 (from introspection); *_allowed enum ", "; wire numbers Int agrees"}},
		{name: "probe off", schema: payroll.SchemaOverrides{NoProbe: true}, level: paysync.CheckWarn, cause: payroll.ErrSchemaUnverified,
			has: []string{"(from defaults)"}},
		{name: "overrides", schema: payroll.SchemaOverrides{InputType: "PayPartInput"}, probe: payroll.SchemaProbe{OverridesName: "PAYSYNC_INPUT_TYPE / PAYSYNC_ID_TYPE"},
			level: paysync.CheckOK, has: []string{"(with PAYSYNC_INPUT_TYPE / PAYSYNC_ID_TYPE overrides)"}},
		{name: "introspection fails", opts: sandbox.Options{Faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "__schema", Status: 500}}},
			level: paysync.CheckFail, cause: payroll.ErrSchemaProbe, has: []string{"schema probe failed: payroll: schema probe: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := probeSandbox(t, tt.opts, nil)
			cfg := e.config(t)
			cfg.Schema = tt.schema
			got := newClient(t, cfg).ProbeSchema(ctxT(t), tt.probe)
			checkProbe(t, got, tt.level, tt.cause, tt.has, cfg.ClientSecret, cfg.RefreshToken)
		})
	}
}

func TestProbeCompany(t *testing.T) {
	// The company's employees answered as none.
	noEmployees := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/graphql" && r.Header.Get("Authorization") != "" {
				body, _ := io.ReadAll(r.Body)
				if strings.Contains(string(body), `"operationName":"CompanyEmployees"`) {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"data":{"companies":[{"id":"MV8x","name":"Nordlys ApS","employees":[]}]}}`)
					return
				}
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			h.ServeHTTP(w, r)
		})
	}
	fault := func(op string) sandbox.Options {
		return sandbox.Options{Faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: op, Status: 500}}}
	}
	tests := []struct {
		name        string
		opts        sandbox.Options
		wrap        func(http.Handler) http.Handler
		probe       payroll.CompanyProbe
		level       paysync.CheckLevel
		cause       error
		unnamed     bool // a failure without a named cause
		has         []string
		current     string // CompanyCheck.Current
		visible     int
		currentAsks int // current_company requests the sandbox answered (a fault's are not counted)
	}{
		{name: "the current company", level: paysync.CheckOK, has: []string{"Nordlys ApS (MV8x, the account's current company): 4 employees"},
			current: sandbox.CompanyNordlys, currentAsks: 1},
		{name: "the current company known", probe: payroll.CompanyProbe{Current: sandbox.CompanyFjordtech}, level: paysync.CheckOK,
			has: []string{"Fjordtech A/S (MV8y, the account's current company): 4 employees"}, current: sandbox.CompanyFjordtech},
		{name: "a configured company", probe: payroll.CompanyProbe{ID: sandbox.CompanyFjordtech, IDName: "PAYSYNC_COMPANY_ID"}, level: paysync.CheckOK,
			has: []string{"Fjordtech A/S (MV8y, PAYSYNC_COMPANY_ID): 4 employees"}},
		{name: "not visible", probe: payroll.CompanyProbe{ID: sandbox.CompanyHavblik}, level: paysync.CheckFail, cause: payroll.ErrCompanyNotFound,
			has: []string{"company MV8z (the configured company) is not visible to this payroll account"}, visible: 2},
		{name: "the current company cannot be read", opts: fault("current_company"), level: paysync.CheckFail, cause: payroll.ErrNoCurrentCompany,
			has: []string{"find the current company: payroll: current company: "}},
		{name: "the company cannot be read", opts: fault("companies"), probe: payroll.CompanyProbe{ID: sandbox.CompanyNordlys}, level: paysync.CheckFail,
			unnamed: true, has: []string{"company MV8x: payroll: "}},
		{name: "no employees", wrap: noEmployees, probe: payroll.CompanyProbe{ID: sandbox.CompanyNordlys}, level: paysync.CheckFail, cause: payroll.ErrNoEmployees,
			has: []string{"Nordlys ApS (MV8x, the configured company) has no employees: nothing can be paid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := probeSandbox(t, tt.opts, tt.wrap)
			cfg := e.config(t)
			got := newClient(t, cfg).ProbeCompany(ctxT(t), tt.probe)
			cause := tt.cause
			if tt.unnamed { // the read's own failure, none of the named causes
				if got.Err == nil || errors.Is(got.Err, payroll.ErrCompanyNotFound) || errors.Is(got.Err, payroll.ErrNoEmployees) {
					t.Errorf("Err = %v, want the read's failure", got.Err)
				}
				cause = got.Err
			}
			checkProbe(t, got.Check, tt.level, cause, tt.has, cfg.ClientSecret, cfg.RefreshToken)
			if got.Current != tt.current || len(got.Visible) != tt.visible {
				t.Errorf("Current %q, %d visible; want %q, %d", got.Current, len(got.Visible), tt.current, tt.visible)
			}
			if n := e.sb.State().Counters.Requests["current_company"]; n != tt.currentAsks {
				t.Errorf("%d current_company requests, want %d", n, tt.currentAsks)
			}
		})
	}
}
