package main

// `paysync connect`, `connections` and `disconnect` against the sandbox's
// partner connect flow, with a scripted browser: an HTTP client with a
// cookie jar that follows the redirects, posts the sandbox's test login
// and picks a company on the select-company page.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
)

// connectEnv is the sandbox's environment for connect: no refresh token
// and no token file (the connection lives in the ledger), the sandbox's
// marketplace.
func connectEnv(s sandboxEnv, ledgerPath string) map[string]string {
	env := with(s.env, "PAYSYNC_LEDGER", ledgerPath, "PAYSYNC_MARKETPLACE_URL", s.sb.URL()+"/marketplace")
	delete(env, "PAYSYNC_REFRESH_TOKEN")
	delete(env, "PAYSYNC_TOKEN_FILE")
	return env
}

// connectProc is a running `paysync connect`.
type connectProc struct {
	cmd       *exec.Cmd
	authURL   string
	done      chan struct{}
	out, errb lockedBuffer
}

// startConnect starts `paysync connect` and reads the authorization URL
// from the first line of its standard output that is a URL.
func startConnect(t *testing.T, env map[string]string, args ...string) *connectProc {
	t.Helper()
	p := &connectProc{done: make(chan struct{})}
	p.cmd = exec.Command(binary, append([]string{"connect", "--no-browser"}, args...)...)
	p.cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.errb
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.out.Write([]byte(line + "\n"))
			if !sent && strings.HasPrefix(line, "http") {
				urls <- line
				sent = true
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
		if !sent {
			close(urls)
		}
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("paysync connect printed no authorization URL:\n%s\n%s", p.out.String(), p.errb.String())
		}
		p.authURL = u
	case <-time.After(30 * time.Second):
		t.Fatalf("paysync connect printed no authorization URL in 30s:\n%s", p.errb.String())
	}
	return p
}

// wait waits for connect to exit and returns its exit code.
func (p *connectProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("paysync connect did not exit:\n%s", p.errb.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// browse is the scripted browser: it opens authURL, logs in with the
// sandbox's test login, picks company on the select-company page and
// returns the last page's body.
func browse(t *testing.T, authURL, user, password, company string) string {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := hc.Get(authURL)
	if err != nil {
		t.Fatalf("open the authorization URL: %v", err)
	}
	page := readBody(t, resp)
	if !strings.Contains(page, `name="password"`) {
		t.Fatalf("the authorization URL shows no login form:\n%s", page)
	}
	// The login form posts to the page it is on.
	resp, err = hc.PostForm(resp.Request.URL.String(), url.Values{"username": {user}, "password": {password}})
	if err != nil {
		t.Fatalf("post the login: %v", err)
	}
	page = readBody(t, resp)
	if resp.Request.URL.Path != "/marketplace/select-company" {
		t.Fatalf("after the login the browser is at %s, not select-company:\n%s", resp.Request.URL.Path, page)
	}
	if !strings.Contains(page, company) {
		t.Fatalf("select-company does not list %s:\n%s", company, page)
	}
	resp, err = hc.PostForm(resp.Request.URL.String(), url.Values{"company_id": {company}})
	if err != nil {
		t.Fatalf("choose the company: %v", err)
	}
	return readBody(t, resp)
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// connectCompany runs the whole connect flow for company and checks that
// it exits 0.
func connectCompany(t *testing.T, env map[string]string, company, name string) {
	t.Helper()
	p := startConnect(t, env)
	page := browse(t, p.authURL, "demo", "demo", company)
	if !strings.Contains(page, "connected to "+name) {
		t.Errorf("the browser's last page = %q, want it to say connected to %s", page, name)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("paysync connect exited %d:\n%s\n%s", code, p.out.String(), p.errb.String())
	}
}

type connectionJSON struct {
	CompanyID   string `json:"company_id"`
	CompanyName string `json:"company_name"`
	State       string `json:"state"`
	LastRefresh string `json:"last_refresh"`
	Fingerprint string `json:"fingerprint"`
}

func listConnections(t *testing.T, env map[string]string) []connectionJSON {
	t.Helper()
	r := runBinary(t, env, "connections", "--json")
	if r.code != 0 {
		t.Fatalf("paysync connections --json exited %d: %s", r.code, r.stderr)
	}
	var out []connectionJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("connections --json: %v\n%s", err, r.stdout)
	}
	return out
}

// connectionToken reads the refresh token of company's connection from
// the ledger (what the sandbox must refuse after disconnect).
func connectionToken(t *testing.T, path, company string) string {
	t.Helper()
	l := openLedger(t, path)
	defer l.Close()
	cs, err := l.Connections(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Serves(company) {
			rt, _, _, err := l.Credentials(context.Background(), c.Credential)
			if err != nil {
				t.Fatal(err)
			}
			return rt
		}
	}
	t.Fatalf("no connection of %s in the ledger", company)
	return ""
}

// refreshRefused posts a refresh_token grant to the sandbox and reports
// whether it was refused with invalid_grant.
func refreshRefused(t *testing.T, s sandboxEnv, token string) bool {
	t.Helper()
	o := s.sb.Options()
	resp, err := http.PostForm(s.sb.URL()+"/auth/realms/"+o.Realm+"/protocol/openid-connect/token", url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {o.ClientID}, "client_secret": {o.ClientSecret},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	return resp.StatusCode == http.StatusBadRequest && strings.Contains(body, "invalid_grant")
}

// TestConnect_EndToEnd: connect through the sandbox's authorization,
// login, select-company and code2token; the connection is listed (with a
// fingerprint, never the token), later commands use it with no
// PAYSYNC_REFRESH_TOKEN, and the token sees only the chosen company;
// disconnect revokes it at the token endpoint and removes it.
func TestConnect_EndToEnd(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Rotate: true})
	path := filepath.Join(t.TempDir(), "ledger.db")
	env := connectEnv(s, path)

	connectCompany(t, env, sandbox.CompanyFjordtech, "Fjordtech A/S")

	cs := listConnections(t, env)
	if len(cs) != 1 || cs[0].CompanyID != sandbox.CompanyFjordtech || cs[0].CompanyName != "Fjordtech A/S" || cs[0].State != "active" || cs[0].Fingerprint == "" {
		t.Fatalf("connections = %+v, want one active connection of Fjordtech with a fingerprint", cs)
	}
	token := connectionToken(t, path, sandbox.CompanyFjordtech)
	r := runBinary(t, env, "connections")
	assertClean(t, r, token)
	if r.code != 0 || !strings.Contains(r.stdout, sandbox.CompanyFjordtech) || !strings.Contains(r.stdout, "active") {
		t.Fatalf("paysync connections = %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A later command uses the connection: no PAYSYNC_REFRESH_TOKEN.
	r = runBinary(t, env, "employees", "--company", sandbox.CompanyFjordtech)
	if r.code != 0 || !strings.Contains(r.stdout, "Jonas Larsen") {
		t.Fatalf("employees through the connection = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The token is scoped to the company chosen: Nordlys is out of its reach.
	r = runBinary(t, env, "companies")
	if r.code != 0 || !strings.Contains(r.stdout, "Fjordtech") || strings.Contains(r.stdout, "Nordlys") {
		t.Fatalf("companies through the connection = %d, want only Fjordtech\n%s%s", r.code, r.stdout, r.stderr)
	}

	token = connectionToken(t, path, sandbox.CompanyFjordtech) // rotated by the commands above
	r = runBinary(t, env, "disconnect", "--company", sandbox.CompanyFjordtech)
	if r.code != 0 {
		t.Fatalf("disconnect exited %d: %s%s", r.code, r.stdout, r.stderr)
	}
	assertClean(t, r, token)
	if cs := listConnections(t, env); len(cs) != 0 {
		t.Fatalf("connections after disconnect = %+v, want none", cs)
	}
	if !refreshRefused(t, s, token) {
		t.Fatal("the sandbox still accepts the disconnected connection's refresh token")
	}
}

// TestConnect_Timeout: nobody logs in: connect gives up after --timeout,
// exits 1, and stores nothing.
func TestConnect_Timeout(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	path := filepath.Join(t.TempDir(), "ledger.db")
	env := connectEnv(s, path)
	p := startConnect(t, env, "--timeout", "300ms")
	if code := p.wait(t); code != 1 {
		t.Fatalf("connect exited %d after its timeout, want 1:\n%s", code, p.errb.String())
	}
	if !strings.Contains(p.errb.String(), "timeout") {
		t.Errorf("stderr = %q, want it to name the timeout", p.errb.String())
	}
	if cs := listConnections(t, env); len(cs) != 0 {
		t.Fatalf("connections after a timed-out connect = %+v, want none", cs)
	}
}

// TestConnect_WrongState: a callback whose state is not the one connect
// sent is refused and nothing is stored.
func TestConnect_WrongState(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	path := filepath.Join(t.TempDir(), "ledger.db")
	env := connectEnv(s, path)
	p := startConnect(t, env, "--timeout", "30s")
	au, err := url.Parse(p.authURL)
	if err != nil {
		t.Fatal(err)
	}
	cb := au.Query().Get("redirect_uri") + "?code=forged&state=not-the-one"
	resp, err := http.Get(cb)
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a forged callback = %d %q, want 400", resp.StatusCode, body)
	}
	if code := p.wait(t); code != 1 {
		t.Fatalf("connect exited %d after a forged callback, want 1", code)
	}
	if cs := listConnections(t, env); len(cs) != 0 {
		t.Fatalf("connections = %+v, want none", cs)
	}
}

var _ = ledger.ErrNoCredentials
