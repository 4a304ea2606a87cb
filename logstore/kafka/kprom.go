package kafka

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// clientMetrics are the franz-go clients' own metrics, exported with
// kwal's through franz-go's plugin/kprom: connections opened, failed and
// closed, bytes written and read, write and read errors, request latency
// (write to response, a histogram), and produced and fetched batches,
// records and bytes, per broker, as kwal_client_*{role, node_id}. One
// kprom.Metrics per client role: lane (the produce lanes, which also
// serve reads' fetches), mark (the mark writer), admin (metadata, admin
// requests, reads' fetches).
type clientMetrics struct {
	lane, mark, admin *clientRole
}

func newClientMetrics() clientMetrics {
	return clientMetrics{lane: newClientRole("lane"), mark: newClientRole("mark"), admin: newClientRole("admin")}
}

func (c clientMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.lane, c.mark, c.admin}
}

// clientRole is one role's kprom.Metrics, a kgo hook for every client of
// the role (kgo.WithHooks) and a prometheus.Collector the store registers
// once its clients exist.
//
// kprom is made for one client per Metrics: its OnNewClient creates the
// collectors and binds its buffered_* gauges to that client. clientRole
// lets it create them at the role's first client only, so that the role's
// clients add to one set of series, and leaves the buffered_* gauges out
// (they would describe one lane of many; kwal_queued_bytes and
// kwal_store_queued_bytes say what the write path holds).
//
// It also keeps the produce_* counters itself (same names and labels):
// kprom's OnProduceBatchWritten builds a label map and looks up four series
// on every batch written, which shows in kwal's client CPU profile where
// batches are small and many; clientRole looks a broker's series up once.
// Likewise the per-request series of OnBrokerE2E (write and read bytes and
// errors, request_duration_e2e_seconds): kprom formats the node's name and
// looks up three series on every request, which shows most where every
// region call is a request (many regions in one topic).
type clientRole struct {
	*kprom.Metrics
	once    sync.Once
	skip    map[*prometheus.Desc]bool // the buffered_* gauges, and kprom's series that clientRole keeps itself
	produce produceCounters
	broker  brokerSeries
}

// brokerSeries are a role's per-request series of OnBrokerE2E, by broker.
type brokerSeries struct {
	writeBytes, writeErrors, readBytes, readErrors *prometheus.CounterVec
	e2e                                            *prometheus.HistogramVec
	byNode                                         sync.Map // int32 node ID → *nodeBroker
}

// nodeBroker is one broker's request series, looked up once.
type nodeBroker struct {
	writeBytes, writeErrors, readBytes, readErrors prometheus.Counter
	e2e                                            prometheus.Observer
}

func newBrokerSeries(role string) brokerSeries {
	labels := prometheus.Labels{"role": role}
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kwal", Subsystem: "client", Name: name, Help: help,
			ConstLabels: labels}, []string{"node_id"})
	}
	return brokerSeries{
		writeBytes:  vec("write_bytes_total", "Total number of bytes written to the TCP connection. The bytes count is tracked after compression (when used)."),
		writeErrors: vec("write_errors_total", "Total number of write errors"),
		readBytes:   vec("read_bytes_total", "Total number of bytes read from the TCP connection. The bytes count is tracked before uncompression (when used)."),
		readErrors:  vec("read_errors_total", "Total number of read errors"),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kwal", Subsystem: "client", Name: "request_duration_e2e_seconds",
			Help:        "Time from the start of when a request is written to the end of when the response for that request was fully read",
			ConstLabels: labels, Buckets: kprom.DefBuckets}, []string{"node_id"}),
	}
}

func (b *brokerSeries) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.writeBytes, b.writeErrors, b.readBytes, b.readErrors, b.e2e}
}

// OnBrokerE2E implements kgo.HookBrokerE2E in place of kprom's, with the
// same series.
func (r *clientRole) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	b := &r.broker
	v, ok := b.byNode.Load(meta.NodeID)
	if !ok {
		node := kgo.NodeName(meta.NodeID)
		v, _ = b.byNode.LoadOrStore(meta.NodeID, &nodeBroker{
			writeBytes: b.writeBytes.WithLabelValues(node), writeErrors: b.writeErrors.WithLabelValues(node),
			readBytes: b.readBytes.WithLabelValues(node), readErrors: b.readErrors.WithLabelValues(node),
			e2e: b.e2e.WithLabelValues(node),
		})
	}
	n := v.(*nodeBroker)
	if e2e.WriteErr != nil {
		n.writeErrors.Inc()
		return
	}
	n.writeBytes.Add(float64(e2e.BytesWritten))
	if e2e.ReadErr != nil {
		n.readErrors.Inc()
		return
	}
	n.readBytes.Add(float64(e2e.BytesRead))
	n.e2e.Observe(e2e.DurationE2E().Seconds())
}

// produceCounters are a role's kwal_client_produce_*_total{node_id}.
type produceCounters struct {
	bytes, compressed, batches, records *prometheus.CounterVec
	byNode                              sync.Map // int32 node ID → *nodeProduce
}

// nodeProduce is one broker's produce series, looked up once.
type nodeProduce struct {
	bytes, compressed, batches, records prometheus.Counter
}

func newProduceCounters(role string) produceCounters {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kwal", Subsystem: "client", Name: name, Help: help,
			ConstLabels: prometheus.Labels{"role": role}}, []string{"node_id"})
	}
	return produceCounters{
		bytes:      vec("produce_uncompressed_bytes_total", "Total number of uncompressed bytes produced"),
		compressed: vec("produce_compressed_bytes_total", "Total number of compressed bytes produced"),
		batches:    vec("produce_batches_total", "Total number of batches produced"),
		records:    vec("produce_records_total", "Total number of records produced"),
	}
}

func (c *produceCounters) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.bytes, c.compressed, c.batches, c.records}
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten in place of
// kprom's.
func (r *clientRole) OnProduceBatchWritten(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c := &r.produce
	v, ok := c.byNode.Load(meta.NodeID)
	if !ok {
		node := kgo.NodeName(meta.NodeID)
		v, _ = c.byNode.LoadOrStore(meta.NodeID, &nodeProduce{
			bytes:      c.bytes.WithLabelValues(node),
			compressed: c.compressed.WithLabelValues(node),
			batches:    c.batches.WithLabelValues(node),
			records:    c.records.WithLabelValues(node),
		})
	}
	n := v.(*nodeProduce)
	n.bytes.Add(float64(m.UncompressedBytes))
	n.compressed.Add(float64(m.CompressedBytes))
	n.batches.Inc()
	n.records.Add(float64(m.NumRecords))
}

func newClientRole(role string) *clientRole {
	return &clientRole{produce: newProduceCounters(role), broker: newBrokerSeries(role), Metrics: kprom.NewMetrics("kwal",
		kprom.Registry(nil), // the store registers the role itself
		kprom.Subsystem("client"),
		kprom.WithStaticLabel(prometheus.Labels{"role": role}),
		kprom.Histograms(kprom.RequestDurationE2E),
		// Per broker, not per topic: kwal's own metrics count per
		// namespace, and a series per topic per role would be many.
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.Batches, kprom.Records, kprom.UncompressedBytes, kprom.CompressedBytes, kprom.ConsistentNaming),
	)}
}

// OnNewClient implements kgo.HookNewClient: the role's first client
// creates the collectors; later clients share them.
func (r *clientRole) OnNewClient(cl *kgo.Client) {
	r.once.Do(func() {
		r.Metrics.OnNewClient(cl)
		descs := make(chan *prometheus.Desc, 64) // kprom has 25
		r.Metrics.Describe(descs)
		close(descs)
		r.skip = make(map[*prometheus.Desc]bool)
		for d := range descs {
			// A Desc shows its name only through String.
			if s := d.String(); strings.Contains(s, `fqName: "kwal_client_buffered_`) || strings.Contains(s, `fqName: "kwal_client_produce_`) ||
				slices.ContainsFunc(brokerSeriesNames, func(n string) bool { return strings.Contains(s, `fqName: "kwal_client_`+n+`"`) }) {
				r.skip[d] = true
			}
		}
	})
}

// Describe implements prometheus.Collector.
func (r *clientRole) Describe(ch chan<- *prometheus.Desc) {
	// Before the first client, no collector exists yet: the store
	// registers a role only after creating its clients.
	descs := make(chan *prometheus.Desc, 64)
	r.Metrics.Describe(descs)
	close(descs)
	for d := range descs {
		if !r.skip[d] {
			ch <- d
		}
	}
	for _, c := range r.ownCollectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (r *clientRole) Collect(ch chan<- prometheus.Metric) {
	ms := make(chan prometheus.Metric)
	go func() {
		defer close(ms)
		r.Metrics.Collect(ms)
	}()
	for m := range ms {
		if !r.skip[m.Desc()] {
			ch <- m
		}
	}
	for _, c := range r.ownCollectors() {
		c.Collect(ch)
	}
}

// brokerSeriesNames are kprom's series that brokerSeries replaces.
var brokerSeriesNames = []string{"write_bytes_total", "write_errors_total", "read_bytes_total", "read_errors_total", "request_duration_e2e_seconds"}

// ownCollectors are the series clientRole keeps in place of kprom's.
func (r *clientRole) ownCollectors() []prometheus.Collector {
	return append(r.produce.collectors(), r.broker.collectors()...)
}
