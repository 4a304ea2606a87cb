package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestManyPassesKeepTheStoreBudgets protects Config.ReadMemoryBound as a
// limit of the whole store, not of one pass: many reads of several topics
// run at once (separate passes: each topic's own, indexed and scanning),
// over entries split into parts whose writers interleave, so that passes
// hold open entries and ReadRegions reads hold entries behind them. Every
// read returns exactly what was appended, and the store's two budgets,
// watched at their peaks, keep their documented limits: the fetched bytes
// at most twice FetchMaxBytes and one read-back fetch, the held entry data
// at most ReadHoldBytes plus one entry per pass (the one whose arrival
// makes it spill).
// It hung before read-backs stopped waiting for the fetch budget (each
// pass's decoder waited for room that the fetchers behind the decoders
// held).
func TestManyPassesKeepTheStoreBudgets(t *testing.T) {
	brokers := testutil.Brokers(t)
	const fetchMax, holdMax, entryMax = 256 << 10, 512 << 10, 192 << 10
	s := openStore(t, brokers, func(cfg *kafka.Config) {
		cfg.MaxBatchBytes = 64 << 10
		cfg.FetchMaxBytes = fetchMax
		cfg.ReadHoldBytes = holdMax
		cfg.MaxEntryBytes = entryMax
	})
	ctx := context.Background()
	const topics, regions, calls = 4, 4, 12
	names := make([]string, topics)
	want := make(map[string]map[logstore.RegionID][][]byte)
	var mu sync.Mutex
	var g errgroup.Group
	for i := range names {
		names[i] = newTopic(t)
		require.NoError(t, s.CreateNamespace(ctx, names[i]))
		want[names[i]] = make(map[logstore.RegionID][][]byte)
		for r := range regions {
			region := logstore.RegionID(r + 1)
			g.Go(func() error {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(r)))
				for range calls {
					var batch []logstore.Entry
					for range 1 + rng.IntN(3) {
						// Up to three batches' worth: most entries are split.
						d := payload(rng, 1+rng.IntN(entryMax))
						batch = append(batch, logstore.Entry{Namespace: names[i], Region: region, Data: d})
					}
					if _, err := s.AppendBatch(ctx, batch); err != nil {
						return err
					}
					mu.Lock()
					for _, e := range batch {
						want[names[i]][region] = append(want[names[i]][region], e.Data)
					}
					mu.Unlock()
				}
				return nil
			})
		}
	}
	require.NoError(t, g.Wait())

	var reads errgroup.Group
	passes := make(map[uint64]bool)
	notePass := func(id uint64) {
		mu.Lock()
		defer mu.Unlock()
		passes[id] = true
	}
	for _, topic := range names {
		for _, noIndex := range []bool{false, true} {
			from := make(map[logstore.RegionID]logstore.EntryID)
			for r := range regions {
				from[logstore.RegionID(r+1)] = 0
			}
			reads.Go(func() error { return checkRead(s, topic, from, noIndex, want[topic], notePass) })
			for r := range regions {
				region := logstore.RegionID(r + 1)
				reads.Go(func() error {
					return checkRead(s, topic, map[logstore.RegionID]logstore.EntryID{region: 0}, noIndex, want[topic], notePass)
				})
			}
		}
	}
	require.NoError(t, reads.Wait())
	t.Logf("%d passes; fetch budget peak %d (limit %d); hold peak %d (limit %d)",
		len(passes), kafka.ReadPoolPeak(s), fetchMax, kafka.ReadHoldPeak(s), holdMax)
	require.LessOrEqual(t, kafka.ReadPoolPeak(s), int64(3*fetchMax), "fetched bytes over twice FetchMaxBytes and a read-back")
	require.LessOrEqual(t, kafka.ReadHoldPeak(s), int64(holdMax+len(passes)*entryMax), "held entry data over ReadHoldBytes and one entry per pass")
	require.Zero(t, kafka.ReadPoolUsed(s), "fetch budget still held after every read ended")
	require.Zero(t, kafka.ReadHoldUsed(s), "hold budget still held after every read ended")
}

// checkRead reads topic's regions from their from points and checks that it
// returns exactly want's entries of those regions, in order per region.
func checkRead(s *kafka.LogStore, topic string, from map[logstore.RegionID]logstore.EntryID, noIndex bool, want map[logstore.RegionID][][]byte, notePass func(uint64)) error {
	got := make(map[logstore.RegionID]int)
	var st kafka.ReadStats
	defer func() { notePass(st.Pass) }()
	for e, err := range s.ReadWith(context.Background(), topic, from, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}) {
		if err != nil {
			return err
		}
		i := got[e.Region]
		if i >= len(want[e.Region]) || !bytes.Equal(e.Data, want[e.Region][i]) {
			return fmt.Errorf("%s region %d (noIndex %v): entry %d (ID %d) is not the one appended", topic, e.Region, noIndex, i, e.ID)
		}
		got[e.Region]++
	}
	for r := range from {
		if got[r] != len(want[r]) {
			return fmt.Errorf("%s region %d (noIndex %v): %d entries, %d appended", topic, r, noIndex, got[r], len(want[r]))
		}
	}
	return nil
}
