package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
)

// runEntries sizes TestRun_NATS. CI uses 2,000 (about 20 s under -race:
// every message is its own ledger transaction); run with
// -args -run.entries=10000 for the figure.
var runEntries = flag.Int("run.entries", 2000, "entries TestRun_NATS publishes")

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func payrollKeys(sb *sandbox.Server) []string {
	var out []string
	for _, c := range sb.State().Companies {
		for _, p := range c.PayParts {
			out = append(out, c.ID+"|"+p.EmployeeID+"|"+p.Code+"|"+p.Numbers.String())
		}
	}
	sort.Strings(out)
	return out
}

// TestRun_NATS: entries published with 1 % invalid and 5 % duplicates →
// payroll holds exactly the valid ones once; the dead-letter subject holds
// the invalid ones with their reasons; /metrics moves; /readyz follows NATS.
func TestRun_NATS(t *testing.T) {
	n := *runEntries
	s := startSandbox(t, sandbox.Options{})
	storeDir := t.TempDir()
	ns := natstest.Start(t, natstest.WithStoreDir(storeDir))
	port := natstest.Port(t, ns)
	url := ns.ClientURL()
	httpAddr := freeAddr(t)
	env := with(s.env, "NATS_URL", url, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_HTTP_ADDR", httpAddr,
		"PAYSYNC_BATCH_LINGER", "100ms", "PAYSYNC_RATE_LIMIT", "1000", "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys, "PAYSYNC_LOG_LEVEL", "error",
		"PAYSYNC_MAPPING", noAggregateRules(t)) // one pay part per entry
	delete(env, "PAYSYNC_TOKEN_FILE")

	nc, js := natstest.Connect(t, url)
	// Dead letters go to a stream of their own (as docs/runbook.md
	// recommends): a core subscription would miss those published while
	// this client reconnects after the server restart below.
	dlq, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "DEADLETTER", Subjects: []string{"paysync.deadletter"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	deadLetters := func() []*jetstream.RawStreamMsg {
		info, err := dlq.Info(t.Context())
		if err != nil {
			return nil
		}
		var out []*jetstream.RawStreamMsg
		for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
			if m, err := dlq.GetMsg(t.Context(), seq); err == nil {
				out = append(out, m)
			}
		}
		return out
	}

	// The daemon, in this process.
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		done <- run(ctx, []string{"run"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup)
	}()
	waitFor(t, "readyz", 20*time.Second, func() bool { c, _ := httpGet("http://" + httpAddr + "/readyz"); return c == 200 })

	emps := []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer pcancel()
	valid, invalid := 0, 0
	for i := 0; i < n; i++ {
		e := paysync.Entry{ID: fmt.Sprintf("n-%d", i), EmployeeID: emps[i%4], Date: "2026-11-02", Code: "T1",
			Hours: paysync.HoursFromSeconds(int64(600 * (i%50 + 1)))}
		if i%100 == 7 { // 1 % invalid: a person payroll does not know
			e.EmployeeID = "MV8xXzk5"
			invalid++
		} else {
			valid++
		}
		subject := stream.Subject("timesheets", sandbox.CompanyNordlys, "test")
		if _, err := stream.Publish(pctx, js, subject, e); err != nil {
			t.Fatal(err)
		}
		if i%20 == 3 { // 5 % duplicates: the same entry again, under a new message id
			b, _ := jsonMarshal(e)
			if _, err := js.Publish(pctx, subject, b, jetstream.WithMsgID(e.ID+"-again")); err != nil {
				t.Fatal(err)
			}
		}
		if i == n/2 { // the NATS server restarts mid-stream (same store)
			ns.Shutdown()
			ns.WaitForShutdown()
			ns = natstest.Start(t, natstest.WithStoreDir(storeDir), natstest.WithPort(port))
			waitFor(t, "publisher reconnect", 10*time.Second, nc.IsConnected)
		}
	}
	waitFor(t, "every valid entry in payroll", 3*time.Minute, func() bool { return len(payrollKeys(s.sb)) >= valid })
	waitFor(t, "dead letters", 30*time.Second, func() bool { return len(deadLetters()) >= invalid })
	time.Sleep(300 * time.Millisecond) // nothing more may arrive
	if got := len(payrollKeys(s.sb)); got != valid {
		t.Fatalf("payroll holds %d pay parts, want %d", got, valid)
	}
	if dead := deadLetters(); len(dead) != invalid || !strings.Contains(dead[0].Header.Get("Paysync-Reason"), "MV8xXzk5") {
		t.Errorf("dead letters: %d (want %d), first reason %q", len(dead), invalid, dead[0].Header.Get("Paysync-Reason"))
	}

	_, body := httpGet("http://" + httpAddr + "/metrics")
	for _, want := range []string{`paysync_entries_total{outcome="committed",source="nats"}`, `paysync_pay_parts_total{outcome="created"}`,
		`paysync_api_request_duration_seconds_count{operation="CreatePayParts",status="200"}`, "paysync_pending_pay_parts 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// /readyz follows NATS.
	ns.Shutdown()
	ns.WaitForShutdown()
	waitFor(t, "not ready without NATS", 10*time.Second, func() bool { c, _ := httpGet("http://" + httpAddr + "/readyz"); return c == 503 })
	ns = natstest.Start(t, natstest.WithStoreDir(storeDir), natstest.WithPort(port))
	waitFor(t, "ready again", 20*time.Second, func() bool { c, _ := httpGet("http://" + httpAddr + "/readyz"); return c == 200 })

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run exited %d\n%s", code, errb.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("run did not stop")
	}
}

// TestRun_Inbox: a file being written is not picked up; a bad file lands in
// failed/ with a report; a good one in processed/; the same file again is a
// no-op; a file whose entries fall in groups payroll holds replaces their
// pay parts by the new totals.
func TestRun_Inbox(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	dir := t.TempDir()
	in := filepath.Join(dir, "inbox")
	if err := os.Mkdir(in, 0o700); err != nil {
		t.Fatal(err)
	}
	env := with(s.env, "PAYSYNC_INBOX", in, "PAYSYNC_LEDGER", filepath.Join(dir, "ledger.db"), "PAYSYNC_MAPPING", "../../deploy/examples/rules.yaml")
	delete(env, "PAYSYNC_TOKEN_FILE")
	copyFile := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("../../deploy/examples/toggl.csv", filepath.Join(in, "toggl.csv"))
	copyFile("testdata/import/bad.csv", filepath.Join(in, "bad.csv"))
	copyFile("../../deploy/examples/harvest.csv", filepath.Join(in, "harvest.csv.part")) // still being written
	r := runInProcess(t, env, "run", "--once")
	if r.code != 0 || !strings.Contains(r.stdout, "1 processed, 1 failed") {
		t.Fatalf("run --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(in, "harvest.csv.part")); err != nil {
		t.Error("the .part file was touched")
	}
	reports, _ := filepath.Glob(filepath.Join(in, "failed", "*bad.csv.report.txt"))
	if len(reports) != 1 {
		t.Fatalf("failed/ reports: %v", reports)
	}
	rep, _ := os.ReadFile(reports[0])
	if !strings.Contains(string(rep), "inbox/bad.csv:4: entry b-3: email") || !strings.Contains(string(rep), "what to do") {
		t.Errorf("report:\n%s", rep)
	}
	if n := len(payrollKeys(s.sb)); n != 7 {
		t.Fatalf("payroll holds %d, want the 7 of toggl.csv", n)
	}
	// The writer renames it into place; the same toggl file is dropped again.
	if err := os.Rename(filepath.Join(in, "harvest.csv.part"), filepath.Join(in, "harvest.csv")); err != nil {
		t.Fatal(err)
	}
	copyFile("../../deploy/examples/toggl.csv", filepath.Join(in, "toggl.csv"))
	before := s.sb.State().Counters.Requests
	r = runInProcess(t, env, "run", "--once")
	if r.code != 0 || !strings.Contains(r.stdout, "1 duplicate,") {
		t.Fatalf("second run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// harvest.csv's hours join toggl.csv's groups (one pay part per
	// employee × code × rate × month): Mette's, Lars's and Sofie's T1 are
	// replaced by their new totals (exact hours summed, rounded once),
	// Anders's overtime is new; the rest keep their pay parts.
	want := []string{
		"MV8x|MV8xXzE=|T1|units=19.33", // 7:30 + 4:20 + 7:30
		"MV8x|MV8xXzE=|T2|units=2.67 rate=310.5",
		"MV8x|MV8xXzE=|TILLAEG|units=2.67 rate=45 amount=120.15",
		"MV8x|MV8xXzI=|SYG|units=8",
		"MV8x|MV8xXzI=|T1|units=16.5", // 7 + 7.5 + 1 + 1
		"MV8x|MV8xXzM=|T1|units=3.83", // 3:20 + 0:30
		"MV8x|MV8xXzM=|TILLAEG|units=3.33 rate=45 amount=149.85",
		"MV8x|MV8xXzQ=|T2|units=2.25 rate=310.5",
	}
	after := s.sb.State().Counters.Requests
	if got := payrollKeys(s.sb); !slices.Equal(got, want) || after["create_pay_parts"] != before["create_pay_parts"]+1 || after["delete_pay_parts"] != before["delete_pay_parts"]+1 {
		t.Fatalf("payroll holds\n%s\nwant\n%s\n%d create and %d delete calls (want 1 each)", strings.Join(got, "\n"), strings.Join(want, "\n"),
			after["create_pay_parts"]-before["create_pay_parts"], after["delete_pay_parts"]-before["delete_pay_parts"])
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
