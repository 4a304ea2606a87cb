package index

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

func reg(id uint64, start, count int64) Run { return Run{Start: start, Count: count, Region: id} }
func foreign(start, count int64) Run        { return Run{Start: start, Count: count, Foreign: true} }

func TestObserveAdvancesThroughKnownOffsetsOnly(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 10), reg(2, 10, 5), foreign(15, 5)})
	tp := g.topic("t", false)
	c, w := span2(tp)
	require.Equal(t, [2]int64{0, 20}, [2]int64{c, w})

	// Out of order: 30.. arrives before 20..
	g.Observe("t", []Run{reg(1, 30, 10)})
	_, w = span2(tp)
	require.Equal(t, int64(20), w, "W must not cross the gap [20,30)")
	g.Observe("t", []Run{reg(2, 20, 10), reg(2, 20, 10), reg(1, 0, 3)}) // with repeats
	_, w = span2(tp)
	require.Equal(t, int64(40), w)
	require.Equal(t, []span{{0, 10}, {30, 40}}, regionRuns(g, "t", 1))
	require.Equal(t, []span{{10, 15}, {20, 30}}, regionRuns(g, "t", 2))
	ts := tp.describe(false)
	require.Equal(t, int64(35), ts.Entries)
	require.Equal(t, 4, ts.Runs)
}

func TestObserveBeforeStartWaits(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Observe("t", []Run{reg(1, 90, 20), reg(2, 110, 5), foreign(200, 1)})
	g.Start("t", 0, 100)
	require.Equal(t, []span{{100, 110}}, regionRuns(g, "t", 1))
	require.Equal(t, []span{{110, 115}}, regionRuns(g, "t", 2))
	_, w := span2(g.topic("t", false))
	require.Equal(t, int64(115), w)
}

func TestObserveIgnoresInvalidRuns(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Start("t", 0, 0)
	g.Observe("t", []Run{{Start: -1, Count: 5}, {Start: 0, Count: 0}, {Start: 1 << 62, Count: 1 << 62}, reg(1, 0, 2)})
	require.Equal(t, []span{{0, 2}}, regionRuns(g, "t", 1))
	require.Equal(t, 3.0, metricValue(g.m.invalidRuns))
}

func TestStart(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Start("t", 0, 50)
	tp := g.topic("t", false)
	c, w := span2(tp)
	require.Equal(t, [2]int64{50, 50}, [2]int64{c, w}, "no coverage: the span starts at end")
	g.Observe("t", []Run{reg(1, 50, 10), reg(2, 60, 10), reg(1, 70, 10)})

	// The log end moved on: nothing changes (the gap [80,100) is unaccounted).
	g.Start("t", 0, 100)
	c, w = span2(tp)
	require.Equal(t, [2]int64{50, 80}, [2]int64{c, w})

	// Retention deleted the log below 65.
	g.Start("t", 65, 100)
	c, w = span2(tp)
	require.Equal(t, [2]int64{65, 80}, [2]int64{c, w})
	require.Equal(t, []span{{70, 80}}, regionRuns(g, "t", 1))
	require.Equal(t, []span{{65, 70}}, regionRuns(g, "t", 2))

	// The log ends below W: the topic was recreated.
	g.Start("t", 0, 10)
	c, w = span2(tp)
	require.Equal(t, [2]int64{10, 10}, [2]int64{c, w})
	require.Nil(t, regionRuns(g, "t", 1))
	require.Equal(t, 1.0, metricValue(g.m.discarded.WithLabelValues("end_below_watermark")))

	// logStart above W.
	g.Observe("t", []Run{reg(3, 10, 5)})
	g.Start("t", 40, 60)
	c, w = span2(tp)
	require.Equal(t, [2]int64{40, 40}, [2]int64{c, w})
	require.Nil(t, regionRuns(g, "t", 3))
	require.Empty(t, tp.regions)
}

func TestPlan(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{MergeGap: 5})
	g.Start("t", 0, 100)
	// Region 1 at [100,110) [130,140) [143,150), region 2 between.
	g.Observe("t", []Run{
		reg(1, 100, 10), reg(2, 110, 20), reg(1, 130, 10), reg(2, 140, 3), reg(1, 143, 7), foreign(150, 50),
	})
	cases := []struct {
		name string
		from map[uint64]int64
		end  int64
		want []Range
	}{
		{"empty request", map[uint64]int64{}, 300, nil},
		{"from at end", map[uint64]int64{1: 300}, 300, nil},
		{"one region", map[uint64]int64{1: 100}, 200, []Range{{100, 110, false}, {130, 150, false}}},
		{"one region from inside a run", map[uint64]int64{1: 135}, 200, []Range{{135, 150, false}}},
		{"tail unaccounted", map[uint64]int64{1: 100}, 250, []Range{{100, 110, false}, {130, 150, false}, {200, 250, true}}},
		{"history before C", map[uint64]int64{1: 40}, 200, []Range{{40, 110, true}, {130, 150, false}}},
		{"end inside", map[uint64]int64{1: 100}, 135, []Range{{100, 110, false}, {130, 135, false}}},
		{"two regions", map[uint64]int64{1: 100, 2: 100}, 200, []Range{{100, 150, false}}},
		{"two regions, own starts", map[uint64]int64{1: 135, 2: 141}, 200, []Range{{135, 150, false}}},
		{"region without runs", map[uint64]int64{9: 100}, 200, nil},
		{"region without runs, tail", map[uint64]int64{9: 100}, 210, []Range{{200, 210, true}}},
	}
	for _, c := range cases {
		p := g.Plan("t", c.from, c.end)
		require.Equal(t, c.want, p.Ranges, c.name)
	}
	// Unknown topic.
	require.Equal(t, []Range{{7, 20, true}}, g.Plan("nope", map[uint64]int64{1: 9, 2: 7}, 20).Ranges)
	require.Empty(t, g.Plan("nope", map[uint64]int64{1: 30}, 20).Ranges)
}

func TestPlanMergeGap(t *testing.T) {
	t.Parallel()
	runs := []Run{reg(1, 0, 1), foreign(1, 2), reg(1, 3, 1), foreign(4, 3), reg(1, 7, 1), foreign(8, 100)}
	for _, c := range []struct {
		gap  int64
		want []Range
	}{
		{-1, []Range{{0, 1, false}, {3, 4, false}, {7, 8, false}}},
		{2, []Range{{0, 4, false}, {7, 8, false}}},
		{3, []Range{{0, 8, false}}},
		{0, []Range{{0, 8, false}}}, // the default
	} {
		g := newCollector(t, Options{MergeGap: c.gap})
		g.Start("t", 0, 0)
		g.Observe("t", runs)
		require.Equal(t, c.want, g.Plan("t", map[uint64]int64{1: 0}, 108).Ranges, "gap %d", c.gap)
	}
	// A scan near an indexed range absorbs it.
	g := newCollector(t, Options{MergeGap: 4})
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 1), foreign(1, 10), reg(1, 11, 1), foreign(12, 2)})
	require.Equal(t, []Range{{0, 1, false}, {11, 20, true}}, g.Plan("t", map[uint64]int64{1: 0}, 20).Ranges)
}

func TestObsoleteMakesTheDroppedPartScan(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{MergeGap: -1})
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 10), reg(2, 10, 90), reg(1, 100, 10), reg(2, 110, 90), reg(1, 200, 10)})
	g.Obsolete("t", 1, 150)
	require.Equal(t, []span{{200, 210}}, regionRuns(g, "t", 1))
	// Asking from before the dropped point scans [from, 150).
	require.Equal(t, []Range{{50, 150, true}, {200, 210, false}}, g.Plan("t", map[uint64]int64{1: 50}, 210).Ranges)
	require.Equal(t, []Range{{200, 210, false}}, g.Plan("t", map[uint64]int64{1: 150}, 210).Ranges)
	// Later runs of the region below its dropped point are not indexed.
	g.Obsolete("t", 3, 260)
	g.Observe("t", []Run{reg(3, 210, 100)})
	require.Equal(t, []span{{260, 310}}, regionRuns(g, "t", 3))
	require.Equal(t, []Range{{220, 310, true}}, g.Plan("t", map[uint64]int64{3: 220}, 310).Ranges)
}

// TestObsoleteBeforeARebuildingScan: a store that lost its index starts
// coverage at the log end, then scans the log from its start; the Obsolete
// points it learns from marks during the scan (below C at that moment)
// still drop the region's records below them once the scan lowers C.
func TestObsoleteBeforeARebuildingScan(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Start("t", 0, 100)
	g.Obsolete("t", 1, 50)
	g.ObserveScan("t", 0, 100, []Run{reg(1, 0, 60), foreign(60, 40)})
	require.Equal(t, []span{{50, 60}}, regionRuns(g, "t", 1))
	ts, _ := g.Stats("t", true)
	require.Equal(t, int64(0), ts.C)
	require.Equal(t, int64(50), ts.Regions[0].First)
}

func TestPlanIdleRegionsCostsOnlyUnaccounted(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Start("t", 0, 1000)
	for i := range int64(100) {
		g.Observe("t", []Run{reg(uint64(i%7), 1000+i*10, 10)})
	}
	from := make(map[uint64]int64)
	for id := uint64(100); id < 1100; id++ {
		from[id] = 1000
	}
	require.Empty(t, g.Plan("t", from, 2000).Ranges)
	require.Equal(t, []Range{{2000, 2010, true}}, g.Plan("t", from, 2010).Ranges)
}

func TestPendingOverflowDropsHighest(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.Start("t", 0, 0)
	runs := make([]Run, 0, maxPendingRuns+10)
	for i := range int64(maxPendingRuns + 10) {
		runs = append(runs, reg(uint64(i%2), 10+i, 1)) // alternate regions: no merging
	}
	g.Observe("t", runs)
	tp := g.topic("t", false)
	require.Len(t, tp.pending, maxPendingRuns)
	require.Equal(t, 10.0, metricValue(g.m.pendingOverflow))
	// A run below the others pushes out the highest one.
	g.Observe("t", []Run{foreign(5, 5)})
	g.Observe("t", []Run{foreign(0, 5)})
	require.Equal(t, 11.0, metricValue(g.m.pendingOverflow))
	_, w := span2(tp)
	require.Equal(t, int64(10+maxPendingRuns-1), w, "W stops where the dropped runs begin")
}

func TestMetricsRegistered(t *testing.T) {
	t.Parallel()
	r := prometheus.NewPedanticRegistry()
	g := newCollector(t, Options{Registerer: r})
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 10)})
	// A second Collector on the same registerer shares the collectors.
	g2 := newCollector(t, Options{Registerer: r})
	g2.Start("u", 0, 0)
	g2.Observe("u", []Run{reg(1, 0, 5)})
	require.Equal(t, 15.0, metricValue(g.m.entries))
	require.Equal(t, 3, gatherCount(t, r, "kwal_index_watermark", "kwal_index_entries_indexed_total"))
	require.NoError(t, g.Drop(context.Background(), "t"))
	require.Equal(t, 1, gatherCount(t, r, "kwal_index_watermark"))
}

// TestMetricsUnregisteredOnClose: the metrics stay registered while any
// Collector on the registerer is open, and are gone once the last closed;
// a Collector opened after that registers its own, counting from zero.
func TestMetricsUnregisteredOnClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := prometheus.NewPedanticRegistry()
	g1, err := New(Options{Registerer: r})
	require.NoError(t, err)
	g2, err := New(Options{Registerer: r})
	require.NoError(t, err)
	g1.Start("t", 0, 0)
	g1.Observe("t", []Run{reg(1, 0, 10)})
	require.NoError(t, g1.Close(ctx))
	require.NoError(t, g1.Close(ctx)) // idempotent: releases once
	require.Equal(t, 2, gatherCount(t, r, "kwal_index_watermark", "kwal_index_entries_indexed_total"), "g2 still uses them")
	require.NoError(t, g2.Close(ctx))
	require.Equal(t, 0, gatherCount(t, r, "kwal_index_watermark", "kwal_index_entries_indexed_total"))
	mfs, err := r.Gather()
	require.NoError(t, err)
	require.Empty(t, mfs, "every kwal_index_* metric is unregistered")

	g3, err := New(Options{Registerer: r})
	require.NoError(t, err)
	g3.Start("u", 0, 0)
	g3.Observe("u", []Run{reg(1, 0, 4)})
	require.Equal(t, 4.0, metricValue(g3.m.entries))
	require.Equal(t, 2, gatherCount(t, r, "kwal_index_watermark", "kwal_index_entries_indexed_total"))
	require.NoError(t, g3.Close(ctx))
}

func TestOptionsValidated(t *testing.T) {
	t.Parallel()
	_, err := New(Options{CheckpointInterval: -1})
	require.ErrorContains(t, err, "CheckpointInterval")
}

func TestCloseAndErrClosed(t *testing.T) {
	t.Parallel()
	g, err := New(Options{Store: newMemStore(), CheckpointInterval: 1 << 40})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, g.Close(ctx))
	require.NoError(t, g.Close(ctx))
	require.ErrorIs(t, g.Checkpoint(ctx), ErrClosed)
	require.ErrorIs(t, g.Drop(ctx, "t"), ErrClosed)
	g.Start("t", 0, 0) // still works in memory
	g.Observe("t", []Run{reg(1, 0, 1)})
	require.Equal(t, []Range{{0, 1, false}}, g.Plan("t", map[uint64]int64{1: 0}, 1).Ranges)
}

// metricValue sums the values of a collector's counters and gauges.
func metricValue(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var v float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			panic(err)
		}
		v += d.GetCounter().GetValue() + d.GetGauge().GetValue()
	}
	return v
}

// gatherCount counts the samples of the named metric families.
func gatherCount(t *testing.T, g prometheus.Gatherer, names ...string) int {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	n := 0
	for _, f := range fams {
		for _, name := range names {
			if f.GetName() == name {
				n += len(f.GetMetric())
			}
		}
	}
	return n
}

// TestLogStartsDropsDeletedOffsets: LogStarts raises C to the new log start
// (retention deleted below it) and drops the offsets below, without the log
// end Start needs; it does nothing for a topic without coverage or below C.
func TestLogStartsDropsDeletedOffsets(t *testing.T) {
	t.Parallel()
	g := newCollector(t, Options{})
	g.LogStarts("t", 5) // unknown topic
	_, ok := g.Stats("t", false)
	require.False(t, ok)
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 10), reg(2, 10, 10)})
	g.LogStarts("t", 15)
	require.Empty(t, regionRuns(g, "t", 1))
	require.Equal(t, []span{{15, 20}}, regionRuns(g, "t", 2))
	g.LogStarts("t", 3)
	ts, _ := g.Stats("t", false)
	require.Equal(t, int64(15), ts.C)
	require.Equal(t, int64(20), ts.W)
}

// TestHealthyLoadIsQuiet: loading healthy checkpoints logs nothing a
// datanode sees by default (INFO and above): a line per topic at every
// start says nothing that needs attention.
func TestHealthyLoadIsQuiet(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g, err := New(Options{Store: st})
	require.NoError(t, err)
	for _, topic := range []string{"a", "b", "c"} {
		g.Start(topic, 0, 0)
		g.Observe(topic, []Run{reg(1, 0, 10)})
	}
	require.NoError(t, g.Close(t.Context()))
	var logs strings.Builder
	g, err = New(Options{Store: st, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	require.NoError(t, err)
	require.NoError(t, g.Close(t.Context()))
	require.Empty(t, logs.String())
}
