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

			// Hold every fetch until every read has joined. A read that
			// starts a pass of its own is counted too, and so is one that
			// returned without a pass (its plan empty, or an error), so
			// that a broken join fails the assertions below instead of
			// holding the fetches forever. (A read in a pass cannot return
			// before the fetches are released, except the cancelled one,
			// cancelled only after the count.)
			placed := make(chan struct{}, 2*regions)
			returned := make(chan struct{}, regions)
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
					defer func() { returned <- struct{}{} }()
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
			for range regions {
				select {
				case <-placed:
				case <-returned:
				}
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

// TestReadJoinsAPassInItsClaimsCatchUp protects sharing at its most common
// moment: a pass's decoder catches up with the claims topic before it takes
// anything, and a read that starts then (a datanode opening its regions a
// moment apart) joins the pass instead of starting a second one. kfake
// holds the claims topic's ListOffsets, and with it the first pass's
// catch-up, until the second read joined or started a pass.
func TestReadJoinsAPassInItsClaimsCatchUp(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	topic := newTopic(t)
	writeRegions(t, s, topic, 2, 3)
	from := map[logstore.RegionID]logstore.EntryID{1: 1}
	alone := collect(t, s.ReadWith(ctx, topic, from, kafka.ReadOptions{}))
	from2 := map[logstore.RegionID]logstore.EntryID{2: 1}
	alone2 := collect(t, s.ReadWith(ctx, topic, from2, kafka.ReadOptions{}))
	require.NotEmpty(t, alone)
	require.NotEmpty(t, alone2)

	catchingUp := make(chan struct{}, 1) // the first pass's catch-up is held
	placed := make(chan struct{}, 2)     // a read joined or started a pass
	release := make(chan struct{})
	kafka.SetJoinHook(s, func() { placed <- struct{}{} }, func() { placed <- struct{}{} })
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if dataTopics(req.(*kmsg.ListOffsetsRequest)) == 0 {
			select {
			case catchingUp <- struct{}{}:
			default:
			}
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})

	var st [2]kafka.ReadStats
	var got [2][]logstore.Entry
	var errs [2]error
	var wg sync.WaitGroup
	read := func(i int, from map[logstore.RegionID]logstore.EntryID) {
		wg.Go(func() {
			for e, err := range s.ReadWith(ctx, topic, from, kafka.ReadOptions{Stats: &st[i]}) {
				if err != nil {
					errs[i] = err
					return
				}
				got[i] = append(got[i], e)
			}
		})
	}
	read(0, from)
	<-placed     // the first read started its pass,
	<-catchingUp // whose decoder waits for the claims topic
	read(1, from2)
	<-placed
	close(release)
	wg.Wait()

	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	requireEntries(t, alone, got[0], "region 1")
	requireEntries(t, alone2, got[1], "region 2")
	st1, st2 := st[0], st[1]
	require.Equal(t, st1.Pass, st2.Pass, "the second read joined the first one's pass")
	require.Equal(t, 2, st2.Reads)
}
