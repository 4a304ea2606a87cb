package kafka_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// BenchmarkReplay writes 64 regions to one topic, either concurrently (one
// writer per region, the write path's batch layout decides what a replay
// must fetch) or one region after another, then replays one region with
// the index and by full scan, and reads the whole topic with a raw
// franz-go consumer. It reports the speedup of the indexed replay, the
// bytes each fetched, full-scan replay throughput relative to the raw
// consumer, and the peak heap of a full-scan replay (which must not grow
// with the topic). Run with -benchtime=1x.
func BenchmarkReplay(b *testing.B) {
	for _, tc := range []struct {
		name       string
		concurrent bool
		calls      int
	}{
		{"concurrent-39MB", true, 30},
		{"sequential-39MB", false, 30},
		{"concurrent-131MB", true, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			brokers := testutil.Brokers(b)
			for range b.N {
				replayOnce(b, brokers, tc.concurrent, tc.calls)
			}
		})
	}
}

func replayOnce(b *testing.B, brokers []string, concurrent bool, calls int) {
	ctx := context.Background()
	s := openStore(b, brokers, func(c *kafka.Config) { c.ProduceLanes = 16 })
	topic := testutil.Topic(b)
	require.NoError(b, s.CreateNamespace(ctx, topic))
	w := bench.Workload{Topics: 1, Regions: 64, Writers: 64, EntrySize: 2048, EntriesPerCall: 10, Calls: calls, Seed: 3}
	plan := w.Plan([]string{topic})
	if concurrent {
		_, err := bench.Run(ctx, plan, bench.KwalAppender(s), nil)
		require.NoError(b, err)
	} else {
		for _, calls := range plan {
			_, err := bench.Run(ctx, [][]bench.Call{calls}, bench.KwalAppender(s), nil)
			require.NoError(b, err)
		}
	}
	plan = nil // the workload's data must not count in the replay's heap
	region := map[logstore.RegionID]logstore.EntryID{17: 0}
	idx, ist := timeRead(b, s, topic, region, kafka.ReadOptions{}, 5, w.Calls*w.EntriesPerCall)
	full, fst := timeRead(b, s, topic, region, kafka.ReadOptions{NoIndex: true}, 5, w.Calls*w.EntriesPerCall)
	var raws []time.Duration
	var raw bench.ConsumeResult
	for range 3 {
		var err error
		raw, err = bench.RawConsume(ctx, brokers, topic, 16<<20)
		require.NoError(b, err)
		raws = append(raws, raw.Elapsed)
	}
	sort.Slice(raws, func(i, j int) bool { return raws[i] < raws[j] })
	peak := bench.PeakHeap(func() {
		for _, err := range s.ReadWith(ctx, topic, region, kafka.ReadOptions{NoIndex: true}) {
			require.NoError(b, err)
		}
	})
	b.ReportMetric(float64(full)/float64(idx), "replay_speedup")
	b.ReportMetric(float64(ist.FetchedBytes)/float64(ist.EntryBytes), "indexed-fetched/own")
	b.ReportMetric(float64(fst.FetchedBytes)/float64(fst.EntryBytes), "scan-fetched/own")
	b.ReportMetric(float64(raws[1])/float64(full), "scan_vs_raw_consumer")
	b.ReportMetric(float64(peak)/(1<<20), "scan-peak-heap-MiB")
	b.Logf("topic %.0f MB: indexed %v (%d fetches, %d B) | full scan %v (%d fetches, %d B) | raw consumer %v (%.0f MB/s) | speedup %.1fx | scan vs raw %.2f | scan peak heap %.1f MiB",
		float64(raw.Bytes)/1e6, idx, ist.Fetches, ist.FetchedBytes, full, fst.Fetches, fst.FetchedBytes, raws[1],
		float64(raw.Bytes)/1e6/raws[1].Seconds(), float64(full)/float64(idx), float64(raws[1])/float64(full), float64(peak)/(1<<20))
	_ = fmt.Sprint()
}

// timeRead runs a read runs times and returns its median time and the
// stats of the last run; want (when >= 0) is the entry count each run must
// yield.
func timeRead(b testing.TB, s *kafka.LogStore, topic string, from map[logstore.RegionID]logstore.EntryID, opts kafka.ReadOptions, runs, want int) (time.Duration, kafka.ReadStats) {
	b.Helper()
	var ds []time.Duration
	var st kafka.ReadStats
	for range runs {
		opts.Stats = &st
		t0 := time.Now()
		n := 0
		for _, err := range s.ReadWith(context.Background(), topic, from, opts) {
			require.NoError(b, err)
			n++
		}
		ds = append(ds, time.Since(t0))
		if want >= 0 {
			require.Equal(b, want, n)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], st
}
