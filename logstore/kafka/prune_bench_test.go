package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// BenchmarkPruneSpaceKept measures what the two designs for proving a
// replay complete after pruning cost in space kept (index/doc.go,
// "Pruning"). 64 regions share a topic; every round each active region
// appends 10 entries of 1 KiB and flushes the previous round's (Obsolete),
// then the topic is pruned. After round 5, 4 regions go idle for good
// (their table was dropped, or they moved to a node that writes them
// elsewhere) having flushed everything.
//
//   - marks (chosen): Prune writes a prune mark restating every region's
//     Obsolete point, so it may delete up to the lowest entry still needed.
//   - pinned: no prune marks; a rebuilt index can vouch for a region only
//     while the region's latest Obsolete mark is in the log, so the prune
//     point may never pass any region's latest Obsolete mark.
//
// It reports the log kept after the last round under each (MB of entry
// data plus marks), the bytes the marks themselves take, and the time an
// Obsolete call (one produce) and a Prune take. Run with -benchtime=1x.
func BenchmarkPruneSpaceKept(b *testing.B) {
	const (
		regions   = 64
		idle      = 4
		rounds    = 30
		perRound  = 10
		entrySize = 1024
	)
	for range b.N {
		brokers := testutil.Brokers(b)
		ctx := context.Background()
		s := openStore(b, brokers, nil)
		topic := testutil.Topic(b)
		require.NoError(b, s.CreateNamespace(ctx, topic))
		sizeAt := map[int64]int64{} // offset -> record key+value bytes, for entries
		lastMark := map[logstore.RegionID]int64{}
		prevLast := map[logstore.RegionID]logstore.EntryID{}
		var markBytes, marks int64
		var obsoleteTime, pruneTime time.Duration
		var first logstore.EntryID
		data := make([]byte, entrySize)
		for round := range rounds {
			last := map[logstore.RegionID]logstore.EntryID{}
			for r := logstore.RegionID(1); r <= regions; r++ {
				if round > 5 && r <= idle {
					continue
				}
				for range perRound {
					res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: data}})
					require.NoError(b, err)
					last[r] = res.LastEntryIDs[r]
					sizeAt[int64(last[r])-1] = int64(record.KeySize + entrySize)
				}
			}
			for r := logstore.RegionID(1); r <= regions; r++ {
				upTo := prevLast[r]
				if round == 5 && r <= idle {
					upTo = last[r] // the idle regions flush everything
				}
				if upTo == 0 || (round > 5 && r <= idle) {
					continue
				}
				t0 := time.Now()
				require.NoError(b, s.Obsolete(ctx, topic, r, upTo))
				obsoleteTime += time.Since(t0)
				latest, err := s.LatestEntryID(ctx, topic)
				require.NoError(b, err)
				lastMark[r] = int64(latest) - 1 // writes are sequential: the mark is the last record
				p := record.MarkPart(record.Mark{Obsolete: []record.RegionPoint{{Region: uint64(r), Before: int64(upTo)}}})
				markBytes += int64(record.KeySize + len(p.Data))
				marks++
			}
			for r, id := range last {
				prevLast[r] = id
			}
			var err error
			t0 := time.Now()
			first, err = s.Prune(ctx, topic)
			pruneTime += time.Since(t0)
			require.NoError(b, err)
		}
		end, err := s.LatestEntryID(ctx, topic)
		require.NoError(b, err)
		pinned := int64(first) - 1
		for _, off := range lastMark {
			pinned = min(pinned, off)
		}
		kept := func(from int64) float64 {
			var n int64
			for off := from; off < int64(end); off++ {
				n += sizeAt[off]
			}
			return float64(n) / 1e6
		}
		table := make([]record.RegionPoint, regions)
		for i := range table {
			table[i] = record.RegionPoint{Region: uint64(i + 1), Before: int64(end)}
		}
		pm := record.MarkPart(record.Mark{Prune: true, Point: int64(end), Obsolete: table})
		b.ReportMetric(kept(int64(first)-1), "MB_kept_marks")
		b.ReportMetric(kept(pinned), "MB_kept_pinned")
		b.ReportMetric(float64(markBytes)/float64(marks), "B/obsolete_mark")
		b.ReportMetric(float64(record.KeySize+len(pm.Data))/regions, "B/region_in_prune_mark")
		b.ReportMetric(float64(obsoleteTime.Microseconds())/1e3/float64(marks), "ms/obsolete")
		b.ReportMetric(float64(pruneTime.Microseconds())/1e3/rounds, "ms/prune")
		b.ReportMetric(float64(int64(end)-int64(first)+1), "offsets_kept_marks")
		b.ReportMetric(float64(int64(end)-pinned), "offsets_kept_pinned")
		b.Log(fmt.Sprintf("log end %d: prune marks keep from offset %d, pinned by marks from %d", end, int64(first)-1, pinned))
	}
}

// BenchmarkPruneRound measures one background pruner round at a datanode's
// scale: Prune of every topic of a pool of 64, each holding 16 regions'
// entries, half of them flushed since the last round (so every Prune
// writes a prune mark and deletes). It reports the round's wall time and
// its requests per topic, which decide how often the pruner may run
// (Config.PruneInterval). Run with -benchtime=Nx: each iteration is a round.
func BenchmarkPruneRound(b *testing.B) {
	brokers := testutil.Brokers(b)
	s := openStore(b, brokers, func(c *kafka.Config) { c.IndexDir = b.TempDir() })
	ctx := context.Background()
	pool, err := kafka.NewTopicPool(testutil.Topic(b), 64)
	require.NoError(b, err)
	require.NoError(b, pool.Create(ctx, s))
	last := map[string]map[logstore.RegionID]logstore.EntryID{}
	write := func() {
		for _, ns := range pool.Names() {
			if last[ns] == nil {
				last[ns] = map[logstore.RegionID]logstore.EntryID{}
			}
			var batch []logstore.Entry
			for r := range logstore.RegionID(16) {
				for range 4 {
					batch = append(batch, logstore.Entry{Namespace: ns, Region: r + 1, Data: make([]byte, 512)})
				}
			}
			res, err := s.AppendBatch(ctx, batch)
			require.NoError(b, err)
			for r, id := range res.LastEntryIDs {
				if r%2 == 0 {
					require.NoError(b, s.Obsolete(ctx, ns, r, last[ns][r]+1))
				}
				last[ns][r] = id
			}
		}
	}
	write()
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		write()
		b.StartTimer()
		began := time.Now()
		for _, ns := range pool.Names() {
			_, err := s.Prune(ctx, ns)
			require.NoError(b, err)
		}
		elapsed += time.Since(began)
	}
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/round")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/64/1000, "ms/topic")
}
