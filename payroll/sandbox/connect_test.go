package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// noRedirect is a client that shows each redirect instead of following it.
func (e *testEnv) noRedirect() *http.Client {
	return &http.Client{Timeout: e.hc.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *testEnv) do(hc *http.Client, method, u string, form url.Values) (int, string, *url.URL) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	loc, _ := resp.Location()
	return resp.StatusCode, string(b), loc
}

// The connect flow: authorization with a test login (offline_access
// required), the code grant's temporary tokens, select-company (the
// user's companies only; ends the temporary tokens), code2token's final
// tokens that see only the company chosen; codes are single use; revoke
// and RevokeCompany end a connection (invalid_grant, 401).
func TestConnectFlow(t *testing.T) {
	e := newEnv(t, Options{Rotate: true})
	o := e.s.Options()
	nr := e.noRedirect()
	const cb = "http://127.0.0.1:9/callback"
	authURL := func(scope string) string {
		return e.base + "/auth/realms/" + o.Realm + "/protocol/openid-connect/auth?" + url.Values{
			"response_type": {"code"}, "client_id": {o.ClientID}, "redirect_uri": {cb}, "scope": {scope}, "state": {"s1"}}.Encode()
	}

	if code, _, loc := e.do(nr, "GET", authURL("openid email"), nil); code != http.StatusFound || loc.Query().Get("error") != "invalid_scope" {
		t.Fatalf("authorize without offline_access = %d %v, want a redirect with invalid_scope", code, loc)
	}
	au := authURL("openid email offline_access")
	if code, page, _ := e.do(nr, "GET", au, nil); code != 200 || !strings.Contains(page, `name="password"`) {
		t.Fatalf("authorize = %d, want the login form:\n%s", code, page)
	}
	if code, page, _ := e.do(nr, "POST", au, url.Values{"username": {"demo"}, "password": {"wrong"}}); code != 200 || !strings.Contains(page, "Invalid username or password") {
		t.Fatalf("a wrong password = %d:\n%s", code, page)
	}
	code, _, loc := e.do(nr, "POST", au, url.Values{"username": {"demo"}, "password": {"demo"}})
	if code != http.StatusFound || loc.Query().Get("state") != "s1" || loc.Query().Get("code") == "" || !strings.HasPrefix(loc.String(), cb) {
		t.Fatalf("login = %d %v, want a redirect to the callback with code and state", code, loc)
	}
	authCode := loc.Query().Get("code")
	exchange := e.clientForm(url.Values{"grant_type": {"authorization_code"}, "code": {authCode}, "redirect_uri": {cb}})
	status, temp := e.postForm(e.tokenURL(), exchange, "", "")
	if status != 200 || temp["refresh_token"] == nil {
		t.Fatalf("code grant = %d %v", status, temp)
	}
	if status, m := e.postForm(e.tokenURL(), exchange, "", ""); status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("the code again = %d %v, want invalid_grant", status, m)
	}

	ret := "http://127.0.0.1:9/selected"
	sel := e.base + "/marketplace/select-company?" + url.Values{"token": {temp["access_token"].(string)}, "return_uri": {ret}}.Encode()
	code, page, _ := e.do(nr, "GET", sel, nil)
	if code != 200 || !strings.Contains(page, CompanyNordlys) || !strings.Contains(page, CompanyFjordtech) || strings.Contains(page, CompanyHavblik) {
		t.Fatalf("select-company = %d, want the user's two companies:\n%s", code, page)
	}
	if code, _, _ := e.do(nr, "POST", sel, url.Values{"company_id": {CompanyHavblik}}); code != http.StatusForbidden {
		t.Fatalf("choosing another user's company = %d, want 403", code)
	}
	code, _, loc = e.do(nr, "POST", sel, url.Values{"company_id": {CompanyFjordtech}})
	if code != http.StatusFound || loc.Query().Get("company_id") != CompanyFjordtech || !strings.HasPrefix(loc.String(), ret) {
		t.Fatalf("choosing Fjordtech = %d %v", code, loc)
	}
	if code, _, _ := e.do(nr, "GET", sel, nil); code != http.StatusUnauthorized {
		t.Fatalf("select-company with the temporary token after the choice = %d, want 401 (revoked)", code)
	}
	if status, m := e.postForm(e.tokenURL(), e.clientForm(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {temp["refresh_token"].(string)}}), "", ""); status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("the temporary refresh token after the choice = %d %v, want invalid_grant", status, m)
	}

	c2t := e.base + "/marketplace/code2token/" + url.PathEscape(loc.Query().Get("code"))
	code, body, _ := e.do(nr, "GET", c2t, nil)
	if code != 200 || !strings.Contains(body, "refresh_token") {
		t.Fatalf("code2token = %d %s", code, body)
	}
	if code, _, _ := e.do(nr, "GET", c2t, nil); code != 400 {
		t.Fatalf("code2token again = %d, want 400", code)
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil {
		t.Fatal(err)
	}
	var cs struct{ Companies []struct{ ID string } }
	e.mustData(tok.AccessToken, `{ companies { id } }`, nil, &cs)
	if len(cs.Companies) != 1 || cs.Companies[0].ID != CompanyFjordtech {
		t.Fatalf("the connection sees %+v, want only Fjordtech", cs.Companies)
	}
	if r := e.gql(tok.AccessToken, `{ pay_parts(company_id: "`+CompanyNordlys+`") { id } }`, nil); len(r.Errors) == 0 {
		t.Fatal("the Fjordtech connection read Nordlys's pay parts")
	}

	// The user disconnects Fjordtech in payroll.
	if n := e.s.RevokeCompany(CompanyFjordtech); n != 1 {
		t.Fatalf("RevokeCompany = %d, want 1", n)
	}
	if resp, _, _ := e.post(tok.AccessToken, map[string]any{"query": `{ companies { id } }`}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an access token of a revoked connection = %d, want 401", resp.StatusCode)
	}
	if status, m := e.postForm(e.tokenURL(), e.clientForm(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}), "", ""); status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("the revoked connection's refresh = %d %v, want invalid_grant", status, m)
	}
}
