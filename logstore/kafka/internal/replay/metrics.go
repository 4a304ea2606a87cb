package replay

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the read path's Prometheus collectors; the store registers
// Collectors.
type Metrics struct {
	fetchedBytes *prometheus.CounterVec // namespace, mode; record batch bytes fetched
	skipped      *prometheus.CounterVec // namespace, kind
	fetchLatency prometheus.Histogram
	fetches      *prometheus.CounterVec // namespace, mode
	spilled      prometheus.Counter
	fenced       *prometheus.CounterVec // namespace
}

// NewMetrics makes unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		fetchedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_read_fetched_bytes_total", Help: "Record batch bytes fetched by reads, per namespace and mode (indexed, scan, read_back: a spilled entry read again).",
		}, []string{"namespace", "mode"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_read_skipped_records_total", Help: "Records fetched but not yielded, per namespace and kind (other_region, duplicate, orphan, incomplete, corrupt, foreign, before_start, missing). corrupt and missing (records lost or damaged, skipped under SkipCorrupt) are present at 0 from a namespace's first use.",
		}, []string{"namespace", "kind"}),
		fetchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_fetch_latency_seconds", Help: "Latency of one fetch request of a read.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_read_fetches_total", Help: "Fetch requests issued by reads, per namespace and mode (indexed, scan, read_back: a spilled entry read again).",
		}, []string{"namespace", "mode"}),
		spilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_read_spilled_entries_total", Help: "Entries whose data reads dropped to stay within ReadHoldBytes, and read back from the log when their turn came.",
		}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_read_fenced_entries_total", Help: "Entries reads skipped because an older owner wrote them after a newer owner's claim of their region, per namespace.",
		}, []string{"namespace"}),
	}
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.fetchedBytes, m.skipped, m.fetchLatency, m.fetches, m.spilled, m.fenced}
}

// Known exports the namespace's counters an alert watches at 0 (its first
// use), so that an alert on their increase sees the first loss.
func (m *Metrics) Known(namespace string) {
	m.skipped.WithLabelValues(namespace, "corrupt")
	m.skipped.WithLabelValues(namespace, "missing")
	m.fenced.WithLabelValues(namespace)
}

// Forget deletes the namespace's series (DeleteNamespace).
func (m *Metrics) Forget(namespace string) {
	for _, v := range []*prometheus.CounterVec{m.fetchedBytes, m.fetches, m.skipped, m.fenced} {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
	}
}
