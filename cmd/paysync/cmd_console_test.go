package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/payroll/sandbox"
)

// `paysync console` refuses to listen beyond loopback without a password,
// and takes the password from the environment only.
func TestConsoleCmd_Refusals(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
	r := runInProcess(t, with(env, "PAYSYNC_CONSOLE_ADDR", "0.0.0.0:0"), "console")
	if r.code != 2 || !strings.Contains(r.stderr, "PAYSYNC_CONSOLE_PASSWORD") {
		t.Errorf("console on 0.0.0.0 without a password: exit %d\n%s", r.code, r.stderr)
	}
	if r := runInProcess(t, env, "console", "--password", "x"); r.code != 2 || !strings.Contains(r.stderr, "flag provided but not defined") {
		t.Errorf("console --password: exit %d\n%s", r.code, r.stderr)
	}
}

// A script reverts a batch through `paysync console` with Basic auth:
// the preview, then its confirmation form posted back.
func TestConsoleCmd_ScriptRevert(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	if r := runInProcess(t, env, "import", "../../deploy/examples/toggl.csv"); r.code != 0 {
		t.Fatalf("import: %s%s", r.stdout, r.stderr)
	}
	addr := freeAddr(t)
	p := secretStart(t, with(env, "PAYSYNC_CONSOLE_ADDR", addr, "PAYSYNC_CONSOLE_PASSWORD", "pw"), "console")
	base := "http://" + addr
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		req.SetBasicAuth("script", "pw")
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var page string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, page = do(http.MethodGet, "/actions/revert?batch=1", nil); code != 0 {
			break
		}
	}
	if code != http.StatusOK || !strings.Contains(page, "Reverting batch 1 touches <strong>6</strong> entries") || !strings.Contains(page, `id="confirm"`) {
		t.Fatalf("preview: %d\n%s\n%s", code, page, p.stderr.String())
	}
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(page[strings.Index(page, `id="confirm"`):], -1) {
		form.Add(m[1], m[2])
	}
	if code, page = do(http.MethodPost, "/actions/revert", form); code != http.StatusOK || !strings.Contains(page, "revert batch 1: 6 entries touched; 7 deleted, 0 created, 0 rejected") {
		t.Fatalf("confirm: %d\n%s", code, page)
	}
	if n := len(s.sb.State().Companies[0].PayParts); n != 0 {
		t.Errorf("the sandbox holds %d pay parts after the console's revert", n)
	}
	if code, page = do(http.MethodGet, "/audit", nil); !strings.Contains(page, "basic:script") {
		t.Errorf("audit log page: %d\n%s", code, page)
	}
	if !p.stop(10 * time.Second) {
		t.Error("paysync console did not stop on SIGTERM")
	}
}
