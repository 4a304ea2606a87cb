package kafka_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/testutil"
)

// TestReadsSeededFromAnotherTopicsSizes: a topic no read measured yet is
// fetched with the bytes per offset of the topic read last as its seed.
// However wrong the seed (entries 500x larger, then 500x smaller than the
// seed topic's), every region's read returns exactly its entries in order:
// a seed sizes fetches, never decides which records a read gets.
func TestReadsSeededFromAnotherTopicsSizes(t *testing.T) {
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	const regions = 4
	write := func(size int) (string, map[logstore.RegionID][]logstore.Entry) {
		topic := newTopic(t)
		want := make(map[logstore.RegionID][]logstore.Entry)
		for i := range 120 {
			e := logstore.Entry{Namespace: topic, Region: logstore.RegionID(rng.IntN(regions) + 1), Data: payload(rng, size)}
			if i%7 == 0 {
				e.Data = e.Data[:1+rng.IntN(size)]
			}
			res, err := s.AppendBatch(ctx, []logstore.Entry{e})
			require.NoError(t, err)
			e.ID = res.LastEntryIDs[e.Region]
			want[e.Region] = append(want[e.Region], e)
		}
		return topic, want
	}
	small1, want1 := write(8)
	big, wantBig := write(4000)
	small2, want2 := write(8)

	// small1 is read first (measured), then big (seeded 500x too small),
	// then small2 (seeded 500x too large); the regions of a topic are read
	// at once, as a restart's replay does, and each from a random point.
	for _, tc := range []struct {
		topic string
		want  map[logstore.RegionID][]logstore.Entry
	}{{small1, want1}, {big, wantBig}, {small2, want2}} {
		got := make([][]logstore.Entry, regions+1)
		errs := make(chan error, regions)
		from := make([]int, regions+1)
		for r := 1; r <= regions; r++ {
			from[r] = rng.IntN(len(tc.want[logstore.RegionID(r)]) + 1)
			go func() {
				var out []logstore.Entry
				var err error
				es := tc.want[logstore.RegionID(r)]
				start := logstore.EntryID(0)
				if from[r] > 0 {
					start = es[from[r]-1].ID + 1
				}
				out, err = readErr(s.Read(ctx, tc.topic, logstore.RegionID(r), start))
				got[r] = out
				errs <- err
			}()
		}
		for range regions {
			require.NoError(t, <-errs)
		}
		for r := 1; r <= regions; r++ {
			want := tc.want[logstore.RegionID(r)][from[r]:]
			require.Equal(t, len(want), len(got[r]), "topic %s region %d", tc.topic, r)
			for i := range want {
				require.Equal(t, want[i], got[r][i], "topic %s region %d entry %d", tc.topic, r, i)
			}
		}
	}
}
