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
	for name, values := range map[string][]string{
		"kwal_append_errors_total":       {"produce", "timeout", "canceled", "closed"},
		"kwal_index_load_failures_total": {"missing", "truncated", "corrupt", "version", "io"},
		"kwal_claims_bad_records_total":  {"foreign", "unreadable"},
	} {
		key := map[string]string{"kwal_append_errors_total": "kind", "kwal_index_load_failures_total": "reason", "kwal_claims_bad_records_total": "kind"}[name]
		for _, v := range values {
			n, found := metricSum(t, reg, name, key, v)
			require.True(t, found, "%s{%s=%q} is exported", name, key, v)
			require.Zero(t, n, "%s{%s=%q}", name, key, v)
		}
	}
}
