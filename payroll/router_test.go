package payroll_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// routerEnv is a sandbox with a router over connections the test sets.
type routerEnv struct {
	sb    *sandbox.Server
	url   string
	mu    sync.Mutex
	conns map[string]payroll.RouteInfo // by id
	toks  map[string]string            // connection id -> refresh token
	now   time.Time
	state []string // OnState calls: "id state"
}

func (e *routerEnv) client(t *testing.T, refresh string) *payroll.Client {
	t.Helper()
	o := e.sb.Options()
	cl, err := payroll.New(payroll.Config{URL: e.url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RefreshToken: refresh})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func (e *routerEnv) router(t *testing.T, def *payroll.Client) *payroll.Router {
	t.Helper()
	r, err := payroll.NewRouter(context.Background(), payroll.RouterConfig{
		Default: def,
		Load: func(context.Context) ([]payroll.RouteInfo, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			var out []payroll.RouteInfo
			for _, id := range []string{"c1", "c2", "c3"} {
				if c, ok := e.conns[id]; ok {
					out = append(out, c)
				}
			}
			return out, nil
		},
		Client: func(id string) (*payroll.Client, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.client(t, e.toks[id]), nil
		},
		OnState: func(id string, st payroll.ConnState, _ string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.state = append(e.state, id+" "+string(st))
		},
		ReloadEvery: time.Minute,
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

func (e *routerEnv) connect(id, company string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.conns[id] = payroll.RouteInfo{ID: id, Companies: []string{company}}
	e.toks[id] = e.sb.IssueCompanyToken(company)
}

func newRouterEnv(t *testing.T) *routerEnv {
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	return &routerEnv{sb: sb, url: srv.URL, conns: map[string]payroll.RouteInfo{}, toks: map[string]string{}, now: time.Unix(0, 0)}
}

func onePart(emp string) []paysync.PayPartInput {
	return []paysync.PayPartInput{{EmployeeID: emp, Code: "T1", Numbers: paysync.Numbers{Units: decimal.NewNullDecimal(decimal.NewFromInt(1))}}}
}

// Each company's calls go through its own connection, the others through
// the configured token; a revoked connection pauses its company only, and
// a newer connection in the store is picked up once ReloadEvery passed.
func TestRouter_PerCompany(t *testing.T) {
	ctx := context.Background()
	e := newRouterEnv(t)
	e.connect("c1", sandbox.CompanyFjordtech)
	def := e.client(t, e.sb.IssueRefreshToken())
	r := e.router(t, def)

	if _, err := r.CreatePayParts(ctx, sandbox.CompanyNordlys, onePart(sandbox.EmpMetteHansen)); err != nil {
		t.Fatal(err)
	}
	before := def.Calls()
	if _, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen)); err != nil {
		t.Fatal(err) // the configured token sees Fjordtech too: only the connection routes it
	}
	if def.Calls() != before {
		t.Fatal("Fjordtech's create went through the configured token, not its connection")
	}

	e.sb.RevokeCompany(sandbox.CompanyFjordtech)
	_, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen))
	if !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("create through the revoked connection = %v, want revoked", err)
	}
	if r.Paused(ctx, sandbox.CompanyFjordtech) == nil || r.Paused(ctx, sandbox.CompanyNordlys) != nil {
		t.Fatal("want Fjordtech paused and Nordlys not")
	}
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), sandbox.CompanyFjordtech) {
		t.Fatalf("Check = %v, want Fjordtech named", err)
	}
	if up := r.Up(); up[sandbox.CompanyFjordtech] {
		t.Fatalf("Up = %v", up)
	}
	if _, err := r.CreatePayParts(ctx, sandbox.CompanyNordlys, onePart(sandbox.EmpLarsNielsen)); err != nil {
		t.Fatalf("Nordlys while Fjordtech is revoked: %v", err)
	}

	// Connected again: found once ReloadEvery has passed, not before.
	e.mu.Lock()
	delete(e.conns, "c1")
	e.mu.Unlock()
	e.connect("c2", sandbox.CompanyFjordtech)
	if r.Paused(ctx, sandbox.CompanyFjordtech) == nil {
		t.Fatal("picked up before ReloadEvery")
	}
	e.mu.Lock()
	e.now = e.now.Add(time.Minute)
	e.mu.Unlock()
	if err := r.Paused(ctx, sandbox.CompanyFjordtech); err != nil {
		t.Fatalf("after connecting again: %v", err)
	}
	if _, err := r.CreatePayParts(ctx, sandbox.CompanyFjordtech, onePart(sandbox.EmpJonasLarsen)); err != nil {
		t.Fatal(err)
	}
	if r.Check() != nil {
		t.Fatal(r.Check())
	}
	e.mu.Lock()
	got := strings.Join(e.state, ", ")
	e.mu.Unlock()
	if got != "c1 revoked" {
		t.Fatalf("OnState calls = %q", got)
	}
}

// Without a configured token, a company no connection serves waits (its
// calls are refused as revoked, never sent), and the calls that name no
// company go through a connection that works.
func TestRouter_NoDefault(t *testing.T) {
	ctx := context.Background()
	e := newRouterEnv(t)
	e.connect("c1", sandbox.CompanyNordlys)
	e.connect("c2", sandbox.CompanyFjordtech)
	r := e.router(t, nil)
	if err := r.Paused(ctx, sandbox.CompanyHavblik); err == nil {
		t.Fatal("a company without a connection is not paused")
	}
	if _, err := r.PayParts(ctx, sandbox.CompanyHavblik); !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("PayParts without a connection = %v, want revoked", err)
	}
	e.sb.RevokeCompany(sandbox.CompanyNordlys)
	if _, err := r.PayParts(ctx, sandbox.CompanyNordlys); !errors.Is(err, payroll.ErrRevoked) {
		t.Fatal(err)
	}
	if _, err := r.Schema(ctx); err != nil {
		t.Fatalf("Schema with one connection revoked: %v", err)
	}
	if id, err := r.CurrentCompany(ctx); err != nil || id != sandbox.CompanyFjordtech {
		t.Fatalf("CurrentCompany = %q, %v; want Fjordtech's (the connection that works)", id, err)
	}
}
