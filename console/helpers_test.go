package console_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/console"
	"github.com/paysync/paysync/deploy/examples"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

const testPassword = "correct horse battery staple"

// env is a console over a real ledger whose one import went to the
// sandbox payroll over loopback HTTP.
type env struct {
	sb      *sandbox.Server
	cl      *payroll.Client
	led     *ledger.Ledger
	srv     *httptest.Server
	console *console.Server
	cfg     console.Config
	batch   int64 // the import's batch
	rules   *mapping.Rules
	mapper  *mapping.Mapper
	schema  payroll.Schema
	refresh string
	secret  string
}

func ctxOf(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return c
}

// setup imports the Toggl example into a new ledger and serves the
// console for it (password: testPassword, "" for none).
func setup(t testing.TB, password string) *env {
	t.Helper()
	ctx := ctxOf(t)
	sb := sandbox.New(sandbox.Options{})
	ps := httptest.NewServer(sb.Handler())
	t.Cleanup(ps.Close)
	o := sb.Options()
	e := &env{sb: sb, refresh: sb.IssueRefreshToken(), secret: o.ClientSecret}
	cl, err := payroll.New(payroll.Config{URL: ps.URL, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RefreshToken: e.refresh, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	if e.led, err = ledger.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.led.Close() })
	rulesYAML, _ := examples.Files.ReadFile("rules.yaml")
	rules, err := mapping.LoadRules("rules.yaml", bytes.NewReader(rulesYAML))
	if err != nil {
		t.Fatal(err)
	}
	deliverer := func() *worker.Deliverer { return &worker.Deliverer{L: e.led, P: cl, DeleteChunk: 100} }
	waiter := func() *payroll.Waiter { return &payroll.Waiter{Until: time.Now().Add(10 * time.Second)} }
	mapper, schema, err := worker.Begin(ctx, waiter(), cl, rules, "", deliverer())
	if err != nil {
		t.Fatal(err)
	}
	im := &worker.Importer{L: e.led, D: deliverer(), Mapper: mapper, Rules: rules, Wire: schema, BatchSize: 100}
	csv, _ := examples.Files.ReadFile("toggl.csv")
	rep, err := im.Import(ctx, paysync.SourceFile, "toggl.csv", csv)
	if err != nil {
		t.Fatalf("import: %+v, %v", rep, err)
	}
	// The reconcile after the import records its batches.
	bs, err := e.led.BatchesOfSource(ctx, rep.ImportID)
	if err != nil || len(bs) != 1 {
		t.Fatalf("import %d: batches %+v, %v (report %+v)", rep.ImportID, bs, err, rep)
	}
	e.batch = bs[0].ID
	e.rules, e.mapper, e.schema = rules, mapper, schema
	if e.holds() == 0 {
		t.Fatal("the sandbox holds no pay parts after the import")
	}
	e.cfg = console.Config{Ledger: e.led, Password: password, Mode: "test",
		Actions: &console.Actions{Payroll: cl, Deliverer: deliverer, Waiter: waiter, Rules: rules, BatchSize: 100}}
	e.serve(t, nil)
	return e
}

// serve (re)starts the console with e.cfg changed by change (nil: as it is).
func (e *env) serve(t testing.TB, change func(*console.Config)) {
	t.Helper()
	if change != nil {
		change(&e.cfg)
	}
	if e.srv != nil {
		e.srv.Close()
	}
	var err error
	if e.console, err = console.New(e.cfg); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.console)
	t.Cleanup(e.srv.Close)
}

// holds counts the pay parts the sandbox holds.
func (e *env) holds() int {
	n := 0
	for _, c := range e.sb.State().Companies {
		n += len(c.PayParts)
	}
	return n
}

// client is a browser-like client: cookies, no redirects followed.
func (e *env) client(t testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login logs c in with the password.
func (e *env) login(t testing.TB, c *http.Client) {
	t.Helper()
	resp := e.post(t, c, "/login", url.Values{"password": {testPassword}, "next": {"/"}}, nil)
	if resp.code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", resp.code, resp.body)
	}
}

type response struct {
	code int
	body string
	hdr  http.Header
}

func (e *env) do(t testing.TB, c *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, string(b), resp.Header}
}

func (e *env) get(t testing.TB, c *http.Client, path string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	return e.do(t, c, req)
}

// post sends a form as the console's own page would (same origin),
// with extra headers set over that.
func (e *env) post(t testing.TB, c *http.Client, path string, form url.Values, hdr map[string]string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return e.do(t, c, req)
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// formOf reads the hidden fields of the page's confirmation form.
func formOf(t testing.TB, body string) url.Values {
	t.Helper()
	i := strings.Index(body, `id="confirm"`)
	if i < 0 {
		t.Fatalf("no confirmation form in:\n%s", body)
	}
	v := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(body[i:], -1) {
		v.Add(m[1], htmlUnescape(m[2]))
	}
	return v
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#43;", "+", "&#39;", "'").Replace(s)
}
