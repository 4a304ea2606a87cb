package kafka

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// TestCostModel protects what the model learns: priors alone price
// nothing; a fetch that opened its connection prices nothing; a small
// fetch measures the latency, a big one the rate; and the bytes per
// offset count from the first batch's base.
func TestCostModel(t *testing.T) {
	m := newCostModel()
	require.False(t, m.priced(), "priors alone price no plan")

	m.learn(50*time.Millisecond, 20_000, 10, false) // opened its connection
	require.InDelta(t, 2000, m.perOff, 1e-9, "sizes are learned from any fetch")
	require.Zero(t, m.nLatency, "its time prices nothing")

	m.learn(time.Millisecond, 20_000, 10, true) // small: latency
	require.True(t, m.priced(), "a measured latency prices gaps (at the prior rate until one is measured)")
	m.learn(11*time.Millisecond, 10_000_000, 5000, true)
	require.InDelta(t, time.Millisecond.Seconds()-20_000/priorRate, m.latency, 1e-9, "the first sample replaces the prior")
	require.InDelta(t, 10_000_000/(0.011-m.latency), m.rate, 1)
}

// TestPlanCosts protects the planner's choice: ranges of a dense plan
// (gaps cheap to stream) are read as one scan when its byte budget allows,
// a plan of a few ranges far apart fetches them alone, and a plan too
// dense to fetch range by range within its byte budget still reads
// stretches whole. Whatever the choice, the chunks cut cover every planned
// range, in order, without overlapping.
func TestPlanCosts(t *testing.T) {
	m := costModel{latency: 0.001, rate: 100e6, perOff: 1000, nLatency: 1, nRate: 1}
	st := &LogStore{cfg: DefaultConfig()}
	run := func(m costModel, rs []index.Range, planned int64) *fetcher {
		t.Helper()
		f := &fetcher{s: st, model: m, pending: slices.Clone(rs), planned: planned}
		f.decide()
		var chunks []index.Range
		for len(f.pending) > 0 {
			sl := f.cut()
			if n := len(chunks); n > 0 {
				require.GreaterOrEqual(t, sl.rg.Start, chunks[n-1].End, "chunks ascend without overlapping")
			}
			require.Equal(t, sl.rg.Start, sl.off)
			chunks = append(chunks, sl.rg)
		}
		require.Empty(t, subtractRanges(rs, chunks), "the chunks cover every planned range")
		return f
	}
	// Gaps of 10 offsets (10 kB, 0.1 ms to stream) under a 1 ms latency.
	var dense []index.Range
	for i := range int64(100) {
		dense = append(dense, index.Range{Start: i * 20, End: i*20 + 10})
	}
	idx, scan := m.planCosts(dense, float64(st.cfg.FetchMaxBytes))
	require.Greater(t, idx, 5*scan, "a fetch per range costs far more than the scan")
	f := run(m, dense, 1<<40)
	require.Equal(t, "scan (cheaper than indexed)", f.planName(), "within a large byte budget")
	f = run(m, dense, spanOffsets(dense))
	require.Less(t, f.stats.estPlan, f.stats.estIndexed, "a budget of a tenth is not met below the scan's time: the plan reads stretches whole all the same")
	require.Positive(t, f.stats.stretches)
	// Three ranges of 10 offsets, 100,000 offsets (100 MB) apart.
	sparse := []index.Range{{Start: 0, End: 10}, {Start: 100_000, End: 100_010}, {Start: 200_000, End: 200_010}}
	idx, scan = m.planCosts(sparse, float64(st.cfg.FetchMaxBytes))
	require.Less(t, idx*100, scan)
	f = run(m, sparse, 1<<40)
	require.Equal(t, "indexed", f.planName())
	require.Zero(t, f.stats.stretchExtra)
	// Ranges one offset apart with a huge latency: one scan of the span.
	var tight []index.Range
	for i := range int64(50) {
		tight = append(tight, index.Range{Start: i * 3, End: i*3 + 2})
	}
	f = run(costModel{latency: 1, rate: 100e6, perOff: 1000, nLatency: 1, nRate: 1}, tight, 1<<40)
	require.Equal(t, "scan (cheaper than indexed)", f.planName())
	require.Equal(t, int64(49), f.stats.stretchExtra)
	// Dense at the end, sparse before, as a restart's replays are: mixed.
	mixed := slices.Clone(sparse)
	for i := range int64(20) {
		mixed = append(mixed, index.Range{Start: 300_000 + i*20, End: 300_000 + i*20 + 10})
	}
	f = run(m, mixed, 1<<40)
	require.Equal(t, "mixed (dense stretches scanned)", f.planName())
	require.Equal(t, 1, f.stats.stretches)
	require.Equal(t, int64(190), f.stats.stretchExtra)
	require.Equal(t, 19, f.stats.mergedGaps)

	// Priced on a latency far too low, the plan fetches every range; as
	// its fetches measure the real latency, what is left is cut again.
	cheap := m
	cheap.latency = 1e-9
	f = &fetcher{s: st, model: cheap, pending: slices.Clone(mixed), planned: 1 << 40}
	require.True(t, f.shouldDecide())
	f.decide()
	require.Empty(t, f.stretches)
	var chunks []index.Range
	for range 4 {
		chunks = append(chunks, f.cut().rg)
	}
	require.False(t, f.shouldDecide(), "nothing learned since")
	f.model.latency, f.model.learned = m.latency, 1
	require.True(t, f.shouldDecide())
	f.decide()
	for len(f.pending) > 0 {
		chunks = append(chunks, f.cut().rg)
	}
	require.Empty(t, subtractRanges(mixed, chunks))
	require.Equal(t, "mixed (dense stretches scanned)", f.planName())
	require.Equal(t, int64(190-10), f.stats.stretchExtra, "the dense ranges left are read as one stretch")
	f.model.learned = 2
	require.True(t, f.shouldDecide())
	f.decide()
	f.model.learned = 3
	require.False(t, f.shouldDecide(), "again after 4")
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

// TestModelSeed protects how a topic no read measured starts: from the
// bytes per offset last measured on any topic (a running pass's first
// response included), as a seed that the topic's first response replaces
// rather than averages with; a topic measured keeps its own sizes; with
// nothing measured the model stays unknown (the fetcher probes).
func TestModelSeed(t *testing.T) {
	var ms modelStore
	m := ms.load("a")
	require.False(t, m.known(), "nothing measured: no seed")
	ms.seed(&m)
	require.False(t, m.known())

	ms.measured("a", 2000) // a's pass measured its first response
	ms.seed(&m)
	require.True(t, m.known())
	require.True(t, m.seeded)
	b := ms.load("b")
	require.InDelta(t, 2000, b.perOff, 1e-9, "b starts from a's sizes")
	require.True(t, b.seeded)
	b.learn(time.Millisecond, 10_000, 100, true)
	require.InDelta(t, 100, b.perOff, 1e-9, "b's first response replaces the seed")
	require.False(t, b.seeded)
	b.learn(time.Millisecond, 30_000, 100, true)
	require.InDelta(t, 0.7*100+0.3*300, b.perOff, 1e-9, "later responses average in")
	ms.save("b", b)

	a := ms.load("a")
	require.InDelta(t, 2000, a.perOff, 1e-9, "a keeps its own sizes")
	require.False(t, a.seeded)
	c := ms.load("c")
	require.InDelta(t, b.perOff, c.perOff, 1e-9, "the seed is the last measured")
	require.True(t, c.seeded)
	ms.save("c", c) // learned nothing: saves nothing
	require.InDelta(t, b.perOff, ms.load("d").perOff, 1e-9)
}

// TestModelLatencySeed protects how the first reads after Open price their
// plans: a model no fetch priced takes the lowest round trip sampled
// outside fetches of data (Open's warming, the bounds lookups) as its
// latency, and so prices plans; its first measured fetch replaces the seed
// rather than averaging with it; a model the store's reads measured keeps
// their latency; with no sample the model stays unpriced.
func TestModelLatencySeed(t *testing.T) {
	var ms modelStore
	m := ms.load("a")
	require.False(t, m.priced(), "no sample: no price")
	ms.sampleLatency(3 * time.Millisecond)
	ms.sampleLatency(400 * time.Microsecond)
	ms.sampleLatency(2 * time.Millisecond)
	ms.seed(&m)
	require.True(t, m.priced(), "a running pass takes the seed")
	require.InDelta(t, 400e-6, m.latency, 1e-12, "the lowest sample")

	b := ms.load("b")
	require.True(t, b.priced())
	require.InDelta(t, 400e-6, b.latency, 1e-12)
	b.learn(time.Millisecond, 1000, 10, true)
	require.InDelta(t, 1e-3-1000/b.rate, b.latency, 1e-9, "the first fetch replaces the seed")
	require.False(t, b.latencySeeded)
	b.learn(2*time.Millisecond, 1000, 10, true)
	require.InDelta(t, 0.7*(1e-3-1000/b.rate)+0.3*(2e-3-1000/b.rate), b.latency, 1e-9, "later fetches average in")
	ms.save("b", b)

	ms.sampleLatency(100 * time.Microsecond)
	c := ms.load("c")
	require.InDelta(t, b.latency, c.latency, 1e-12, "what the store's reads measured beats the seed")
	require.False(t, c.latencySeeded)
}

// TestSampledSizeIsASeed: the size Open weighs from one batch seeds every
// topic, the weighed one included, and each topic's first response
// replaces it (one batch is not a topic's average: averaging it in left a
// full scan's chunks a batch short each, twice the fetches).
func TestSampledSizeIsASeed(t *testing.T) {
	var ms modelStore
	ms.sampled(2000)
	m := ms.load("a")
	require.True(t, m.known())
	require.True(t, m.seeded)
	m.learn(time.Millisecond, 2100*10, 10, true)
	require.InDelta(t, 2100, m.perOff, 1e-9, "the first response replaces the sample")
}

// TestLatencyEstimateSurvivesALowRate: a rate measured too low (a big
// fetch that waited behind other passes' fetches) must not pin the
// latency at nothing. Small fetches' times are mostly latency; before,
// each sample subtracted its bytes at that rate, came out negative, and
// the latency fell to a microsecond: from then on no gap was worth
// fetching through and every plan priced fetches as free.
func TestLatencyEstimateSurvivesALowRate(t *testing.T) {
	m := newCostModel()
	m.learn(time.Millisecond, 20_000, 10, true)
	m.learn(100*time.Millisecond, 1_000_000, 500, true) // waited: 10 MB/s
	require.Less(t, m.rate, 20e6)
	for range 20 {
		m.learn(time.Millisecond, 60_000, 30, true) // 6 ms of bytes at that rate
	}
	require.GreaterOrEqual(t, m.latency, 0.5e-3, "a small fetch's time is at least half latency")
	require.LessOrEqual(t, m.latency, 1e-3)
	// Two ranges with a gap that streams in less than that latency are
	// read as one.
	m.perOff = 1000
	gap := int64(0.5 * m.latency * m.rate / m.perOff)
	p := m.plan([]index.Range{{Start: 0, End: 10}, {Start: 10 + gap, End: 20 + gap}}, 1e9, 0)
	require.Equal(t, []int{0}, p.first, "gaps cheaper than a fetch are still fetched through")
}

// TestStretchesProperty checks the cut of a plan into stretches on random
// plans and models against every cut of small plans: for its price per
// extra offset, plan finds the cheapest cut; the choice covers every range
// with contiguous stretches, is never priced above scanning the whole span
// nor above fetching every range alone, and is the fastest cut when that
// one stays within the byte budget.
func TestStretchesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for it := range 3000 {
		n := 1 + rng.IntN(9)
		var rs []index.Range
		off := int64(rng.IntN(100))
		for range n {
			size := int64(1 + rng.IntN(200))
			if rng.IntN(4) == 0 {
				size *= 100
			}
			rs = append(rs, index.Range{Start: off, End: off + size})
			off += size + 1 + int64(rng.IntN(3000))
		}
		m := costModel{latency: 1e-6 * float64(1+rng.IntN(5000)), rate: 1e6 * float64(10+rng.IntN(3000)), perOff: float64(100 + rng.IntN(5000)), nLatency: 1, nRate: 1}
		target := float64(64<<10 + rng.IntN(4<<20))
		c := m.perOffCost(target)
		cost := func(first []int) (tm float64, extra int64) {
			for k, j := range first {
				end := n
				if k+1 < len(first) {
					end = first[k+1]
				}
				span := rs[end-1].End - rs[j].Start
				tm += m.latency + c*float64(span)
				extra += span - spanOffsets(rs[j:end])
			}
			return tm, extra
		}
		// Every cut: a bit per gap between neighbours says "split here".
		lambda := m.latency * rng.Float64()
		bestCost := math.Inf(1)
		for mask := range 1 << (n - 1) {
			first := []int{0}
			for i := 1; i < n; i++ {
				if mask&(1<<(i-1)) != 0 {
					first = append(first, i)
				}
			}
			tm, extra := cost(first)
			bestCost = min(bestCost, tm+lambda*float64(extra))
		}
		p := m.plan(rs, target, lambda)
		tm, extra := cost(p.first)
		require.InDelta(t, tm, p.time, 1e-9*tm, "iteration %d", it)
		require.Equal(t, extra, p.extra)
		require.LessOrEqual(t, p.time+lambda*float64(p.extra), bestCost*(1+1e-9), "iteration %d: plan is the cheapest cut at its price", it)

		budget := int64(rng.IntN(2000))
		ch := m.stretches(rs, target, budget)
		require.Equal(t, 0, ch.first[0])
		require.True(t, slices.IsSorted(ch.first))
		scan := m.latency + c*float64(rs[n-1].End-rs[0].Start)
		alone, _ := cost(slices.Collect(func(yield func(int) bool) {
			for i := range n {
				if !yield(i) {
					return
				}
			}
		}))
		require.LessOrEqual(t, ch.time, scan*(1+1e-6), "iteration %d: never priced above a scan", it)
		require.LessOrEqual(t, ch.time, alone*(1+1e-6), "iteration %d: never priced above fetching every range", it)
		if fast := m.plan(rs, target, 0); fast.extra <= budget {
			require.InDelta(t, fast.time, ch.time, 1e-9*fast.time, "iteration %d: the fastest cut within budget", it)
		}
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
