package bench

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomLayout is a log of n batches of 1-3 offsets and 1-100 bytes, each
// holding records of one or two of regions 1-4.
func randomLayout(rng *rand.Rand, n int) Layout {
	var l Layout
	var off int64 = rng.Int64N(5)
	for range n {
		b := BatchSpan{Base: off, End: off + 1 + rng.Int64N(3), Bytes: 1 + rng.Int64N(100), Last: map[uint64]int64{}}
		for range 1 + rng.IntN(2) {
			b.Last[1+uint64(rng.IntN(4))] = b.End - 1
		}
		off = b.End
		l.Spans = append(l.Spans, b)
		l.BatchBytes += b.Bytes
	}
	return l
}

// TestFloorRunsProperty protects what the broker floors fetch: every
// wanted batch exactly once, in log order, nothing else but the gaps
// merged, whose bytes stay within the budget; no choice of gaps within the
// budget leaves fewer runs (brute force over every subset); chunks of about
// the chunk size, cut at batch boundaries.
func TestFloorRunsProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for iter := range 3000 {
		l := randomLayout(rng, 1+rng.IntN(12))
		from := map[uint64]int64{}
		for r := uint64(1); r <= 4; r++ {
			if rng.IntN(3) > 0 {
				from[r] = rng.Int64N(l.Spans[len(l.Spans)-1].End + 1)
			}
		}
		extra := []float64{0, 0.2, 1, 5}[rng.IntN(4)]
		var chunk int64
		if rng.IntN(2) == 0 {
			chunk = 1 + rng.Int64N(200)
		}
		needed := l.NeededBytes(from)
		got := l.NeededRuns("t", from, extra, chunk)

		// Which batches are wanted, and the runs before merging.
		want := make([]bool, len(l.Spans))
		var runs [][2]int // span indexes, inclusive
		for i, b := range l.Spans {
			for region, last := range b.Last {
				if f, ok := from[region]; ok && last >= f {
					want[i] = true
				}
			}
			if !want[i] {
				continue
			}
			if n := len(runs); n > 0 && runs[n-1][1] == i-1 {
				runs[n-1][1] = i
			} else {
				runs = append(runs, [2]int{i, i})
			}
		}
		if len(runs) == 0 {
			require.Empty(t, got, "iter %d", iter)
			continue
		}

		// Coverage: the ranges are ascending, disjoint, on batch
		// boundaries, with their batches' bytes; every wanted batch lies in
		// one; the unwanted batches inside them stay within the budget.
		covered := make([]bool, len(l.Spans))
		var extraBytes, prevEnd int64 = 0, -1
		for _, r := range got {
			require.Equal(t, "t", r.Topic)
			require.Greater(t, r.End, r.Start, "iter %d: %+v", iter, got)
			require.GreaterOrEqual(t, r.Start, prevEnd, "iter %d: ascending and disjoint: %+v", iter, got)
			prevEnd = r.End
			var bytes, last int64
			for i, b := range l.Spans {
				if b.Base >= r.Start && b.End <= r.End {
					require.False(t, covered[i], "iter %d: batch %d fetched twice", iter, i)
					covered[i] = true
					bytes += b.Bytes
					last = b.Bytes
					if !want[i] {
						extraBytes += b.Bytes
					}
				} else {
					require.True(t, b.End <= r.Start || b.Base >= r.End, "iter %d: range %+v cuts batch %d", iter, r, i)
				}
			}
			require.Equal(t, bytes, r.Bytes, "iter %d", iter)
			if chunk > 0 {
				require.Less(t, r.Bytes-last, chunk, "iter %d: a chunk ends at the first batch that fills it", iter)
			}
		}
		for i := range want {
			if want[i] {
				require.True(t, covered[i], "iter %d: wanted batch %d missing", iter, i)
			}
		}
		budget := int64(extra * float64(needed))
		require.LessOrEqual(t, extraBytes, budget, "iter %d", iter)

		// Fewest runs: brute force over every set of gaps to merge.
		gaps := make([]int64, len(runs)-1)
		for k := range gaps {
			for i := runs[k][1] + 1; i < runs[k+1][0]; i++ {
				gaps[k] += l.Spans[i].Bytes
			}
		}
		best := 0
		for set := uint(0); set < 1<<len(gaps); set++ {
			var sum int64
			for k := range gaps {
				if set&(1<<k) != 0 {
					sum += gaps[k]
				}
			}
			if sum <= budget {
				best = max(best, bits.OnesCount(set))
			}
		}
		unchunked := l.NeededRuns("t", from, extra, 0)
		require.Len(t, unchunked, len(runs)-best, "iter %d: gaps %v budget %d", iter, gaps, budget)
	}
}

// TestScanAndRegionRuns: a scan covers every batch; a region's runs are
// its batches, merged only where they touch.
func TestScanAndRegionRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for iter := range 500 {
		l := randomLayout(rng, 1+rng.IntN(30))
		scan := l.ScanRuns("t", 0)
		require.Len(t, scan, 1)
		require.Equal(t, OffsetRange{Topic: "t", Start: l.Spans[0].Base, End: l.Spans[len(l.Spans)-1].End, Bytes: l.BatchBytes}, scan[0])
		var sum int64
		for _, r := range l.ScanRuns("t", 150) {
			sum += r.Bytes
		}
		require.Equal(t, l.BatchBytes, sum, "iter %d", iter)

		runs := l.RegionRuns("t", 2)
		var n, bytes int64
		for i, b := range l.Spans {
			if _, ok := b.Last[2]; ok {
				bytes += b.Bytes
				if i == 0 || !hasRegion(l.Spans[i-1], 2) {
					n++
				}
			}
		}
		require.Len(t, runs, int(n), "iter %d", iter)
		var got int64
		for _, r := range runs {
			got += r.Bytes
		}
		require.Equal(t, bytes, got, "iter %d", iter)
	}
}

func hasRegion(b BatchSpan, r uint64) bool { _, ok := b.Last[r]; return ok }
