package worker

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the producer side's Prometheus collectors. One Metrics serves
// every topic's worker; the store registers Collectors.
type Metrics struct {
	EntriesAppended *prometheus.CounterVec // namespace
	BytesAppended   *prometheus.CounterVec // namespace; entry data bytes
	ProduceLatency  prometheus.Histogram   // seconds from handing a group to a lane to its acknowledgement
	ProduceRecords  prometheus.Histogram   // records per batch (one group of one topic)
	ProduceBytes    prometheus.Histogram   // bytes per batch
	ProduceRegions  prometheus.Histogram   // regions per batch: 1 means a region-pure batch
	DispatchTopics  prometheus.Histogram   // groups (batches, one per topic) a lane sends in one dispatch
	QueueRequests   *prometheus.GaugeVec   // namespace; requests queued or in flight
	QueueBytes      *prometheus.GaugeVec   // namespace; bytes queued or in flight
	Errors          *prometheus.CounterVec // kind: produce, timeout, canceled, closed
	LatestAcked     *prometheus.GaugeVec   // namespace; the newest acknowledged record's offset + 1
}

// NewMetrics makes unregistered collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		EntriesAppended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_append_entries_total", Help: "Entries acknowledged by Kafka, per namespace.",
		}, []string{"namespace"}),
		BytesAppended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_append_bytes_total", Help: "Entry data bytes acknowledged by Kafka, per namespace.",
		}, []string{"namespace"}),
		ProduceLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_produce_latency_seconds", Help: "Time from handing a group of requests to a produce lane to Kafka's acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		ProduceRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_produce_records", Help: "Records per produce request.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}),
		ProduceBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_produce_bytes", Help: "Record bytes (keys and values) per produce request.",
			Buckets: prometheus.ExponentialBuckets(256, 2, 18),
		}),
		ProduceRegions: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_produce_regions", Help: "Regions per produce request (1: a region-pure batch).",
			Buckets: []float64{1, 2, 3, 4, 8, 16, 32, 64, 128},
		}),
		DispatchTopics: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_produce_dispatch_batches", Help: "Region-pure batches (one per topic) a produce lane sends together in one dispatch.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		QueueRequests: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_queue_requests", Help: "Append requests queued or in flight, per namespace.",
		}, []string{"namespace"}),
		QueueBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_queue_bytes", Help: "Bytes of append requests queued or in flight, per namespace.",
		}, []string{"namespace"}),
		LatestAcked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_latest_acked_entry_id", Help: "Per namespace, the ID the newest record this store had acknowledged would have (offset + 1).",
		}, []string{"namespace"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_append_errors_total", Help: "Failed append requests, by kind (produce, timeout, canceled, closed).",
		}, []string{"kind"}),
	}
	// Present at zero: an alert on their rate cannot tell "none" from
	// "not exported" otherwise.
	for _, k := range []string{"produce", "timeout", "canceled", "closed"} {
		m.Errors.WithLabelValues(k)
	}
	return m
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.EntriesAppended, m.BytesAppended, m.ProduceLatency, m.ProduceRecords,
		m.ProduceBytes, m.ProduceRegions, m.DispatchTopics, m.QueueRequests, m.QueueBytes, m.Errors, m.LatestAcked}
}

// topicMetrics are one topic's children of the labeled collectors, looked
// up once per producer rather than on every request (a lookup hashes the
// label value and takes the vector's lock).
type topicMetrics struct {
	entries, bytes          prometheus.Counter
	queueRequests, queueLen prometheus.Gauge
	latestAcked             prometheus.Gauge
}

// forTopic is nil when m is nil.
func (m *Metrics) forTopic(topic string) *topicMetrics {
	if m == nil {
		return nil
	}
	return &topicMetrics{
		entries: m.EntriesAppended.WithLabelValues(topic), bytes: m.BytesAppended.WithLabelValues(topic),
		queueRequests: m.QueueRequests.WithLabelValues(topic), queueLen: m.QueueBytes.WithLabelValues(topic),
		latestAcked: m.LatestAcked.WithLabelValues(topic),
	}
}

// Forget deletes the topic's series (the namespace was deleted). A
// producer still holding them keeps adding to children no longer
// exported, so the topic's producer must be closed first.
func (m *Metrics) Forget(topic string) {
	if m == nil {
		return
	}
	for _, v := range []interface{ DeleteLabelValues(...string) bool }{
		m.EntriesAppended, m.BytesAppended, m.QueueRequests, m.QueueBytes, m.LatestAcked,
	} {
		v.DeleteLabelValues(topic)
	}
}
