package kafka

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
)

// TestLastIDsMatchesPerEntry: lastIDs, which touches the result map once
// per run of one region's entries, gives every region the greatest ID of
// its entries, exactly as a lookup per entry does, whatever the order of
// regions and offsets (including offsets that do not rise with the entry
// order) and whatever the map held before (another namespace's batch of
// the same call, or a greater ID already recorded).
func TestLastIDsMatchesPerEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	for range 2000 {
		n := rng.IntN(20)
		regions := make([]logstore.RegionID, n)
		offsets := make([]int64, n)
		for j := range n {
			regions[j] = logstore.RegionID(rng.IntN(4))
			offsets[j] = rng.Int64N(100)
		}
		got := map[logstore.RegionID]logstore.EntryID{}
		want := map[logstore.RegionID]logstore.EntryID{}
		if rng.IntN(2) == 0 {
			got[1], want[1] = 50, 50
		}
		lastIDs(got, regions, offsets)
		for j, off := range offsets {
			if id := logstore.EntryID(off + 1); id > want[regions[j]] {
				want[regions[j]] = id
			}
		}
		require.Equal(t, want, got, "regions %v offsets %v", regions, offsets)
	}
}
