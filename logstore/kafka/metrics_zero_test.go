package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestErrorCountersArePresentAtZero: after healthy work, every label value
// of the error counters an alert watches is exported at 0, so that an
// alert on their rate can tell "no errors" from "not exported".
func TestErrorCountersArePresentAtZero(t *testing.T) {
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	s := openStore(t, brokers, func(c *kafka.Config) { c.Registerer = reg })
	topic := newTopic(t)
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
	collect(t, s.Read(ctx, topic, 1, 1))
	for _, c := range alertCounters {
		for _, v := range c.values {
			n, found := metricSum(t, reg, c.name, c.label, v)
			require.True(t, found, "%s{%s=%q} is exported", c.name, c.label, v)
			require.Zero(t, n, "%s{%s=%q}", c.name, c.label, v)
		}
	}
}

// alertCounters are the error counters an alert watches, each with its
// label and every value it is exported with from Open on (a namespace's
// series: from its first use).
var alertCounters = []struct {
	name, label string
	values      []string
}{
	{"kwal_append_errors_total", "kind", []string{"produce", "timeout", "canceled", "closed"}},
	{"kwal_index_load_failures_total", "reason", []string{"missing", "truncated", "corrupt", "version", "io"}},
	{"kwal_claims_bad_records_total", "kind", []string{"foreign", "unreadable"}},
	{"kwal_refused_calls_total", "reason", []string{"entry_too_large", "invalid_namespace", "unknown_namespace"}},
	{"kwal_claims_check_failures_total", "cause", []string{"config", "timeout", "kafka_error", "gap"}},
	{"kwal_read_skipped_records_total", "kind", []string{"corrupt", "missing"}},
}
