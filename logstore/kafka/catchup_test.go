package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/testutil"
)

// TestRestartedIndexCheckpointsWithoutARead protects the index's progress
// on a node that restarts and only appends: its checkpoint lies below the
// log's end (entries were acknowledged after it), and the new appends lie
// above that gap. The store must catch the index up in the background, so
// that the next checkpoint (here Close's) accounts for the whole log
// without any read; a node crashing after it loses nothing of the index.
// Without the catch-up the index's watermark stays at the old checkpoint
// for good, and every checkpoint writes nothing new.
func TestRestartedIndexCheckpointsWithoutARead(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	dir := t.TempDir()
	appendN := func(s *kafka.LogStore, region logstore.RegionID, n int) {
		for i := range n {
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: region, Data: fmt.Appendf(nil, "%d-%d", region, i)}})
			require.NoError(t, err)
		}
	}
	withDir := func(c *kafka.Config) { c.IndexDir = dir }

	a := openStore(t, brokers, withDir)
	appendN(a, 1, 5)
	require.NoError(t, a.Close()) // checkpoint: W = 5
	// Entries acknowledged after the last checkpoint (the node crashed
	// before the next): written here by a store without that index.
	b := openStore(t, brokers, func(c *kafka.Config) { c.DisableIndex = true })
	appendN(b, 2, 5)
	require.NoError(t, b.Close())

	c := openStore(t, brokers, withDir)
	appendN(c, 1, 5) // appends only: no read
	kafka.WaitCatchUp(c, topic)
	require.NoError(t, c.Close())

	g, err := index.Open(ctx, index.Options{Store: index.OpenDirStoreReadOnly(dir), ReadOnly: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, g.Close(ctx)) }()
	w, covered := g.Watermark(topic)
	require.True(t, covered)
	require.Equal(t, int64(15), w, "the checkpoint accounts for the whole log")
	require.Equal(t, []index.Range{{Start: 5, End: 10}}, g.Plan(topic, map[uint64]int64{2: 0}, 15).Ranges,
		"the entries written after the old checkpoint are indexed")

	d := openStore(t, brokers, withDir)
	var st kafka.ReadStats
	got := collect(t, d.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{2: 1}, kafka.ReadOptions{Stats: &st}))
	require.Len(t, got, 5)
	require.Zero(t, st.ScanRanges, "a replay after the restart needs no scan")
}
