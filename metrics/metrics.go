// Package metrics holds paysync's Prometheus metrics on a private registry
// and serves them with the health endpoints.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the counters, histograms and gauges of a paysync process.
type Metrics struct {
	reg *prometheus.Registry

	Entries      *prometheus.CounterVec   // entries by source kind and outcome
	PayParts     *prometheus.CounterVec   // pay parts by outcome (ObserveBatch, ObservePayParts)
	Batches      *prometheus.CounterVec   // batch outcomes (ObserveBatch)
	APILatency   *prometheus.HistogramVec // payroll API calls by operation and status
	TokenRefresh prometheus.CounterFunc
	PendingParts prometheus.GaugeFunc
	ConsumerLag  prometheus.GaugeFunc
	InboxFiles   *prometheus.CounterVec // inbox files by outcome (ObserveInboxFile)
	Ready        prometheus.Gauge
}

// Funcs supply the gauges that are read at scrape time.
type Funcs struct {
	TokenRefreshes func() float64
	PendingParts   func() float64
	ConsumerLag    func() float64
}

// New registers every metric on a fresh registry.
func New(f Funcs) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	or0 := func(fn func() float64) func() float64 {
		if fn == nil {
			return func() float64 { return 0 }
		}
		return fn
	}
	m := &Metrics{
		reg: reg,
		Entries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paysync_entries_total",
			Help: "Timesheet entries received, by source (nats, file) and outcome (committed, duplicate, rejected)."}, []string{"source", "outcome"}),
		PayParts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paysync_pay_parts_total",
			Help: "Pay parts by outcome: created (incl. reconciled), reconciled, deleted, split (moved into halves), failed (in batches that became failed), rejected (refused by the payroll API for good)."}, []string{"outcome"}),
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paysync_batches_total",
			Help: "Batch outcomes: created (create calls that succeeded), reconciled, split, deleted, failed (batches that ran out of attempts, each counted once when it becomes failed, not per retry), recovered (failed batches created after all)."}, []string{"outcome"}),
		APILatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "paysync_api_request_duration_seconds",
			Help:    "Payroll API calls by operation and status (HTTP status, or the error class).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"operation", "status"}),
		TokenRefresh: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "paysync_token_refreshes_total",
			Help: "Successful OAuth2 refresh-token grants."}, or0(f.TokenRefreshes)),
		PendingParts: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paysync_pending_pay_parts",
			Help: "Pay parts committed to the ledger and not yet created in payroll."}, or0(f.PendingParts)),
		ConsumerLag: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paysync_consumer_lag_messages",
			Help: "JetStream messages not yet acknowledged by paysync (pending + in flight)."}, or0(f.ConsumerLag)),
		InboxFiles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paysync_inbox_files_total",
			Help: "Inbox files by outcome: processed, failed, duplicate, refused."}, []string{"outcome"}),
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "paysync_ready", Help: "1 when /readyz answers ready."}),
	}
	reg.MustRegister(m.Entries, m.PayParts, m.Batches, m.APILatency, m.TokenRefresh, m.PendingParts, m.ConsumerLag, m.InboxFiles, m.Ready)
	// The outcomes worth alerting on exist from the start (at 0), so that
	// increase() sees their first one.
	for _, o := range []string{"failed", "recovered"} {
		m.Batches.WithLabelValues(o)
	}
	for _, o := range []string{"failed", "rejected"} {
		m.PayParts.WithLabelValues(o)
	}
	m.InboxFiles.WithLabelValues("failed")
	return m
}

// ObserveInboxFile counts a file an inbox poll finished with, by outcome
// (the inbox's Config.OnFile): processed, failed, duplicate, refused.
func (m *Metrics) ObserveInboxFile(outcome string) {
	m.InboxFiles.WithLabelValues(outcome).Inc()
}

// ObserveBatch records a batch outcome with its number of pay parts (the
// worker's Deliverer.OnBatch). payParts 0 counts the batch only (a
// recovered batch's pay parts count as created).
func (m *Metrics) ObserveBatch(outcome string, payParts int) {
	m.Batches.WithLabelValues(outcome).Inc()
	if payParts > 0 {
		m.PayParts.WithLabelValues(outcome).Add(float64(payParts))
	}
}

// ObservePayParts records pay parts with an outcome of their own, not a
// batch's (Deliverer.OnPayParts): rejected.
func (m *Metrics) ObservePayParts(outcome string, n int) {
	m.PayParts.WithLabelValues(outcome).Add(float64(n))
}

// ObserveCall records one payroll API call.
func (m *Metrics) ObserveCall(op, class string, status int, d time.Duration) {
	s := class
	if s == "" {
		s = strconv.Itoa(status)
	}
	m.APILatency.WithLabelValues(op, s).Observe(d.Seconds())
}

// Check is one readiness condition: nil when fine.
type Check struct {
	Name string
	Fn   func() error
}

// Handler serves /metrics, /healthz (the process runs) and /readyz (every
// check passes; the failing ones are named).
func (m *Metrics) Handler(checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		var bad []string
		for _, c := range checks {
			if err := c.Fn(); err != nil {
				bad = append(bad, c.Name+": "+err.Error())
			}
		}
		if len(bad) > 0 {
			m.Ready.Set(0)
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, b := range bad {
				w.Write([]byte("not ready: " + b + "\n"))
			}
			return
		}
		m.Ready.Set(1)
		w.Write([]byte("ready\n"))
	})
	return mux
}
