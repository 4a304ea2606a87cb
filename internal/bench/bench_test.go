package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPlanIsDeterministicAndComplete protects the benchmark's fairness:
// the same seed gives the same calls (so kwal and the raw producer write
// the same bytes), every writer gets its share, and each call holds one
// region's entries of the asked size in the region's topic.
func TestPlanIsDeterministicAndComplete(t *testing.T) {
	for _, w := range []Workload{
		{Topics: 2, Regions: 8, Writers: 4, EntrySize: 100, EntriesPerCall: 3, Calls: 5, Seed: 1},
		{Topics: 1, Regions: 4, Writers: 8, EntrySize: 0, EntriesPerCall: 1, Calls: 2, Seed: 2}, // writers share regions
	} {
		require.NoError(t, w.Validate())
		topics := []string{"a", "b"}[:w.Topics]
		p1, p2 := w.Plan(topics), w.Plan(topics)
		require.Equal(t, p1, p2)
		require.Len(t, p1, w.Writers)
		var entries int64
		for _, calls := range p1 {
			require.Len(t, calls, w.Calls)
			for _, c := range calls {
				require.Equal(t, topics[int(c.Region-1)%len(topics)], c.Topic)
				require.Len(t, c.Entries, w.EntriesPerCall)
				for _, e := range c.Entries {
					require.Len(t, e, w.EntrySize)
				}
				entries += int64(len(c.Entries))
			}
		}
		require.Equal(t, w.Entries(), entries)
	}
	require.Error(t, Workload{}.Validate())
}

// TestRecordsEncodeLikeKwal protects "same records": the raw producer's
// records are kwal's encoding of the call, split at the same limit.
func TestRecordsEncodeLikeKwal(t *testing.T) {
	c := Call{Topic: "t", Region: 7, Entries: [][]byte{make([]byte, 10), make([]byte, 1000)}}
	recs, err := Records(c, 512)
	require.NoError(t, err)
	require.Len(t, recs, 1+4) // 1000 bytes at 256-byte parts
	for _, r := range recs {
		require.Equal(t, "t", r.Topic)
		require.Len(t, r.Key, 28)
	}
}

// TestPlanContextStopsWhenCanceled protects kwal bench's Ctrl-C: building
// a plan (seconds for a large one) ends at once with ctx's error, and
// uncanceled it is Plan.
func TestPlanContextStopsWhenCanceled(t *testing.T) {
	w := Workload{Topics: 1, Regions: 4, Writers: 2, EntrySize: 10, EntriesPerCall: 2, Calls: 3, Seed: 3}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := w.PlanContext(ctx, []string{"a"})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, p)
	p, err = w.PlanContext(context.Background(), []string{"a"})
	require.NoError(t, err)
	require.Equal(t, w.Plan([]string{"a"}), p)
}
