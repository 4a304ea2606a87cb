package index

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatsDescribeTheIndex protects the inspection API that `kwal index
// show` relies on: span, per-region counts, first/last offsets, Obsolete
// points, and the checkpoint chain's size, before and after a restart.
func TestStatsDescribeTheIndex(t *testing.T) {
	st := newMemStore()
	g, err := New(Options{Store: st})
	require.NoError(t, err)
	g.Start("t", 0, 0)
	g.Observe("t", []Run{{Start: 0, Count: 10, Region: 1}, {Start: 10, Count: 5, Region: 2}, {Start: 15, Count: 10, Region: 1}, {Start: 30, Count: 1, Region: 3}})
	g.Obsolete("t", 2, 12)
	ts, ok := g.Stats("t", true)
	require.True(t, ok)
	require.True(t, ts.Covered)
	require.Equal(t, int64(0), ts.C)
	require.Equal(t, int64(25), ts.W)
	require.Equal(t, 1, ts.PendingRuns)
	require.Equal(t, []RegionStats{
		{Region: 1, Entries: 20, Runs: 2, First: 0, Last: 24},
		{Region: 2, Entries: 3, Runs: 1, First: 12, Last: 14, ObsoleteBelow: 12},
	}, ts.Regions)
	require.Equal(t, int64(23), ts.Entries)
	require.Zero(t, ts.StoredBytes, "nothing checkpointed yet")
	_, ok = g.Stats("unknown", false)
	require.False(t, ok)

	require.NoError(t, g.Close(t.Context()))
	g, err = New(Options{Store: st, ReadOnly: true})
	require.NoError(t, err)
	defer g.Close(t.Context())
	require.Equal(t, []string{"t"}, g.Topics())
	ts, ok = g.Stats("t", false)
	require.True(t, ok)
	require.Equal(t, int64(25), ts.W)
	require.Equal(t, int64(23), ts.Entries)
	require.Positive(t, ts.StoredBytes)
	require.Positive(t, ts.Files)
	require.Nil(t, ts.Regions)
}

// TestStatsNameUnusableFiles: a checkpoint file that fails its CRC is
// named by Stats with its reason (the CLI's index verify reports it), and
// FileNames lists it though the chain could not use it.
func TestStatsNameUnusableFiles(t *testing.T) {
	st := newMemStore()
	g, err := New(Options{Store: st})
	require.NoError(t, err)
	g.Start("t", 0, 0)
	g.Observe("t", []Run{{Start: 0, Count: 10, Region: 1}})
	require.NoError(t, g.Close(t.Context()))
	names, err := st.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, names, 1)
	st.blobs[names[0]][len(st.blobs[names[0]])/2] ^= 0xff

	g, err = New(Options{Store: st, ReadOnly: true})
	require.NoError(t, err)
	defer g.Close(t.Context())
	ts, ok := g.Stats("t", false)
	require.True(t, ok)
	require.False(t, ts.Covered)
	require.Zero(t, ts.StoredBytes, "the chain uses no file")
	require.Equal(t, names, ts.FileNames)
	require.Len(t, ts.LoadFailures, 1)
	require.Equal(t, names[0], ts.LoadFailures[0].File)
	require.Equal(t, reasonCorrupt, ts.LoadFailures[0].Reason)
	require.ErrorIs(t, ts.LoadFailures[0].Err, ErrCorrupt)

	require.NoError(t, g.Drop(t.Context(), "t"))
	g.Start("t", 0, 0)
	ts, _ = g.Stats("t", false)
	require.Empty(t, ts.LoadFailures, "a dropped topic's failures go with it")
}
