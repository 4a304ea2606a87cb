package kafka_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// ordinaryWork does what a datanode does with a store: creates a
// namespace, appends, reads a region back, claims a region, declares
// entries obsolete, prunes, and makes calls the store refuses. It returns
// the namespace.
func ordinaryWork(t *testing.T, s *kafka.LogStore) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, ns))
	_, err := s.Claim(ctx, ns, 1)
	require.NoError(t, err)
	var res logstore.AppendResult
	for i := range 3 {
		res, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte{byte(i)}}, {Namespace: ns, Region: 2, Data: []byte("y")}})
		require.NoError(t, err)
	}
	require.Len(t, collect(t, s.Read(ctx, ns, 1, 1)), 3)
	require.NoError(t, s.Obsolete(ctx, ns, 1, res.LastEntryIDs[1]))
	_, err = s.Prune(ctx, ns)
	require.NoError(t, err)
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: "__refused", Region: 1, Data: []byte("x")}})
	require.ErrorIs(t, err, kafka.ErrInvalidNamespace)
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: make([]byte, kafka.DefaultConfig().MaxEntryBytes+1)}})
	require.ErrorIs(t, err, kafka.ErrEntryTooLarge)
	_, err = s.LatestEntryID(ctx, newTopic(t)+"-never-created")
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	return ns
}

// namespaceFamilies are the families whose series are per namespace: each
// must carry the namespace in a label named "namespace".
var namespaceFamilies = []string{
	"kwal_append_entries_total", "kwal_append_bytes_total", "kwal_queue_requests", "kwal_queue_bytes",
	"kwal_latest_acked_entry_id", "kwal_read_entries_total", "kwal_read_bytes_total",
	"kwal_read_fetched_bytes_total", "kwal_read_fetches_total", "kwal_prune_pinned_bytes",
	"kwal_topic_retention_seconds", "kwal_topic_retention_bytes", "kwal_index_watermark",
	"kwal_prune_runs_total", "kwal_prune_last_success_timestamp_seconds",
}

// TestMetricsFollowPrometheusConventions protects what dashboards and
// alerts are written against: after ordinary work, promlint finds nothing
// in the store's metrics, every family is kwal_ and has help, no label is
// named topic (a namespace is labeled namespace everywhere), and the
// per-namespace families carry it.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	brokers := testutil.Brokers(t)
	reg := prometheus.NewRegistry()
	s := openStore(t, brokers, func(c *kafka.Config) { c.Registerer = reg })
	ns := ordinaryWork(t, s)

	problems, err := promtestutil.GatherAndLint(reg)
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	mfs, err := reg.Gather()
	require.NoError(t, err)
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		name := mf.GetName()
		byName[name] = mf
		require.True(t, strings.HasPrefix(name, "kwal_"), "%s: every family is kwal_", name)
		require.NotEmpty(t, mf.GetHelp(), "%s has help", name)
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				require.NotEqual(t, "topic", l.GetName(), "%s: a namespace is labeled namespace, not topic", name)
			}
		}
	}
	for _, name := range namespaceFamilies {
		mf, ok := byName[name]
		require.True(t, ok, "%s is exported after ordinary work", name)
		require.True(t, slices.ContainsFunc(mf.GetMetric(), func(m *dto.Metric) bool {
			return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "namespace" && l.GetValue() == ns })
		}), "%s has a series with namespace=%q", name, ns)
	}
	// The error counters an alert watches are exported (each refused call
	// of ordinaryWork counted once; no other error).
	for _, c := range alertCounters {
		for _, v := range c.values {
			n, found := metricSum(t, reg, c.name, c.label, v)
			require.True(t, found, "%s{%s=%q} is exported", c.name, c.label, v)
			want := 0.0
			if c.name == "kwal_refused_calls_total" {
				want = 1
			}
			require.Equal(t, want, n, "%s{%s=%q}", c.name, c.label, v)
		}
	}
	build, found := metricSum(t, reg, "kwal_build_info", "", "")
	require.True(t, found)
	require.Equal(t, 1.0, build)
	require.Len(t, byName["kwal_build_info"].GetMetric(), 1)
	labels := map[string]string{}
	for _, l := range byName["kwal_build_info"].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, "(devel)", labels["version"], "a test binary is kwal's own, built from a checkout")
	require.Equal(t, runtime.Version(), labels["goversion"])
	require.NotEmpty(t, labels["revision"])
	// -1 is "deletes nothing by age", the retention of kwal's own topics.
	v, found := metricSum(t, reg, "kwal_topic_retention_seconds", "namespace", ns)
	require.True(t, found)
	require.Equal(t, -1.0, v)
}

// TestTopicRetentionIsExportedInSeconds: a topic that deletes by age
// exports its retention.ms in seconds.
func TestTopicRetentionIsExportedInSeconds(t *testing.T) {
	brokers := testutil.Brokers(t)
	reg := prometheus.NewRegistry()
	s := openStore(t, brokers, func(c *kafka.Config) {
		c.Registerer = reg
		c.TopicConfigs = map[string]string{"retention.ms": "86400000"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, ns))
	v, found := metricSum(t, reg, "kwal_topic_retention_seconds", "namespace", ns)
	require.True(t, found)
	require.Equal(t, 86400.0, v)
	r, err := s.TopicRetention(ctx, ns)
	require.NoError(t, err)
	require.Equal(t, int64(86400000), r.Ms)
	require.False(t, errors.Is(err, kafka.ErrUnknownNamespace))

	// An operator changes the retention after the store's first use: the
	// next Prune (here a dry run) exports the new one.
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("3600000")}, {Name: "retention.bytes", Value: ptr("1073741824")}}, ns)
	require.NoError(t, err)
	require.NoError(t, resp[0].Err)
	// A real broker applies an altered config through its metadata log.
	require.Eventually(t, func() bool {
		r, err := s.TopicRetention(ctx, ns)
		require.NoError(t, err)
		return r.Ms == 3600000 && r.Bytes == 1073741824
	}, time.Minute, 20*time.Millisecond)
	_, err = s.PruneWith(ctx, ns, kafka.PruneOptions{DryRun: true})
	require.NoError(t, err)
	v, _ = metricSum(t, reg, "kwal_topic_retention_seconds", "namespace", ns)
	require.Equal(t, 3600.0, v)
	v, _ = metricSum(t, reg, "kwal_topic_retention_bytes", "namespace", ns)
	require.Equal(t, 1073741824.0, v)
}
