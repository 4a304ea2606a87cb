package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestRoutineWorkIsLoggedAtDebug protects what a datanode sees in its log
// by default: the store's routine work (a restarted node's index caught
// up in the background, a prune deleting what no region needs) is logged
// at DEBUG, and a healthy run logs nothing at INFO or above. Both lines
// were INFO, one per topic at every restart and one per background prune.
func TestRoutineWorkIsLoggedAtDebug(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	dir := t.TempDir()
	logs := &recordingHandler{}
	appendN := func(s *kafka.LogStore, region logstore.RegionID, n int) logstore.EntryID {
		var last logstore.EntryID
		for i := range n {
			res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: region, Data: fmt.Appendf(nil, "%d-%d", region, i)}})
			require.NoError(t, err)
			last = res.LastEntryIDs[region]
		}
		return last
	}
	withDir := func(c *kafka.Config) {
		c.IndexDir = dir
		c.Logger = slog.New(logs)
		c.PruneInterval = 0
	}

	a := openStore(t, brokers, withDir)
	appendN(a, 1, 5)
	require.NoError(t, a.Close())
	// Entries the index in dir has not seen, as after a crash.
	b := openStore(t, brokers, func(c *kafka.Config) { c.DisableIndex = true })
	appendN(b, 2, 5)
	require.NoError(t, b.Close())

	c := openStore(t, brokers, withDir)
	last1 := appendN(c, 1, 5) // appends only: the index catches up in the background
	kafka.WaitCatchUp(c, topic)
	require.NoError(t, c.Obsolete(ctx, topic, 1, last1))
	require.NoError(t, c.Obsolete(ctx, topic, 2, 10))
	first, err := c.Prune(ctx, topic)
	require.NoError(t, err)
	require.Greater(t, first, last1, "the prune deleted every entry")
	require.NoError(t, c.Close())

	for _, msg := range []string{"kwal: the index lies below the log's end; catching it up in the background", "kwal: pruned"} {
		recs := logs.find(msg)
		require.Len(t, recs, 1, msg)
		require.Equal(t, slog.LevelDebug, recs[0]["level"], msg)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, r := range logs.recs {
		require.Less(t, r.Level, slog.LevelInfo, "logged at %v: %s", r.Level, r.Message)
	}
}
