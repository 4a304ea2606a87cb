package replay

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// TestEstimate protects what a pass learns from its fetches: bytes per
// offset from every fetch (a seed from another topic replaced by the first
// measurement, not averaged with it), a small fetch's time as the latency,
// a big one's as the rate beyond the latency; and the gap rule: read
// through the offsets that stream in less than a fetch's latency, priced
// with the priors (500 µs, 1 GB/s) until each is measured. A chunk asks
// for the bytes that decompress to it, at the expansion measured.
func TestEstimate(t *testing.T) {
	e := estimate{perOff: 5000, seeded: true}
	require.True(t, e.known())
	require.EqualValues(t, 100, e.gapWorth(), "nothing measured: the priors, 500 µs at 1 GB/s over 5 KB offsets")
	e.learn(time.Millisecond, 10_000, 10, 0, 0) // small: latency
	require.InDelta(t, 1000, e.perOff, 1e-9, "the seed is replaced")
	require.InDelta(t, 0.001, e.latency, 1e-12)
	require.EqualValues(t, 1000, e.gapWorth(), "no rate yet: the measured 1 ms at the prior 1 GB/s over 1 KB offsets")
	e.learn(5*time.Millisecond, 2_000_000, 2000, 0, 0) // big: 2 MB in 4 ms beyond the latency
	require.InDelta(t, 1000, e.perOff, 1e-9)
	require.InDelta(t, 5e8, e.rate, 1)
	require.EqualValues(t, 500, e.gapWorth(), "1 ms at 500 MB/s is 500 KB: 500 offsets of 1 KB")
	e.learn(time.Millisecond, 1, 0, 0, 0) // nothing learned from an empty advance
	require.InDelta(t, 1000, e.perOff, 1e-9)
	require.InDelta(t, 1000, e.chunk(1000), 1e-9, "no compressed batch measured: a chunk of fetched bytes")
	e.learn(time.Millisecond, 1000, 1, 1000, 5000) // compressed batches: 5 bytes of records per byte fetched
	require.InDelta(t, 200, e.chunk(1000), 1e-9, "a chunk's records once decompressed")

	// A latency measured high never makes the rate look infinite.
	e = estimate{latency: 0.010}
	e.learn(2*time.Millisecond, 1_000_000, 100, 0, 0)
	require.InDelta(t, 1e9, e.rate, 1, "at least half the fetch is streaming")
}

// TestSizesSeedANewTopic: a topic no pass measured starts from the size
// last measured on any topic, as a seed; a measured topic keeps its own;
// the latency and rate of the last pass carry to the next.
func TestSizesSeedANewTopic(t *testing.T) {
	var s sizes
	require.False(t, func() bool { e := s.start("a"); return e.known() }(), "nothing measured")
	s.measured("a", estimate{perOff: 100})
	s.measured("b", estimate{perOff: 2000})
	e := s.start("a")
	require.InDelta(t, 100, e.perOff, 0)
	require.False(t, e.seeded)
	e = s.start("c")
	require.InDelta(t, 2000, e.perOff, 0)
	require.True(t, e.seeded)
	s.finished(estimate{latency: 0.002, rate: 5e8})
	e = s.start("a")
	require.InDelta(t, 0.002, e.latency, 0)
	require.InDelta(t, 5e8, e.rate, 0)
	s.forget("a")
	require.True(t, s.start("a").seeded, "a forgotten topic starts from the seed again")
}

// TestRangeSetOps checks unionRanges and subtractRanges against sets of
// offsets on random inputs.
func TestRangeSetOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	random := func() []index.Range {
		var out []index.Range
		off := int64(rng.IntN(5))
		for range rng.IntN(8) {
			n := int64(1 + rng.IntN(6))
			out = append(out, index.Range{Start: off, End: off + n, Scan: rng.IntN(2) == 0})
			off += n + int64(1+rng.IntN(6))
		}
		return out
	}
	set := func(rs []index.Range) map[int64]bool {
		m := map[int64]bool{}
		for _, r := range rs {
			for o := r.Start; o < r.End; o++ {
				m[o] = true
			}
		}
		return m
	}
	for range 2000 {
		a, b := random(), random()
		u := unionRanges(a, b)
		want := set(a)
		for o := range set(b) {
			want[o] = true
		}
		require.Equal(t, want, set(u))
		for _, m := range u {
			// Every input range that overlaps or touches m was merged into
			// it (the output's ranges do not touch): m scans if any of them does.
			scan := false
			for _, r := range append(slices.Clone(a), b...) {
				if r.Start <= m.End && r.End >= m.Start {
					scan = scan || r.Scan
				}
			}
			require.Equal(t, scan, m.Scan, "range %v of the union of %v and %v", m, a, b)
		}
		for i := 1; i < len(u); i++ {
			require.Greater(t, u[i].Start, u[i-1].End, "disjoint, not touching, ascending")
		}
		d := subtractRanges(a, b)
		want = set(a)
		for o := range set(b) {
			delete(want, o)
		}
		require.Equal(t, want, set(d))
	}
}

// TestShareOfABurst: a fetch that started alone and landed behind 16 more
// is charged its share of the 17 that ran over its lifetime, on average,
// not the whole of what it took; one that ran alone is charged all of it.
func TestShareOfABurst(t *testing.T) {
	require.Equal(t, 9*time.Millisecond, shareOf(9*time.Millisecond, 1, 1))
	require.Equal(t, time.Millisecond, shareOf(9*time.Millisecond, 1, 17))
	require.Equal(t, time.Millisecond, shareOf(9*time.Millisecond, 17, 1))
	require.Equal(t, 9*time.Millisecond, shareOf(9*time.Millisecond, 0, 0), "never divided by nothing")
}
