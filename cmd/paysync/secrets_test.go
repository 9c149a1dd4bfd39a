package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// secretKnownLeaks lists leaks this test has found and paysync has not
// fixed yet, as "artifact name|secret kind" → where it comes from. A listed
// leak is logged instead of failing the test; an entry whose leak no longer
// occurs fails it, so that the exemption goes with the fix.
var secretKnownLeaks = map[string]string{}

// secretSet collects every secret the test hands to paysync or sees the
// sandbox issue, by value, with its kind ("client secret", "refresh
// token", ...).
type secretSet struct {
	mu   sync.Mutex
	kind map[string]string
}

func (s *secretSet) add(kind, v string) {
	if v == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind == nil {
		s.kind = map[string]string{}
	}
	if _, ok := s.kind[v]; !ok {
		s.kind[v] = kind
	}
}

// forms returns what a leak of v could look like: the value itself, its
// URL-encoded (query and path) and JSON-escaped forms and, for random
// tokens, a prefix long enough never to occur by chance (a truncated token
// is a leak too).
func (s *secretSet) forms() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for v, kind := range s.kind {
		jsonEsc, _ := json.Marshal(v)
		for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v), strings.Trim(string(jsonEsc), `"`)} {
			out[f] = kind
		}
		if strings.HasSuffix(kind, "token") && len(v) >= 24 {
			out[v[:16]] = kind + " (prefix)"
		}
	}
	return out
}

func (s *secretSet) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.kind {
		if k == kind {
			n++
		}
	}
	return n
}

// secretArtifact is something paysync printed or wrote that people see.
type secretArtifact struct {
	name  string
	text  string
	allow []string // secrets this artifact shows by design
}

type secretArtifacts struct {
	mu  sync.Mutex
	all []secretArtifact
}

func (a *secretArtifacts) add(name, text string, allow ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, secretArtifact{name, text, allow})
}

// secretRedact shows text with every secret form replaced, for messages.
func secretRedact(text string, forms map[string]string) string {
	keys := make([]string, 0, len(forms))
	for f := range forms {
		keys = append(keys, f)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, f := range keys {
		text = strings.ReplaceAll(text, f, "<"+strings.ToUpper(forms[f])+">")
	}
	if len(text) > 3000 {
		text = text[:3000] + "…"
	}
	return text
}

// secretTokenProxy serves target through a reverse proxy that records the
// access and refresh tokens of every token endpoint response: all the
// tokens the sandbox hands out during the test.
func secretTokenProxy(t *testing.T, target string, sec *secretSet) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		r.Header.Del("Accept-Encoding") // plain bodies to read
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.URL.Path, "/protocol/openid-connect/token") {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var tr struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		if json.Unmarshal(b, &tr) == nil {
			sec.add("access token", tr.AccessToken)
			sec.add("refresh token", tr.RefreshToken)
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// secretBuf is a bytes.Buffer safe to read while a process writes to it.
type secretBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *secretBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *secretBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secretProc is a paysync process running in the background.
type secretProc struct {
	cmd            *exec.Cmd
	stdout, stderr secretBuf
	done           chan struct{}
	code           int
}

func secretEnviron(t *testing.T, env map[string]string) []string {
	out := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func secretStart(t *testing.T, env map[string]string, args ...string) *secretProc {
	t.Helper()
	p := &secretProc{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = secretEnviron(t, env)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and waits up to d; it kills the process when that is
// not enough and reports whether SIGTERM sufficed.
func (p *secretProc) stop(d time.Duration) bool {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

// secretRun runs paysync to completion with stdin; safe in a goroutine.
func secretRun(t *testing.T, env map[string]string, stdin string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = secretEnviron(t, env)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return result{}, fmt.Errorf("run paysync %v: %w", args, err)
	}
	return result{code, stdout.String(), stderr.String()}, nil
}

func secretRandom(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

func secretMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func secretLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// TestSecrets_NeverLeak: the client secret, every refresh and access token
// the sandbox issued, the password of `auth password` and the NATS
// password never appear (nor URL- or JSON-encoded, nor truncated) in
// stdout, stderr (debug logs included), --json output, /metrics, /readyz,
// inbox reports or `batches show --json`, on the happy paths and the
// failure paths; the files that hold them are 0600 and a readable token
// file is refused; the listeners default to loopback.
func TestSecrets_NeverLeak(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sec := &secretSet{}
	arts := &secretArtifacts{}

	clientSecret := "cs-" + secretRandom(8) + "+/&= x"
	wrongSecret := "wrong-cs-" + secretRandom(8) + "&="
	username := "sec-" + secretRandom(3)
	password := "pw-" + secretRandom(8) + " &+/%"
	natsUser, natsPass := "nu-"+secretRandom(4), "np-"+secretRandom(8)+"@:/ %"
	sec.add("client secret", clientSecret)
	sec.add("client secret", wrongSecret)
	sec.add("client secret", base64.StdEncoding.EncodeToString([]byte("paysync-sandbox:"+clientSecret))) // a Basic header
	sec.add("password", password)
	sec.add("NATS password", natsPass)
	sec.add("NATS password", url.UserPassword(natsUser, natsPass).String())

	// Every artifact is checked at the end, also when a step failed.
	t.Cleanup(func() { secretCheck(t, sec, arts) })

	s := startSandbox(t, sandbox.Options{Rotate: true, AccessTTL: 3 * time.Second, ClientSecret: clientSecret, Username: username, Password: password})
	sec.add("refresh token", s.env["PAYSYNC_REFRESH_TOKEN"])
	proxy := secretTokenProxy(t, s.env["PAYSYNC_PAYROLL_URL"], sec)
	base := with(s.env, "PAYSYNC_PAYROLL_URL", proxy, "PAYSYNC_AUTH_URL", proxy, "PAYSYNC_LOG_LEVEL", "debug")
	delete(base, "PAYSYNC_TOKEN_FILE")
	delete(base, "PAYSYNC_REFRESH_TOKEN")
	if base["PAYSYNC_CLIENT_SECRET"] != clientSecret {
		t.Fatalf("startSandbox did not pass the client secret")
	}
	freshToken := func() string {
		rt := s.sb.IssueRefreshToken()
		sec.add("refresh token", rt)
		return rt
	}
	rules, err := filepath.Abs("../../deploy/examples/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Abs("../../deploy/examples")

	// Where paysync keeps tokens; read after every step (beside the proxy's
	// record) so that no stored token is missed.
	var storeMu sync.Mutex
	var tokenFiles, ledgers []string
	harvest := func() {
		storeMu.Lock()
		defer storeMu.Unlock()
		for _, p := range tokenFiles {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			var st payroll.StoredToken
			if json.Unmarshal(b, &st) == nil {
				sec.add("refresh token", st.RefreshToken)
				sec.add("access token", st.AccessToken)
			}
		}
		for _, p := range ledgers {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			l, err := ledger.Open(ctx, p, ledger.Options{})
			if err != nil {
				t.Errorf("open ledger %s: %v", p, err)
				continue
			}
			if rt, _, _, err := l.Credentials(ctx, credentialName); err == nil {
				sec.add("refresh token", rt)
			}
			if at, _, _, err := l.AccessToken(ctx, credentialName); err == nil {
				sec.add("access token", at)
			}
			l.Close()
		}
	}
	track := func(tokenFile, ledgerPath string) {
		storeMu.Lock()
		defer storeMu.Unlock()
		if tokenFile != "" {
			tokenFiles = append(tokenFiles, tokenFile)
		}
		if ledgerPath != "" {
			ledgers = append(ledgers, ledgerPath)
		}
	}
	record := func(name string, r result, allow ...string) {
		arts.add(name+": stdout", r.stdout, allow...)
		arts.add(name+": stderr", r.stderr)
		harvest()
	}
	// step runs paysync as a process and wants exit code want.
	step := func(name string, want int, env map[string]string, args ...string) result {
		t.Helper()
		r := runBinary(t, env, args...)
		record(name, r)
		if r.code != want {
			t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", name, r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	// inProcess runs it in this process (under the race detector).
	inProcess := func(name string, want int, env map[string]string, args ...string) result {
		t.Helper()
		r := runInProcess(t, env, args...)
		record(name+" (in-process)", r)
		if r.code != want {
			t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", name, r.code, want, r.stdout, r.stderr)
		}
		return r
	}

	// NATS with user and password; the URL carries them (URL-encoded).
	ns := natstest.Start(t, natstest.WithUser(natsUser, natsPass))
	natsHostPort := ns.Addr().String()
	natsURL := "nats://" + url.UserPassword(natsUser, natsPass).String() + "@" + natsHostPort
	closedURL := "nats://" + url.UserPassword(natsUser, natsPass).String() + "@" + freeAddr(t)

	// Slow failure paths run in the background while the rest goes on:
	// publish and run with NATS_URL (user:pass) pointing to a closed port.
	var bg sync.WaitGroup
	t.Cleanup(bg.Wait) // also when a step below fails the test
	bg.Add(1)
	go func() {
		defer bg.Done()
		r, err := secretRun(t, with(base, "NATS_URL", closedURL), "", "publish", "--company", sandbox.CompanyNordlys, filepath.Join(examples, "entries.ndjson"))
		if err != nil {
			t.Error(err)
			return
		}
		arts.add("publish, NATS closed port: stdout", r.stdout)
		arts.add("publish, NATS closed port: stderr", r.stderr)
		if r.code != 1 {
			t.Errorf("publish to a closed port: exit %d, want 1\n%s", r.code, r.stderr)
		}
	}()
	closedLedger := filepath.Join(dir, "closed-ledger.db")
	track("", closedLedger)
	closedHTTP := freeAddr(t)
	closedRun := secretStart(t, with(base, "PAYSYNC_LEDGER", closedLedger, "PAYSYNC_REFRESH_TOKEN", freshToken(), "PAYSYNC_MAPPING", rules,
		"NATS_URL", closedURL, "PAYSYNC_HTTP_ADDR", closedHTTP), "run")
	bg.Add(1)
	go func() {
		defer bg.Done()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if c, _ := httpGet("http://" + closedHTTP + "/healthz"); c == 200 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(2500 * time.Millisecond) // a few connection attempts
		_, ready := httpGet("http://" + closedHTTP + "/readyz")
		arts.add("run, NATS closed port: /readyz", ready)
		_, metricsBody := httpGet("http://" + closedHTTP + "/metrics")
		arts.add("run, NATS closed port: /metrics", metricsBody)
		if !closedRun.stop(5 * time.Second) {
			t.Errorf("`paysync run` with NATS unreachable at start did not stop on SIGTERM (killed)")
		}
		arts.add("run, NATS closed port: stdout", closedRun.stdout.String())
		arts.add("run, NATS closed port: stderr", closedRun.stderr.String())
		harvest()
	}()

	// Phase A: API commands, the token in a token file.
	tokenFile := filepath.Join(dir, "a", "token.json")
	track(tokenFile, "")
	envA := with(base, "PAYSYNC_TOKEN_FILE", tokenFile, "PAYSYNC_REFRESH_TOKEN", freshToken())
	step("meta --json", 0, envA, "meta", "--json")
	step("meta --schema", 0, envA, "meta", "--schema")
	step("companies --json", 0, envA, "companies", "--json")
	step("employees --json", 0, envA, "employees", "--json")
	step("payparts --json", 0, envA, "payparts", "--json")
	if r := step("auth status --json", 0, envA, "auth", "status", "--json"); !strings.Contains(r.stdout, `"stored_refresh_token_fingerprint"`) {
		t.Errorf("auth status --json shows no fingerprint:\n%s", r.stdout)
	}
	step("auth status", 0, envA, "auth", "status")
	// The stored access token is fresh: straight to GraphQL, which is gone.
	step("employees, unreachable payroll (stored access token)", 1, with(envA, "PAYSYNC_PAYROLL_URL", "http://127.0.0.1:1", "PAYSYNC_AUTH_URL", "http://127.0.0.1:1"), "employees", "--json")
	time.Sleep(2500 * time.Millisecond) // the 3 s access token is due: the next run refreshes (and rotates)
	step("employees (after expiry)", 0, envA, "employees")
	if m := secretMode(t, tokenFile); m != 0o600 {
		t.Errorf("token file mode %04o, want 0600", m)
	}

	// A token file others can read is refused, with a clear error.
	if err := os.Chmod(tokenFile, 0o640); err != nil {
		t.Fatal(err)
	}
	r := step("meta, token file mode 0640", 1, envA, "meta")
	for _, want := range []string{"readable by others", "chmod 600 " + tokenFile} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("a group-readable token file: stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if err := os.Chmod(tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}

	// Phase B: the ledger keeps the token; import, query, revert, replay,
	// the daemon.
	led := filepath.Join(dir, "b", "ledger.db")
	if err := os.Mkdir(filepath.Dir(led), 0o700); err != nil {
		t.Fatal(err)
	}
	track("", led)
	envB := with(base, "PAYSYNC_LEDGER", led, "PAYSYNC_REFRESH_TOKEN", freshToken(), "PAYSYNC_MAPPING", rules)
	step("import toggl.csv", 0, envB, "import", filepath.Join(examples, "toggl.csv"))
	// A 401 on create_pay_parts: paysync refreshes (and rotates) mid-call.
	s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultUnauthorized, Op: "create_pay_parts", Times: 1})
	inProcess("import --json harvest.csv (401 once)", 0, envB, "import", "--json", filepath.Join(examples, "harvest.csv"))
	// A 502 after commit: an attempt with an error, then reconciliation.
	s.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultBadGatewayAfterCommit, Op: "create_pay_parts", Times: 1})
	step("import --json entries.ndjson (502 once)", 0, envB, "import", "--json", filepath.Join(examples, "entries.ndjson"))
	s.sb.SetFaults()
	step("import --dry-run --json", 0, envB, "import", "--dry-run", "--json", filepath.Join(examples, "clockify.csv"))
	step("batches --json", 0, envB, "batches", "--json")
	step("batches show 1 --json", 0, envB, "batches", "show", "1", "--json")
	step("imports --json", 0, envB, "imports", "--json")
	step("imports show 1 --json", 0, envB, "imports", "show", "1", "--json")
	step("revert 1 --dry-run", 0, envB, "revert", "1", "--dry-run")
	step("revert 1 --yes", 0, envB, "revert", "1", "--yes")
	step("replay 1 --dry-run --json", 0, envB, "replay", "1", "--dry-run", "--json")
	step("revert 1 --dry-run --json", 0, envB, "revert", "1", "--dry-run", "--json")
	step("revert --bogus (no such flag: usage)", 2, envB, "revert", "1", "--dry-run", "--bogus")

	// run --once over an inbox with a good and a bad file.
	in := filepath.Join(dir, "inbox")
	if err := os.Mkdir(in, 0o700); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{filepath.Join(examples, "clockify.csv"): "clockify.csv", "testdata/import/bad.csv": "bad.csv"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if r := inProcess("run --once", 0, with(envB, "PAYSYNC_INBOX", in), "run", "--once"); !strings.Contains(r.stdout, "1 processed, 1 failed") {
		t.Errorf("run --once: %s", r.stdout)
	}
	reports, _ := filepath.Glob(filepath.Join(in, "*", "*.report.txt"))
	if len(reports) == 0 {
		t.Error("run --once wrote no report")
	}
	for _, rp := range reports {
		b, _ := os.ReadFile(rp)
		arts.add("inbox report "+filepath.Base(rp), string(b))
	}

	// The daemon with NATS (user and password in NATS_URL): publish to it,
	// scrape /metrics and /readyz while it runs, SIGTERM.
	httpAddr, consoleAddr := freeAddr(t), freeAddr(t)
	consolePassword := "cp-" + secretRandom(8) + " &+/%"
	sec.add("console password", consolePassword)
	daemon := secretStart(t, with(envB, "NATS_URL", natsURL, "PAYSYNC_HTTP_ADDR", httpAddr, "PAYSYNC_BATCH_LINGER", "100ms",
		"PAYSYNC_CONSOLE_ADDR", consoleAddr, "PAYSYNC_CONSOLE_PASSWORD", consolePassword), "run")
	ready := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, _ := httpGet("http://" + httpAddr + "/readyz"); c == 200 {
			ready = true
			break
		}
		select {
		case <-daemon.done:
			deadline = time.Time{}
		default:
		}
	}
	if !ready {
		t.Errorf("run with NATS never got ready\n%s", daemon.stderr.String())
	}
	entries := filepath.Join(dir, "nats.ndjson")
	if err := os.WriteFile(entries, []byte(
		`{"id":"sec-1","employee_id":"MV8xXzE=","date":"2026-11-09","hours":"7:30","code":"T1"}`+"\n"+
			`{"id":"sec-2","employee_id":"MV8xXzI=","date":"2026-11-09","hours":6,"code":"T1"}`+"\n"+
			`{"id":"sec-3","employee_id":"MV8xXzk5","date":"2026-11-09","hours":6,"code":"T1"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The two valid entries (7.5 + 6 hours) land, merged into their
	// aggregates (the rules aggregate).
	before, want := payrollUnits(s.sb), decimal.RequireFromString("13.5")
	step("publish", 0, with(base, "NATS_URL", natsURL), "publish", "--company", sandbox.CompanyNordlys, "--source", "sec", entries)
	for deadline := time.Now().Add(15 * time.Second); !payrollUnits(s.sb).Sub(before).Equal(want) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if got := payrollUnits(s.sb).Sub(before); !got.Equal(want) {
		t.Errorf("the daemon added %s units of the 13.5 published", got)
	}
	time.Sleep(3 * time.Second) // the 3 s access token is refreshed (rotated) while the daemon runs
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		_, body := httpGet("http://" + httpAddr + path)
		arts.add("run with NATS: "+path, body)
		if path == "/metrics" && !strings.Contains(body, "paysync_token_refreshes_total") {
			t.Errorf("/metrics lacks paysync_token_refreshes_total:\n%.2000s", body)
		}
	}
	// The console's pages (Basic auth), the revert preview (it reads
	// payroll) and the login form.
	for _, path := range []string{"/", "/periods", "/period?period=2026-11", "/imports", "/imports/1", "/batches", "/batches/1", "/rejects",
		"/corrections", "/audit", "/actions/revert?batch=1", "/actions/replay?period=2026-11", "/actions/close?period=2026-11", "/login"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+consoleAddr+path, nil)
		req.SetBasicAuth("ops", consolePassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("console %s: %v", path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		arts.add("console "+path, string(body))
		if resp.StatusCode != http.StatusOK && path != "/actions/replay?period=2026-11" {
			t.Errorf("console %s: %d\n%.2000s", path, resp.StatusCode, body)
		}
	}
	if !daemon.stop(20 * time.Second) {
		t.Error("run with NATS did not stop on SIGTERM")
	}
	arts.add("run with NATS: stdout", daemon.stdout.String())
	arts.add("run with NATS: stderr", daemon.stderr.String())
	harvest()
	if daemon.code != 0 {
		t.Errorf("run with NATS exited %d\n%s", daemon.code, daemon.stderr.String())
	}

	// Every batch as `batches show --json` shows it (attempts and their
	// errors included).
	r = step("batches --json (final)", 0, envB, "batches", "--json")
	var bs []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &bs); err != nil || len(bs) < 4 {
		t.Errorf("batches --json: %d batches (%v)\n%s", len(bs), err, r.stdout)
	}
	for _, b := range bs {
		id := fmt.Sprint(b.ID)
		step("batches show "+id+" --json", 0, envB, "batches", "show", id, "--json")
	}

	// Phase C: `auth password` (test only), the password from the
	// environment and from standard input.
	pwFile := filepath.Join(dir, "c", "token.json")
	track(pwFile, "")
	envC := with(base, "PAYSYNC_TOKEN_FILE", pwFile, "PAYSYNC_PASSWORD", password)
	if r := step("auth password --save", 0, envC, "auth", "password", "--username", username, "--save"); !strings.Contains(r.stdout, "saved") {
		t.Errorf("auth password --save: %s", r.stdout)
	}
	step("employees --json (password token)", 0, envC, "employees", "--json")
	pwFile2 := filepath.Join(dir, "c2", "token.json")
	track(pwFile2, "")
	envC2 := with(base, "PAYSYNC_TOKEN_FILE", pwFile2)
	r, err = secretRun(t, envC2, password+"\n", "auth", "password", "--username", username, "--save")
	if err != nil {
		t.Fatal(err)
	}
	record("auth password --save (stdin)", r)
	if r.code != 0 {
		t.Errorf("auth password from stdin: exit %d\n%s", r.code, r.stderr)
	}
	if m := secretMode(t, pwFile2); m != 0o600 {
		t.Errorf("token file saved by auth password: mode %04o, want 0600", m)
	}
	// Without --save the refresh token is the output (by design): on
	// stdout, alone, and nowhere else.
	r = runBinary(t, envC, "auth", "password", "--username", username)
	printed := strings.TrimSpace(r.stdout)
	sec.add("refresh token", printed)
	record("auth password (prints the token)", r, printed)
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || len(printed) < 20 {
		t.Errorf("auth password: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := step("auth password, wrong password", 1, with(envC, "PAYSYNC_PASSWORD", "wrong-"+password), "auth", "password", "--username", username); !strings.Contains(r.stderr, "invalid_grant") {
		t.Errorf("wrong password: %s", r.stderr)
	}
	sec.add("password", "wrong-"+password)

	// Phase D: failure paths that print errors.
	wrongFile := filepath.Join(dir, "d1", "token.json")
	if r := step("meta, wrong client secret", 1, with(base, "PAYSYNC_CLIENT_SECRET", wrongSecret, "PAYSYNC_TOKEN_FILE", wrongFile, "PAYSYNC_REFRESH_TOKEN", freshToken()), "meta", "--json"); !strings.Contains(r.stderr, "invalid_client") {
		t.Errorf("wrong client secret: stderr lacks invalid_client:\n%s", r.stderr)
	}
	step("meta, unreachable payroll", 1, with(base, "PAYSYNC_PAYROLL_URL", "http://127.0.0.1:1", "PAYSYNC_AUTH_URL", "http://127.0.0.1:1",
		"PAYSYNC_TOKEN_FILE", filepath.Join(dir, "d2", "token.json"), "PAYSYNC_REFRESH_TOKEN", freshToken()), "meta", "--json")
	step("import, unreachable payroll", 1, with(envB, "PAYSYNC_PAYROLL_URL", "http://127.0.0.1:1", "PAYSYNC_AUTH_URL", "http://127.0.0.1:1",
		"PAYSYNC_STARTUP_TIMEOUT", "2s"), "import", filepath.Join(examples, "clockify.csv")) // the start-up waits that long for payroll

	// NATS_URL with user:pass in flag defaults (--help, a mistyped flag)
	// and in a URL NATS cannot parse.
	step("publish --help", 0, with(base, "NATS_URL", natsURL), "publish", "--help")
	step("publish, unknown flag", 2, with(base, "NATS_URL", natsURL), "publish", "--nope", "x.ndjson")
	badURL := "nats://" + url.UserPassword(natsUser, natsPass).String() + "@127.0.0.1:42x22"
	step("publish, malformed NATS_URL", 1, with(base, "NATS_URL", badURL), "publish", "--company", sandbox.CompanyNordlys, entries)
	badLedger := filepath.Join(dir, "bad-nats-ledger.db")
	track("", badLedger)
	step("run, malformed NATS_URL", 1, with(base, "PAYSYNC_LEDGER", badLedger, "PAYSYNC_REFRESH_TOKEN", freshToken(), "PAYSYNC_MAPPING", rules,
		"NATS_URL", badURL, "PAYSYNC_HTTP_ADDR", ""), "run")

	// The user disconnects the app: every token is revoked.
	bg.Wait() // the background runs need the sandbox's tokens
	s.sb.RevokeAll()
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"meta, revoked", envA, []string{"meta", "--json"}},
		{"import, revoked", envB, []string{"import", "--json", filepath.Join(examples, "clockify.csv")}},
		{"auth status, revoked", envA, []string{"auth", "status", "--json"}},
	} {
		if r := step(c.name, 1, c.env, c.args...); !strings.Contains(r.stderr, "connection revoked") {
			t.Errorf("%s: stderr lacks 'connection revoked':\n%s", c.name, r.stderr)
		}
	}
	inProcess("import, revoked", 1, envB, "import", filepath.Join(examples, "clockify.csv"))

	// The files that hold secrets are 0600 (the ledger, its SQLite
	// journal files and locks, the token files and their locks).
	for _, p := range []string{tokenFile, led, closedLedger, pwFile} {
		matches, _ := filepath.Glob(p + "*")
		for _, f := range matches {
			if m := secretMode(t, f); m&0o077 != 0 {
				t.Errorf("%s: mode %04o, want 0600", f, m)
			}
		}
		if m := secretMode(t, p); m != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", p, m)
		}
	}

	if n, m := sec.count("refresh token"), sec.count("access token"); n < 8 || m < 5 {
		t.Errorf("collected %d refresh and %d access tokens; the test should see more", n, m)
	} else {
		t.Logf("checked %d artifacts against %d refresh tokens, %d access tokens and the other secrets", len(arts.all), n, m)
	}
}

// secretCheck fails for every secret form in an artifact, except the
// known leaks.
func secretCheck(t *testing.T, sec *secretSet, arts *secretArtifacts) {
	forms := sec.forms()
	arts.mu.Lock()
	defer arts.mu.Unlock()
	seen := map[string]bool{}
	for _, a := range arts.all {
		leaked := map[string]bool{}
		for f, kind := range forms {
			if !strings.Contains(a.text, f) {
				continue
			}
			allowed := false
			for _, ok := range a.allow {
				allowed = allowed || strings.Contains(ok, f)
			}
			if allowed {
				continue
			}
			kind = strings.TrimSuffix(kind, " (prefix)")
			leaked[kind] = true
		}
		for kind := range leaked {
			key := a.name + "|" + kind
			if why, ok := secretKnownLeaks[key]; ok {
				seen[key] = true
				t.Logf("KNOWN LEAK (%s): %s shows the %s", why, a.name, kind)
				continue
			}
			t.Errorf("%s leaks the %s:\n%s", a.name, kind, secretRedact(a.text, forms))
		}
	}
	for key := range secretKnownLeaks {
		if !seen[key] {
			t.Errorf("known leak %q no longer occurs: remove it from secretKnownLeaks", key)
		}
	}
}

// TestSecrets_Defaults: the metrics listener and the sandbox listen on
// loopback by default, and no secret has a flag.
func TestSecrets_Defaults(t *testing.T) {
	cfg, err := loadConfig(context.Background(), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if !secretLoopback(cfg.HTTPAddr) {
		t.Errorf("PAYSYNC_HTTP_ADDR defaults to %q, not loopback", cfg.HTTPAddr)
	}
	defaultAddr := regexp.MustCompile(`-(addr|http-addr) string\n[^\n]*\(default "([^"]*)"\)`)
	for _, args := range [][]string{{"sandbox", "--help"}, {"run", "--help"}} {
		r := runBinary(t, nil, args...)
		help := r.stdout + r.stderr
		m := defaultAddr.FindStringSubmatch(help)
		if r.code != 0 || m == nil {
			t.Errorf("%v: exit %d, no address default in:\n%s", args, r.code, help)
			continue
		}
		if !secretLoopback(m[2]) {
			t.Errorf("%v: --%s defaults to %q, not loopback", args, m[1], m[2])
		}
	}
	// Secrets come from the environment only: command lines are visible
	// to other users.
	for _, cmd := range []string{"meta", "import", "run", "auth status", "auth password", "publish", "revert", "replay"} {
		r := runBinary(t, nil, append(strings.Fields(cmd), "--help")...)
		for _, flag := range []string{"-client-secret", "-refresh-token", "-password ", "-password\n", "-secret", "-token "} {
			if strings.Contains(r.stderr+r.stdout, flag) {
				t.Errorf("paysync %s has a %q flag: secrets belong in the environment", cmd, strings.TrimSpace(flag))
			}
		}
	}
}
