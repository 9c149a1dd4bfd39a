package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/console"
	"github.com/paysync/paysync/ledger"
)

// TestLogin_NextNeverAnotherHost: browsers drop tabs and line breaks from
// a Location (WHATWG URL parser), so a next= of "/\t/evil.example" would be
// followed as "//evil.example", an open redirect after login: such a next
// goes to the overview.
func TestLogin_NextNeverAnotherHost(t *testing.T) {
	ctx := ctxOf(t)
	led, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	s, err := console.New(console.Config{Ledger: led, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, next := range []string{"/\t/evil.example/", "/\t\t/evil.example/", "/\n/evil.example/", "/ /evil.example/"} {
		form := url.Values{"password": {testPassword}, "next": {next}}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		resp, err := http.DefaultTransport.RoundTrip(req) // Go's client refuses the Location a browser follows

		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		// What a browser makes of it: tabs and newlines removed.
		browser := strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(loc)
		if strings.HasPrefix(browser, "//") {
			t.Errorf("next=%q: Location %q, which a browser follows to %q (another host)", next, loc, browser)
		}
	}
}
