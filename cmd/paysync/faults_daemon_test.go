package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestDaemon_PayrollFaults: `paysync run`, over each source, while payroll
// fails in every way that is not the input's fault: every call answers
// HTTP 500 for a few seconds while entries arrive; then the connection is
// revoked while more arrive, the daemon is SIGKILLed and restarted while
// it is still revoked (it must stay up, not ready), more arrive, and the
// operator re-connects (`paysync auth password --save`, into the ledger
// the running daemon uses). Every valid entry lands in payroll exactly
// once, nothing is dead-lettered or parked, no source is recorded as
// rejected, and the daemon never exits on its own.
func TestDaemon_PayrollFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	for _, drv := range sourceDrivers {
		t.Run(drv.name, func(t *testing.T) {
			h := newDaemonHarness(t, drv.new(t), drv.name+"-faults")
			connect := func(what string) {
				t.Helper()
				r := runBinary(t, with(h.env, "PAYSYNC_PASSWORD", "demo"), "auth", "password", "--username", "demo", "--save")
				if r.code != 0 {
					t.Fatalf("%s: paysync auth password --save: exit %d\n%s", what, r.code, r.stderr)
				}
			}
			// The connection lives in the ledger, as after `paysync auth`:
			// a re-connect is what the running daemon must pick up.
			connect("connect")
			delete(h.env, "PAYSYNC_REFRESH_TOKEN")
			all := daemonEntries(h.prefix, 900)
			alive := func(d *daemonProc, when string) {
				t.Helper()
				if d.exited() {
					t.Fatalf("paysync run exited %s: %s", when, d.exitDesc())
				}
			}
			readyz := func(d *daemonProc) (int, string) { return httpGet("http://" + d.addr + "/readyz") }

			// 1. An outage of every payroll call while entries arrive.
			d := h.start(t)
			h.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultErrorBefore, Status: 500})
			outage := time.Now()
			h.drv.feed(t, all[:300])
			time.Sleep(time.Until(outage.Add(3 * time.Second)))
			alive(d, "during the outage")
			h.sb.SetFaults()
			waitFor(t, "the first 300 in payroll after the outage", 90*time.Second, func() bool { return h.payroll() >= 300 })

			// 2. The connection is revoked while more arrive.
			h.sb.RevokeAll()
			h.drv.feed(t, all[300:600])
			waitFor(t, "/readyz to name the revoked connection", 60*time.Second, func() bool {
				code, body := readyz(d)
				return code == 503 && strings.Contains(body, "revoked")
			})
			alive(d, "while revoked")

			// 3. SIGKILL, and a restart while still revoked: up, not ready.
			d.signal(t, syscall.SIGKILL)
			if !d.waitExit(10 * time.Second) {
				t.Fatal("paysync run did not die of SIGKILL")
			}
			h.drv.afterHardStop(t)
			d = h.launch(t)
			waitFor(t, "the restarted daemon to answer /readyz 503 naming the revoked connection", 60*time.Second, func() bool {
				alive(d, "after a restart while revoked")
				code, body := readyz(d)
				return code == 503 && strings.Contains(body, "revoked")
			})
			h.drv.feed(t, all[600:])
			time.Sleep(2 * time.Second)
			alive(d, "while revoked after the restart")

			// 4. The operator re-connects; the running daemon picks it up.
			connect("re-connect")
			waitFor(t, "/readyz 200 after the re-connect", 60*time.Second, func() bool {
				alive(d, "after the re-connect")
				code, _ := readyz(d)
				return code == 200
			})
			h.finish(t, all, 120*time.Second)
			if p := h.drv.parked(t); len(p) > 0 {
				t.Errorf("%d inputs parked (dead-lettered or failed/), want none: %v", len(p), p[:min(5, len(p))])
			}
			d.stop(t)
			h.checkLedger(t, len(all))
			l, err := ledger.Open(context.Background(), h.env["PAYSYNC_LEDGER"], ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			srcs, err := l.ListSources(context.Background(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var rejected []string
			for _, s := range srcs {
				if s.Status == paysync.SourceRejected {
					rejected = append(rejected, fmt.Sprintf("%d %s", s.ID, s.Name))
				}
			}
			if len(rejected) > 0 {
				t.Errorf("%d sources recorded as rejected, want none: %v", len(rejected), rejected[:min(5, len(rejected))])
			}
		})
	}
}
