package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// testEnv is a sandbox served over real HTTP by httptest.
type testEnv struct {
	t    *testing.T
	s    *Server
	base string
	hc   *http.Client
}

func newEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	s := New(opts)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx) // ends fault waits before httptest waits for handlers
		ts.Close()
	})
	return &testEnv{t: t, s: s, base: ts.URL, hc: &http.Client{Timeout: 10 * time.Second}}
}

func (e *testEnv) tokenURL() string {
	return e.base + "/auth/realms/" + e.s.Options().Realm + "/protocol/openid-connect/token"
}

// postForm posts a form and decodes the JSON answer (nil for an empty body).
func (e *testEnv) postForm(u string, form url.Values, basicID, basicSecret string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicID != "" {
		req.SetBasicAuth(url.QueryEscape(basicID), url.QueryEscape(basicSecret))
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) == 0 {
		return resp.StatusCode, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("token endpoint answered %d with non-JSON %q", resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

func (e *testEnv) clientForm(v url.Values) url.Values {
	o := e.s.Options()
	v.Set("client_id", o.ClientID)
	v.Set("client_secret", o.ClientSecret)
	return v
}

// login runs the password grant for user and returns the token response.
func (e *testEnv) login(user, password string) map[string]any {
	e.t.Helper()
	status, m := e.postForm(e.tokenURL(), e.clientForm(url.Values{
		"grant_type": {"password"}, "username": {user}, "password": {password},
	}), "", "")
	if status != http.StatusOK {
		e.t.Fatalf("password grant for %s: %d %v", user, status, m)
	}
	return m
}

// accessToken logs the fixture user in and returns an access token.
func (e *testEnv) accessToken() string {
	e.t.Helper()
	return e.login("demo", "demo")["access_token"].(string)
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
	Path       []any          `json:"path"`
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// post sends a raw /graphql request and returns the response (body read
// into the returned bytes) or the transport error.
func (e *testEnv) post(token string, body any, header http.Header) (*http.Response, []byte, error) {
	e.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.base+"/graphql", bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp, rb, err
}

// gql runs a GraphQL request that must answer 200 and returns the decoded
// body.
func (e *testEnv) gql(token, query string, vars map[string]any) gqlResponse {
	e.t.Helper()
	resp, b, err := e.post(token, map[string]any{"query": query, "variables": vars}, nil)
	if err != nil {
		e.t.Fatalf("graphql request: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("graphql status %d: %s", resp.StatusCode, b)
	}
	var r gqlResponse
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatalf("graphql body %q: %v", b, err)
	}
	return r
}

// mustData runs a request that must succeed and decodes its data into v.
func (e *testEnv) mustData(token, query string, vars map[string]any, v any) {
	e.t.Helper()
	r := e.gql(token, query, vars)
	if len(r.Errors) > 0 {
		e.t.Fatalf("graphql errors: %+v", r.Errors)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		e.t.Fatalf("decode data %s: %v", r.Data, err)
	}
}

// payPartCount returns the number of pay parts in the sandbox.
func (e *testEnv) payPartCount() int {
	n := 0
	for _, c := range e.s.State().Companies {
		n += len(c.PayParts)
	}
	return n
}

// fakeClock is a settable clock for token expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const createMutation = `mutation Create($c: ID!, $pp: [PayPartInput]) {
  create_pay_parts(company_id: $c, pay_parts: $pp) { id code units rate amount employee { id name } }
}`

// t1 is a valid T1 item for Mette Hansen.
func t1(units float64) map[string]any {
	return map[string]any{"employee_id": EmpMetteHansen, "code": "T1", "units": units}
}
