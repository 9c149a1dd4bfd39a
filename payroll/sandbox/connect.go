package sandbox

// The partner connect flow (payroll-api-facts §5), so that `paysync
// connect` is tested offline:
//
//  1. GET  {oidc}auth?response_type=code&client_id&redirect_uri&scope&state
//     shows a test login form (the fixture users); POSTing username and
//     password to the same URL redirects to redirect_uri?code&state. The
//     scope must include offline_access.
//  2. POST {oidc}token grant_type=authorization_code&code&redirect_uri: the
//     temporary tokens (a session that sees every company of the user).
//  3. GET  /marketplace/select-company?token=<temporary access token>&return_uri
//     lists the user's companies; POSTing company_id to the same URL ends
//     the temporary session and redirects to return_uri?code&company_id.
//  4. GET  /marketplace/code2token/{code}: the final tokens, scoped to the
//     chosen company: that refresh token and its access tokens see and act
//     on that company only.
//
// Codes are single use and live a minute. Any absolute http(s)
// redirect_uri is accepted (Keycloak checks it against the client's
// registered ones; a loopback callback needs http://127.0.0.1/* there).
// The token parameter of
// select-company is the raw access token (Danløn's encoding is unknown).
// Revoking the final refresh token (POST {oidc}revoke) ends its session:
// refreshes are then refused with invalid_grant and its access tokens
// with 401. RevokeCompany is the user disconnecting in Danløn.

import (
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// codeTTL is how long an authorization or marketplace code is valid.
const codeTTL = time.Minute

// principal is who an access token acts for: a user, or a user within one
// company (a connection's scope), as userFrom returns it.
func principal(user, company string) string {
	if company == "" {
		return user
	}
	return user + "\x1f" + company
}

// owns reports whether the principal may see company id owned by owner.
func owns(p, owner, id string) bool {
	user, company, scoped := strings.Cut(p, "\x1f")
	return user == owner && (!scoped || company == id)
}

// authCode is an authorization code (OIDC) or a marketplace code.
type authCode struct {
	user, company string
	redirect      string // the redirect_uri it was issued for ("" for marketplace codes)
	expires       time.Time
}

// takeCode returns and forgets a code that has not expired.
func (a *authority) takeCode(codes map[string]authCode, code string) (authCode, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := codes[code]
	delete(codes, code)
	if !ok || !a.opts.Now().Before(c.expires) {
		return authCode{}, false
	}
	return c, true
}

func (a *authority) putCode(codes map[string]authCode, c authCode) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()
	for k, v := range codes {
		if !now.Before(v.expires) {
			delete(codes, k)
		}
	}
	c.expires = now.Add(codeTTL)
	code := randomToken()
	codes[code] = c
	return code
}

// newScopedSession starts a session of user that sees only company.
func (a *authority) newScopedSession(user, company string) session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &session{id: randomToken()[:22], user: user, company: company, refresh: randomToken()}
	a.sessions[s.refresh] = s
	return *s
}

// endSessions ends the sessions match takes, with their access tokens.
func (a *authority) endSessions(match func(*session) bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := map[string]bool{}
	for rt, s := range a.sessions {
		if match(s) {
			ids[s.id] = true
			delete(a.sessions, rt)
		}
	}
	for tok, at := range a.access {
		if ids[at.session] {
			delete(a.access, tok)
		}
	}
	return len(ids)
}

// accessOf returns the live access token's record.
func (a *authority) accessOf(tok string) (accessToken, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.access[tok]
	if !ok || !a.opts.Now().Before(at.expires) {
		return accessToken{}, false
	}
	return at, true
}

// RevokeCompany is the user disconnecting the app in payroll for one
// company: every connection scoped to it ends (refreshes are refused with
// invalid_grant, access tokens with 401). It returns how many ended.
func (s *Server) RevokeCompany(companyID string) int {
	return s.auth.endSessions(func(ss *session) bool { return ss.company == companyID })
}

func (s *Server) connectRoutes(mux *http.ServeMux) {
	const oidc = "/auth/realms/{realm}/protocol/openid-connect/"
	mux.HandleFunc("GET "+oidc+"auth", s.handleAuthorize)
	mux.HandleFunc("POST "+oidc+"auth", s.handleAuthorize)
	mux.HandleFunc("GET /marketplace/select-company", s.handleSelectCompany)
	mux.HandleFunc("POST /marketplace/select-company", s.handleSelectCompany)
	mux.HandleFunc("GET /marketplace/code2token/{code}", s.handleCode2Token)
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head><body>
<h1>{{.Title}}</h1>
{{if .Message}}<p>{{.Message}}</p>{{end}}
{{if .Login}}<form method="post">
<label>Username <input name="username" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Log in</button>
</form>{{end}}
{{range .Companies}}<form method="post"><button name="company_id" value="{{.ID}}">{{.Name}} ({{.ID}})</button></form>
{{end}}</body></html>
`))

type pageData struct {
	Title, Message string
	Login          bool
	Companies      []struct{ ID, Name string }
}

func writePage(w http.ResponseWriter, status int, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, d)
}

// handleAuthorize is the authorization endpoint with its test login.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("realm") != s.opts.Realm {
		writePage(w, http.StatusNotFound, pageData{Title: "Realm does not exist"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBody)
	if err := r.ParseForm(); err != nil {
		writePage(w, http.StatusBadRequest, pageData{Title: "Invalid request"})
		return
	}
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("client_id") != s.opts.ClientID:
		writePage(w, http.StatusBadRequest, pageData{Title: "Client not found"})
		return
	case err != nil || (redirect.Scheme != "http" && redirect.Scheme != "https") || redirect.Host == "":
		writePage(w, http.StatusBadRequest, pageData{Title: "Invalid parameter: redirect_uri"})
		return
	case q.Get("response_type") != "code":
		redirectWith(w, r, redirect, url.Values{"error": {"unsupported_response_type"}, "state": {q.Get("state")}})
		return
	case !slices.Contains(strings.Fields(q.Get("scope")), "offline_access"):
		redirectWith(w, r, redirect, url.Values{"error": {"invalid_scope"}, "error_description": {"the connect flow needs offline_access"}, "state": {q.Get("state")}})
		return
	}
	if r.Method == http.MethodGet {
		writePage(w, http.StatusOK, pageData{Title: "Log in to the payroll sandbox", Login: true})
		return
	}
	user := r.PostForm.Get("username")
	pw, ok := s.auth.users[user]
	if !ok || user == "" || pw != r.PostForm.Get("password") {
		writePage(w, http.StatusOK, pageData{Title: "Log in to the payroll sandbox", Message: "Invalid username or password.", Login: true})
		return
	}
	code := s.auth.putCode(s.auth.codes, authCode{user: user, redirect: redirect.String()})
	redirectWith(w, r, redirect, url.Values{"code": {code}, "state": {q.Get("state")}})
}

// redirectWith redirects to u with params added to its query.
func redirectWith(w http.ResponseWriter, r *http.Request, u *url.URL, params url.Values) {
	v := u.Query()
	for k, vs := range params {
		for _, x := range vs {
			v.Add(k, x)
		}
	}
	to := *u
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

// codeGrant is the token endpoint's authorization_code grant: the
// temporary tokens of the connect flow (no company scope yet). It writes
// the error response and returns false on failure.
func (s *Server) codeGrant(w http.ResponseWriter, r *http.Request) (session, bool) {
	c, ok := s.auth.takeCode(s.auth.codes, r.PostForm.Get("code"))
	if !ok || c.redirect != r.PostForm.Get("redirect_uri") {
		s.tokenError(w, http.StatusBadRequest, "invalid_grant", "Code not valid")
		return session{}, false
	}
	return s.auth.newSession(c.user), true
}

// handleSelectCompany is the marketplace's select-company page.
func (s *Server) handleSelectCompany(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBody)
	if err := r.ParseForm(); err != nil {
		writePage(w, http.StatusBadRequest, pageData{Title: "Invalid request"})
		return
	}
	q := r.URL.Query()
	at, ok := s.auth.accessOf(q.Get("token"))
	if !ok {
		writePage(w, http.StatusUnauthorized, pageData{Title: "Not logged in", Message: "The token is missing, expired or revoked: start connecting again."})
		return
	}
	ret, err := url.Parse(q.Get("return_uri"))
	if err != nil || (ret.Scheme != "http" && ret.Scheme != "https") || ret.Host == "" {
		writePage(w, http.StatusBadRequest, pageData{Title: "Invalid parameter: return_uri"})
		return
	}
	companies := s.st.companiesOf(at.user, nil)
	if r.Method == http.MethodGet {
		d := pageData{Title: "Choose the company to connect"}
		for _, c := range companies {
			d.Companies = append(d.Companies, struct{ ID, Name string }{c.id, c.name})
		}
		writePage(w, http.StatusOK, d)
		return
	}
	id := r.PostForm.Get("company_id")
	if !slices.ContainsFunc(companies, func(c companyView) bool { return c.id == id }) {
		writePage(w, http.StatusForbidden, pageData{Title: "Unknown company", Message: "You cannot connect that company."})
		return
	}
	user, _, _ := strings.Cut(at.user, "\x1f")
	// The temporary tokens end here, as Danløn's guide says.
	s.auth.endSessions(func(ss *session) bool { return ss.id == at.session })
	code := s.auth.putCode(s.auth.mcodes, authCode{user: user, company: id})
	redirectWith(w, r, ret, url.Values{"code": {code}, "company_id": {id}})
}

// handleCode2Token trades a marketplace code for the final tokens.
func (s *Server) handleCode2Token(w http.ResponseWriter, r *http.Request) {
	c, ok := s.auth.takeCode(s.auth.mcodes, r.PathValue("code"))
	if !ok {
		s.tokenError(w, http.StatusBadRequest, "invalid_grant", "Code not valid")
		return
	}
	sess := s.auth.newScopedSession(c.user, c.company)
	s.count(func(c *Counters) { c.TokenGrants["code2token"]++ })
	s.writeTokens(w, sess)
}

// IssueCompanyToken returns a new offline refresh token of the fixture
// user scoped to one company, as if the user had connected the app for
// that company (code2token's token).
func (s *Server) IssueCompanyToken(companyID string) string {
	return s.auth.newScopedSession(s.opts.Username, companyID).refresh
}
