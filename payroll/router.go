package payroll

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paysync/paysync"
	"golang.org/x/oauth2"
)

// Router sends every call for a company through that company's
// connection (a Client with its own rotating refresh token, lock and
// access token); a connection serves every company listed for it. The
// companies no connection serves go through Default (the configured
// PAYSYNC_REFRESH_TOKEN), when there is one. Calls that name no company
// (the schema, pay codes, the current company) go through Default, else
// the first connection that answers.
//
// A connection whose refresh token was refused (invalid_grant) pauses its
// companies only: Paused says so. Paused reads the store again at most
// every ReloadEvery, so that a connection connected again, replaced or
// removed (paysync connect, disconnect) is followed while the daemon runs;
// a call whose connection's token is gone from the store reloads at once.
type Router struct {
	cfg RouterConfig

	mu       sync.Mutex
	routes   []*route          // by connection, in the order Load gave
	byCo     map[string]*route // company -> its connection
	loadedAt time.Time
	loadErr  error
}

// RouteInfo is a stored connection as the router needs it.
type RouteInfo struct {
	ID string
	// Key tells connections stored under the same ID apart (e.g. its
	// creation time): a route whose Key changed is a new connection and
	// gets a new client.
	Key       string
	Companies []string
	State     ConnState // as last recorded ("" = active)
}

// ConnState is a connection's state.
type ConnState string

// The states of a connection.
const (
	ConnActive  ConnState = "active"
	ConnRevoked ConnState = "revoked" // the refresh token was refused (invalid_grant)
	ConnFailing ConnState = "failing" // the refresh failed otherwise
)

// RouterConfig configures a Router.
type RouterConfig struct {
	Default *Client                                        // serves companies without a connection; nil: none
	Load    func(ctx context.Context) ([]RouteInfo, error) // the stored connections
	Client  func(id string) (*Client, error)               // a connection's client, with its own token source
	// OnState is told when a connection's state changes (record it); nil:
	// nobody.
	OnState     func(id string, state ConnState, reason string)
	ReloadEvery time.Duration // default 5s
	Now         func() time.Time
}

type route struct {
	id, key   string
	companies []string // written and read under Router.mu
	cl        *Client

	mu     sync.Mutex
	state  ConnState
	reason string
}

// NewRouter loads the connections once.
func NewRouter(ctx context.Context, cfg RouterConfig) (*Router, error) {
	if cfg.ReloadEvery <= 0 {
		cfg.ReloadEvery = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Router{cfg: cfg}
	if err := r.Reload(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the connections again: a connection it already holds keeps
// its client (and token source); a new one gets its own, and so does one
// stored again under the same ID (its Key changed, or it was seen revoked
// while the store does not record it so: its token was replaced). The
// routes of connections no longer stored are dropped.
func (r *Router) Reload(ctx context.Context) error {
	infos, err := r.cfg.Load(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadedAt = r.cfg.Now()
	r.loadErr = err
	if err != nil {
		return fmt.Errorf("payroll: load connections: %w", err)
	}
	old := map[string]*route{}
	for _, rt := range r.routes {
		old[rt.id] = rt
	}
	var routes []*route
	byCo := map[string]*route{}
	for _, in := range infos {
		rt := old[in.ID]
		if rt != nil && (rt.key != in.Key || (in.State != ConnRevoked && rt.revoked())) {
			rt = nil
		}
		if rt == nil {
			cl, err := r.cfg.Client(in.ID)
			if err != nil {
				return fmt.Errorf("payroll: connection %s: %w", in.ID, err)
			}
			st := in.State
			if st == "" {
				st = ConnActive
			}
			rt = &route{id: in.ID, key: in.Key, cl: cl, state: st}
		}
		rt.companies = slices.Clone(in.Companies)
		routes = append(routes, rt)
		for _, c := range in.Companies {
			byCo[c] = rt
		}
	}
	r.routes, r.byCo = routes, byCo
	return nil
}

// maybeReload reloads when the last load is older than ReloadEvery.
func (r *Router) maybeReload(ctx context.Context) {
	r.mu.Lock()
	due := r.cfg.Now().Sub(r.loadedAt) >= r.cfg.ReloadEvery
	r.mu.Unlock()
	if due {
		_ = r.Reload(ctx) // kept in loadErr; the old routes stay
	}
}

func (r *Router) routeOf(company string) *route {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byCo[company]
}

// revoked reports whether the route's token was refused.
func (rt *route) revoked() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.state == ConnRevoked || rt.cl.Tokens().Revoked()
}

// Paused says why company's calls wait (nil: they go): its connection was
// revoked, or no connection (and no configured token) serves it. It reads
// the store again at most every ReloadEvery (connections connected again,
// replaced or removed meanwhile).
func (r *Router) Paused(ctx context.Context, company string) error {
	r.maybeReload(ctx)
	rt := r.routeOf(company)
	switch {
	case rt == nil && r.cfg.Default == nil:
		return fmt.Errorf("no payroll connection serves company %s: run paysync connect", company)
	case rt != nil && rt.revoked():
		return fmt.Errorf("the payroll connection of company %s was revoked: run paysync connect for it", company)
	}
	return nil
}

// clientFor returns the client of company's calls.
func (r *Router) clientFor(op, company string) (*Client, *route, error) {
	if rt := r.routeOf(company); rt != nil {
		return rt.cl, rt, nil
	}
	if r.cfg.Default != nil {
		return r.cfg.Default, nil, nil
	}
	return nil, nil, &Error{Op: op, Class: Revoked, Index: -1, Reason: "no payroll connection serves company " + company + " (paysync connect)", Err: ErrRevoked}
}

// call runs fn on company's client. A connection's client whose token is
// gone from the store (the connection was replaced or removed: paysync
// connect, disconnect) sent nothing: the router reloads and runs fn once
// more on what serves the company now (a newer connection, Default); when
// that is the same connection still, the company waits as revoked (an
// operator must connect it again), never a failed call.
func (r *Router) call(ctx context.Context, op, company string, fn func(*Client) error) error {
	cl, rt, err := r.clientFor(op, company)
	if err != nil {
		return err
	}
	err = fn(cl)
	if rt != nil && errors.Is(err, ErrNoRefreshToken) && ClassOf(err) == NotApplied {
		_ = r.Reload(ctx) // a failed load keeps the old routes
		if now := r.routeOf(company); now == rt {
			err = &Error{Op: op, Class: Revoked, Index: -1, Reason: "the payroll connection of company " + company + " has no stored token (disconnected?): run paysync connect for it", Err: ErrRevoked}
		} else if cl, rt, err = r.clientFor(op, company); err == nil {
			err = fn(cl)
		}
	}
	r.observe(rt, err)
	return err
}

// observe records the state a call's outcome shows of its connection.
func (r *Router) observe(rt *route, err error) {
	if rt == nil {
		return
	}
	st, reason := ConnActive, ""
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
	case errors.Is(err, ErrRevoked):
		st, reason = ConnRevoked, ErrorReason(err)
	case errors.As(err, &re):
		st, reason = ConnFailing, ErrorReason(err)
	default:
		return // the call failed, not the connection
	}
	rt.mu.Lock()
	changed := rt.state != st
	rt.state, rt.reason = st, reason
	rt.mu.Unlock()
	if changed && r.cfg.OnState != nil {
		r.cfg.OnState(rt.id, st, reason)
	}
}

// ErrorReason is an error's short, secret-free reason.
func ErrorReason(err error) string {
	var pe *Error
	if errors.As(err, &pe) && pe.Reason != "" {
		return pe.Reason
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// anyClient runs fn on Default, else on each connection in turn until one
// is not revoked.
func (r *Router) anyClient(fn func(*Client) error) error {
	if r.cfg.Default != nil {
		return fn(r.cfg.Default)
	}
	r.mu.Lock()
	routes := slices.Clone(r.routes)
	r.mu.Unlock()
	err := error(&Error{Op: "connections", Class: Revoked, Index: -1, Reason: "no payroll connection: run paysync connect", Err: ErrRevoked})
	for _, rt := range routes {
		if rt.revoked() {
			continue
		}
		err = fn(rt.cl)
		r.observe(rt, err)
		if !errors.Is(err, ErrRevoked) {
			return err
		}
	}
	return err
}

// RouteStatus is a connection's state as the router last saw it.
type RouteStatus struct {
	ID        string
	Companies []string
	State     ConnState
	Reason    string
}

// Status lists the connections, in load order.
func (r *Router) Status() []RouteStatus {
	r.mu.Lock()
	routes := slices.Clone(r.routes)
	companies := make([][]string, len(routes))
	for i, rt := range routes {
		companies[i] = slices.Clone(rt.companies) // Reload rewrites them under r.mu
	}
	r.mu.Unlock()
	out := make([]RouteStatus, 0, len(routes))
	for i, rt := range routes {
		rt.mu.Lock()
		st, reason := rt.state, rt.reason
		rt.mu.Unlock()
		if st != ConnRevoked && rt.cl.Tokens().Revoked() {
			st = ConnRevoked
		}
		out = append(out, RouteStatus{ID: rt.id, Companies: companies[i], State: st, Reason: reason})
	}
	return out
}

// Check is /readyz's condition: every connection active (a revoked one
// names its companies; the others keep flowing meanwhile).
func (r *Router) Check() error {
	var bad []string
	for _, s := range r.Status() {
		if s.State == ConnRevoked {
			bad = append(bad, "company "+strings.Join(s.Companies, ", ")+": connection revoked (paysync connect)")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return errors.New(strings.Join(bad, "; "))
}

// Up says per company whether its connection works (metrics).
func (r *Router) Up() map[string]bool {
	up := map[string]bool{}
	for _, s := range r.Status() {
		for _, c := range s.Companies {
			up[c] = s.State != ConnRevoked
		}
	}
	return up
}

// ---- the calls ----

func (r *Router) CreatePayParts(ctx context.Context, companyID string, items []paysync.PayPartInput) (out []paysync.PayPart, err error) {
	err = r.call(ctx, "CreatePayParts", companyID, func(cl *Client) (err error) {
		out, err = cl.CreatePayParts(ctx, companyID, items)
		return err
	})
	return out, err
}

func (r *Router) DeletePayParts(ctx context.Context, companyID string, ids []string) (out DeleteResult, err error) {
	err = r.call(ctx, "DeletePayParts", companyID, func(cl *Client) (err error) {
		out, err = cl.DeletePayParts(ctx, companyID, ids)
		return err
	})
	return out, err
}

func (r *Router) PayParts(ctx context.Context, companyID string) (out []paysync.PayPart, err error) {
	err = r.call(ctx, "PayParts", companyID, func(cl *Client) (err error) {
		out, err = cl.PayParts(ctx, companyID)
		return err
	})
	return out, err
}

func (r *Router) Employees(ctx context.Context, companyID string, employeeIDs []string) (out []paysync.Employee, err error) {
	err = r.call(ctx, "Employees", companyID, func(cl *Client) (err error) {
		out, err = cl.Employees(ctx, companyID, employeeIDs)
		return err
	})
	return out, err
}

func (r *Router) PayPartsMeta(ctx context.Context) (out []paysync.PayPartMeta, err error) {
	err = r.anyClient(func(cl *Client) (err error) {
		out, err = cl.PayPartsMeta(ctx)
		return err
	})
	return out, err
}

func (r *Router) Schema(ctx context.Context) (out Schema, err error) {
	err = r.anyClient(func(cl *Client) (err error) {
		out, err = cl.Schema(ctx)
		return err
	})
	return out, err
}

func (r *Router) CurrentCompany(ctx context.Context) (out string, err error) {
	err = r.anyClient(func(cl *Client) (err error) {
		out, err = cl.CurrentCompany(ctx)
		return err
	})
	return out, err
}

// Refreshes sums the connections' (and Default's) successful refreshes.
func (r *Router) Refreshes() int64 {
	var n int64
	if r.cfg.Default != nil {
		n = r.cfg.Default.Tokens().Refreshes()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rt := range r.routes {
		n += rt.cl.Tokens().Refreshes()
	}
	return n
}
