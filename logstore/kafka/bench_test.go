package kafka_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// BenchmarkAppendVsRaw runs a datanode-like append workload through kwal
// and through a raw franz-go producer (same records, same batch limit, same
// concurrency) on the same broker in the same run, and reports the ratio,
// the batch layout (regions per batch, replay selectivity) of both, and the
// ratio to a raw producer writing everything asynchronously from one
// goroutine. Run with -benchtime=1x; every iteration uses fresh topics.
func BenchmarkAppendVsRaw(b *testing.B) {
	for _, wl := range []struct {
		name string
		w    bench.Workload
	}{
		{"32w-16r-small", bench.Workload{Topics: 1, Regions: 16, Writers: 32, EntrySize: 256, EntriesPerCall: 4, Calls: 200, Seed: 1}},
		{"64w-64r-10x2KiB", bench.Workload{Topics: 1, Regions: 64, Writers: 64, EntrySize: 2048, EntriesPerCall: 10, Calls: 30, Seed: 2}},
		{"64w-64r-64t-10x2KiB", bench.Workload{Topics: 64, Regions: 64, Writers: 64, EntrySize: 2048, EntriesPerCall: 10, Calls: 100, Seed: 3}},
	} {
		b.Run(wl.name, func(b *testing.B) {
			brokers := testutil.Brokers(b)
			for range b.N {
				r := compareAppend(b, brokers, wl.w, nil)
				b.ReportMetric(r.kwal.MBps(), "kwal-MB/s")
				b.ReportMetric(r.raw.MBps(), "raw-MB/s")
				b.ReportMetric(r.kwal.MBps()/r.raw.MBps(), "append_vs_raw")
				b.ReportMetric(r.kwal.MBps()/r.async.MBps(), "append_vs_raw_async")
				b.ReportMetric(r.kwalLayout.Selectivity, "kwal-selectivity")
				b.ReportMetric(r.rawLayout.Selectivity, "raw-selectivity")
				b.ReportMetric(r.kwalLayout.RegionsPerBatch, "kwal-regions/batch")
				b.ReportMetric(float64(r.kwal.Quantile(0.99).Microseconds()), "kwal-p99-µs")
				b.ReportMetric(float64(r.raw.Quantile(0.99).Microseconds()), "raw-p99-µs")
			}
		})
	}
}

type appendComparison struct {
	kwal, raw, async      bench.AppendResult
	kwalLayout, rawLayout bench.Layout
}

func compareAppend(b *testing.B, brokers []string, w bench.Workload, mutate func(*kafka.Config)) appendComparison {
	b.Helper()
	ctx := context.Background()
	const batch = 1 << 20
	topics := func(tag string) []string {
		out := make([]string, w.Topics)
		base := testutil.Topic(b)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%s-%d", base, tag, i)
		}
		return out
	}
	var c appendComparison

	s := openStore(b, brokers, func(cfg *kafka.Config) {
		cfg.MaxBatchBytes = batch
		cfg.ProduceLanes = 16
		cfg.Compression = "none" // as raw's below: the payload is random bytes
		envInt("KWAL_BENCH_LANES", &cfg.ProduceLanes)
		envInt("KWAL_BENCH_MAX_REGIONS", &cfg.MaxRegionsPerBatch)
		if mutate != nil {
			mutate(cfg)
		}
	})
	kt := topics("kwal")
	for _, t := range kt {
		require.NoError(b, s.CreateNamespace(ctx, t))
	}
	var err error
	c.kwal, err = bench.Run(ctx, w.Plan(kt), bench.KwalAppender(s), nil)
	require.NoError(b, err)

	cl, err := bench.RawClient(brokers, bench.RawOptions{MaxBatchBytes: batch, Compression: kgo.NoCompression()})
	require.NoError(b, err)
	defer cl.Close()
	rt := topics("raw")
	for _, t := range rt {
		require.NoError(b, s.CreateNamespace(ctx, t))
	}
	c.raw, err = bench.Run(ctx, w.Plan(rt), bench.RawAppender(cl, batch), nil)
	require.NoError(b, err)
	at := topics("async")
	for _, t := range at {
		require.NoError(b, s.CreateNamespace(ctx, t))
	}
	c.async, err = bench.RawAsync(ctx, cl, w.Plan(at), batch)
	require.NoError(b, err)

	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c.kwalLayout, err = bench.MeasureLayout(lctx, brokers, kt[0])
	require.NoError(b, err)
	c.rawLayout, err = bench.MeasureLayout(lctx, brokers, rt[0])
	require.NoError(b, err)
	b.Logf("kwal %.1f MB/s p50 %v p99 %v | raw %.1f MB/s p50 %v p99 %v | async %.1f MB/s | kwal layout: %d batches, %.2f regions/batch, selectivity %.2f (max %.2f) | raw layout: %d batches, %.2f regions/batch, selectivity %.2f",
		c.kwal.MBps(), c.kwal.Quantile(0.5), c.kwal.Quantile(0.99), c.raw.MBps(), c.raw.Quantile(0.5), c.raw.Quantile(0.99), c.async.MBps(),
		c.kwalLayout.Batches, c.kwalLayout.RegionsPerBatch, c.kwalLayout.Selectivity, c.kwalLayout.MaxSelectivity,
		c.rawLayout.Batches, c.rawLayout.RegionsPerBatch, c.rawLayout.Selectivity)
	_ = logstore.EntryID(0)
	return c
}

// envInt overrides *v from an environment variable, for exploring knobs
// with the same benchmark.
func envInt(name string, v *int) {
	if s := os.Getenv(name); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			*v = n
		}
	}
}

// BenchmarkAppendIndexOverhead runs the 64-region workload with the index
// on and off, alternating, and reports the throughput ratio (the index
// collects every acknowledged record; the target is at least 0.97).
func BenchmarkAppendIndexOverhead(b *testing.B) {
	brokers := testutil.Brokers(b)
	ctx := context.Background()
	w := bench.Workload{Topics: 1, Regions: 64, Writers: 64, EntrySize: 2048, EntriesPerCall: 10, Calls: 30, Seed: 5}
	stores := map[bool]*kafka.LogStore{}
	for _, off := range []bool{false, true} {
		dir := b.TempDir()
		stores[off] = openStore(b, brokers, func(c *kafka.Config) { c.DisableIndex = off; c.IndexDir = dir; c.ProduceLanes = 16 })
	}
	for range b.N {
		var on, off time.Duration
		for round := range 16 {
			disabled := round%2 == 1
			topic := fmt.Sprintf("%s-%d", testutil.Topic(b), round)
			s := stores[disabled]
			require.NoError(b, s.CreateNamespace(ctx, topic))
			res, err := bench.Run(ctx, w.Plan([]string{topic}), bench.KwalAppender(s), nil)
			require.NoError(b, err)
			if disabled {
				off += res.Elapsed
			} else {
				on += res.Elapsed
			}
		}
		b.ReportMetric(float64(off)/float64(on), "index_on_vs_off")
		b.Logf("index on %v, off %v over 8 rounds each: throughput with the index = %.3f of without", on, off, float64(off)/float64(on))
	}
}
