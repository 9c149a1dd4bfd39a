package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
)

// A reverted batch or import is replayed from its page through the
// preview (the pay parts payroll gets) and the confirmation: payroll holds
// them again, once; the same form submitted again changes nothing, a
// stale preview is refused, and both replays are in the audit log. A batch
// whose pay parts are still in payroll offers no replay, and its preview
// says to revert it first.
func TestConsole_ReplayBatchAndImport(t *testing.T) {
	for _, tc := range []struct {
		name, page, button, preview, scope string
	}{
		{"batch", "/batches/%d", `id="replay"`, "/actions/replay?batch=%d", "batch %d"},
		{"import", "/imports/1", `id="replay"`, "/actions/replay?import=1", "import 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, testPassword)
			c := e.client(t)
			e.login(t, c)
			withBatch := func(s string) string {
				if strings.Contains(s, "%d") {
					return fmt.Sprintf(s, e.batch)
				}
				return s
			}
			page, preview, scope := withBatch(tc.page), withBatch(tc.preview), withBatch(tc.scope)
			before := e.holds()

			// In payroll: no button, and the preview refuses.
			if r := e.get(t, c, page); strings.Contains(r.body, tc.button) {
				t.Errorf("%s offers a replay while its pay parts are in payroll", page)
			}
			if r := e.get(t, c, preview); r.code != http.StatusConflict || !strings.Contains(r.body, "revert it first") || strings.Contains(r.body, `id="confirm"`) {
				t.Errorf("replay preview of what payroll holds: %d\n%s", r.code, r.body)
			}

			r := e.post(t, c, "/actions/revert", formOf(t, e.get(t, c, fmt.Sprintf("/actions/revert?batch=%d", e.batch)).body), nil)
			if r.code != http.StatusOK || e.holds() != 0 {
				t.Fatalf("revert: %d, the sandbox holds %d\n%s", r.code, e.holds(), r.body)
			}

			p := e.get(t, c, page)
			if p.code != http.StatusOK || !strings.Contains(p.body, tc.button) || !strings.Contains(p.body, preview) {
				t.Fatalf("%s after the revert offers no replay:\n%s", page, p.body)
			}
			pv := e.get(t, c, preview)
			if pv.code != http.StatusOK || strings.Count(pv.body, `class="op-create"`) != before {
				t.Fatalf("replay preview: %d, want %d pay parts to create\n%s", pv.code, before, pv.body)
			}
			if e.holds() != 0 {
				t.Fatal("the preview sent pay parts")
			}
			form := formOf(t, pv.body)

			stale := formOf(t, e.get(t, c, preview).body)
			stale.Set("digest", "0000")
			if r := e.post(t, c, "/actions/replay", stale, nil); r.code != http.StatusConflict || !strings.Contains(r.body, "not what the preview showed") || e.holds() != 0 {
				t.Errorf("stale replay: %d, the sandbox holds %d\n%s", r.code, e.holds(), r.body)
			}

			first := e.post(t, c, "/actions/replay", form, nil)
			if first.code != http.StatusOK || !strings.Contains(first.body, "replayed into batches") || e.holds() != before {
				t.Fatalf("replay: %d, the sandbox holds %d, want %d\n%s", first.code, e.holds(), before, first.body)
			}
			second := e.post(t, c, "/actions/replay", form, nil)
			if second.code != http.StatusOK || !strings.Contains(second.body, "submitted before") || e.holds() != before {
				t.Errorf("second submit: %d, the sandbox holds %d\n%s", second.code, e.holds(), second.body)
			}
			// Replayed, nothing is left to replay.
			if r := e.get(t, c, preview); strings.Contains(r.body, `id="confirm"`) {
				t.Errorf("a replayed %s still offers a confirmation:\n%s", tc.name, r.body)
			}
			log, err := e.led.AuditLog(ctxOf(t), 0)
			if err != nil {
				t.Fatal(err)
			}
			var replays []ledger.AuditEntry
			for _, a := range log {
				if a.Action == "replay" {
					replays = append(replays, a)
				}
			}
			if len(replays) != 2 || replays[0].Result != ledger.AuditDone || replays[0].Scope != scope || replays[1].Result != ledger.AuditFailed {
				t.Errorf("audit log of the replays: %+v", replays)
			}
			if b, _ := e.led.Batch(ctxOf(t), e.batch); b.State != paysync.BatchReverted {
				t.Errorf("the replayed batch %d is %s, want it reverted (its replay is a batch of its own)", e.batch, b.State)
			}
		})
	}
}
