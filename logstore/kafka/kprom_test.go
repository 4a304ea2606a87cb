package kafka_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestClientMetricsExported protects the franz-go clients' own metrics
// (kprom): after an append, an Obsolete and a read, each client role shows
// its connections, bytes and request latency as kwal_client_* in the
// store's registry, the role's clients share one set of series (a gather
// with duplicates fails), the per-client buffered_* gauges are left out,
// a second store on the same registry is refused with an error (no
// panic), and Close unregisters everything so the registry can serve a
// new store.
func TestClientMetricsExported(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	reg := prometheus.NewRegistry()
	cfg := func(c *kafka.Config) {
		c.Registerer = reg
		c.ProduceLanes = 3
	}
	s := openStore(t, brokers, cfg)
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("a")}, {Namespace: topic, Region: 1, Data: []byte("b")}})
	require.NoError(t, err)
	require.NoError(t, s.Obsolete(ctx, topic, 1, res.LastEntryIDs[1]))
	require.Len(t, collect(t, s.Read(ctx, topic, 1, 0)), 2)

	sum := func(name, role string) float64 {
		v, _ := metricSum(t, reg, name, "role", role)
		return v
	}
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, role := range []string{"lane", "mark", "admin"} {
		v := sum("kwal_client_connects_total", role)
		require.Positive(t, v, "%s connects", role)
		v = sum("kwal_client_write_bytes_total", role)
		require.Positive(t, v, "%s bytes written", role)
		v = sum("kwal_client_read_bytes_total", role)
		require.Positive(t, v, "%s bytes read", role)
		v = sum("kwal_client_request_duration_e2e_seconds", role)
		require.Positive(t, v, "%s request latencies", role)
	}
	v := sum("kwal_client_produce_records_total", "lane")
	require.Equal(t, 2.0, v, "the lanes produced the two entries' records")
	v = sum("kwal_client_produce_records_total", "mark")
	require.Equal(t, 1.0, v, "the mark client produced the Obsolete mark")
	// clientRole keeps the produce counters in place of kprom: same names.
	require.Positive(t, sum("kwal_client_produce_batches_total", "lane"), "lane batches")
	require.GreaterOrEqual(t, sum("kwal_client_produce_uncompressed_bytes_total", "lane"), 2.0, "lane bytes")
	require.Positive(t, sum("kwal_client_produce_compressed_bytes_total", "lane"), "lane compressed bytes")
	for _, f := range fams {
		require.NotContains(t, f.GetName(), "buffered", "per-client gauges are left out")
	}

	cf := kafka.DefaultConfig()
	cf.Brokers = brokers
	cf.Registerer = reg
	_, err = kafka.Open(ctx, cf)
	require.ErrorContains(t, err, "WrapRegistererWith", "a second store on the registerer is refused, saying how to share it")

	require.NoError(t, s.Close())
	fams, err = reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		require.False(t, strings.HasPrefix(f.GetName(), "kwal_client_"), "%s still registered after Close", f.GetName())
	}
	s2 := openStore(t, brokers, cfg)
	require.NoError(t, s2.CreateNamespace(ctx, newTopic(t)))
	_, found := metricSum(t, reg, "kwal_client_connects_total", "role", "admin")
	require.True(t, found, "a new store on the registry exports its clients' metrics")
}
