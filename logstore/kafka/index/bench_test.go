package index

import (
	"context"
	"fmt"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/stretchr/testify/require"
)

// workload is a way regions' records fall into a topic.
type workload struct {
	name    string
	regions int
	runLen  int64
}

var workloads = []workload{
	{"runs_of_10_over_64_regions", 64, 10},
	{"interleaved_single_over_64_regions", 64, 1},
}

// runs returns the runs of n entries of the workload from offset w.
func (wl workload) runs(w int64, n int) []Run {
	out := make([]Run, 0, n/int(wl.runLen)+1)
	for i := 0; len(out)*int(wl.runLen) < n; i++ {
		out = append(out, Run{Start: w, Count: wl.runLen, Region: uint64(i % wl.regions)})
		w += wl.runLen
	}
	return out
}

// TestBytesPerEntry measures checkpoint bytes per indexed entry for both
// workloads: a base of the whole index; deltas of 64,000 entries each; what
// is on disk after ten incremental checkpoints (base plus deltas, with
// compaction); and all that those checkpoints wrote.
func TestBytesPerEntry(t *testing.T) {
	t.Parallel()
	const entries, steps = 640_000, 10
	for _, wl := range workloads {
		st := newMemStore()
		g := newCollector(t, Options{Store: st})
		g.Start("t", 0, 0)
		g.Observe("t", wl.runs(0, entries))
		require.NoError(t, g.Checkpoint(bg))
		base := float64(st.size("")) / entries

		st2 := newMemStore()
		g2 := newCollector(t, Options{Store: st2})
		g2.Start("t", 0, 0)
		tp := g2.topic("t", false)
		var written, deltas int64
		for i := range steps {
			g2.Observe("t", wl.runs(int64(i)*entries/steps, entries/steps))
			if i > 0 {
				tp.mu.Lock()
				deltas += int64(len(appendFile(nil, tp.deltaLocked(2, 1, int64(i)*entries/steps))))
				tp.mu.Unlock()
			}
			n, err := g2.checkpointAll(bg)
			require.NoError(t, err)
			written += n
		}
		delta := float64(deltas) / (entries * (steps - 1) / steps)
		disk := float64(st2.size("")) / entries
		wrote := float64(written) / entries
		t.Logf("%s: base %.3f, deltas %.3f, on disk after %d checkpoints %.3f (%d files), written %.3f bytes/entry",
			wl.name, base, delta, steps, disk, len(st2.names()), wrote)
		require.LessOrEqual(t, base, 2.0)
		require.LessOrEqual(t, delta, 2.0)
		require.LessOrEqual(t, disk, 2.0)
	}
}

func BenchmarkCheckpointBytesPerEntry(b *testing.B) {
	for _, wl := range workloads {
		b.Run(wl.name, func(b *testing.B) {
			const entries = 640_000
			g := newCollector(b, Options{})
			g.Start("t", 0, 0)
			g.Observe("t", wl.runs(0, entries))
			tp := g.topic("t", false)
			var n int
			for b.Loop() {
				tp.mu.RLock()
				n = len(appendFile(nil, tp.baseLocked(1)))
				tp.mu.RUnlock()
			}
			b.ReportMetric(float64(n)/entries, "bytes/entry")
		})
	}
}

// BenchmarkRegionSetMemory compares the memory of the region sets: runList
// against roaring64 bitmaps with run optimisation.
func BenchmarkRegionSetMemory(b *testing.B) {
	const entries = 640_000
	for _, wl := range workloads {
		runs := wl.runs(0, entries)
		b.Run("runlist/"+wl.name, func(b *testing.B) {
			var bytes int
			for b.Loop() {
				sets := make([]runList, wl.regions)
				for _, r := range runs {
					sets[r.Region].appendRun(r.Start, r.Start+r.Count)
				}
				bytes = 0
				for i := range sets {
					bytes += sets[i].memBytes()
				}
			}
			b.ReportMetric(float64(bytes)/entries, "bytes/entry")
		})
		b.Run("roaring64/"+wl.name, func(b *testing.B) {
			var bytes uint64
			for b.Loop() {
				sets := make([]*roaring64.Bitmap, wl.regions)
				for i := range sets {
					sets[i] = roaring64.New()
				}
				for _, r := range runs {
					sets[r.Region].AddRange(uint64(r.Start), uint64(r.Start+r.Count))
				}
				bytes = 0
				for _, s := range sets {
					s.RunOptimize()
					bytes += s.GetSizeInBytes()
				}
			}
			b.ReportMetric(float64(bytes)/entries, "bytes/entry")
		})
	}
}

// BenchmarkObserve: acknowledged appends of runs, in order.
func BenchmarkObserve(b *testing.B) {
	for _, wl := range workloads {
		b.Run(wl.name, func(b *testing.B) {
			g := newCollector(b, Options{})
			g.Start("t", 0, 0)
			batch := wl.runs(0, 640)
			w := int64(0)
			for b.Loop() {
				for i := range batch {
					batch[i].Start = w
					w += batch[i].Count
				}
				g.Observe("t", batch)
			}
			b.ReportMetric(float64(len(batch)), "runs/op")
			b.ReportMetric(float64(b.N)*640/b.Elapsed().Seconds(), "entries/s")
		})
	}
	b.Run("out_of_order_pairs", func(b *testing.B) {
		g := newCollector(b, Options{})
		g.Start("t", 0, 0)
		w := int64(0)
		for b.Loop() {
			g.Observe("t", []Run{{Start: w + 10, Count: 10, Region: 2}})
			g.Observe("t", []Run{{Start: w, Count: 10, Region: 1}})
			w += 20
		}
	})
}

// indexOf builds a topic of the workload with the given entries.
func indexOf(b *testing.B, wl workload, entries int) (*Collector, int64) {
	g := newCollector(b, Options{})
	g.Start("t", 0, 0)
	g.Observe("t", wl.runs(0, entries))
	_, w := span2(g.topic("t", false))
	return g, w
}

// BenchmarkPlan: replaying one region of 64 sharing a topic of 1M entries
// from the start, and opening 1,000 regions that have no records.
func BenchmarkPlan(b *testing.B) {
	for _, wl := range workloads {
		b.Run("1_of_64/"+wl.name, func(b *testing.B) {
			g, w := indexOf(b, wl, 1<<20)
			from := map[uint64]int64{7: 0}
			var p Plan
			for b.Loop() {
				p = g.Plan("t", from, w)
			}
			b.ReportMetric(float64(len(p.Ranges)), "ranges")
		})
		b.Run("1_of_64_last_1pct/"+wl.name, func(b *testing.B) {
			g, w := indexOf(b, wl, 1<<20)
			from := map[uint64]int64{7: w - w/100}
			for b.Loop() {
				g.Plan("t", from, w)
			}
		})
	}
	b.Run("1000_idle_regions", func(b *testing.B) {
		g, w := indexOf(b, workloads[0], 1<<20)
		from := make(map[uint64]int64, 1000)
		for i := range uint64(1000) {
			from[1000+i] = 0
		}
		var p Plan
		for b.Loop() {
			p = g.Plan("t", from, w+5)
		}
		b.ReportMetric(float64(len(p.Ranges)), "ranges")
	})
}

// BenchmarkCheckpoint: the cost of a checkpoint of a topic of 1M indexed
// entries after 640 more (a delta), and of a whole base.
func BenchmarkCheckpoint(b *testing.B) {
	for _, wl := range workloads {
		b.Run("delta_640_entries/"+wl.name, func(b *testing.B) {
			st := newMemStore()
			g := newCollector(b, Options{Store: st})
			g.Start("t", 0, 0)
			w := int64(1 << 20)
			g.Observe("t", wl.runs(0, int(w)))
			require.NoError(b, g.Checkpoint(bg))
			var written int64
			for b.Loop() {
				g.Observe("t", wl.runs(w, 640))
				w += 640
				n, err := g.checkpointAll(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				written += n
			}
			// bytes/op includes the bases rewritten by compaction.
			b.ReportMetric(float64(written)/float64(b.N), "bytes/op")
			b.ReportMetric(metricValue(g.m.checkpointBytes.WithLabelValues("delta"))/
				metricValue(g.m.checkpointFiles.WithLabelValues("delta")), "bytes/delta")
		})
		b.Run("base_1M_entries/"+wl.name, func(b *testing.B) {
			g, _ := indexOf(b, wl, 1<<20)
			tp := g.topic("t", false)
			st := newMemStore()
			var n int64
			for b.Loop() {
				tp.mu.Lock()
				tp.needBase = true
				tp.mu.Unlock()
				var err error
				if n, err = tp.checkpoint(bg, st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}

// BenchmarkLoad: New over a store holding a topic of 1M entries.
func BenchmarkLoad(b *testing.B) {
	for _, wl := range workloads {
		b.Run(wl.name, func(b *testing.B) {
			st := newMemStore()
			g := newCollector(b, Options{Store: st})
			g.Start("t", 0, 0)
			g.Observe("t", wl.runs(0, 1<<20))
			require.NoError(b, g.Close(bg))
			for b.Loop() {
				g2, err := New(Options{Store: st})
				if err != nil {
					b.Fatal(err)
				}
				if g2.topic("t", false) == nil {
					b.Fatal(fmt.Errorf("not loaded"))
				}
			}
		})
	}
}

// memBytes estimates the heap bytes the list holds (for
// BenchmarkRegionSetMemory).
func (l *runList) memBytes() int {
	const chunkHeader = 8 + 8 + 8 + 8 + 24
	n := 0
	for _, c := range l.chunks {
		n += cap(c.data)
	}
	return n + cap(l.chunks)*chunkHeader
}
