package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// The measurements behind three choices, kept runnable (-benchtime=1x,
// figures in the log): the index's default merge gap, lazy catch-up after a
// restart, and what a fetch costs at several concurrencies.

// BenchmarkMergeGap replays one region of 16 (and of 64) sharing a topic,
// written concurrently in calls of 10 entries of 1 KiB, with several
// IndexMergeGap values, and logs time, fetches and bytes fetched against
// the region's own bytes.
func BenchmarkMergeGap(b *testing.B) {
	brokers := testutil.Brokers(b)
	ctx := context.Background()
	for range b.N {
		for _, regions := range []int{16, 64} {
			dir := b.TempDir()
			topic := testutil.Topic(b)
			w0 := openStore(b, brokers, func(c *kafka.Config) { c.IndexDir = dir })
			require.NoError(b, w0.CreateNamespace(ctx, topic))
			w := bench.Workload{Topics: 1, Regions: regions, Writers: regions, EntrySize: 1024, EntriesPerCall: 10, Calls: 32000 / regions, Seed: 3}
			_, err := bench.Run(ctx, w.Plan([]string{topic}), bench.KwalAppender(w0), nil)
			require.NoError(b, err)
			require.NoError(b, w0.Close())
			region := map[logstore.RegionID]logstore.EntryID{3: 0}
			for _, gap := range []int64{-1, 8, 32, 128, 512} {
				s := openStore(b, brokers, func(c *kafka.Config) { c.IndexDir = dir; c.IndexMergeGap = gap })
				idx, st := timeRead(b, s, topic, region, kafka.ReadOptions{}, 5, -1)
				full, _ := timeRead(b, s, topic, region, kafka.ReadOptions{NoIndex: true}, 1, -1)
				b.Logf("%d regions, merge gap %d: indexed %v (%d fetches, %.2fx the region's bytes), full scan %v, speedup %.1fx",
					regions, gap, idx, st.Fetches, float64(st.FetchedBytes)/float64(st.EntryBytes), full, float64(full)/float64(idx))
				require.NoError(b, s.Close())
			}
		}
	}
}

// BenchmarkCatchUp measures lazy catch-up: a store checkpoints its index
// and closes, another process (a store without the index) appends as much
// again, and the reopened store replays three regions: the first replay
// scans the unaccounted tail once, the next ones are indexed.
func BenchmarkCatchUp(b *testing.B) {
	brokers := testutil.Brokers(b)
	ctx := context.Background()
	for range b.N {
		dir := b.TempDir()
		topic := testutil.Topic(b)
		w := bench.Workload{Topics: 1, Regions: 64, Writers: 64, EntrySize: 2048, EntriesPerCall: 10, Calls: 30, Seed: 3}
		a := openStore(b, brokers, func(c *kafka.Config) { c.IndexDir = dir })
		require.NoError(b, a.CreateNamespace(ctx, topic))
		_, err := bench.Run(ctx, w.Plan([]string{topic}), bench.KwalAppender(a), nil)
		require.NoError(b, err)
		require.NoError(b, a.Close())
		other := openStore(b, brokers, func(c *kafka.Config) { c.DisableIndex = true })
		w.Seed = 4
		_, err = bench.Run(ctx, w.Plan([]string{topic}), bench.KwalAppender(other), nil)
		require.NoError(b, err)
		require.NoError(b, other.Close())
		s := openStore(b, brokers, func(c *kafka.Config) { c.IndexDir = dir })
		for _, r := range []logstore.RegionID{9, 10, 11} {
			d, st := timeRead(b, s, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, kafka.ReadOptions{}, 1, 2*w.Calls*w.EntriesPerCall)
			b.Logf("region %d: %v, %d fetches (%d scanned ranges), %d bytes", r, d, st.Fetches, st.ScanRanges, st.FetchedBytes)
		}
	}
}

// BenchmarkFetchConcurrency times 64 one-batch fetches at different
// offsets of a topic with 1, 4 and 16 requests in flight, each on its own
// client (connection).
func BenchmarkFetchConcurrency(b *testing.B) {
	brokers := testutil.Brokers(b)
	ctx := context.Background()
	s := openStore(b, brokers, nil)
	topic := testutil.Topic(b)
	require.NoError(b, s.CreateNamespace(ctx, topic))
	w := bench.Workload{Topics: 1, Regions: 64, Writers: 64, EntrySize: 2048, EntriesPerCall: 10, Calls: 30, Seed: 3}
	_, err := bench.Run(ctx, w.Plan([]string{topic}), bench.KwalAppender(s), nil)
	require.NoError(b, err)
	var clients []*kgo.Client
	for range 16 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		require.NoError(b, err)
		b.Cleanup(cl.Close)
		clients = append(clients, cl)
	}
	td, err := kadm.NewClient(clients[0]).ListTopics(ctx, topic)
	require.NoError(b, err)
	leader := td[topic].Partitions[0].Leader
	fetch := func(cl *kgo.Client, off int64) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, 1, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, td[topic].ID
		p := kmsg.NewFetchRequestTopicPartition()
		p.FetchOffset, p.PartitionMaxBytes, p.LogStartOffset, p.CurrentLeaderEpoch = off, 1, -1, -1
		t.Partitions = []kmsg.FetchRequestTopicPartition{p}
		req.Topics = []kmsg.FetchRequestTopic{t}
		_, err := cl.Broker(int(leader)).Request(ctx, req)
		require.NoError(b, err)
	}
	for range b.N {
		for _, conc := range []int{1, 4, 16} {
			t0 := time.Now()
			var wg sync.WaitGroup
			sem := make(chan struct{}, conc)
			for i := range 64 {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					fetch(clients[i%conc], int64(i*300))
				}()
			}
			wg.Wait()
			d := time.Since(t0)
			b.Logf("%d in flight: 64 fetches in %v, %v each", conc, d, d/64)
			b.ReportMetric(float64(d.Microseconds())/64, fmt.Sprintf("us/fetch@%d", conc))
		}
	}
}
