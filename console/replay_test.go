package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/paysync/paysync/ledger"
)

// A batch or an import is replayed from its page through the preview (the
// entries it touches, what it would send) and the confirmation. A replay
// is a redo: of what payroll holds, it would send nothing (no
// confirmation: nothing is paid twice); once reverted, payroll holds its
// pay parts again, once; the same form submitted again changes nothing, a
// stale preview is refused, a replay done again would send nothing, and
// every replay confirmed is in the audit log.
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

			// In payroll: a replay is offered, and would send nothing (no
			// confirmation).
			if r := e.get(t, c, page); !strings.Contains(r.body, tc.button) || !strings.Contains(r.body, preview) {
				t.Errorf("%s offers no replay:\n%s", page, r.body)
			}
			if r := e.get(t, c, preview); r.code != http.StatusOK || !strings.Contains(r.body, "nothing to send") || strings.Contains(r.body, `id="confirm"`) || e.holds() != before {
				t.Fatalf("replay of what payroll holds: %d, the sandbox holds %d, want %d\n%s", r.code, e.holds(), before, r.body)
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
			if pv.code != http.StatusOK || !strings.Contains(pv.body, "touches <strong>6</strong> entries") {
				t.Fatalf("replay preview: %d, want 6 entries touched\n%s", pv.code, pv.body)
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
			if first.code != http.StatusOK || !strings.Contains(first.body, fmt.Sprintf("replay %s: 6 entries touched; 0 deleted, %d created", scope, before)) || e.holds() != before {
				t.Fatalf("replay: %d, the sandbox holds %d, want %d\n%s", first.code, e.holds(), before, first.body)
			}
			second := e.post(t, c, "/actions/replay", form, nil)
			if second.code != http.StatusOK || !strings.Contains(second.body, "submitted before") || e.holds() != before {
				t.Errorf("second submit: %d, the sandbox holds %d\n%s", second.code, e.holds(), second.body)
			}
			// Replayed, a replay again pays nothing twice: nothing to send.
			if again := e.get(t, c, preview); again.code != http.StatusOK || !strings.Contains(again.body, "nothing to send") ||
				strings.Contains(again.body, `id="confirm"`) || e.holds() != before {
				t.Errorf("replay again: %d, the sandbox holds %d, want %d and nothing to send\n%s", again.code, e.holds(), before, again.body)
			}
			log, err := e.led.AuditLog(ctxOf(t), 0)
			if err != nil {
				t.Fatal(err)
			}
			var replays []string
			for _, a := range log {
				if a.Action == "replay" {
					if a.Scope != scope {
						t.Errorf("audit log: a replay of %q, want %q", a.Scope, scope)
					}
					replays = append(replays, string(a.Result))
				}
			}
			// Newest first: the replay, and the stale one.
			want := []string{string(ledger.AuditDone), string(ledger.AuditFailed)}
			if got, want := strings.Join(replays, ", "), strings.Join(want, ", "); got != want {
				t.Errorf("audit log of the replays, newest first: %s, want %s", got, want)
			}
			// The replay's pay parts are in a batch of their own; the
			// reverted batch's stay deleted.
			if b, _ := e.led.Batch(ctxOf(t), e.batch); b.Deleted != before || b.Created != 0 {
				t.Errorf("the replayed batch %d: %d deleted, %d created; want its %d deleted (its replay is a batch of its own)", e.batch, b.Deleted, b.Created, before)
			}
		})
	}
}
