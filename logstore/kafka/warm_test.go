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
// first replay fetches on warm connections; a store whose index knows no
// topic opens none. The replay still returns the region's entries.
func TestOpenWarmsReadsOfIndexedTopics(t *testing.T) {
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	topic := testutil.Topic(t)
	ctx := context.Background()

	fresh := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = t.TempDir() })
	warm, _ := kafka.WarmFetchClients(fresh)
	require.Zero(t, warm, "an index that knows no topic warms nothing")

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
	got := collect(t, s.Read(ctx, topic, 2, 0))
	require.Equal(t, want, got)
}
