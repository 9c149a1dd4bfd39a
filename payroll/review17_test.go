package payroll_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

// A code2token call that fails in transport (the marketplace unreachable,
// a timeout) does not put the marketplace code in its error: the code
// alone is redeemable for the final refresh token (code2token takes no
// client credentials), and connect prints the error on stderr and on the
// browser's page.
func TestCodeToToken_TransportErrorHidesCode(t *testing.T) {
	const code = "SECRET-MARKETPLACE-CODE-123"
	// A marketplace that hangs past the client's timeout.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); srv.Close() })
	// A marketplace that is not there at all.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()

	for _, tc := range []struct{ name, url string }{{"timeout", srv.URL}, {"refused", gone}} {
		t.Run(tc.name, func(t *testing.T) {
			cc := payroll.ConnectConfig{Marketplace: tc.url, HTTPClient: &http.Client{Timeout: 200 * time.Millisecond}}
			_, err := cc.CodeToToken(context.Background(), code)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), code) {
				t.Fatalf("code2token's error carries the marketplace code: %v", err)
			}
		})
	}
}

// storedEnv is a sandbox with a router over connections whose tokens are
// kept in a ledger-like store: a removed connection's Load says nothing is
// stored (as connectionTokens does once the credentials row is deleted).
type storedEnv struct {
	sb    *sandbox.Server
	url   string
	mu    sync.Mutex
	toks  map[string]string // connection id -> stored refresh token
	conns []payroll.RouteInfo
	now   time.Time
}

func newStoredEnv(t *testing.T, id, company string) *storedEnv {
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	return &storedEnv{sb: sb, url: srv.URL, now: time.Unix(0, 0),
		toks:  map[string]string{id: sb.IssueCompanyToken(company)},
		conns: []payroll.RouteInfo{{ID: id, Companies: []string{company}}}}
}

// client is a client of the sandbox: over refresh when set, else over the
// stored token of connection id.
func (e *storedEnv) client(t *testing.T, id, refresh string) *payroll.Client {
	t.Helper()
	o := e.sb.Options()
	cfg := payroll.Config{URL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RefreshToken: refresh}
	if refresh == "" {
		cfg.Store = storedToken{e, id}
	}
	cl, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func (e *storedEnv) router(t *testing.T, def *payroll.Client, reloadEvery time.Duration) *payroll.Router {
	t.Helper()
	r, err := payroll.NewRouter(context.Background(), payroll.RouterConfig{
		Default: def,
		Load: func(context.Context) ([]payroll.RouteInfo, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return slices.Clone(e.conns), nil
		},
		Client:      func(id string) (*payroll.Client, error) { return e.client(t, id, ""), nil },
		ReloadEvery: reloadEvery,
		Now: func() time.Time {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.now
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// change changes the store (and the time) under its lock.
func (e *storedEnv) change(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn()
}

// storedToken is connection id's token in its storedEnv.
type storedToken struct {
	e  *storedEnv
	id string
}

func (s storedToken) Load(context.Context) (payroll.StoredToken, error) {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	rt, ok := s.e.toks[s.id]
	if !ok {
		return payroll.StoredToken{}, payroll.ErrNoStoredToken
	}
	return payroll.StoredToken{RefreshToken: rt}, nil
}

func (s storedToken) Save(_ context.Context, st payroll.StoredToken) error {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if _, ok := s.e.toks[s.id]; !ok {
		return errors.New("no such connection")
	}
	s.e.toks[s.id] = st.RefreshToken
	return nil
}

// Connecting a company again while the daemon runs and its old connection
// still works (not yet seen revoked) replaces the connection in the store
// (AddConnection: new connection, the old one removed with its token,
// which connect revokes). The running router sends the company through
// the new connection once it reads the store again (Paused, every
// ReloadEvery), not through the old route whose token is gone.
func TestRouter_FollowsReconnectOfWorkingConnection(t *testing.T) {
	ctx := context.Background()
	e := newStoredEnv(t, "c1", sandbox.CompanyFjordtech)
	r := e.router(t, nil, time.Second)
	if _, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen)); err != nil {
		t.Fatal(err)
	}

	// paysync connect for Fjordtech again: a new connection c2; c1 removed
	// from the store and its token revoked at the token endpoint.
	var old string
	e.change(func() {
		old = e.toks["c1"]
		delete(e.toks, "c1")
		e.toks["c2"] = e.sb.IssueCompanyToken(sandbox.CompanyFjordtech)
		e.conns = []payroll.RouteInfo{{ID: "c2", Companies: []string{sandbox.CompanyFjordtech}}}
	})
	o := e.sb.Options()
	cc := payroll.ConnectConfig{AuthURL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret}
	if err := cc.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}

	// The daemon goes on: each look asks Paused, then sends.
	var last error
	for i := 0; i < 5; i++ {
		e.change(func() { e.now = e.now.Add(time.Minute) })
		if err := r.Paused(ctx, sandbox.CompanyFjordtech); err != nil {
			last = err
			continue
		}
		if _, last = r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpEmmaChristensen)); last == nil {
			return
		}
	}
	t.Fatalf("Fjordtech after connecting it again: %v (the router still uses the removed connection)", last)
}

// A call whose connection's token is gone from the store (replaced or
// removed since the last load) sent nothing: the router reloads at once
// and sends it through what serves the company now, or refuses it as
// revoked (the company waits for paysync connect) — never a plain failure
// that would end a batch failed.
func TestRouter_CallAfterConnectionRemoved(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reconnect  bool // connected again (c2), or only disconnected
		withDef    bool // a configured token serves the others
		wantRevoke bool
	}{
		{name: "connected again", reconnect: true},
		{name: "disconnected", wantRevoke: true},
		{name: "disconnected, configured token", withDef: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newStoredEnv(t, "c1", sandbox.CompanyFjordtech)
			var def *payroll.Client
			if tc.withDef {
				def = e.client(t, "", e.sb.IssueRefreshToken())
			}
			r := e.router(t, def, time.Hour) // only the call's own reload can see the change
			e.change(func() {
				delete(e.toks, "c1")
				e.conns = nil
				if tc.reconnect {
					e.toks["c2"] = e.sb.IssueCompanyToken(sandbox.CompanyFjordtech)
					e.conns = []payroll.RouteInfo{{ID: "c2", Companies: []string{sandbox.CompanyFjordtech}}}
				}
			})
			_, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen))
			switch {
			case tc.wantRevoke && !errors.Is(err, payroll.ErrRevoked):
				t.Fatalf("create after disconnect = %v, want revoked (the company waits)", err)
			case !tc.wantRevoke && err != nil:
				t.Fatalf("create = %v, want it sent through what serves the company now", err)
			}
		})
	}
}

// A connection stored again under the id of a revoked one (the ledger
// never reuses ids now, see ledger TestConnections_IDNotReused; a store
// that does) is a new connection: the route seen revoked, while the store
// does not record it so, gets a new client on the next load, and
// Fjordtech resumes without a restart.
func TestRouter_ResumesReconnectUnderSameID(t *testing.T) {
	ctx := context.Background()
	e := newStoredEnv(t, "connection-2", sandbox.CompanyFjordtech)
	r := e.router(t, nil, time.Second)
	e.sb.RevokeCompany(sandbox.CompanyFjordtech)
	if _, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen)); !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("create through the revoked connection = %v", err)
	}
	// disconnect, then connect: the same id comes back with a new token.
	e.change(func() {
		e.toks["connection-2"] = e.sb.IssueCompanyToken(sandbox.CompanyFjordtech)
		e.now = e.now.Add(time.Minute)
	})
	if err := r.Paused(ctx, sandbox.CompanyFjordtech); err != nil {
		t.Fatalf("Fjordtech after connecting it again: %v", err)
	}
	if _, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen)); err != nil {
		t.Fatal(err)
	}
}

// Reload rewrites a kept route's companies under the router's lock; Status
// (/readyz's Check, the metrics' Up) copies them under it too, so the
// daemon's sending loop (Paused → maybeReload) and an HTTP probe do not
// race. Run with -race.
func TestRouter_StatusWhileReloading(t *testing.T) {
	ctx := context.Background()
	e := newRouterEnv(t)
	e.connect("c1", sandbox.CompanyFjordtech)
	r := e.router(t, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			_ = r.Reload(ctx)
		}
	}()
	for i := 0; i < 200; i++ {
		_ = r.Check()
	}
	<-done
}
