package payroll

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	graphql "github.com/hasura/go-graphql-client"
	"github.com/paysync/paysync"
)

// Config configures a Client. Only URL and the token settings are required.
type Config struct {
	URL          string // base URL; GraphQL is served at URL + "/graphql"
	AuthURL      string // Keycloak base URL; token endpoint {AuthURL}/auth/realms/{Realm}/protocol/openid-connect/token
	Realm        string
	ClientID     string
	ClientSecret string
	RefreshToken string     // initial refresh token; the rotated one lives in Store
	Store        TokenStore // where rotated refresh tokens are persisted (nil: memory only)

	Timeout      time.Duration // whole-request timeout (default 30s)
	QueryRetries int           // retries of read-only queries on NotApplied/Ambiguous errors (default 2; -1 = none). Mutations are never retried here.
	TLS          *tls.Config   // custom CA / client certificates (nil: system roots)
	Transport    http.RoundTripper
	UserAgent    string          // default "paysync/<version>"
	Schema       SchemaOverrides // explicit schema settings for servers without introspection
	Logger       *slog.Logger
	Now          func() time.Time

	// OnCall, when set, observes every GraphQL call (for metrics).
	OnCall func(op string, class Class, status int, d time.Duration)
}

// Client is a typed client of the payroll GraphQL API. It is safe for
// concurrent use.
type Client struct {
	cfg Config
	gql *graphql.Client
	ts  *TokenSource
	log *slog.Logger

	mu     sync.Mutex
	schema *Schema
	docs   documents

	calls atomic.Int64
}

type callInfoKey struct{}

// New validates cfg and returns a Client. It makes no network call: the
// schema is probed on first use.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("payroll: URL %q is not an absolute http(s) URL", cfg.URL)
	}
	if cfg.AuthURL == "" {
		cfg.AuthURL = cfg.URL
	}
	if a, err := url.Parse(cfg.AuthURL); err != nil || (a.Scheme != "http" && a.Scheme != "https") || a.Host == "" {
		return nil, fmt.Errorf("payroll: auth URL %q is not an absolute http(s) URL", cfg.AuthURL)
	}
	if cfg.Realm == "" {
		return nil, errors.New("payroll: auth realm is empty")
	}
	if cfg.ClientID == "" {
		return nil, errors.New("payroll: client id is empty")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.QueryRetries == 0 {
		cfg.QueryRetries = 2
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "paysync/" + paysync.Version()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base := cfg.Transport
	if base == nil {
		base = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       cfg.TLS,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: cfg.Timeout,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
			// gzip: the transport asks for it and decompresses by itself.
		}
	}
	tokenHTTP := &http.Client{Timeout: cfg.Timeout, Transport: uaTransport{base: base, ua: cfg.UserAgent}}
	ts := NewTokenSource(TokenConfig{
		AuthURL: cfg.AuthURL, Realm: cfg.Realm, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		RefreshToken: cfg.RefreshToken, Store: cfg.Store, HTTPClient: tokenHTTP, Now: cfg.Now,
	})
	hc := &http.Client{
		Timeout:   cfg.Timeout,
		Transport: &authTransport{base: base, ts: ts, ua: cfg.UserAgent},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // never replay a POST to another place
		},
	}
	c := &Client{
		cfg: cfg,
		gql: graphql.NewClient(trimSlash(cfg.URL)+"/graphql", hc), // no WithRetry: mutations are never replayed by the library
		ts:  ts,
		log: cfg.Logger,
	}
	return c, nil
}

// Tokens returns the client's token source.
func (c *Client) Tokens() *TokenSource { return c.ts }

// Calls returns how many GraphQL requests the client has sent.
func (c *Client) Calls() int64 { return c.calls.Load() }

// GraphQLURL returns the GraphQL endpoint.
func (c *Client) GraphQLURL() string { return trimSlash(c.cfg.URL) + "/graphql" }

// Schema returns the server's schema as paysync uses it, probing by
// introspection on first use (unless the overrides turn the probe off).
func (c *Client) Schema(ctx context.Context) (Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schema != nil {
		return *c.schema, nil
	}
	var s Schema
	if c.cfg.Schema.NoProbe {
		s = DefaultSchemaFor(c.cfg.Schema.Dialect)
	} else {
		var err error
		if s, err = c.probe(ctx); err != nil {
			return Schema{}, err
		}
	}
	s = c.cfg.Schema.Apply(s)
	c.schema, c.docs = &s, buildDocuments(s)
	return s, nil
}

// Documents returns the GraphQL text of every operation for the server's
// schema, by operation name.
func (c *Client) Documents(ctx context.Context) (map[string]string, error) {
	if _, err := c.Schema(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.docs))
	for k, v := range c.docs {
		out[k] = v
	}
	return out, nil
}

func (c *Client) doc(ctx context.Context, op string) (Schema, string, error) {
	s, err := c.Schema(ctx)
	if err != nil {
		return Schema{}, "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s, c.docs[op], nil
}

// exec sends one request. It never retries.
func (c *Client) exec(ctx context.Context, op, doc string, vars map[string]any) (json.RawMessage, error) {
	info := &callInfo{}
	ctx = context.WithValue(ctx, callInfoKey{}, info)
	start := time.Now()
	c.calls.Add(1)
	data, err := c.gql.ExecRaw(ctx, doc, vars, graphql.OperationName(op))
	var perr *Error
	if err != nil {
		perr = classify(op, info, err)
	}
	if c.cfg.OnCall != nil {
		var cl Class
		if perr != nil {
			cl = perr.Class
		}
		c.cfg.OnCall(op, cl, info.status, time.Since(start))
	}
	if perr != nil {
		c.log.Debug("payroll call failed", "op", op, "class", perr.Class.String(), "status", perr.StatusCode, "reason", perr.Reason)
		return data, perr
	}
	return data, nil
}

// query sends a read-only operation, retrying NotApplied and Ambiguous
// failures (reads are safe to repeat) with backoff that honours Retry-After.
func (c *Client) query(ctx context.Context, op string, vars map[string]any) (json.RawMessage, error) {
	_, doc, err := c.doc(ctx, op)
	if err != nil {
		return nil, err
	}
	return c.retryQuery(ctx, op, doc, vars)
}

func (c *Client) retryQuery(ctx context.Context, op, doc string, vars map[string]any) (json.RawMessage, error) {
	retries := max(c.cfg.QueryRetries, 0)
	for attempt := 0; ; attempt++ {
		data, err := c.exec(ctx, op, doc, vars)
		cl := ClassOf(err)
		if err == nil || attempt >= retries || (cl != NotApplied && cl != Ambiguous) || isValidation(err) {
			return data, err
		}
		wait := backoff(attempt)
		var pe *Error
		if errors.As(err, &pe) && pe.RetryAfter > wait {
			wait = min(pe.RetryAfter, time.Minute)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

func isValidation(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && strings.HasPrefix(pe.Reason, "request refused by schema validation")
}

// backoff is exponential with full jitter: 0..(200ms·2^attempt), at most 10s.
func backoff(attempt int) time.Duration {
	ceil := 200 * time.Millisecond << min(attempt, 6)
	ceil = min(ceil, 10*time.Second)
	return time.Duration(rand.Int64N(int64(ceil))) + 50*time.Millisecond
}

func asError(err error, target **Error) bool { return errors.As(err, target) }

// ---- transport ----

// authTransport adds the bearer token, the User-Agent and Accept headers,
// records whether the request was written (to classify failures), and on a
// 401 refreshes the token once and resends (a 401 means nothing executed).
type authTransport struct {
	base http.RoundTripper
	ts   *TokenSource
	ua   string
}

type wroteFlag struct{ atomic.Bool }

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	info, _ := req.Context().Value(callInfoKey{}).(*callInfo)
	for attempt := 0; ; attempt++ {
		tok, err := t.ts.Token(req.Context())
		if err != nil {
			if info != nil {
				info.refreshErr = err
			}
			return nil, fmt.Errorf("access token: %w", err)
		}
		r := req.Clone(req.Context())
		if attempt > 0 {
			if req.GetBody == nil {
				return nil, errors.New("resend after 401: request body cannot be replayed")
			}
			if r.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("resend after 401: %w", err)
			}
		}
		r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		r.Header.Set("User-Agent", t.ua)
		r.Header.Set("Accept", "application/json")
		var wrote wroteFlag
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			WroteRequest: func(w httptrace.WroteRequestInfo) {
				if w.Err == nil {
					wrote.Store(true)
				}
			},
		}))
		resp, err := t.base.RoundTrip(r)
		if info != nil && wrote.Load() {
			info.wrote = true
		}
		if err != nil {
			return nil, err
		}
		if info != nil {
			info.status, info.header = resp.StatusCode, resp.Header
		}
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			t.ts.Invalidate(tok.AccessToken)
			if info != nil {
				info.wrote = false // the first attempt did not execute
			}
			continue
		}
		return resp, nil
	}
}

// uaTransport sets the User-Agent on token endpoint calls.
type uaTransport struct {
	base http.RoundTripper
	ua   string
}

func (t uaTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", t.ua)
	return t.base.RoundTrip(r)
}
