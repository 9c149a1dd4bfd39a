package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxTokenBody bounds a token or revoke request body.
const maxTokenBody = 64 << 10

// Keycloak's error descriptions, which clients may match on.
const (
	descInvalidClient    = "Invalid client or Invalid client credentials"
	descInvalidUserCreds = "Invalid user credentials"
	descTokenNotActive   = "Token is not active"
	descInvalidRefresh   = "Invalid refresh token"
	descTokenReused      = "Maximum allowed refresh token reuse exceeded"
	descTokenVerifyFail  = "Token verification failed"
)

type userKey struct{}

func withUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// userFrom returns the authenticated user, or "" (who owns nothing).
func userFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// session is one connection of a user with the app: the offline session
// a refresh token stands for.
type session struct {
	id      string
	user    string
	company string // "": every company of the user; else only this one (a connection's scope)
	refresh string // current refresh token
}

type accessToken struct {
	user    string
	session string
	expires time.Time
}

// authority issues and checks tokens, like a Keycloak realm with one client.
type authority struct {
	opts  Options
	users map[string]string // username -> password

	mu       sync.Mutex
	sessions map[string]*session    // by current refresh token
	access   map[string]accessToken // by access token
	spent    map[string]string      // refresh tokens rotated away -> their session's id
	codes    map[string]authCode    // authorization codes (connect.go)
	mcodes   map[string]authCode    // marketplace codes of select-company (connect.go)
}

// maxSpent bounds the memory of rotated-away refresh tokens.
const maxSpent = 1 << 16

func newAuthority(opts Options) *authority {
	return &authority{
		opts:     opts,
		users:    map[string]string{otherUsername: otherPassword, opts.Username: opts.Password},
		sessions: map[string]*session{},
		access:   map[string]accessToken{},
		spent:    map[string]string{},
		codes:    map[string]authCode{},
		mcodes:   map[string]authCode{},
	}
}

// randomToken returns an opaque token of 256 random bits.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return base64.RawURLEncoding.EncodeToString(b)
}

// newSession starts a session for user and returns a copy of it.
func (a *authority) newSession(user string) session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &session{id: randomToken()[:22], user: user, refresh: randomToken()}
	a.sessions[s.refresh] = s
	return *s
}

// refreshResult says why a refresh token was refused ("" = accepted):
// Keycloak's error description.
type refreshResult = string

// refresh finds the session of a refresh token, rotating the token when
// the options say so, and returns a copy of it. Like a Keycloak realm
// with "Revoke Refresh Token" on, a rotated-away token presented again is
// refused as reused and ends its session (Keycloak detaches the client
// session): the newest token of that session stops working too, while the
// access tokens already issued stay valid until they expire.
func (a *authority) refresh(token string) (session, refreshResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[token]
	if !ok {
		if id, reused := a.spent[token]; reused {
			for rt, cur := range a.sessions {
				if cur.id == id {
					delete(a.sessions, rt)
				}
			}
			return session{}, descTokenReused
		}
		if !wellFormed(token) {
			return session{}, descInvalidRefresh // Keycloak cannot even decode it
		}
		return session{}, descTokenNotActive
	}
	if a.opts.Rotate {
		delete(a.sessions, token)
		if len(a.spent) >= maxSpent {
			clear(a.spent)
		}
		a.spent[token] = s.id
		s.refresh = randomToken()
		a.sessions[s.refresh] = s
	}
	return *s, ""
}

// wellFormed says whether tok looks like a token randomToken made.
func wellFormed(tok string) bool {
	if len(tok) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(tok)
	return err == nil
}

// issueAccess returns a new access token for the session. Its exact
// expiry is kept here; the response rounds it up to whole seconds.
func (a *authority) issueAccess(s session) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()
	if len(a.access) > 4096 {
		for tok, at := range a.access {
			if !now.Before(at.expires) {
				delete(a.access, tok)
			}
		}
	}
	tok := randomToken()
	exp := now.Add(a.opts.AccessTTL)
	a.access[tok] = accessToken{user: principal(s.user, s.company), session: s.id, expires: exp}
	return tok
}

// verify checks an Authorization header and returns the user.
func (a *authority) verify(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.access[tok]
	if !ok {
		return "", false
	}
	if !a.opts.Now().Before(at.expires) {
		delete(a.access, tok)
		return "", false
	}
	return at.user, true
}

// revoke ends the session of a refresh token (with its access tokens), or
// revokes a single access token.
func (a *authority) revoke(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sessions[token]; ok {
		delete(a.sessions, token)
		for tok, at := range a.access {
			if at.session == s.id {
				delete(a.access, tok)
			}
		}
		return
	}
	delete(a.access, token)
}

func (a *authority) revokeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.sessions)
	clear(a.access)
	clear(a.spent)
	clear(a.codes)
	clear(a.mcodes)
}

// clientOK authenticates the client by HTTP Basic (RFC 6749 §2.3.1:
// form-encoded id and secret) or by form parameters.
func (a *authority) clientOK(r *http.Request) bool {
	id, secret, basic := r.BasicAuth()
	if basic {
		if v, err := url.QueryUnescape(id); err == nil {
			id = v
		}
		if v, err := url.QueryUnescape(secret); err == nil {
			secret = v
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return id == a.opts.ClientID && secret == a.opts.ClientSecret
}

// tokenResponse is Keycloak's token response.
type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	ExpiresIn        int    `json:"expires_in"`
	RefreshExpiresIn int    `json:"refresh_expires_in"`
	RefreshToken     string `json:"refresh_token"`
	TokenType        string `json:"token_type"`
	NotBeforePolicy  int    `json:"not-before-policy"`
	SessionState     string `json:"session_state"`
	Scope            string `json:"scope"`
}

type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// tokenRequest checks the realm, parses the form and authenticates the
// client. It writes the error response and returns false on failure.
func (s *Server) tokenRequest(w http.ResponseWriter, r *http.Request) bool {
	if r.PathValue("realm") != s.opts.Realm {
		writeJSON(w, http.StatusNotFound, oauthError{Error: "Realm does not exist"})
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBody)
	if err := r.ParseForm(); err != nil {
		s.tokenError(w, http.StatusBadRequest, "invalid_request", "Invalid form body")
		return false
	}
	if !s.auth.clientOK(r) {
		s.tokenError(w, http.StatusUnauthorized, "invalid_client", descInvalidClient)
		return false
	}
	return true
}

func (s *Server) tokenError(w http.ResponseWriter, status int, code, desc string) {
	s.count(func(c *Counters) { c.TokenErrors[code]++ })
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, oauthError{Error: code, Description: desc})
}

// handleToken serves the token endpoint: password, authorization_code
// (connect.go) and refresh_token grants.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	if !s.tokenRequest(w, r) {
		return
	}
	grant := r.PostForm.Get("grant_type")
	var sess session
	switch grant {
	case "password":
		user := r.PostForm.Get("username")
		pw, ok := s.auth.users[user]
		if !ok || user == "" || pw != r.PostForm.Get("password") {
			s.tokenError(w, http.StatusUnauthorized, "invalid_grant", descInvalidUserCreds)
			return
		}
		sess = s.auth.newSession(user)
	case "authorization_code":
		var ok bool
		if sess, ok = s.codeGrant(w, r); !ok {
			return
		}
	case "refresh_token":
		// The client is authenticated (above) before the refresh token is
		// looked at, as Keycloak does: a wrong secret is invalid_client
		// whatever the token, so a client can check its credentials with
		// a token that cannot be valid without spending its own.
		var why refreshResult
		if sess, why = s.auth.refresh(r.PostForm.Get("refresh_token")); why != "" {
			s.tokenError(w, http.StatusBadRequest, "invalid_grant", why)
			return
		}
	case "":
		s.tokenError(w, http.StatusBadRequest, "invalid_request", "Missing form parameter: grant_type")
		return
	default:
		s.tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "Unsupported grant_type")
		return
	}
	s.count(func(c *Counters) { c.TokenGrants[grant]++ })
	s.writeTokens(w, sess)
}

// writeTokens answers with a new access token for the session and its
// refresh token.
func (s *Server) writeTokens(w http.ResponseWriter, sess session) {
	tok := s.auth.issueAccess(sess)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, tokenResponse{
		AccessToken:  tok,
		ExpiresIn:    int(math.Ceil(s.opts.AccessTTL.Seconds())),
		RefreshToken: sess.refresh,
		TokenType:    "Bearer",
		SessionState: sess.id,
		Scope:        "openid email offline_access",
	})
}

// handleRevoke serves the revocation endpoint (RFC 7009): unknown tokens
// are not an error.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	if !s.tokenRequest(w, r) {
		return
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		s.tokenError(w, http.StatusBadRequest, "invalid_request", "Token not provided")
		return
	}
	s.auth.revoke(tok)
	w.WriteHeader(http.StatusOK)
}

// handleDiscovery serves the realm's OpenID configuration, enough for
// clients that discover the token endpoint.
func (s *Server) handleDiscovery(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("realm") != s.opts.Realm {
		writeJSON(w, http.StatusNotFound, oauthError{Error: "Realm does not exist"})
		return
	}
	issuer := "http://" + r.Host + "/auth/realms/" + s.opts.Realm
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                issuer,
		"token_endpoint":                        issuer + "/protocol/openid-connect/token",
		"revocation_endpoint":                   issuer + "/protocol/openid-connect/revoke",
		"authorization_endpoint":                issuer + "/protocol/openid-connect/auth",
		"grant_types_supported":                 []string{"authorization_code", "password", "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

// unauthorized answers a /graphql request without a valid access token.
func (s *Server) unauthorized(w http.ResponseWriter) {
	s.count(func(c *Counters) { c.Unauthorized++ })
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	writeJSON(w, http.StatusUnauthorized, oauthError{Error: "invalid_token", Description: descTokenVerifyFail})
}
