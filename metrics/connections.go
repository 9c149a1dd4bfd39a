package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterConnections adds paysync_connection_up{company}: 1 while the
// company's payroll connection works, 0 once it was revoked (its batches
// wait for `paysync connect`). up is read at scrape time.
func (m *Metrics) RegisterConnections(up func() map[string]bool) {
	m.reg.MustRegister(connectionsCollector{up})
}

var connectionUpDesc = prometheus.NewDesc("paysync_connection_up",
	"1 while the company's payroll connection works, 0 once it was revoked (its batches wait for paysync connect).", []string{"company"}, nil)

type connectionsCollector struct{ up func() map[string]bool }

func (c connectionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- connectionUpDesc }

func (c connectionsCollector) Collect(ch chan<- prometheus.Metric) {
	for company, up := range c.up() {
		v := 0.0
		if up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(connectionUpDesc, prometheus.GaugeValue, v, company)
	}
}
