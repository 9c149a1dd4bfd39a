package main

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/payroll/sandbox"
)

// The browser hits the loopback callback twice (a reload, a double click,
// a prefetch) before the user picks the company: the second hit is
// answered "already in progress" and does not exchange the (single-use)
// code again nor end the flow, so the user's choice on select-company,
// made next, is stored.
func TestConnect_SurvivesDuplicateCallback(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	path := filepath.Join(t.TempDir(), "ledger.db")
	env := connectEnv(s, path)
	p := startConnect(t, env, "--timeout", "60s")

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var callback string
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/callback" {
			callback = req.URL.String()
		}
		return nil
	}}
	resp, err := hc.Get(p.authURL)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	resp, err = hc.PostForm(resp.Request.URL.String(), url.Values{"username": {"demo"}, "password": {"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	selectURL := resp.Request.URL.String()
	if resp.Request.URL.Path != "/marketplace/select-company" || callback == "" {
		t.Fatalf("the browser is at %s (callback %q), not select-company", resp.Request.URL.Path, callback)
	}

	// The callback again (no redirects followed).
	once := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := once.Get(callback); err == nil {
		readBody(t, resp)
	}

	// The user picks the company on the page already open.
	resp, err = hc.PostForm(selectURL, url.Values{"company_id": {sandbox.CompanyFjordtech}})
	page := ""
	if err == nil {
		page = readBody(t, resp)
	}
	code := p.wait(t)
	if code != 0 || !strings.Contains(page, "connected to") {
		t.Fatalf("connect after a duplicate callback: exit %d, last page %q (post err %v)\nstderr: %s", code, page, err, p.errb.String())
	}
	if cs := listConnections(t, env); len(cs) != 1 {
		t.Fatalf("connections = %+v, want Fjordtech's", cs)
	}
}
