package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Access: the console password through the login form (a session) or
// HTTP Basic auth; every POST checked for its origin and CSRF token.

const (
	sessionCookie = "paysync_console"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1000
)

// who is the caller of one request, as the audit log names it.
type who struct {
	Actor  string // "console", "basic:NAME", "console (loopback, no password)"
	Remote string
	CSRF   string // the token every POST of this caller must carry
	sessID string // "" for Basic auth and no password
}

type session struct {
	csrf    string
	expires time.Time
}

type auth struct {
	password string
	key      []byte // signs the CSRF tokens of callers without a session
	now      func() time.Time

	mu       sync.Mutex
	sessions map[string]session
	limits   map[string]*rate.Limiter // failed logins per remote host
}

func newAuth(password string, now func() time.Time) *auth {
	return &auth{password: password, key: []byte(randomToken()), now: now, sessions: map[string]session{}, limits: map[string]*rate.Limiter{}}
}

// randomToken is 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sign derives a CSRF token for a caller without a session.
func (a *auth) sign(what string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(what))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// passwordOK compares in constant time (of the hashes: the length of
// the password is not told either).
func (a *auth) passwordOK(p string) bool {
	x, y := sha256.Sum256([]byte(p)), sha256.Sum256([]byte(a.password))
	return a.password != "" && subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// limiter is host's budget of wrong passwords: five, then one every 12
// seconds.
func (a *auth) limiter(host string) *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.limits[host]
	if l == nil {
		if len(a.limits) > 10000 {
			clear(a.limits)
		}
		l = rate.NewLimiter(rate.Every(12*time.Second), 5)
		a.limits[host] = l
	}
	return l
}

// blocked reports whether host spent its budget of wrong passwords.
func (a *auth) blocked(host string) bool { return a.limiter(host).TokensAt(a.now()) < 1 }

// wrong spends one of host's wrong passwords.
func (a *auth) wrong(host string) { a.limiter(host).AllowN(a.now(), 1) }

func (a *auth) newSession() (id string, s session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if len(a.sessions) >= maxSessions {
		for k, v := range a.sessions {
			if now.After(v.expires) {
				delete(a.sessions, k)
			}
		}
		if len(a.sessions) >= maxSessions {
			clear(a.sessions)
		}
	}
	id, s = randomToken(), session{csrf: randomToken(), expires: now.Add(sessionTTL)}
	a.sessions[id] = s
	return id, s
}

func (a *auth) session(id string) (session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if ok && a.now().After(s.expires) {
		delete(a.sessions, id)
		return s, false
	}
	return s, ok
}

func (a *auth) endSession(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// caller authenticates r: its session, its Basic auth, or (without a
// password) a loopback request.
func (s *Server) caller(r *http.Request) (who, bool) {
	a := s.auth
	remote := remoteHost(r)
	if a.password == "" {
		// Loopback only; a page of another site that rebinds its name to
		// 127.0.0.1 names its own host: refused.
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !loopbackHost(host) {
			return who{}, false
		}
		return who{Actor: "console (loopback, no password)", Remote: remote, CSRF: a.sign("loopback")}, true
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := a.session(c.Value); ok {
			return who{Actor: "console", Remote: remote, CSRF: sess.csrf, sessID: c.Value}, true
		}
	}
	if user, pass, ok := r.BasicAuth(); ok {
		if a.blocked(remote) {
			return who{}, false
		}
		if a.passwordOK(pass) {
			return who{Actor: "basic:" + user, Remote: remote, CSRF: a.sign("basic:" + user)}, true
		}
		a.wrong(remote)
	}
	return who{}, false
}

// guard serves fn to authenticated callers only, and a POST only from the
// console's own pages (same origin, the caller's CSRF token).
func (s *Server) guard(fn func(http.ResponseWriter, *http.Request, who)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.caller(r)
		if !ok {
			if r.Method == http.MethodGet && s.auth.password != "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Basic ") {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			if s.auth.password != "" {
				w.Header().Set("WWW-Authenticate", `Basic realm="paysync console", charset="UTF-8"`)
			}
			s.fail(w, r, http.StatusUnauthorized, "log in first: the console password (PAYSYNC_CONSOLE_PASSWORD) is needed")
			return
		}
		if r.Method == http.MethodPost {
			if why := s.forged(r, c.CSRF); why != "" {
				s.log.Warn("console: refused a POST", "path", r.URL.Path, "remote", c.Remote, "why", why)
				s.fail(w, r, http.StatusForbidden, "refused: "+why)
				return
			}
		}
		fn(w, r, c)
	})
}

// forged says why a POST did not come from the console's own form ("":
// it did).
func (s *Server) forged(r *http.Request, csrf string) string {
	if why := s.crossSite(r); why != "" {
		return why
	}
	got := r.PostFormValue("csrf")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1 {
		return "the form's CSRF token is missing or not this session's (reload the page and submit again)"
	}
	return ""
}

// crossSite says why r comes from another site ("": it does not).
func (s *Server) crossSite(r *http.Request) string {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return "a cross-site request (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return "a request from another origin (" + o + ")"
		}
	}
	return ""
}

func (s *Server) setSessionCookie(w http.ResponseWriter, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.tls})
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if s.auth.password == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", who{}, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next, Error string
}

// safeNext keeps a redirect after login on the console.
func safeNext(n string) string {
	// Browsers drop tabs and line breaks from a Location and read a
	// backslash as a slash, so "/\t/evil" is "//evil": any of them, or any
	// other control character or space, and the page is the overview.
	if !strings.HasPrefix(n, "/") || strings.HasPrefix(n, "//") || strings.ContainsFunc(n, func(r rune) bool {
		return r == '\\' || r <= ' ' || r == 0x7f
	}) {
		return "/"
	}
	return n
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.auth.password == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if why := s.crossSite(r); why != "" {
		s.fail(w, r, http.StatusForbidden, "refused: "+why)
		return
	}
	if s.auth.blocked(remoteHost(r)) {
		s.render(w, r, http.StatusTooManyRequests, "login", who{}, loginData{Next: next, Error: "Too many tries: wait a minute and try again."})
		return
	}
	if !s.auth.passwordOK(r.PostFormValue("password")) {
		s.auth.wrong(remoteHost(r))
		s.log.Warn("console: wrong password", "remote", remoteHost(r))
		s.render(w, r, http.StatusUnauthorized, "login", who{}, loginData{Next: next, Error: "Wrong password."})
		return
	}
	id, _ := s.auth.newSession()
	s.setSessionCookie(w, id, int(sessionTTL.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, c who) {
	if c.sessID != "" {
		s.auth.endSession(c.sessID)
	}
	s.setSessionCookie(w, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
