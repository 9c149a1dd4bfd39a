package sandbox

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestServer_PasswordGrant(t *testing.T) {
	e := newEnv(t, Options{})
	tests := []struct {
		name            string
		form            url.Values
		basic           bool
		wantStatus      int
		wantError, desc string
	}{
		{name: "form client auth", form: url.Values{"grant_type": {"password"}, "username": {"demo"}, "password": {"demo"}}, wantStatus: 200},
		{name: "basic client auth", form: url.Values{"grant_type": {"password"}, "username": {"demo"}, "password": {"demo"}}, basic: true, wantStatus: 200},
		{name: "other user", form: url.Values{"grant_type": {"password"}, "username": {"other"}, "password": {"other"}}, wantStatus: 200},
		{name: "wrong password", form: url.Values{"grant_type": {"password"}, "username": {"demo"}, "password": {"nope"}}, wantStatus: 401, wantError: "invalid_grant", desc: "Invalid user credentials"},
		{name: "unknown user", form: url.Values{"grant_type": {"password"}, "username": {"mallory"}, "password": {"demo"}}, wantStatus: 401, wantError: "invalid_grant", desc: "Invalid user credentials"},
		{name: "unsupported grant", form: url.Values{"grant_type": {"client_credentials"}}, wantStatus: 400, wantError: "unsupported_grant_type"},
		{name: "missing grant", form: url.Values{}, wantStatus: 400, wantError: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var status int
			var m map[string]any
			if tt.basic {
				status, m = e.postForm(e.tokenURL(), tt.form, "paysync-sandbox", "sandbox-secret")
			} else {
				status, m = e.postForm(e.tokenURL(), e.clientForm(tt.form), "", "")
			}
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%v)", status, tt.wantStatus, m)
			}
			if tt.wantError != "" {
				if m["error"] != tt.wantError || (tt.desc != "" && m["error_description"] != tt.desc) {
					t.Fatalf("body = %v, want error %q %q", m, tt.wantError, tt.desc)
				}
				return
			}
			for k, want := range map[string]any{
				"token_type": "Bearer", "expires_in": 300.0, "refresh_expires_in": 0.0,
				"not-before-policy": 0.0, "scope": "openid email offline_access",
			} {
				if m[k] != want {
					t.Errorf("%s = %v, want %v", k, m[k], want)
				}
			}
			for _, k := range []string{"access_token", "refresh_token", "session_state"} {
				if s, _ := m[k].(string); len(s) < 16 {
					t.Errorf("%s = %q, want an opaque random token", k, m[k])
				}
			}
		})
	}
	c := e.s.State().Counters
	if c.TokenGrants["password"] != 3 || c.TokenErrors["invalid_grant"] != 2 || c.TokenErrors["unsupported_grant_type"] != 1 {
		t.Errorf("counters = %+v", c)
	}
}

func TestServer_ClientAuthAndRealm(t *testing.T) {
	e := newEnv(t, Options{ClientID: "app", ClientSecret: "s3cret/+"})
	grant := url.Values{"grant_type": {"password"}, "username": {"demo"}, "password": {"demo"}}
	with := func(id, secret string) url.Values {
		v := url.Values{"client_id": {id}, "client_secret": {secret}}
		for k, vs := range grant {
			v[k] = vs
		}
		return v
	}
	tests := []struct {
		name               string
		url                string
		form               url.Values
		basicID, basicSec  string
		wantStatus         int
		wantError, wantDsc string
	}{
		{name: "good form", url: e.tokenURL(), form: with("app", "s3cret/+"), wantStatus: 200},
		{name: "good basic with escaped secret", url: e.tokenURL(), form: grant, basicID: "app", basicSec: "s3cret/+", wantStatus: 200},
		{name: "bad secret", url: e.tokenURL(), form: with("app", "wrong"), wantStatus: 401, wantError: "invalid_client", wantDsc: "Invalid client or Invalid client credentials"},
		{name: "bad id", url: e.tokenURL(), form: with("nope", "s3cret/+"), wantStatus: 401, wantError: "invalid_client"},
		{name: "bad basic", url: e.tokenURL(), form: grant, basicID: "app", basicSec: "x", wantStatus: 401, wantError: "invalid_client"},
		{name: "no client", url: e.tokenURL(), form: grant, wantStatus: 401, wantError: "invalid_client"},
		{name: "wrong realm", url: e.base + "/auth/realms/master/protocol/openid-connect/token", form: with("app", "s3cret/+"), wantStatus: 404, wantError: "Realm does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := e.postForm(tt.url, tt.form, tt.basicID, tt.basicSec)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%v)", status, tt.wantStatus, m)
			}
			if tt.wantError != "" && m["error"] != tt.wantError {
				t.Errorf("error = %v, want %q", m["error"], tt.wantError)
			}
			if tt.wantDsc != "" && m["error_description"] != tt.wantDsc {
				t.Errorf("error_description = %v, want %q", m["error_description"], tt.wantDsc)
			}
		})
	}
}

func TestServer_RefreshGrant(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(map[bool]string{false: "no rotation", true: "rotation"}[rotate], func(t *testing.T) {
			e := newEnv(t, Options{Rotate: rotate})
			refresh := func(tok string) (int, map[string]any) {
				return e.postForm(e.tokenURL(), e.clientForm(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}), "", "")
			}
			rt0 := e.s.IssueRefreshToken()
			status, m := refresh(rt0)
			if status != 200 {
				t.Fatalf("first refresh: %d %v", status, m)
			}
			rt1 := m["refresh_token"].(string)
			if rotate == (rt1 == rt0) {
				t.Fatalf("rotate=%v: refresh token changed = %v", rotate, rt1 != rt0)
			}
			if r := e.gql(m["access_token"].(string), `{ current_company { id } }`, nil); len(r.Errors) > 0 {
				t.Fatalf("access token from refresh grant: %+v", r.Errors)
			}
			// The client is authenticated before the token is looked at
			// (as Keycloak does): a wrong secret is invalid_client whatever
			// the token, a right one with a token that cannot be valid is
			// invalid_grant, and neither spends the session's token.
			for _, tok := range []string{rt1, "never-issued"} {
				status, m := e.postForm(e.tokenURL(), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok},
					"client_id": {e.s.Options().ClientID}, "client_secret": {"wrong"}}, "", "")
				if status != 401 || m["error"] != "invalid_client" {
					t.Fatalf("wrong secret: %d %v, want 401 invalid_client", status, m)
				}
			}
			if status, m := refresh("never-issued"); status != 400 || m["error"] != "invalid_grant" || m["error_description"] != "Invalid refresh token" {
				t.Fatalf("malformed refresh token: %d %v, want 400 invalid_grant Invalid refresh token", status, m)
			}
			if status, m := refresh(strings.Repeat("A", 43)); status != 400 || m["error_description"] != "Token is not active" {
				t.Fatalf("unknown refresh token: %d %v, want 400 invalid_grant Token is not active", status, m)
			}
			// Reusing the first token works only without rotation; with
			// rotation it is refused as reused and ends the session, so the
			// newest token stops working too (Keycloak's "Revoke Refresh
			// Token"), while the access token already issued still works.
			at := m["access_token"].(string)
			status, m = refresh(rt0)
			if rotate {
				if status != 400 || m["error"] != "invalid_grant" || m["error_description"] != "Maximum allowed refresh token reuse exceeded" {
					t.Fatalf("reuse after rotation: %d %v, want 400 invalid_grant reuse exceeded", status, m)
				}
				if status, m := refresh(rt1); status != 400 || m["error"] != "invalid_grant" {
					t.Fatalf("newest token after a reuse: %d %v, want 400 invalid_grant", status, m)
				}
				if r := e.gql(at, `{ current_company { id } }`, nil); len(r.Errors) > 0 {
					t.Fatalf("access token after the session ended: %+v", r.Errors)
				}
				return
			}
			if status != 200 || m["refresh_token"] != rt0 {
				t.Fatalf("reuse without rotation: %d %v", status, m)
			}
			if status, m := refresh(rt1); status != 200 {
				t.Fatalf("refresh with newest token: %d %v", status, m)
			}
		})
	}
}

func TestServer_Revoke(t *testing.T) {
	e := newEnv(t, Options{})
	m := e.login("demo", "demo")
	rt, at := m["refresh_token"].(string), m["access_token"].(string)
	other := e.accessToken() // a second session survives the revocation
	revokeURL := e.base + "/auth/realms/danlon-sandbox/protocol/openid-connect/revoke"

	if status, body := e.postForm(revokeURL, url.Values{"token": {rt}}, "", ""); status != 401 {
		t.Fatalf("revoke without client auth: %d %v", status, body)
	}
	if status, body := e.postForm(revokeURL, e.clientForm(url.Values{"token": {rt}}), "", ""); status != 200 || body != nil {
		t.Fatalf("revoke: %d %v, want 200 with empty body", status, body)
	}
	if status, _ := e.postForm(e.tokenURL(), e.clientForm(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}), "", ""); status != 400 {
		t.Fatalf("refresh after revoke: %d, want 400", status)
	}
	if resp, _, _ := e.post(at, map[string]any{"query": "{ current_company { id } }"}, nil); resp.StatusCode != 401 {
		t.Fatalf("access token of revoked session: %d, want 401", resp.StatusCode)
	}
	if r := e.gql(other, "{ current_company { id } }", nil); len(r.Errors) > 0 {
		t.Fatalf("other session: %+v", r.Errors)
	}

	e.s.RevokeAll()
	if resp, _, _ := e.post(other, map[string]any{"query": "{ current_company { id } }"}, nil); resp.StatusCode != 401 {
		t.Fatalf("after RevokeAll: %d, want 401", resp.StatusCode)
	}
}

func TestServer_BearerCheck(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 4, 1, 8, 0, 0, 0, time.UTC)}
	e := newEnv(t, Options{AccessTTL: 50 * time.Millisecond, Now: clk.Now})
	m := e.login("demo", "demo")
	if m["expires_in"] != 1.0 {
		t.Errorf("expires_in for a 50ms TTL = %v, want 1 (rounded up)", m["expires_in"])
	}
	expired := m["access_token"].(string)
	clk.Add(50 * time.Millisecond)
	fresh := e.accessToken()

	tests := []struct {
		name   string
		header string
		want   int
	}{
		{"no header", "", 401},
		{"not bearer", "Basic " + fresh, 401},
		{"unknown token", "Bearer nope", 401},
		{"expired token", "Bearer " + expired, 401},
		{"valid token", "Bearer " + fresh, 200},
		{"scheme case-insensitive", "bearer " + fresh, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("Authorization", tt.header)
			}
			resp, b, err := e.post("", map[string]any{"query": "{ current_company { id } }"}, h)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if tt.want == 401 {
				if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
					t.Errorf("WWW-Authenticate = %q", got)
				}
				if want := `{"error":"invalid_token","error_description":"Token verification failed"}` + "\n"; string(b) != want {
					t.Errorf("body = %s, want %s", b, want)
				}
			}
		})
	}
	if got := e.s.State().Counters.Unauthorized; got != 4 {
		t.Errorf("Unauthorized = %d, want 4", got)
	}
}

func TestServer_Visibility(t *testing.T) {
	e := newEnv(t, Options{})
	other := e.login("other", "other")["access_token"].(string)
	var d struct {
		Companies []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"companies"`
		CurrentCompany struct{ ID string } `json:"current_company"`
	}
	e.mustData(other, `{ companies { id name } current_company { id } }`, nil, &d)
	if len(d.Companies) != 1 || d.Companies[0].ID != CompanyHavblik || d.CurrentCompany.ID != CompanyHavblik {
		t.Fatalf("other sees %+v", d)
	}
	r := e.gql(other, `query($c: ID!) { pay_parts(company_id: $c) { id } }`, map[string]any{"c": CompanyNordlys})
	if len(r.Errors) != 1 || r.Errors[0].Message != "company MV8x not found" {
		t.Fatalf("other reading Nordlys: %+v", r.Errors)
	}
}
