package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/metrics"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
)

// runMetrics are the daemon's metrics. The gauges read the session and
// the NATS source at scrape time: both are set once built.
type runMetrics struct {
	m   *metrics.Metrics
	s   *session
	src *stream.Source
	// refreshes, when set, counts the refreshes instead of the session's
	// client (payroll.Router.Refreshes: every connection's).
	refreshes func() int64
}

// newRunMetrics registers the metrics and hooks the payroll calls of the
// session cfg will connect.
func newRunMetrics(cfg *config) *runMetrics {
	rm := &runMetrics{}
	rm.m = metrics.New(metrics.Funcs{
		TokenRefreshes: func() float64 {
			if rm.refreshes != nil {
				return float64(rm.refreshes())
			}
			if rm.s == nil {
				return 0
			}
			return float64(rm.s.cl.Tokens().Refreshes())
		},
		PendingParts: func() float64 {
			if rm.s == nil {
				return 0
			}
			n, _ := rm.s.led.PendingPayParts(context.Background())
			return float64(n)
		},
		ConsumerLag: func() float64 {
			if rm.src == nil {
				return 0
			}
			n, _ := rm.src.Pending(context.Background())
			return float64(n)
		},
	})
	cfg.onCall = func(op string, class payroll.Class, status int, d time.Duration) {
		c := ""
		if class != 0 {
			c = strings.ReplaceAll(class.String(), " ", "_")
		}
		rm.m.ObserveCall(op, c, status, d)
	}
	return rm
}

// observe counts a committed input's entries by outcome.
func (rm *runMetrics) observe(kind paysync.SourceKind, rep worker.Report) {
	rm.m.Entries.WithLabelValues(string(kind), "duplicate").Add(float64(rep.Duplicates))
	rm.m.Entries.WithLabelValues(string(kind), "rejected").Add(float64(len(rep.ProblemList())))
	if rep.ImportID != 0 && !rep.Duplicate {
		rm.m.Entries.WithLabelValues(string(kind), "committed").Add(float64(max(0, rep.Entries-rep.Duplicates)))
	}
}

// serveMetrics serves /metrics, /healthz and /readyz (checks) on
// PAYSYNC_HTTP_ADDR, and pprof when PAYSYNC_PPROF is set, until shutdown
// (nothing when the address is empty).
func serveMetrics(cfg *config, m *metrics.Metrics, checks []worker.Check, log *slog.Logger) (shutdown func(context.Context), err error) {
	if cfg.HTTPAddr == "" {
		return func(context.Context) {}, nil
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("run: listen on PAYSYNC_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	mc := make([]metrics.Check, len(checks))
	for i, c := range checks {
		mc[i] = metrics.Check(c)
	}
	var h http.Handler = m.Handler(mc...)
	if cfg.PProf {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		h = mux
	}
	hsrv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go hsrv.Serve(ln)
	log.Info("metrics and health", "addr", ln.Addr().String())
	return func(ctx context.Context) { hsrv.Shutdown(ctx) }, nil
}
