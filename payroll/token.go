package payroll

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
)

// StoredToken is what a TokenStore keeps: the newest refresh token and the
// fingerprint of the configured initial token it descends from.
type StoredToken struct {
	RefreshToken string    `json:"refresh_token"`
	Seed         string    `json:"seed"` // Fingerprint of the initial token this one was rotated from
	UpdatedAt    time.Time `json:"updated_at"`

	// The access token that came with it, so that another process started
	// within its lifetime uses it instead of spending the refresh token
	// (with rotation, every refresh is a moment where a crash revokes).
	AccessToken string    `json:"access_token,omitempty"`
	Issued      time.Time `json:"issued,omitzero"`
	Expiry      time.Time `json:"expiry,omitzero"`
}

// TokenStore persists rotated refresh tokens so that a restart never reuses
// a spent one. Load returns ErrNoStoredToken when nothing is stored.
type TokenStore interface {
	Load(ctx context.Context) (StoredToken, error)
	Save(ctx context.Context, t StoredToken) error
}

// Locker is implemented by stores that can serialize refreshes across
// processes (two processes sharing one rotating token must not both spend it).
type Locker interface {
	Lock(ctx context.Context) (unlock func(), err error)
}

// ErrNoStoredToken is returned by TokenStore.Load when nothing is stored.
var ErrNoStoredToken = errors.New("no stored refresh token")

// ErrNoRefreshToken: neither the configuration nor the store holds a
// refresh token. Like a revocation, only an operator can fix it.
var ErrNoRefreshToken = errors.New("no refresh token: set PAYSYNC_REFRESH_TOKEN (or run `paysync auth password --save` against a sandbox)")

// storeError marks a failure of the token store (not of the network).
type storeError struct{ err error }

func (e *storeError) Error() string { return "token store: " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// Fingerprint returns a short, non-reversible identifier of a secret, safe to
// print and log.
func Fingerprint(secret string) string {
	if secret == "" {
		return ""
	}
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:8])
}

// TokenConfig configures a TokenSource.
type TokenConfig struct {
	AuthURL      string // Keycloak base URL
	Realm        string
	ClientID     string
	ClientSecret string
	RefreshToken string     // the configured initial refresh token ("" = use the store's)
	Store        TokenStore // nil: keep rotated tokens in memory only
	HTTPClient   *http.Client
	Now          func() time.Time
}

// TokenURL returns {auth}/auth/realms/{realm}/protocol/openid-connect/token.
func TokenURL(authURL, realm string) string {
	return trimSlash(authURL) + "/auth/realms/" + realm + "/protocol/openid-connect/token"
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// TokenSource hands out access tokens from the refresh_token grant. It
// refreshes ahead of expiry, serializes refreshes (also across processes
// when the store is a Locker), and persists a rotated refresh token before
// the access token that came with it is used.
type TokenSource struct {
	conf  *oauth2.Config
	store TokenStore
	hc    *http.Client
	now   func() time.Time
	seed  string // Fingerprint of the configured initial token
	init  string // the configured initial token

	mu        sync.Mutex
	rt        string        // current refresh token ("" until loaded)
	loaded    bool          // rt was chosen (store or config)
	unsaved   bool          // rt was rotated but not yet persisted
	cur       *oauth2.Token // current access token
	issuedAt  time.Time
	bad       string // an access token the server refused (401): never reused
	refreshes atomic.Int64
	revoked   atomic.Bool // the last refresh was refused (invalid_grant)

	// Under mu too: refused is the last refresh token the server refused
	// (invalid_grant); lineage is the seed saved with rotated tokens: seed,
	// or that of a stored token adopted after the configured one was refused.
	refused     string
	initRefused bool
	lineage     string
	// fromEmpty: the store holds no token, so rt is the configured one
	// (see unspentLocked).
	fromEmpty bool
}

// NewTokenSource returns a TokenSource; it makes no network call.
func NewTokenSource(cfg TokenConfig) *TokenSource {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &TokenSource{
		conf: &oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			Endpoint: oauth2.Endpoint{
				TokenURL:  TokenURL(cfg.AuthURL, cfg.Realm),
				AuthStyle: oauth2.AuthStyleInParams,
			},
		},
		store:   cfg.Store,
		hc:      hc,
		now:     now,
		seed:    Fingerprint(cfg.RefreshToken),
		init:    cfg.RefreshToken,
		lineage: Fingerprint(cfg.RefreshToken),
	}
}

// Refreshes returns how many refresh_token grants succeeded.
func (s *TokenSource) Refreshes() int64 { return s.refreshes.Load() }

// Revoked reports whether the last refresh was refused (invalid_grant)
// and none has worked since: the connection waits for an operator to
// re-connect. It makes no call.
func (s *TokenSource) Revoked() bool { return s.revoked.Load() }

// Current returns the cached access token's expiry without refreshing.
func (s *TokenSource) Current() (expiry time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return time.Time{}, false
	}
	return s.cur.Expiry, true
}

// Token returns a valid access token, refreshing when it is missing or
// close to expiry.
func (s *TokenSource) Token(ctx context.Context) (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.now().Before(s.cur.Expiry.Add(-s.margin())) {
		return s.cur, nil
	}
	return s.refreshLocked(ctx)
}

// Invalidate drops the cached access token if it is still accessToken, so
// the next Token call refreshes (after a 401).
func (s *TokenSource) Invalidate(accessToken string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.AccessToken == accessToken {
		s.cur = nil
	}
	s.bad = accessToken
}

// margin is how long before expiry a token is refreshed: a quarter of its
// lifetime, at most a minute (a 5-minute token is refreshed after 4).
func (s *TokenSource) margin() time.Duration {
	life := s.cur.Expiry.Sub(s.issuedAt)
	m := life / 4
	if m > time.Minute {
		m = time.Minute
	}
	return m
}

// chooseLocked picks the refresh token to spend: the stored one when it
// descends from the configured initial token (or none is configured),
// otherwise the configured one (an operator re-connected) — unless the
// server refused the configured one and the store holds another: then an
// operator re-connected by saving a new token (paysync auth), which a
// running process picks up here, on its next refresh.
func (s *TokenSource) chooseLocked(ctx context.Context) error {
	if s.store == nil {
		if !s.loaded {
			s.rt, s.loaded = s.init, true
		}
		return nil
	}
	st, err := s.store.Load(ctx)
	s.fromEmpty = false
	switch {
	case errors.Is(err, ErrNoStoredToken):
		if s.unsaved { // keep the rotated one we could not save yet
			return nil
		}
		s.rt, s.fromEmpty = s.init, true
	case err != nil:
		return &storeError{err}
	case s.unsaved:
		// Our in-memory rotated token is newer than anything stored.
	case s.init == "" || st.Seed == s.seed || (s.initRefused && st.RefreshToken != "" && st.RefreshToken != s.refused && st.RefreshToken != s.init):
		s.rt, s.lineage = st.RefreshToken, s.seed
		if st.Seed != s.seed {
			s.lineage = st.Seed // adopted: its successors keep its lineage
		}
		// Another process's access token, still good: use it.
		if st.AccessToken != "" && st.AccessToken != s.bad {
			tok := &oauth2.Token{AccessToken: st.AccessToken, TokenType: "Bearer", Expiry: st.Expiry}
			prev, prevIssued := s.cur, s.issuedAt
			s.cur, s.issuedAt = tok, st.Issued
			if !s.now().Before(tok.Expiry.Add(-s.margin())) {
				s.cur, s.issuedAt = prev, prevIssued
			}
		}
	default:
		s.rt, s.lineage = s.init, s.seed
	}
	s.loaded = true
	return nil
}

func (s *TokenSource) refreshLocked(ctx context.Context) (*oauth2.Token, error) {
	if l, ok := s.store.(Locker); ok {
		unlock, err := l.Lock(ctx)
		if err != nil {
			return nil, &storeError{fmt.Errorf("lock: %w", err)}
		}
		defer unlock()
	}
	if err := s.chooseLocked(ctx); err != nil {
		return nil, err
	}
	if s.unsaved {
		if err := s.saveLocked(ctx); err != nil {
			return nil, err
		}
	}
	if s.cur != nil && s.cur.AccessToken != s.bad && s.now().Before(s.cur.Expiry.Add(-s.margin())) {
		return s.cur, nil // loaded from the store: no refresh needed
	}
	if s.rt == "" {
		return nil, &storeError{ErrNoRefreshToken}
	}
	if err := s.unspentLocked(ctx); err != nil {
		return nil, err
	}
	// A refresh in flight must not be abandoned when the caller gives up:
	// with rotation the server may already have spent the old token.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rctx = context.WithValue(rctx, oauth2.HTTPClient, s.hc)
	issued := s.now()
	tok, err := s.conf.TokenSource(rctx, &oauth2.Token{RefreshToken: s.rt}).Token()
	if err != nil && refusedGrant(err) && s.rt == s.init && !s.initRefused && s.store != nil {
		// The configured token is dead; a token an operator saved into the
		// store (paysync auth) is the one to use: try it now.
		s.refused, s.initRefused = s.rt, true
		if cerr := s.chooseLocked(ctx); cerr == nil && s.rt != s.refused {
			issued = s.now()
			tok, err = s.conf.TokenSource(rctx, &oauth2.Token{RefreshToken: s.rt}).Token()
		}
	}
	if err != nil {
		if refusedGrant(err) {
			s.refused = s.rt
			s.initRefused = s.initRefused || s.rt == s.init
			s.revoked.Store(true)
		}
		return nil, s.explainRefusedLocked(ctx, err)
	}
	s.refreshes.Add(1)
	s.revoked.Store(false)
	if tok.RefreshToken != "" && tok.RefreshToken != s.rt {
		s.rt = tok.RefreshToken
	}
	s.cur, s.issuedAt = tok, issued
	// Save the (possibly rotated) refresh token with the access token before
	// the access token is used: never use a token whose successor is not stored.
	s.unsaved = true
	if err := s.saveLocked(rctx); err != nil {
		s.cur = nil
		return nil, err
	}
	return tok, nil
}

func (s *TokenSource) saveLocked(ctx context.Context) error {
	if s.store == nil {
		s.unsaved = false
		return nil
	}
	st := StoredToken{RefreshToken: s.rt, Seed: s.lineage, UpdatedAt: s.now().UTC()}
	if s.cur != nil {
		st.AccessToken, st.Issued, st.Expiry = s.cur.AccessToken, s.issuedAt, s.cur.Expiry
	}
	if err := s.store.Save(ctx, st); err != nil {
		return &storeError{fmt.Errorf("persist rotated refresh token: %w", err)}
	}
	s.unsaved = false
	return nil
}

// refusedGrant: the token endpoint refused the refresh token itself.
func refusedGrant(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == "invalid_grant"
}

// PasswordGrant obtains tokens with the resource-owner password grant.
// TEST ONLY: it exists for sandboxes and demo accounts; production access
// uses the refresh token from the connect flow, and an integration never
// asks a user for payroll credentials.
func PasswordGrant(ctx context.Context, cfg TokenConfig, username, password string) (*oauth2.Token, error) {
	ts := NewTokenSource(cfg)
	hc := ts.hc
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	tok, err := ts.conf.PasswordCredentialsToken(ctx, username, password)
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return nil, fmt.Errorf("password grant: %s: %s", re.ErrorCode, re.ErrorDescription)
	}
	if err != nil {
		return nil, fmt.Errorf("password grant: %w", err)
	}
	return tok, nil
}
