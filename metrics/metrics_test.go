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
