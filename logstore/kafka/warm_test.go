package kafka_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestOpenWarmsReadsOfIndexedTopics: a store reopened with its index dir
// has, when Open returns, the leader of every topic its index knows cached
// and every fetch client's connection to it open, so that the restart's
// first replay fetches on warm connections, and the cost model's latency
// is seeded with a measured round trip; a store whose index knows no topic
// opens none. The replay still returns the region's entries.
func TestOpenWarmsReadsOfIndexedTopics(t *testing.T) {
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	topic := testutil.Topic(t)
	ctx := context.Background()

	fresh := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = t.TempDir() })
	warm, _ := kafka.WarmFetchClients(fresh)
	require.Zero(t, warm, "an index that knows no topic warms nothing")
	require.Zero(t, kafka.LatencySeed(fresh), "and measures no round trip")

	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	var want []logstore.Entry
	for i := range 20 {
		e := logstore.Entry{Namespace: topic, Region: logstore.RegionID(i%3 + 1), Data: []byte{byte(i)}}
		res, err := w.AppendBatch(ctx, []logstore.Entry{e})
		require.NoError(t, err)
		if e.Region == 2 {
			e.ID = res.LastEntryIDs[e.Region]
			want = append(want, e)
		}
	}
	require.NoError(t, w.Close())

	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	warm, all := kafka.WarmFetchClients(s)
	require.Positive(t, all, "the store has fetch clients to warm")
	require.Equal(t, all, warm, "every fetch client warmed at Open")
	require.True(t, kafka.KnowsTopicMeta(s, topic))
	require.Positive(t, kafka.LatencySeed(s), "warming timed a fetch's round trip: the first reads price their plans")
	got := collect(t, s.Read(ctx, topic, 2, 0))
	require.Equal(t, want, got)
}

// TestOpenSamplesTheStreamingRate: a store reopened with an index that
// covers a topic of more than a small fetch's bytes has, when Open
// returns, a measured streaming rate to price its first reads' scans
// with (instead of the 1 GB/s prior); and a model that measured no rate
// takes it, until its first measured rate replaces it.
func TestOpenSamplesTheStreamingRate(t *testing.T) {
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	topic := testutil.Topic(t)
	ctx := context.Background()
	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	for range 20 {
		var es []logstore.Entry
		for range 10 {
			es = append(es, logstore.Entry{Namespace: topic, Region: 1, Data: make([]byte, 1000)})
		}
		_, err := w.AppendBatch(ctx, es)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())

	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	require.Positive(t, kafka.RateSeed(s), "Open timed a fetch of the topic's records")
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 200)
}
