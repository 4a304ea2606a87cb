package index

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwal/kwal/internal/kwalerr"
)

// metrics are the kwal_index_* metrics of a Collector. Collectors on one
// Registerer share them: the first registers them, as one
// prometheus.Collector, and the last to close unregisters them.
type metrics struct {
	entries            prometheus.Counter
	runs               prometheus.Counter
	invalidRuns        prometheus.Counter
	pendingOverflow    prometheus.Counter
	checkpointBytes    *prometheus.CounterVec // by kind: base, delta
	checkpointFiles    *prometheus.CounterVec // by kind
	checkpointDuration prometheus.Histogram
	checkpointErrors   prometheus.Counter
	loadFailures       *prometheus.CounterVec // by reason
	discarded          *prometheus.CounterVec // by reason
	watermark          *prometheus.GaugeVec   // by namespace (the topic's name)

	reg   prometheus.Registerer
	users int // Collectors sharing the metrics; guarded by sharedMu
}

// sharedMu orders the registrations and unregistrations of metrics, so
// that a Collector never shares metrics that the last other user is
// unregistering.
var sharedMu sync.Mutex

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.entries, m.runs, m.invalidRuns, m.pendingOverflow, m.checkpointBytes, m.checkpointFiles,
		m.checkpointDuration, m.checkpointErrors, m.loadFailures, m.discarded, m.watermark}
}

// Describe and Collect make metrics one prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

// release is a Collector's Close: the last user unregisters the metrics.
func (m *metrics) release() {
	if m.reg == nil {
		return
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if m.users--; m.users == 0 {
		m.reg.Unregister(m)
	}
}

// Load failure reasons (label values of kwal_index_load_failures_total).
const (
	reasonMissing   = "missing"   // a base or a delta of the chain is absent
	reasonTruncated = "truncated" // ErrTruncated
	reasonCorrupt   = "corrupt"   // ErrCorrupt, or a file that does not fit its chain
	reasonVersion   = "version"   // ErrVersion
	reasonIO        = "io"        // the Store failed
)

func loadFailureReason(err error) string {
	switch {
	case errors.Is(err, ErrTruncated):
		return reasonTruncated
	case errors.Is(err, ErrVersion):
		return reasonVersion
	case errors.Is(err, ErrCorrupt):
		return reasonCorrupt
	case errors.Is(err, ErrNotExist):
		return reasonMissing
	}
	return reasonIO
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		entries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_index_entries_indexed_total",
			Help: "Offsets added to regions' offset sets.",
		}),
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_index_runs_observed_total",
			Help: "Runs passed to Observe (repeats included).",
		}),
		invalidRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_index_runs_invalid_total",
			Help: "Runs passed to Observe and ignored as invalid (negative offset, empty, overflowing).",
		}),
		pendingOverflow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_index_pending_overflow_total",
			Help: "Runs above a topic's watermark dropped because too many were waiting for a gap to fill.",
		}),
		checkpointBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_index_checkpoint_bytes_total",
			Help: "Bytes of checkpoint files written, by kind (base, delta).",
		}, []string{"kind"}),
		checkpointFiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_index_checkpoint_files_total",
			Help: "Checkpoint files written, by kind (base, delta).",
		}, []string{"kind"}),
		checkpointDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kwal_index_checkpoint_duration_seconds",
			Help:    "Time to checkpoint every changed topic.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		checkpointErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_index_checkpoint_errors_total",
			Help: "Topic checkpoints that failed.",
		}),
		loadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_index_load_failures_total",
			Help: "Checkpoint files that could not be used at load, by reason (missing, truncated, corrupt, version, io).",
		}, []string{"reason"}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_index_coverage_discarded_total",
			Help: "Topics whose coverage was discarded, by reason.",
		}, []string{"reason"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_index_watermark",
			Help: "End W of a namespace topic's accounted span [C, W): the offset below which the index accounts for every record.",
		}, []string{"namespace"}),
	}
	// Present at zero: an alert on their rate cannot tell "none" from
	// "not exported" otherwise.
	for _, r := range []string{reasonMissing, reasonTruncated, reasonCorrupt, reasonVersion, reasonIO} {
		m.loadFailures.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if err := reg.Register(m); err != nil {
		are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			return nil, kwalerr.Errorf("index: registering metrics: %w", err)
		}
		if m, ok = are.ExistingCollector.(*metrics); !ok {
			return nil, kwalerr.Errorf("index: registering metrics: another collector holds the kwal_index_* metrics: %w", err)
		}
	}
	m.reg = reg
	m.users++
	return m, nil
}
