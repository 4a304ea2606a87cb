package kafka

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/internal/replay"
	"github.com/kwal/kwal/logstore/kafka/worker"
)

// metrics are the store's Prometheus collectors (prefix kwal_). The index
// registers its own (kwal_index_).
type metrics struct {
	worker        *worker.Metrics
	reads         *replay.Metrics
	appendLatency prometheus.Histogram
	entriesRead   *prometheus.CounterVec // namespace
	bytesRead     *prometheus.CounterVec // namespace; entry data yielded
	prunePinned   *prometheus.GaugeVec   // namespace
	// prune are Prune's runs, what they deleted, the log's size and the
	// retention's headroom (pruneMetrics).
	prune *pruneMetrics
	// retentionSeconds and retentionBytes are the topics' retention.ms
	// (in seconds) and retention.bytes as checked at first use (-1: none),
	// per namespace.
	retentionSeconds, retentionBytes *prometheus.GaugeVec
	obsoleteStale                    prometheus.Counter
	// claims counts Claim calls by outcome; claimLatency times the
	// successful ones; fencedAppends counts AppendBatch calls refused
	// with ErrFenced, by when (before writing, after the produce);
	// fencingCheck times strict fencing's check after each produce.
	claims        *prometheus.CounterVec
	claimLatency  prometheus.Histogram
	fencedAppends *prometheus.CounterVec
	fencingCheck  prometheus.Histogram
	// claimsRecords counts the claims topic's records that are no
	// region's (foreign) and regions' records that do not decode
	// (unreadable).
	claimsRecords *prometheus.CounterVec
	// heldEpochsFileErrors counts failures of the held-epochs file
	// (heldepochs.go), by op (read, write).
	heldEpochsFileErrors *prometheus.CounterVec
	// refused counts calls refused for what the caller asked, by reason
	// (refusedReasons); claimsCheckFailures counts the store's checks of
	// the claims topic that failed, by cause (claimsCheckCauses).
	refused             *prometheus.CounterVec
	claimsCheckFailures *prometheus.CounterVec
	// buildInfo is kwal_build_info: 1, labeled with kwal's version.
	buildInfo prometheus.Gauge
	// clients are the franz-go clients' own metrics, registered apart
	// (registerClients) once the clients exist.
	clients clientMetrics
}

// Reasons of kwal_refused_calls_total.
const (
	refusedEntryTooLarge    = "entry_too_large"
	refusedInvalidNamespace = "invalid_namespace"
	refusedUnknownNamespace = "unknown_namespace"
)

var refusedReasons = []string{refusedEntryTooLarge, refusedInvalidNamespace, refusedUnknownNamespace}

// Causes of kwal_claims_check_failures_total.
const (
	checkConfig     = "config"
	checkTimeout    = "timeout"
	checkKafkaError = "kafka_error"
	checkGap        = "gap"
)

var claimsCheckCauses = []string{checkConfig, checkTimeout, checkKafkaError, checkGap}

// presentAtZero makes c's series of each value of its one label exist at
// 0: an alert on their rate cannot tell "none" from "not exported"
// otherwise.
func presentAtZero(c *prometheus.CounterVec, values []string) *prometheus.CounterVec {
	for _, v := range values {
		c.WithLabelValues(v)
	}
	return c
}

func newMetrics() *metrics {
	return &metrics{
		prune:   newPruneMetrics(),
		worker:  worker.NewMetrics(),
		reads:   replay.NewMetrics(),
		clients: newClientMetrics(),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_append_latency_seconds", Help: "AppendBatch latency, from the call to the acknowledgement of all its entries.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		entriesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_read_entries_total", Help: "Entries yielded by reads, per namespace.",
		}, []string{"namespace"}),
		bytesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_read_bytes_total", Help: "Entry data bytes yielded by reads, per namespace.",
		}, []string{"namespace"}),
		prunePinned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_prune_pinned_bytes", Help: "Estimated log bytes that the region holding the prune point back pins (what Prune could delete once it declares its entries obsolete), per namespace, as of the last Prune.",
		}, []string{"namespace"}),
		retentionSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_topic_retention_seconds", Help: "The namespace topic's retention.ms, in seconds, as checked when the store first used it and at every Prune (and dry run): -1 deletes nothing by age; any other value lets the broker delete entries regions still need.",
		}, []string{"namespace"}),
		retentionBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_topic_retention_bytes", Help: "The namespace topic's retention.bytes as checked when the store first used it and at every Prune (and dry run): -1 deletes nothing by size; any other value lets the broker delete entries regions still need.",
		}, []string{"namespace"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_claims_total", Help: "Claim calls of this store, by outcome (ok, lost: another claim came first or overtook it, error).",
		}, []string{"outcome"}),
		claimLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_claim_latency_seconds", Help: "Latency of a successful Claim, from the call to the commit of the claim.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		fencedAppends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_fenced_appends_total", Help: "AppendBatch calls refused with ErrFenced: before anything was written (the store knew of the newer claim or released the region), or after the produce (the check of the claims topic found the claim).",
		}, []string{"when"}),
		fencingCheck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kwal_fencing_check_seconds", Help: "Strict and lease fencing: how long an AppendBatch waited, after its produce returned, for a look at the claims topic begun after that (under a lease, only when the lease had run out): what fencing adds to an append's latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		heldEpochsFileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_held_epochs_file_errors_total", Help: "Failures of the file that keeps the epochs this store holds, by op: read (at Open the file was not valid; the store started holding no region), write (the epochs are held in memory; a restart before the next write that succeeds resumes the file's older state).",
		}, []string{"op"}),
		claimsRecords: func() *prometheus.CounterVec {
			c := prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kwal_claims_bad_records_total", Help: "Records of the claims topic that are not a region's event (kind foreign: skipped) or a region's event that does not decode or comes in a newer format (kind unreadable: the region fails closed until repaired), as this store folded them.",
			}, []string{"kind"})
			c.WithLabelValues("foreign")
			c.WithLabelValues("unreadable")
			return c
		}(),
		refused: presentAtZero(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_refused_calls_total", Help: "Calls refused for what the caller asked, before anything was written, by reason: " +
				"entry_too_large (AppendBatch: an entry longer than Config.MaxEntryBytes, which no read could hold; ErrEntryTooLarge), " +
				"invalid_namespace (a name that cannot be a namespace: not a topic name, the claims topic's, or starting with __; ErrInvalidNamespace), " +
				"unknown_namespace (a namespace whose topic does not exist, or for Claim a missing claims topic; ErrUnknownNamespace).",
		}, []string{"reason"}), refusedReasons),
		claimsCheckFailures: presentAtZero(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_claims_check_failures_total", Help: "Failed checks of the claims topic, by cause: " +
				"config (its configs let the broker compact or delete claim events: Claim refused), " +
				"timeout (a look at its end that fenced appends, Obsolete and Claim wait for, or the fold of its records, or the config check, did not finish within RequestTimeout), " +
				"kafka_error (the broker answered those with an error), " +
				"gap (records of the claims topic were deleted: the claims they held are lost, and the fold fails closed). " +
				"The calls waiting for a failed look fail.",
		}, []string{"cause"}), claimsCheckCauses),
		buildInfo: newBuildInfo(),
		obsoleteStale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kwal_obsolete_stale_total", Help: "Obsolete calls at or below the region's current Obsolete point: nothing to do (a retry, or a point already learned from another store's mark).",
		}),
	}
}

// forget deletes the namespace's series (DeleteNamespace).
func (m *metrics) forget(namespace string) {
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.entriesRead, m.bytesRead, m.prunePinned, m.retentionSeconds, m.retentionBytes} {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
	}
	m.prune.forget(namespace)
	m.reads.Forget(namespace)
}

func (m *metrics) collectors() []prometheus.Collector {
	return append(append(append(m.worker.Collectors(), m.reads.Collectors()...), m.appendLatency, m.entriesRead, m.bytesRead, m.prunePinned, m.retentionSeconds, m.retentionBytes, m.obsoleteStale, m.claims, m.claimLatency, m.fencedAppends, m.fencingCheck, m.claimsRecords, m.heldEpochsFileErrors, m.refused, m.claimsCheckFailures, m.buildInfo), m.prune.collectors()...)
}

// noteRefused counts err in kwal_refused_calls_total when it refuses the
// call for what the caller asked. Public calls defer it on their error,
// so each refused call counts once.
func (m *metrics) noteRefused(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrEntryTooLarge):
		m.refused.WithLabelValues(refusedEntryTooLarge).Inc()
	case errors.Is(err, ErrInvalidNamespace):
		m.refused.WithLabelValues(refusedInvalidNamespace).Inc()
	case errors.Is(err, ErrUnknownNamespace):
		m.refused.WithLabelValues(refusedUnknownNamespace).Inc()
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	return registerAll(r, m.collectors())
}

// registerClients registers the clients' metrics, after Open created the
// clients (kprom creates its collectors with the first client of a role).
func (m *metrics) registerClients(r prometheus.Registerer) error {
	return registerAll(r, m.clients.collectors())
}

// registerAll registers cs, or none of them: a collector already
// registered (another store on the same registerer) is an error, not a
// panic.
func registerAll(r prometheus.Registerer, cs []prometheus.Collector) error {
	if r == nil {
		return nil
	}
	var done []prometheus.Collector
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			for _, d := range done {
				r.Unregister(d)
			}
			return registerError(c, err)
		}
		done = append(done, c)
	}
	return nil
}

// sharedRegistryHint says how stores share a registry (Config.Registerer).
const sharedRegistryHint = `several stores on one registry must each get prometheus.WrapRegistererWith(prometheus.Labels{"store": "..."}, reg)`

// registerError is the error of Open when the registerer refused c, in one
// line naming c's metric.
func registerError(c prometheus.Collector, err error) error {
	name := metricName(c)
	if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		return kwalerr.Errorf("kwal: metric %s is already registered on Config.Registerer: %s (%w)", name, sharedRegistryHint, err)
	}
	return kwalerr.Errorf("kwal: Config.Registerer refused metric %s: %s: %w", name, sharedRegistryHint, err)
}

// metricName is the name of the first metric c describes.
func metricName(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var name string
	for d := range ch {
		if name == "" {
			// A Desc shows its name only through String:
			// Desc{fqName: "kwal_...", help: ...}.
			s := d.String()
			if _, rest, ok := strings.Cut(s, `fqName: "`); ok {
				s, _, _ = strings.Cut(rest, `"`)
			}
			name = s
		}
	}
	return name
}

// unregister unregisters every collector register and registerClients
// registered.
func (m *metrics) unregister(r prometheus.Registerer) {
	if r == nil {
		return
	}
	for _, c := range append(m.collectors(), m.clients.collectors()...) {
		r.Unregister(c)
	}
}

// pruneMetrics are the kwal_prune_*, kwal_log_bytes and
// kwal_retention_headroom_seconds series, per namespace.
type pruneMetrics struct {
	runs           *prometheus.CounterVec // namespace, outcome
	deletedBytes   *prometheus.CounterVec // namespace
	deletedRecords *prometheus.CounterVec // namespace
	lastSuccess    *prometheus.GaugeVec   // namespace
	logBytes       *prometheus.GaugeVec   // namespace
	headroom       *prometheus.GaugeVec   // namespace
}

// Outcomes of kwal_prune_runs_total.
const (
	pruneOK    = "ok"
	pruneError = "error"
)

func newPruneMetrics() *pruneMetrics {
	return &pruneMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_prune_runs_total", Help: "Prune calls (the background pruner's included) on a namespace, by outcome: ok (whether or not anything could go) or error (the call failed: the broker refused DeleteRecords, ErrCannotPrune, a timeout...). Dry runs (PruneWith with DryRun, kwal namespaces prune --dry-run) are not counted. Both outcomes are exported at 0 from the namespace's first use by the store.",
		}, []string{"namespace", "outcome"}),
		deletedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_prune_deleted_bytes_total", Help: "Log bytes Prune deleted with DeleteRecords, per namespace: estimated from the partition's size spread evenly over its offsets (PruneResult.PrunableBytes). Under PruneMode mark-only it stays at 0: the topic's retention deletes.",
		}, []string{"namespace"}),
		deletedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kwal_prune_deleted_records_total", Help: "Offsets (records, marks included) Prune deleted with DeleteRecords, per namespace. Under PruneMode mark-only it stays at 0: the topic's retention deletes.",
		}, []string{"namespace"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_prune_last_success_timestamp_seconds", Help: "Unix time of the namespace's last Prune with outcome ok (dry runs not counted): a value that stops rising means pruning stopped.",
		}, []string{"namespace"}),
		logBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_log_bytes", Help: "Size of the namespace's partition on its leader, as of the last Prune or dry run that the broker answered with it (DescribeLogDirs).",
		}, []string{"namespace"}),
		headroom: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kwal_retention_headroom_seconds", Help: "How long the oldest record a region still needs has before the topic's finite retention (retention.ms, or retention.bytes at the log's growth rate) may delete it, as of the last Prune or dry run that checked it; negative: it may be gone any moment. Absent when the retention is infinite or no record is needed. Config.RetentionWarnMargin is the warning's threshold.",
		}, []string{"namespace"}),
	}
}

// known exports the namespace's run counters at 0 (its first use).
func (m *pruneMetrics) known(namespace string) {
	m.runs.WithLabelValues(namespace, pruneOK)
	m.runs.WithLabelValues(namespace, pruneError)
}

// observe records a Prune or PruneWith call on a valid namespace. A
// namespace that does not exist gets no series.
func (m *pruneMetrics) observe(namespace string, dryRun bool, res PruneResult, err error) {
	if errors.Is(err, ErrUnknownNamespace) {
		return
	}
	if err == nil && res.RetentionErr == nil {
		if res.RetentionLimit != "" {
			m.headroom.WithLabelValues(namespace).Set(res.RetentionHeadroom.Seconds())
		} else {
			m.headroom.DeleteLabelValues(namespace)
		}
	}
	if dryRun {
		return
	}
	m.known(namespace)
	if err != nil {
		m.runs.WithLabelValues(namespace, pruneError).Inc()
		return
	}
	m.runs.WithLabelValues(namespace, pruneOK).Inc()
	m.lastSuccess.WithLabelValues(namespace).SetToCurrentTime()
	if res.Deleted {
		m.deletedBytes.WithLabelValues(namespace).Add(float64(res.PrunableBytes))
		m.deletedRecords.WithLabelValues(namespace).Add(float64(res.FirstID - res.Before))
	}
}

// forget deletes the namespace's series (DeleteNamespace).
func (m *pruneMetrics) forget(namespace string) {
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.runs, m.deletedBytes, m.deletedRecords, m.lastSuccess, m.logBytes, m.headroom} {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
	}
}

func (m *pruneMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.runs, m.deletedBytes, m.deletedRecords, m.lastSuccess, m.logBytes, m.headroom}
}
