package console_test

import (
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/device"
)

// TestScreenshots writes docs/console/*.png, the README's pictures of the
// console, from the demo data (the Toggl example imported into the
// sandbox): PAYSYNC_CONSOLE_SCREENSHOTS=1 go test ./console -run TestScreenshots
func TestScreenshots(t *testing.T) {
	if os.Getenv("PAYSYNC_CONSOLE_SCREENSHOTS") == "" {
		t.Skip("set PAYSYNC_CONSOLE_SCREENSHOTS=1 to write docs/console/*.png")
	}
	e := setup(t, testPassword)
	ctx := browser(t)
	base := e.srv.URL
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`#login`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	screenshot(ctx, t, base+"/login", "login")
	if err := chromedp.Run(ctx, chromedp.SendKeys(`input[name=password]`, testPassword, chromedp.ByQuery),
		chromedp.Click(`#login`, chromedp.ByQuery), chromedp.WaitVisible(`#readiness`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	// A closed period and a reverted batch, so that the audit log and the
	// periods page show something.
	c := e.client(t)
	e.login(t, c)
	e.post(t, c, "/actions/close", formOf(t, e.get(t, c, "/actions/close?period=2026-10").body), nil)
	screenshot(ctx, t, base+"/", "overview")
	screenshot(ctx, t, base+"/periods", "periods")
	screenshot(ctx, t, base+"/period?"+url.Values{"period": {"2026-11"}}.Encode(), "period")
	screenshot(ctx, t, base+"/imports/1", "import")
	screenshot(ctx, t, fmt.Sprintf("%s/batches/%d", base, e.batch), "batch")
	screenshot(ctx, t, fmt.Sprintf("%s/actions/revert?batch=%d", base, e.batch), "revert-preview")
	if err := chromedp.Run(ctx, chromedp.Click(`#confirm-button`, chromedp.ByQuery), chromedp.WaitVisible(`#result`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	screenshot(ctx, t, base+"/audit", "audit")
	if err := chromedp.Run(ctx, chromedp.Emulate(device.IPhone12)); err != nil {
		t.Fatal(err)
	}
	screenshot(ctx, t, fmt.Sprintf("%s/batches/%d", base, e.batch), "phone-batch")
}
