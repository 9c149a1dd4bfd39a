package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestServer_Admin(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()
	e.mustData(tok, createMutation, map[string]any{"c": CompanyNordlys, "pp": []any{t1(7.5)}}, &struct{}{})

	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	t.Run("state", func(t *testing.T) {
		status, b := do(http.MethodGet, "/_sandbox/state", "")
		var st State
		if err := json.Unmarshal(b, &st); status != 200 || err != nil {
			t.Fatalf("%d %v %s", status, err, b)
		}
		pp := st.Companies[0].PayParts
		if len(pp) != 1 || pp[0].Units.Decimal.String() != "7.5" || pp[0].EmployeeName != "Mette Hansen" ||
			st.Counters.TokenGrants["password"] != 1 || st.Counters.Requests["create_pay_parts"] != 1 {
			t.Fatalf("state = %s", b)
		}
	})
	t.Run("faults", func(t *testing.T) {
		status, b := do(http.MethodPut, "/_sandbox/faults", `[{"kind":"rate_limit","op":"companies","times":1,"retry_after":"3s"}]`)
		if status != 200 || string(b) != `[{"kind":"rate_limit","op":"companies","times":1,"retry_after":"3s"}]`+"\n" {
			t.Fatalf("PUT: %d %s", status, b)
		}
		resp, _, err := e.post(tok, map[string]any{"query": "{ companies { id } }"}, nil)
		if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
			t.Fatalf("after PUT: %v %v", err, resp)
		}
		if status, b := do(http.MethodGet, "/_sandbox/faults", ""); status != 200 || string(b) != "[]\n" {
			t.Fatalf("GET after firing: %d %s", status, b)
		}
		for _, bad := range []string{`{"kind":"latency"}`, `[{"kind":"boom"}]`, `[{"kind":"latency","delay":"soon"}]`} {
			if status, b := do(http.MethodPut, "/_sandbox/faults", bad); status != 400 {
				t.Errorf("PUT %s: %d %s", bad, status, b)
			}
		}
	})
	t.Run("refresh token and revoke", func(t *testing.T) {
		status, b := do(http.MethodPost, "/_sandbox/refresh-token", "")
		var rt struct {
			RefreshToken string `json:"refresh_token"`
		}
		if err := json.Unmarshal(b, &rt); status != 200 || err != nil || rt.RefreshToken == "" {
			t.Fatalf("%d %s", status, b)
		}
		refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt.RefreshToken}}
		status, m := e.postForm(e.tokenURL(), e.clientForm(refresh), "", "")
		if status != 200 {
			t.Fatalf("refresh with issued token: %d %v", status, m)
		}
		if status, _ := do(http.MethodPost, "/_sandbox/revoke", ""); status != 200 {
			t.Fatalf("revoke: %d", status)
		}
		if status, _ := e.postForm(e.tokenURL(), e.clientForm(refresh), "", ""); status != 400 {
			t.Errorf("refresh after revoke: %d, want 400", status)
		}
		if resp, _, _ := e.post(m["access_token"].(string), map[string]any{"query": "{ companies { id } }"}, nil); resp.StatusCode != 401 {
			t.Errorf("access after revoke: %d, want 401", resp.StatusCode)
		}
	})
	t.Run("discovery", func(t *testing.T) {
		status, b := do(http.MethodGet, "/auth/realms/danlon-sandbox/.well-known/openid-configuration", "")
		if status != 200 || !strings.Contains(string(b), e.tokenURL()) {
			t.Fatalf("%d %s", status, b)
		}
	})
}

func TestServer_ConcurrentUse(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.accessToken()
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			if i%2 == 0 {
				e.s.SetFaults(Fault{Kind: FaultLatency, Delay: time.Millisecond})
			}
			resp, b, err := e.post(tok, map[string]any{"query": createMutation, "variables": map[string]any{"c": CompanyNordlys, "pp": []any{t1(1), t1(2)}}}, nil)
			if err == nil && (resp.StatusCode != 200 || strings.Contains(string(b), "errors")) {
				err = &json.UnsupportedValueError{Str: string(b)}
			}
			_ = e.s.State()
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	st := e.s.State()
	if got := len(st.Companies[0].PayParts); got != 2*n {
		t.Fatalf("%d pay parts, want %d", got, 2*n)
	}
	seen := map[string]bool{}
	for _, p := range st.Companies[0].PayParts {
		if seen[p.ID] {
			t.Fatalf("duplicate id %s", p.ID)
		}
		seen[p.ID] = true
	}
}
