package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestConcurrentReadsShareAPass protects the datanode-restart case: reads
// of one namespace started together, each of one region from its own
// point, share one pass over the log (one set of fetches), and each still
// yields exactly what it yields alone, in order, with its own stop: some
// reads break out early, one is cancelled, and the others are unaffected.
// The broker holds the pass's first fetch until every read has joined, so
// the sharing is certain, not a matter of timing. Random workloads, with
// and without the index.
func TestConcurrentReadsShareAPass(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 5))
			noIndex := seed%2 == 0
			c := testutil.NewCluster(t)
			s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.MaxBatchBytes = 16 << 10; cfg.FetchMaxBytes = 256 << 10 })
			ctx := context.Background()
			topic := newTopic(t)
			require.NoError(t, s.CreateNamespace(ctx, topic))
			const regions = 12
			writeRegions(t, s, topic, regions, 3+rng.IntN(4))
			end, err := s.LatestEntryID(ctx, topic)
			require.NoError(t, err)

			type job struct {
				region logstore.RegionID
				from   logstore.EntryID
				stopAt int  // break after this many entries (0: read to the end)
				cancel bool // cancelled while the pass waits for its first fetch
			}
			jobs := make([]job, regions)
			for i := range jobs {
				jobs[i] = job{region: logstore.RegionID(i + 1), from: logstore.EntryID(rng.Int64N(int64(end)) + 1)}
				if rng.IntN(4) == 0 {
					jobs[i].stopAt = 1 + rng.IntN(5)
				}
			}
			jobs[rng.IntN(regions)].cancel = true
			alone := make([][]logstore.Entry, regions)
			fetching := make([]bool, regions) // the read has something to fetch (a read whose plan is empty joins nothing)
			var soloBytes int64
			sharing := 0
			for i, j := range jobs {
				var st kafka.ReadStats
				alone[i] = collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{j.region: j.from}, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}))
				soloBytes += st.FetchedBytes
				if fetching[i] = st.Fetches > 0; fetching[i] {
					sharing++
				}
			}

			// Hold every fetch until every other read has joined. A read
			// that starts a pass of its own is counted too, so that a
			// broken join fails the assertions below instead of holding the
			// fetches forever.
			placed := make(chan struct{}, 2*regions)
			kafka.SetJoinHook(s, func() { placed <- struct{}{} }, func() { placed <- struct{}{} })
			release := make(chan struct{})
			c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				c.SleepControl(func() { <-release })
				return nil, nil, false
			})

			got := make([][]logstore.Entry, regions)
			errs := make([]error, regions)
			stats := make([]kafka.ReadStats, regions)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var wg sync.WaitGroup
			for i, j := range jobs {
				rctx := ctx
				if j.cancel {
					rctx = cctx
				}
				wg.Go(func() {
					for e, err := range s.ReadWith(rctx, topic, map[logstore.RegionID]logstore.EntryID{j.region: j.from}, kafka.ReadOptions{NoIndex: noIndex, Stats: &stats[i]}) {
						if err != nil {
							errs[i] = err
							return
						}
						got[i] = append(got[i], e)
						if len(got[i]) == j.stopAt {
							return
						}
					}
				})
			}
			for range sharing {
				<-placed
			}
			cancel() // the cancelled read leaves before anything is fetched
			close(release)
			wg.Wait()

			pass := uint64(0)
			for i, j := range jobs {
				what := fmt.Sprintf("region %d from %d", j.region, j.from)
				switch {
				case !fetching[i]:
					require.NoError(t, errs[i], what)
					require.Empty(t, got[i], what)
					continue
				case j.cancel:
					require.ErrorIs(t, errs[i], context.Canceled, what)
					continue
				case j.stopAt > 0 && j.stopAt < len(alone[i]):
					require.NoError(t, errs[i], what)
					requireEntries(t, alone[i][:j.stopAt], got[i], what)
				default:
					require.NoError(t, errs[i], what)
					requireEntries(t, alone[i], got[i], what)
				}
				if pass == 0 {
					pass = stats[i].Pass
				}
				require.Equal(t, pass, stats[i].Pass, "%s: one pass for all", what)
				require.Equal(t, sharing, stats[i].Reads, what)
			}
			// Whoever finished last saw the pass's final counters.
			var shared int64
			fetches := 0
			for i := range stats {
				shared = max(shared, stats[i].FetchedBytes)
				fetches = max(fetches, stats[i].Fetches)
			}
			t.Logf("noIndex=%v: alone the reads fetched %d bytes, sharing %d", noIndex, soloBytes, shared)
			require.Positive(t, shared)
			if noIndex {
				require.Less(t, shared*3, soloBytes, "scans share their fetches")
			} else {
				// One plan for all reads may fetch through the cheap gaps
				// between different regions' ranges (at most a tenth of
				// its planned offsets), and a fetch may return one batch
				// past its chunk.
				require.LessOrEqual(t, shared, soloBytes+soloBytes/10+int64(fetches)*(16<<10),
					"sharing fetches at most the reads alone, a tenth more in gaps, and a batch per fetch")
			}
		})
	}
}
