package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// pages are every page a logged-in operator can open (beside the
// actions' previews).
func pages(batch int64) []string {
	return []string{"/", "/periods", "/imports", "/imports/1", "/batches", fmt.Sprintf("/batches/%d", batch), "/rejects",
		"/corrections", "/audit", "/period?period=2026-11", fmt.Sprintf("/actions/revert?batch=%d", batch)}
}

// Without the password, every page and every action is refused: a page
// sends the browser to the login form and shows no data, an action is 401
// and changes nothing; a wrong Basic password is refused too, and many
// of them stop further tries for a while.
func TestConsole_RefusedWithoutPassword(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	for _, p := range pages(e.batch) {
		r := e.get(t, c, p)
		if r.code != http.StatusSeeOther || !strings.HasPrefix(r.hdr.Get("Location"), "/login") || strings.Contains(r.body, "toggl") {
			t.Errorf("GET %s without login: %d %q", p, r.code, r.hdr.Get("Location"))
		}
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+p, nil)
		req.SetBasicAuth("ops", "wrong")
		if r := e.do(t, c, req); r.code != http.StatusUnauthorized || r.hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s with a wrong Basic password: %d", p, r.code)
		}
	}
	for _, op := range []string{"revert", "replay", "close", "open"} {
		r := e.post(t, c, "/actions/"+op, url.Values{"batch": {fmt.Sprint(e.batch)}, "period": {"2026-11"}, "token": {strings.Repeat("x", 40)}}, nil)
		if r.code != http.StatusUnauthorized {
			t.Errorf("POST /actions/%s without login: %d", op, r.code)
		}
	}
	// The wrong Basic passwords above spent this address's tries: even
	// the right password waits now.
	if r := e.post(t, c, "/login", url.Values{"password": {testPassword}}, nil); r.code != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many tries") {
		t.Errorf("login after many wrong passwords: %d", r.code)
	}
	if n := e.holds(); n == 0 {
		t.Error("the sandbox lost its pay parts")
	}
	if b, _ := e.led.Batch(ctxOf(t), e.batch); b.State != paysync.BatchCreated {
		t.Errorf("batch %d is %s", e.batch, b.State)
	}
}

// The login form's session and Basic auth (any user name) open every
// page; the session cookie is HttpOnly and SameSite=Strict.
func TestConsole_LoginAndBasicAuth(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	resp := e.post(t, c, "/login", url.Values{"password": {testPassword}, "next": {"/batches"}}, nil)
	if resp.code != http.StatusSeeOther || resp.hdr.Get("Location") != "/batches" {
		t.Fatalf("login: %d %q", resp.code, resp.hdr.Get("Location"))
	}
	ck := resp.hdr.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(ck, want) {
			t.Errorf("session cookie %q lacks %s", ck, want)
		}
	}
	for _, p := range pages(e.batch) {
		if r := e.get(t, c, p); r.code != http.StatusOK {
			t.Errorf("GET %s logged in: %d\n%s", p, r.code, r.body)
		}
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+p, nil)
		req.SetBasicAuth("script", testPassword)
		if r := e.do(t, e.client(t), req); r.code != http.StatusOK {
			t.Errorf("GET %s with Basic auth: %d", p, r.code)
		}
	}
	// An open redirect after login is not followed off the console.
	if r := e.post(t, e.client(t), "/login", url.Values{"password": {testPassword}, "next": {"//evil.example/"}}, nil); r.hdr.Get("Location") != "/" {
		t.Errorf("login next=//evil.example/ redirects to %q", r.hdr.Get("Location"))
	}
}

// A POST from another site, or without the session's CSRF token, is
// refused and changes nothing.
func TestConsole_ForgedPostRefused(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	form := formOf(t, e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch)).body)
	without := url.Values{}
	for k, v := range form {
		if k != "csrf" {
			without[k] = v
		}
	}
	wrong := url.Values{}
	for k, v := range form {
		wrong[k] = v
	}
	wrong.Set("csrf", "forged")
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"cross-site", form, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"other origin", form, map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}},
		{"no csrf token", without, nil},
		{"wrong csrf token", wrong, nil},
	} {
		if r := e.post(t, c, "/actions/revert", tc.form, tc.hdr); r.code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, r.code)
		}
	}
	// Logging in from another site is refused too.
	if r := e.post(t, e.client(t), "/login", url.Values{"password": {testPassword}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.code != http.StatusForbidden {
		t.Errorf("cross-site login: %d", r.code)
	}
	if b, _ := e.led.Batch(ctxOf(t), e.batch); b.State != paysync.BatchCreated || e.holds() == 0 {
		t.Errorf("a refused POST changed something: batch %s, sandbox holds %d", b.State, e.holds())
	}
	if log, _ := e.led.AuditLog(ctxOf(t), 0); len(log) != 0 {
		t.Errorf("audit log: %+v", log)
	}
}

// Reverting a batch through the preview (what it would send: its pay
// parts' deletes) and the confirmation deletes its pay parts from
// payroll, once: the same form submitted again changes
// nothing and says so; both are in the audit log. Reverted, a new revert
// of it changes nothing either: nothing comes back, nothing is deleted
// twice.
func TestConsole_RevertOnce(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	before := e.holds()
	preview := e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch))
	if preview.code != http.StatusOK || !strings.Contains(preview.body, `id="entries"`) || !strings.Contains(preview.body, "touches <strong>6</strong> entries") ||
		strings.Count(tableOf(t, preview.body, `id="plan"`), `<span class="op-delete">delete</span>`) != before {
		t.Fatalf("preview: %d, want the 6 entries and the %d deletes it would send\n%s", preview.code, before, preview.body)
	}
	if e.holds() != before {
		t.Fatal("the preview changed payroll")
	}
	form := formOf(t, preview.body)
	first := e.post(t, c, "/actions/revert", form, nil)
	if first.code != http.StatusOK || !strings.Contains(first.body, fmt.Sprintf("revert batch %d: 6 entries touched; %d deleted, 0 created", e.batch, before)) {
		t.Fatalf("confirm: %d\n%s", first.code, first.body)
	}
	if n := e.holds(); n != 0 {
		t.Errorf("the sandbox holds %d pay parts after the revert, want 0 (had %d)", n, before)
	}
	second := e.post(t, c, "/actions/revert", form, nil)
	if second.code != http.StatusOK || !strings.Contains(second.body, "submitted before") {
		t.Errorf("second submit: %d\n%s", second.code, second.body)
	}
	// The batch's pay parts are deleted (the delete is the reconciler's:
	// the batch itself is not reverting or reverted any more).
	b, _ := e.led.Batch(ctxOf(t), e.batch)
	if b.Deleted != before || b.Created != 0 || b.Pending != 0 {
		t.Errorf("batch %d after the revert: %d deleted, %d created, %d pending; want %d deleted", e.batch, b.Deleted, b.Created, b.Pending, before)
	}
	log, err := e.led.AuditLog(ctxOf(t), 0)
	if err != nil || len(log) != 1 || log[0].Result != ledger.AuditDone || log[0].Actor != "console" || log[0].Scope != fmt.Sprintf("batch %d", e.batch) {
		t.Errorf("audit log: %+v, %v", log, err)
	}
	// Reverting it again changes nothing in payroll: its fresh preview
	// says there is nothing to send, and offers no confirmation.
	again := e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch))
	if again.code != http.StatusOK || !strings.Contains(again.body, "nothing to send") || strings.Contains(again.body, `id="confirm"`) || e.holds() != 0 {
		t.Errorf("revert again: %d, the sandbox holds %d\n%s", again.code, e.holds(), again.body)
	}
	if b2, _ := e.led.Batch(ctxOf(t), e.batch); b2.Deleted != before {
		t.Errorf("batch %d after the second revert: %d deleted, want %d", e.batch, b2.Deleted, before)
	}
}

// A confirmation whose preview no longer holds (payroll changed
// meanwhile) does nothing and shows the new preview.
func TestConsole_StalePreviewRefused(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	form := formOf(t, e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch)).body)
	form.Set("digest", "0000")
	r := e.post(t, c, "/actions/revert", form, nil)
	if r.code != http.StatusConflict || !strings.Contains(r.body, "not what the preview showed") {
		t.Errorf("stale confirm: %d\n%s", r.code, r.body)
	}
	if e.holds() == 0 {
		t.Error("a stale confirmation deleted pay parts")
	}
}

// Closing a period goes through a preview and is audited; closed, the
// period refuses a revert of itself (reopen it first), and is frozen: the
// preview of a revert of its batch or its import lists its groups as late
// and sends nothing (no confirmation), and payroll keeps what it holds;
// opened again, the batch's revert deletes its pay parts, once.
func TestConsole_ClosePeriod(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	form := formOf(t, e.get(t, c, "/actions/close?period=2026-11").body)
	if r := e.post(t, c, "/actions/close", form, nil); r.code != http.StatusOK || !strings.Contains(r.body, "closed") {
		t.Fatalf("close: %d\n%s", r.code, r.body)
	}
	closed, _ := e.led.ClosedPeriods(ctxOf(t))
	if len(closed) != 1 || closed[0].Period.String() != "2026-11" {
		t.Errorf("closed periods: %+v", closed)
	}
	if r := e.get(t, c, "/actions/revert?period=2026-11"); r.code != http.StatusConflict || !strings.Contains(r.body, "reopen it first") {
		t.Errorf("revert of a closed period: %d\n%s", r.code, r.body)
	}
	// A closed period is frozen: a revert of its batch or its import sends
	// nothing there; its groups' changes are late (the revert can be
	// recorded, as paysync revert records it: sent once the period opens).
	before := e.holds()
	for _, q := range []string{fmt.Sprintf("batch=%d", e.batch), "import=1"} {
		pv := e.get(t, c, "/actions/revert?"+q)
		if pv.code != http.StatusOK || strings.Count(pv.body, "late</span>: its period is closed") != before ||
			!strings.Contains(pv.body, `id="confirm"`) || strings.Contains(pv.body, `<span class="op-delete">delete</span>`) || e.holds() != before {
			t.Errorf("revert preview (%s) in a closed period: %d, the sandbox holds %d, want %d and its %d groups late\n%s", q, pv.code, e.holds(), before, before, pv.body)
		}
	}
	// Opened again, the batch's revert deletes its pay parts.
	if r := e.post(t, c, "/actions/open", formOf(t, e.get(t, c, "/actions/open?period=2026-11").body), nil); r.code != http.StatusOK || !strings.Contains(r.body, "opened again") {
		t.Fatalf("open: %d\n%s", r.code, r.body)
	}
	if e.holds() != before {
		t.Errorf("opening the period sent something: the sandbox holds %d, want %d", e.holds(), before)
	}
	pv := e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch))
	if strings.Count(pv.body, `<span class="op-delete">delete</span>`) != before {
		t.Errorf("revert preview of the batch once its period is open: want its %d pay parts' deletes\n%s", before, pv.body)
	}
	if r := e.post(t, c, "/actions/revert", formOf(t, pv.body), nil); r.code != http.StatusOK || !strings.Contains(r.body, fmt.Sprintf("%d deleted, 0 created", before)) || e.holds() != 0 {
		t.Errorf("revert of the batch once its period is open: %d, the sandbox holds %d, want 0\n%s", r.code, e.holds(), r.body)
	}
	var actions []string
	log, _ := e.led.AuditLog(ctxOf(t), 0)
	for _, a := range log {
		actions = append(actions, a.Action+" "+a.Scope+" "+string(a.Result))
	}
	if got, want := strings.Join(actions, ", "), fmt.Sprintf("revert batch %d done, open period 2026-11 done, close period 2026-11 done", e.batch); got != want {
		t.Errorf("audit log: %s, want %s", got, want)
	}
}

// Without a password the console serves loopback only: a listen address
// beyond it is refused, and so is a request naming another host (a page
// that rebinds its name to 127.0.0.1).
func TestConsole_NoPasswordLoopbackOnly(t *testing.T) {
	e := setup(t, "")
	if _, _, err := e.console.Serve(ctxOf(t), consoleListen("0.0.0.0:0")); err == nil || !strings.Contains(err.Error(), "PAYSYNC_CONSOLE_PASSWORD") {
		t.Errorf("Serve on 0.0.0.0 without a password: %v", err)
	}
	c := e.client(t)
	if r := e.get(t, c, "/"); r.code != http.StatusOK {
		t.Errorf("loopback without a password: %d", r.code)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/", nil)
	req.Host = "evil.example"
	if r := e.do(t, c, req); r.code != http.StatusUnauthorized {
		t.Errorf("Host evil.example without a password: %d", r.code)
	}
}

// No page renders the refresh token, the client secret or the console
// password.
func TestConsole_NoSecretsRendered(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	for _, p := range append(pages(e.batch), "/login", "/actions/replay?period=2026-11", fmt.Sprintf("/actions/replay?batch=%d", e.batch), "/actions/close?period=2026-11") {
		r := e.get(t, c, p)
		for name, s := range map[string]string{"refresh token": e.refresh, "client secret": e.secret, "console password": testPassword} {
			if strings.Contains(r.body, s) {
				t.Errorf("%s renders the %s", p, name)
			}
		}
	}
}

// An import and a period are reverted through their previews as a batch
// is; a period replayed afterwards is paid again (the entries stayed in
// the ledger), once.
func TestConsole_RevertImportAndPeriod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		preview string
		replay  bool
	}{
		{"import", "/actions/revert?import=1", false},
		{"period, then replay", "/actions/revert?period=2026-11", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, testPassword)
			c := e.client(t)
			e.login(t, c)
			before := e.holds()
			r := e.post(t, c, "/actions/revert", formOf(t, e.get(t, c, tc.preview).body), nil)
			if r.code != http.StatusOK || e.holds() != 0 {
				t.Fatalf("revert: %d, the sandbox holds %d\n%s", r.code, e.holds(), r.body)
			}
			if !tc.replay {
				return
			}
			p := e.get(t, c, "/actions/replay?period=2026-11")
			if p.code != http.StatusOK || !strings.Contains(p.body, "touches <strong>7</strong> entries") || e.holds() != 0 { // every entry dated in it, the one the rules skip too
				t.Fatalf("replay preview: %d, the sandbox holds %d\n%s", p.code, e.holds(), p.body)
			}
			if r := e.post(t, c, "/actions/replay", formOf(t, p.body), nil); r.code != http.StatusOK || e.holds() != before {
				t.Errorf("replay: %d, the sandbox holds %d, want %d\n%s", r.code, e.holds(), before, r.body)
			}
			// Replayed again: nothing is paid twice (nothing to send, no
			// confirmation).
			if r := e.get(t, c, "/actions/replay?period=2026-11"); r.code != http.StatusOK || !strings.Contains(r.body, "nothing to send") ||
				strings.Contains(r.body, `id="confirm"`) || e.holds() != before {
				t.Errorf("replay again: %d, the sandbox holds %d, want %d\n%s", r.code, e.holds(), before, r.body)
			}
		})
	}
}
