package kafka_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestLostIndexIsRebuiltByTheFirstScan protects the region-move and
// new-disk case: a store that opens a topic of many fetch chunks with an
// empty index directory scans it once, for its first replay, and every
// later replay reads about its own records. Before, only the scan's last
// chunk was kept as coverage (each chunk reached the index as a piece
// below its span, and only a piece reaching the span lowered it), so every
// replay scanned nearly the whole topic again.
func TestLostIndexIsRebuiltByTheFirstScan(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	a := openStore(t, brokers, nil)
	rng := rand.New(rand.NewPCG(7, 7))
	own := map[logstore.RegionID]int64{}
	const regions, calls, perCall = 16, 100, 10
	for c := range calls {
		for r := range logstore.RegionID(regions) {
			batch := make([]logstore.Entry, perCall)
			for i := range batch {
				batch[i] = logstore.Entry{Namespace: topic, Region: r + 1, Data: payload(rng, 1024)}
				own[r+1] += 1024
			}
			_, err := a.AppendBatch(ctx, batch)
			require.NoError(t, err, "call %d", c)
		}
	}
	require.NoError(t, a.Close())

	b := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = t.TempDir() })
	var first kafka.ReadStats
	got := collect(t, b.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &first}))
	require.Len(t, got, calls*perCall)
	require.EqualValues(t, regions*calls*perCall, first.Records, "the first replay scans the topic")
	for _, r := range []logstore.RegionID{2, 3} {
		var st kafka.ReadStats
		got := collect(t, b.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, kafka.ReadOptions{Stats: &st}))
		require.Len(t, got, calls*perCall)
		require.LessOrEqual(t, st.FetchedBytes, 2*own[r], "region %d's replay after the first scan fetched %d bytes for %d of its own", r, st.FetchedBytes, own[r])
		require.LessOrEqual(t, st.Records, int64(2*calls*perCall), "region %d decoded %d records", r, st.Records)
	}
}
