package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds a Chromium binary (Debian's chromium package; .ci/run
// installs it), or skips the test saying so.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("PAYSYNC_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium binary found (chromium, chromium-browser, google-chrome or PAYSYNC_CHROMIUM): install Debian's chromium package to run the browser tests")
	return ""
}

// browser starts a headless Chromium for one test.
func browser(t *testing.T) context.Context {
	t.Helper()
	// The profile is not t.TempDir(): Chromium's helper processes can still
	// write into it for a moment after the browser has exited, and
	// TempDir's cleanup fails the test on "directory not empty". It is
	// removed once they are done (waited for, with a deadline).
	profile, err := os.MkdirTemp("", "paysync-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeWhenDone(t, profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(ctxOf(t), opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func text(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	var s string
	if err := chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery)); err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// In a real browser: log in, see the batch the import created, open its
// pay parts (payroll ids and totals), revert it through the preview (the entries it touches, what
// the reconciler plans) and the confirmation, see its pay parts deleted
// and payroll (the sandbox) without them; the same form submitted again
// changes nothing; a page and a form post from another site are refused.
func TestBrowser_RevertABatch(t *testing.T) {
	e := setup(t, testPassword)
	ctx := browser(t)
	base := e.srv.URL

	// Without the password: the login form, no data.
	var loc string
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/batches"), chromedp.Location(&loc)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "/login") {
		t.Fatalf("without login, /batches is at %s", loc)
	}
	// Log in.
	if err := chromedp.Run(ctx,
		chromedp.SendKeys(`input[name=password]`, testPassword, chromedp.ByQuery),
		chromedp.Click(`#login`, chromedp.ByQuery),
		chromedp.WaitVisible(`#batches`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	if s := text(ctx, t, "#batches"); !strings.Contains(s, fmt.Sprintf("#%d", e.batch)) || !strings.Contains(s, "created") {
		t.Fatalf("the batches page does not show batch %d created:\n%s", e.batch, s)
	}
	// Its pay parts: payroll ids, employees, codes and totals, created.
	// (The reconciler's pay parts are per group: the page no longer lists
	// the source lines behind each.)
	if err := chromedp.Run(ctx, chromedp.Click(fmt.Sprintf(`#batches a[href="/batches/%d"]`, e.batch), chromedp.ByQuery),
		chromedp.WaitVisible(`#payparts`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if s := text(ctx, t, "#payparts"); strings.Count(s, "created") != 7 || !strings.Contains(s, "cHBf") || !strings.Contains(s, "Mette Hansen") ||
		!strings.Contains(s, "TILLAEG") || !strings.Contains(s, "11.83") {
		t.Errorf("the batch's pay parts (7 created, with payroll ids, employees, codes and units):\n%s", s)
	}
	// Revert: the preview, then the confirmation.
	if err := chromedp.Run(ctx, chromedp.Click(`#revert`, chromedp.ByQuery), chromedp.WaitVisible(`#confirm-button`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if s := text(ctx, t, "#entries"); !strings.Contains(s, "touches 6 entries") {
		t.Errorf("the preview does not say which entries it touches:\n%s", s)
	}
	if s := text(ctx, t, "#plan"); strings.Count(s, "delete") != 7 {
		t.Errorf("the preview's plan (what it would send: the batch's 7 pay parts deleted): %s", s)
	}
	if e.holds() == 0 {
		t.Fatal("the preview changed payroll")
	}
	// Keep the form as it is, to submit it again afterwards.
	var formHTML string
	if err := chromedp.Run(ctx, chromedp.OuterHTML(`#confirm`, &formHTML, chromedp.ByQuery),
		chromedp.Click(`#confirm-button`, chromedp.ByQuery), chromedp.WaitVisible(`#result`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if s := text(ctx, t, "#result"); !strings.Contains(s, fmt.Sprintf("revert batch %d: 6 entries touched; 7 deleted", e.batch)) {
		t.Fatalf("result: %s", s)
	}
	if n := e.holds(); n != 0 {
		t.Errorf("the sandbox still holds %d pay parts", n)
	}
	if err := chromedp.Run(ctx, chromedp.Navigate(fmt.Sprintf("%s/batches/%d", base, e.batch)), chromedp.WaitVisible(`#payparts`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if s := text(ctx, t, "#payparts"); strings.Count(s, "deleted") != 7 || strings.Contains(s, "created") {
		t.Errorf("the batch's pay parts are not all deleted:\n%s", s)
	}
	// The same form again (as a second click or a resubmit would send it).
	resubmit := fmt.Sprintf(`document.body.insertAdjacentHTML('beforeend', %q); document.body.lastElementChild.submit();`, formHTML)
	if err := chromedp.Run(ctx, chromedp.Evaluate(resubmit, nil), chromedp.WaitVisible(`#result`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if s := text(ctx, t, "#result"); !strings.Contains(s, "submitted before") {
		t.Errorf("second submit: %s", s)
	}
	log, _ := e.led.AuditLog(ctxOf(t), 0)
	if len(log) != 1 {
		t.Errorf("audit log has %d entries, want 1: %+v", len(log), log)
	}

	// A forged form on another site, posting to the console with this
	// browser's session, is refused.
	evil := httptestEvil(t, base, formHTML)
	if err := chromedp.Run(ctx, chromedp.Navigate(evil), chromedp.WaitVisible(`#error`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if s := text(ctx, t, "#error"); !strings.Contains(s, "refused") && !strings.Contains(s, "log in") {
		t.Errorf("forged cross-site POST: %s", s)
	}
	if log, _ := e.led.AuditLog(ctxOf(t), 0); len(log) != 1 {
		t.Errorf("the forged POST reached the audit log: %+v", log)
	}
}

// screenshot writes the page at path as docs/console/NAME.png.
func screenshot(ctx context.Context, t *testing.T, url, name string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.Navigate(url), chromedp.WaitReady("main", chromedp.ByQuery), chromedp.FullScreenshot(&png, 80)); err != nil {
		t.Fatal(err)
	}
	// FullScreenshot with quality < 100 is JPEG: ask for PNG.
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// httptestEvil serves another origin's page that posts form (the
// console's own confirmation, CSRF token and all) to the console at base
// as soon as it loads.
func httptestEvil(t *testing.T, base, form string) string {
	t.Helper()
	form = strings.Replace(form, `action="/actions/`, `action="`+base+`/actions/`, 1)
	form = tokenField.ReplaceAllString(form, `name="token" value="forged-forged-forged-forged"`)
	page := "<!doctype html><title>prize</title>" + form + "<script>document.forms[0].submit()</script>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

var tokenField = regexp.MustCompile(`name="token" value="[^"]*"`)

// removeWhenDone removes dir, waiting (up to 10 s) for processes still
// writing into it to stop.
func removeWhenDone(t *testing.T, dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.RemoveAll(dir)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("browser profile %s left behind: %v", dir, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
