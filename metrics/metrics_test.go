package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/metrics"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetrics_Handler(t *testing.T) {
	pending := 7.0
	m := metrics.New(metrics.Funcs{PendingParts: func() float64 { return pending }})
	natsUp := true
	srv := httptest.NewServer(m.Handler(metrics.Check{Name: "nats", Fn: func() error {
		if !natsUp {
			return errors.New("disconnected")
		}
		return nil
	}}))
	defer srv.Close()

	m.Entries.WithLabelValues("nats", "committed").Add(3)
	m.ObserveCall("CreatePayParts", "", 200, 40*time.Millisecond)
	m.ObserveCall("CreatePayParts", "ambiguous", 502, time.Second)
	code, body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`paysync_entries_total{outcome="committed",source="nats"} 3`,
		`paysync_pending_pay_parts 7`,
		`paysync_api_request_duration_seconds_count{operation="CreatePayParts",status="200"} 1`,
		`paysync_api_request_duration_seconds_count{operation="CreatePayParts",status="ambiguous"} 1`,
		`go_goroutines`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	pending = 2
	if _, body = get(t, srv.URL+"/metrics"); !strings.Contains(body, "paysync_pending_pay_parts 2") {
		t.Error("gauge not read at scrape time")
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	natsUp = false
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || !strings.Contains(body, "nats: disconnected") {
		t.Errorf("/readyz with NATS down = %d %q", code, body)
	}
}

// Batch and pay-part outcomes land where the runbook says: a rejected pay
// part is no batch; a recovered batch adds no pay parts (they count as
// created); failed, recovered and rejected are exported from the start.
func TestMetrics_Outcomes(t *testing.T) {
	m := metrics.New(metrics.Funcs{})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	_, body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`paysync_batches_total{outcome="failed"} 0`,
		`paysync_batches_total{outcome="recovered"} 0`,
		`paysync_pay_parts_total{outcome="failed"} 0`,
		`paysync_pay_parts_total{outcome="rejected"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics before any outcome lacks %q", want)
		}
	}
	m.ObserveBatch("created", 100)
	m.ObserveBatch("failed", 40)
	m.ObserveBatch("recovered", 0)
	m.ObservePayParts("rejected", 1)
	m.ObservePayParts("rejected", 1)
	_, body = get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`paysync_batches_total{outcome="created"} 1`,
		`paysync_pay_parts_total{outcome="created"} 100`,
		`paysync_batches_total{outcome="failed"} 1`,
		`paysync_pay_parts_total{outcome="failed"} 40`,
		`paysync_batches_total{outcome="recovered"} 1`,
		`paysync_pay_parts_total{outcome="rejected"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, unwanted := range []string{`paysync_batches_total{outcome="rejected"}`, `paysync_pay_parts_total{outcome="recovered"}`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("/metrics has %q", unwanted)
		}
	}
}

// Issue 16: paysync_inbox_files_total was registered but never counted
// while the runbook alerts on its failed outcome: each file an inbox poll
// finished with counts once under its outcome; failed exists from the start.
func TestMetrics_InboxFiles(t *testing.T) {
	m := metrics.New(metrics.Funcs{})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if _, body := get(t, srv.URL+"/metrics"); !strings.Contains(body, `paysync_inbox_files_total{outcome="failed"} 0`) {
		t.Errorf("/metrics before any file lacks the failed outcome at 0")
	}
	for _, o := range []string{"processed", "processed", "failed", "duplicate", "refused"} {
		m.ObserveInboxFile(o)
	}
	_, body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`paysync_inbox_files_total{outcome="processed"} 2`,
		`paysync_inbox_files_total{outcome="failed"} 1`,
		`paysync_inbox_files_total{outcome="duplicate"} 1`,
		`paysync_inbox_files_total{outcome="refused"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
