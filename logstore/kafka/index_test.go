package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// readBoth reads regions from their starts with the index and by full
// scan and requires the same entries; it returns the indexed read's stats.
func readBoth(t *testing.T, s *kafka.LogStore, topic string, from map[logstore.RegionID]logstore.EntryID, what string) kafka.ReadStats {
	t.Helper()
	ctx := context.Background()
	var st kafka.ReadStats
	idx := collect(t, s.ReadWith(ctx, topic, from, kafka.ReadOptions{Stats: &st}))
	full := collect(t, s.ReadWith(ctx, topic, from, kafka.ReadOptions{NoIndex: true}))
	requireEntries(t, full, idx, what)
	return st
}

// TestIndexedReadEqualsFullScan is the index's property test at the store
// level: random appends over many regions, a second writer (a raw
// franz-go producer writing kwal records, as another process would)
// appending to the same topic, Obsolete calls, restarts of the store with
// a persisted index (and one that loses its index directory), and every
// indexed read, of one region or several, equals the full-scan read.
func TestIndexedReadEqualsFullScan(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(seed, 11))
			topic := newTopic(t)
			ctx := context.Background()
			open := func() *kafka.LogStore {
				cfg := kafka.DefaultConfig()
				cfg.Brokers = brokers
				cfg.MaxBatchBytes = 4096
				cfg.IndexDir = dir
				cfg.IndexCheckpointInterval = time.Duration(rng.IntN(3)) * 20 * time.Millisecond
				cfg.ProduceLanes = 1 + rng.IntN(8)
				s, err := kafka.Open(ctx, cfg)
				require.NoError(t, err)
				return s
			}
			s := open()
			defer func() { _ = s.Close() }()
			raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			require.NoError(t, err)
			defer raw.Close()
			const regions = 10
			for round := range 6 {
				var wg sync.WaitGroup
				for w := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := rand.New(rand.NewPCG(seed*100+uint64(round), uint64(w)))
						for range 8 {
							var batch []logstore.Entry
							for range 1 + r.IntN(3) {
								batch = append(batch, logstore.Entry{Namespace: topic, Region: logstore.RegionID(1 + r.IntN(regions)), Data: payload(r, r.IntN(9000))})
							}
							_, err := s.AppendBatch(ctx, batch)
							assertNoErr(t, err)
						}
					}()
				}
				// The second writer, concurrently.
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, uint64(round)+1000))
					for range 5 {
						recs := partRecords(t, topic, uint64(1+r.IntN(regions)), payload(r, r.IntN(6000)), 4096)
						if err := raw.ProduceSync(ctx, recs...).FirstErr(); err != nil {
							t.Errorf("second writer: %v", err)
						}
					}
				}()
				wg.Wait()
				// Reads: single regions from random points, and all at once.
				all := map[logstore.RegionID]logstore.EntryID{}
				for region := logstore.RegionID(1); region <= regions+1; region++ {
					var from logstore.EntryID
					if rng.IntN(2) == 0 {
						latest, err := s.LatestEntryID(ctx, topic)
						require.NoError(t, err)
						from = logstore.EntryID(rng.Int64N(int64(latest) + 1))
					}
					readBoth(t, s, topic, map[logstore.RegionID]logstore.EntryID{region: from}, fmt.Sprintf("round %d region %d from %d", round, region, from))
					all[region] = from
				}
				readBoth(t, s, topic, all, fmt.Sprintf("round %d all regions", round))
				// Obsolete some regions up to a random ID.
				for range 3 {
					latest, err := s.LatestEntryID(ctx, topic)
					require.NoError(t, err)
					require.NoError(t, s.Obsolete(ctx, topic, logstore.RegionID(1+rng.IntN(regions)), logstore.EntryID(rng.Int64N(int64(latest)+1))))
				}
				switch rng.IntN(3) {
				case 0: // restart with the persisted index
					require.NoError(t, s.Close())
					s = open()
				case 1: // restart having lost the index directory's files
					if rng.IntN(2) == 0 {
						require.NoError(t, s.Close())
						require.NoError(t, removeAll(dir))
						s = open()
					}
				}
			}
		})
	}
}

// TestIndexedReadFetchesOnlyItsRegion protects what the index is for: with
// 64 regions written concurrently to one topic, replaying one region
// fetches about its own bytes (not 64 times them), counted from the fetch
// responses; and after a restart with a persisted index, it still does.
func TestIndexedReadFetchesOnlyItsRegion(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	ctx := context.Background()
	topic := newTopic(t)
	cfg := func(c *kafka.Config) { c.IndexDir = dir; c.ProduceLanes = 16 }
	s := openStore(t, brokers, cfg)
	const regions, calls = 64, 8
	writeRegions(t, s, topic, regions, calls)
	check := func(s *kafka.LogStore, what string) {
		var full kafka.ReadStats
		collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{7: 0}, kafka.ReadOptions{NoIndex: true, Stats: &full}))
		st := readBoth(t, s, topic, map[logstore.RegionID]logstore.EntryID{7: 0}, what)
		require.EqualValues(t, calls*10, st.Entries)
		ratio := float64(st.FetchedBytes) / float64(st.EntryBytes)
		t.Logf("%s: indexed read fetched %d bytes in %d fetches for %d bytes of entries (%.2fx); full scan fetched %d bytes (%.1fx)",
			what, st.FetchedBytes, st.Fetches, st.EntryBytes, ratio, full.FetchedBytes, float64(full.FetchedBytes)/float64(st.EntryBytes))
		require.Less(t, ratio, 2.0, "a one-region replay fetches less than twice its own bytes")
		require.Less(t, st.FetchedBytes*16, full.FetchedBytes, "and a small fraction of the topic")
	}
	check(s, "live")
	require.NoError(t, s.Close())
	check(openStore(t, brokers, cfg), "after restart")
}

// TestIdleRegionsOpenFast protects restarts with many idle regions
// (GreptimeDB #6594): after a restart with a persisted index, replaying
// 1,000 regions that never wrote to a busy topic fetches nothing.
func TestIdleRegionsOpenFast(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	ctx := context.Background()
	topic := newTopic(t)
	cfg := func(c *kafka.Config) { c.IndexDir = dir }
	s := openStore(t, brokers, cfg)
	for i := range 50 {
		var batch []logstore.Entry
		for r := range 8 {
			batch = append(batch, logstore.Entry{Namespace: topic, Region: logstore.RegionID(r + 1), Data: make([]byte, 1000+i)})
		}
		_, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	s = openStore(t, brokers, cfg)
	start := time.Now()
	fetches := 0
	for r := 1000; r < 2000; r++ {
		var st kafka.ReadStats
		got := collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{logstore.RegionID(r): 0}, kafka.ReadOptions{Stats: &st}))
		require.Empty(t, got)
		fetches += st.Fetches
	}
	t.Logf("1000 idle regions replayed in %v with %d fetches", time.Since(start), fetches)
	require.Zero(t, fetches, "idle regions fetch nothing when the index accounts for the whole log")
}

// TestIndexedReadFetchRequests checks the index's effect from the broker's
// side, with kfake's ControlKey watching every fetch request: replaying one
// region of 64 sends one fetch per run of that region's records, each at
// the offset where the run starts, and nothing else.
func TestIndexedReadFetchRequests(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	ctx := context.Background()
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceLanes = 16 })
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	const regions = 64
	writeRegions(t, s, topic, regions, 5)
	// Where does region 9 live, according to the log itself?
	starts := map[int64]bool{} // where runs of region 9 start
	mine := map[int64]bool{}   // every offset of region 9
	var prev logstore.RegionID
	var topicBytes int64
	for i, r := range scanRaw(t, c.ListenAddrs(), topic) {
		p, err := record.Decode(r.Key, r.Value)
		require.NoError(t, err)
		topicBytes += int64(len(r.Key) + len(r.Value))
		if logstore.RegionID(p.Region) == 9 {
			mine[r.Offset] = true
			if i == 0 || prev != 9 {
				starts[r.Offset] = true
			}
		}
		prev = logstore.RegionID(p.Region)
	}

	var mu sync.Mutex
	var offsets []int64
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				offsets = append(offsets, p.FetchOffset)
			}
		}
		return nil, nil, false
	})
	var st kafka.ReadStats
	got := collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{9: 0}, kafka.ReadOptions{Stats: &st}))
	require.Len(t, got, 50)
	mu.Lock()
	defer mu.Unlock()
	// One fetch per run (a run that kgo cut into two batches takes two).
	require.GreaterOrEqual(t, len(offsets), len(starts))
	require.LessOrEqual(t, len(offsets), 2*len(starts))
	for o := range starts {
		require.Contains(t, offsets, o, "every run is fetched from its start")
	}
	for _, o := range offsets {
		require.True(t, mine[o], "fetch at offset %d, which holds no record of region 9", o)
	}
	t.Logf("%d fetch requests, %d bytes fetched; the topic holds %d bytes", len(offsets), st.FetchedBytes, topicBytes)
	require.Less(t, st.FetchedBytes*32, topicBytes, "about 1/64 of the topic")
}

// TestDamagedIndexFallsBackToScanning protects Open and reads against a
// damaged index directory (a torn or garbled checkpoint, a foreign file):
// Open succeeds, and reads return exactly what a full scan returns.
func TestDamagedIndexFallsBackToScanning(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	for _, damage := range []string{"truncate", "garble", "foreign"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			cfg := func(c *kafka.Config) { c.IndexDir = dir }
			s := openStore(t, brokers, cfg)
			for i := range 20 {
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(i%3 + 1), Data: fmt.Appendf(nil, "%s-%d", damage, i)}})
				require.NoError(t, err)
			}
			require.NoError(t, s.Close())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.NotEmpty(t, entries)
			for _, e := range entries {
				p := filepath.Join(dir, e.Name())
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				switch damage {
				case "truncate":
					b = b[:len(b)/2]
				case "garble":
					b[len(b)/2] ^= 0xff
				case "foreign":
					b = []byte("not an index file")
				}
				require.NoError(t, os.WriteFile(p, b, 0o644))
			}
			s = openStore(t, brokers, cfg)
			for r := logstore.RegionID(1); r <= 3; r++ {
				readBoth(t, s, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, fmt.Sprintf("%s region %d", damage, r))
			}
		})
	}
}

// writeRegions has one writer per region (1..regions) append calls calls
// of 10 entries of about 2 KiB, all at once, as a datanode does.
func writeRegions(t *testing.T, s *kafka.LogStore, topic string, regions, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	for r := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				var batch []logstore.Entry
				for i := range 10 {
					batch = append(batch, logstore.Entry{Namespace: topic, Region: logstore.RegionID(r + 1), Data: fmt.Appendf(make([]byte, 0, 2048), "%d/%d/%d%2000d", r, c, i, 0)})
				}
				_, err := s.AppendBatch(context.Background(), batch)
				assertNoErr(t, err)
			}
		}()
	}
	wg.Wait()
}
