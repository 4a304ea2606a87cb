package index

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the kwal_index_* metrics of a Collector.
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
	watermark          *prometheus.GaugeVec   // by topic
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
			Help: "End W of a topic's accounted span [C, W).",
		}, []string{"topic"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	register := func(c prometheus.Collector) prometheus.Collector {
		if err != nil {
			return c
		}
		if rerr := reg.Register(c); rerr != nil {
			if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](rerr); ok {
				return are.ExistingCollector
			}
			err = fmt.Errorf("index: registering metrics: %w", rerr)
		}
		return c
	}
	m.entries = register(m.entries).(prometheus.Counter)
	m.runs = register(m.runs).(prometheus.Counter)
	m.invalidRuns = register(m.invalidRuns).(prometheus.Counter)
	m.pendingOverflow = register(m.pendingOverflow).(prometheus.Counter)
	m.checkpointBytes = register(m.checkpointBytes).(*prometheus.CounterVec)
	m.checkpointFiles = register(m.checkpointFiles).(*prometheus.CounterVec)
	m.checkpointDuration = register(m.checkpointDuration).(prometheus.Histogram)
	m.checkpointErrors = register(m.checkpointErrors).(prometheus.Counter)
	m.loadFailures = register(m.loadFailures).(*prometheus.CounterVec)
	m.discarded = register(m.discarded).(*prometheus.CounterVec)
	m.watermark = register(m.watermark).(*prometheus.GaugeVec)
	return m, err
}
