package kafka

import (
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// costModel is what a read has learned about fetching from its topic's
// broker: what a fetch costs before it streams anything (latency), how
// fast a fetch streams bytes, and how many bytes an offset weighs. The
// fetcher consults it to size fetches and to cut its plan into stretches:
// runs of ranges read whole (gaps of other regions' records included)
// where that costs less than a fetch per range, ranges fetched alone
// elsewhere (see stretches).
//
// A fetch costs latency + bytes/rate, measured as its share of the time:
// what it took divided by the store's fetches on the wire when it started
// (fetches that overlap split the time they ran), so the costs of a
// plan's fetches add up to about the time the plan takes however many run
// at once, and two ways to fetch the same records compare by that sum.
//
// A model starts from the store's last read's model (seed), or from
// priors before any read; each fetch refines it. Only its owner (a pass's
// fetcher goroutine) touches it.
type costModel struct {
	latency float64 // seconds a fetch costs beyond its bytes
	rate    float64 // bytes per second a fetch streams
	perOff  float64 // bytes per offset
	// seeded is set while perOff is another topic's (see modelStore): the
	// topic's first measured fetch replaces it rather than averaging in.
	seeded  bool
	learned int // fetches folded in by this read
	// Samples behind latency and rate (a store's last read's count too):
	// the first replaces the prior, later ones move an average.
	nLatency, nRate int
	// latencySeeded is set while latency is the store's round trip as
	// measured outside any fetch of data (see modelStore.sampleLatency):
	// it prices plans, and the first fetch measured replaces it.
	latencySeeded bool
}

// Priors used until a fetch is measured: a local broker's round trip and
// the rate a broker streams from its page cache (measured about 1 GB/s on
// the local Kafka broker by a pipelined scan). The latency prior decides
// nothing (see priced); the rate prior prices stretches until a fetch big
// enough to measure the rate comes (a replay of few regions may fetch
// none). A rate sampled at Open (one fetch of about a scan chunk, timed)
// was tried and dropped: the timed replays right after Open got slower
// (one region of 1,000 over 64 topics on the local Kafka broker: 0.95–1.8
// ms with it against 0.48–0.72 without, 2 runs each, alternated).
const (
	// gapShare is the byte budget of a pass's stretches: the offsets they
	// read beyond the planned ranges, as a share of the planned offsets.
	// Reading dense stretches whole saves fetches, but a replay should
	// stay close to its own bytes (about 1.1x) unless only a plan priced
	// above its scan would (see stretches).
	gapShare = 0.1

	priorLatency = 500 * time.Microsecond
	priorRate    = 1e9
	// smallFetch is the size under which a fetch's time is taken as
	// latency; bigger fetches measure the rate.
	smallFetch = 64 << 10
)

func newCostModel() costModel {
	return costModel{latency: priorLatency.Seconds(), rate: priorRate}
}

// shareOf is a fetch's share of the time it took: took divided by the
// fetches on the wire while it ran, taken as the mean of their count when
// it started and when it landed (itself included in both). The count at
// its start alone overcharges the first fetches of a burst: they start
// nearly alone and land behind everything started after them (measured at
// 1,000 regions over 64 topics on the local Kafka broker: a learned
// latency of 3.6 ms a fetch, where the pass took 108 ms for 105 fetches).
func shareOf(took time.Duration, atStart, atEnd int) time.Duration {
	return time.Duration(float64(took) * 2 / float64(max(atStart, 1)+max(atEnd, 1)))
}

// known reports whether the model can size fetches (it has seen bytes).
func (m *costModel) known() bool { return m.perOff > 0 }

// learn folds one fetch in: it took took, returned n record-batch bytes
// and advanced offsets offsets. timed is false for a fetch whose time says
// nothing about the broker's costs (it opened its connection).
func (m *costModel) learn(took time.Duration, n int, offsets int64, timed bool) {
	if n <= 0 || offsets <= 0 {
		return
	}
	ewma := func(old, x float64, seen int) float64 {
		if old <= 0 || seen == 0 {
			return x
		}
		return 0.7*old + 0.3*x
	}
	if m.seeded {
		m.perOff, m.seeded = 0, false
	}
	m.perOff = ewma(m.perOff, float64(n)/float64(offsets), 1)
	d := took.Seconds()
	if d <= 0 || !timed {
		return
	}
	m.learned++
	if n <= smallFetch {
		// Mostly latency: the bytes at the current rate are subtracted,
		// but never more than half the fetch. A rate measured too low (a
		// big fetch that waited behind other passes' fetches, or priced
		// with a latency seed too high) would otherwise subtract more than
		// the fetch took, and every sample would pin the latency at
		// nothing: from then on no gap is worth fetching through and every
		// plan of the store's later reads is priced as free fetches.
		m.latency = ewma(m.latency, max(d-float64(n)/m.rate, d/2), m.nLatency)
		m.nLatency++
		m.latencySeeded = false
		return
	}
	// Streaming time is what the fetch took beyond a fetch's latency;
	// never less than half the fetch (a latency estimate too high must
	// not make the rate look infinite).
	m.rate = ewma(m.rate, float64(n)/max(d-m.latency, d/2), m.nRate)
	m.nRate++
}

// bytes estimates the bytes of offsets offsets.
func (m *costModel) bytes(offsets int64) float64 { return float64(offsets) * m.perOff }

// priced reports whether the latency was measured (by this read, the
// store's last one, or as the store's round trip: see
// modelStore.sampleLatency); until then the model fetches only what the
// plan asks (a prior latency must not talk a read into fetching through
// gaps, nor into a scan).
func (m *costModel) priced() bool { return m.nLatency > 0 || m.latencySeeded }

// planCosts estimates, in connection time, fetching every range on its
// own and scanning their whole span, each in chunks of at most target
// bytes (ReadStats reports them next to the plan chosen).
func (m *costModel) planCosts(ranges []index.Range, target float64) (indexed, scan float64) {
	if len(ranges) == 0 {
		return 0, 0
	}
	chunks := func(b float64) float64 {
		n := float64(int64(b/target) + 1)
		return n*m.latency + b/m.rate
	}
	for _, r := range ranges {
		indexed += chunks(m.bytes(r.End - r.Start))
	}
	scan = chunks(m.bytes(ranges[len(ranges)-1].End - ranges[0].Start))
	return indexed, scan
}

// modelStore keeps the store's latest learned latency and rate, and each
// topic's bytes per offset, so that a read starts where the last one left
// off (a topic's record sizes are its own; the broker's costs are shared).
//
// A topic no read has measured yet starts from the bytes per offset last
// measured on any topic, as a seed its first response replaces. Without
// it, a pass that knows nothing of its topic's sizes probes with one-batch
// fetches, up to one per connection, and continues each (after a restart
// that replays every region of 64 small topics, 64 passes at once). A seed
// that is wrong costs fetches or bytes (a chunk's byte limit is an
// estimate either way; at most one window of FetchMaxBytes is cut with it),
// never records: the reader keeps exactly each chunk's offsets and a short
// response is continued.
//
// Before any read measured a fetch, a model's latency is the store's round
// trip as measured without fetching data (latencySeed): the empty fetches
// that warm the fetch connections at Open (warm.go; each its share, as a
// read's fetches are priced, of the time it ran beside the others) and the
// reads' own log-bounds lookups (bounds.go), the lowest seen. A seed too
// high costs bytes (stretches read whole whose fetches it overprices), too
// low it costs fetches until the pass's own are measured and the rest of
// its plan is cut again (fetcher.shouldDecide); never records. Without
// one the first reads after
// Open priced nothing, and fetched a small topic's region in several
// fetches where one fetch of the span costs less (measured on the local
// Kafka broker: 1.4–2.0 ms indexed against 0.8–1.2 ms for a scan of the
// whole 0.6 MB topic).
type modelStore struct {
	mu     sync.Mutex
	m      costModel
	ok     bool
	perOff map[string]float64
	last   float64 // bytes per offset last measured, on any topic
	// latencySeed is the lowest round trip sampled outside fetches of
	// data, in seconds (0: none yet).
	latencySeed float64
}

// sampleLatency offers a round trip to the broker measured outside any
// fetch of data as the latency seed; the lowest sample is kept (a sample
// that also paid for opening a connection, or waited behind other
// requests, overstates what a fetch costs).
func (s *modelStore) sampleLatency(d time.Duration) {
	if d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latencySeed == 0 || d.Seconds() < s.latencySeed {
		s.latencySeed = d.Seconds()
	}
}

// seedLatency gives an unpriced model the latency seed, if there is one.
// s.mu is held.
func (s *modelStore) seedLatency(m *costModel) {
	if !m.priced() && s.latencySeed > 0 {
		m.latency, m.latencySeeded = s.latencySeed, true
	}
}

func (s *modelStore) load(topic string) costModel {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := newCostModel()
	if s.ok {
		m = s.m
	}
	m.perOff, m.seeded, m.learned = s.perOff[topic], false, 0
	if m.perOff == 0 && s.last > 0 {
		m.perOff, m.seeded = s.last, true
	}
	s.seedLatency(&m)
	return m
}

// seed gives an unknown model the bytes per offset last measured on any
// topic (a running pass's first response included: see measured), and an
// unpriced one the latency seed.
func (s *modelStore) seed(m *costModel) {
	if m.known() && m.priced() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !m.known() && s.last > 0 {
		m.perOff, m.seeded = s.last, true
	}
	s.seedLatency(m)
}

// measured records a topic's bytes per offset as a pass measured it,
// before the pass ends, so that passes starting meanwhile need not probe.
func (s *modelStore) measured(topic string, perOff float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perOff == nil {
		s.perOff = make(map[string]float64)
	}
	s.perOff[topic], s.last = perOff, perOff
}

// sampled records a bytes per offset weighed outside any read (Open's
// size sample) as the seed of every topic no read measured yet.
func (s *modelStore) sampled(perOff float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = perOff
}

func (s *modelStore) save(topic string, m costModel) {
	if m.learned == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m, s.ok = m, true
	if s.perOff == nil {
		s.perOff = make(map[string]float64)
	}
	s.perOff[topic] = m.perOff
	if !m.seeded && m.perOff > 0 {
		s.last = m.perOff
	}
}

func (s *modelStore) forget(topic string) {
	s.mu.Lock()
	delete(s.perOff, topic)
	s.mu.Unlock()
}

// stretches cuts a plan's ranges (ascending, disjoint) into stretches:
// each either one range fetched on its own, or a run of ranges read whole
// as one span, gaps of other regions' records included (a scan of the
// stretch). Where the ranges of the reads sharing a pass lie dense (a
// restart's replays near the log's end, where most regions' flushed points
// lie behind), one scan of the stretch costs less than a fetch per range;
// where they lie sparse, the ranges are fetched alone.
//
// The choice trades connection time for bytes fetched beyond the plan
// (extra offsets): it is the fastest plan whose extra offsets stay within
// budget, unless every such plan prices above a scan of the whole span,
// in which case it is the one fetching the fewest extra offsets among
// those priced no higher than that scan. So a read is never priced slower
// than its scan, and fetches close to its own bytes where that costs
// little time.
//
// Costs are linear in a stretch's bytes (chunks of target bytes, each
// paying the latency, counted fractionally), so the fastest plan for a
// price lambda per extra offset is found in one pass (plan); the choice
// searches lambda, along which the plan's time rises and its extra
// offsets fall.
func (m *costModel) stretches(ranges []index.Range, target float64, budget int64) stretchPlan {
	n := len(ranges)
	if n == 0 {
		return stretchPlan{}
	}
	scan := m.latency + m.perOffCost(target)*float64(ranges[n-1].End-ranges[0].Start)
	fast := m.plan(ranges, target, 0)
	if fast.extra <= budget {
		return fast
	}
	// At hi, no gap of an offset or more is worth its price: merging
	// saves a latency per gap and pays more than one per extra offset.
	lo, hi := 0.0, 2*m.latency
	var lBudget, lTime float64
	if m.plan(ranges, target, hi).time <= scan*(1+1e-9) {
		lTime = hi
	} else {
		a, b := lo, hi
		for range 50 {
			mid := (a + b) / 2
			if m.plan(ranges, target, mid).time <= scan*(1+1e-9) {
				a = mid
			} else {
				b = mid
			}
		}
		lTime = a
	}
	a, b := lo, hi
	for range 50 {
		mid := (a + b) / 2
		if m.plan(ranges, target, mid).extra <= budget {
			b = mid
		} else {
			a = mid
		}
	}
	lBudget = b
	return m.plan(ranges, target, min(lBudget, lTime))
}

// perOffCost is the connection time an offset costs in a stretch read in
// chunks of target bytes: its bytes streamed, and its share of a chunk's
// latency.
func (m *costModel) perOffCost(target float64) float64 {
	return m.perOff * (m.latency/target + 1/m.rate)
}

// stretchPlan is a plan cut into stretches.
type stretchPlan struct {
	// first holds, per stretch, the index of its first range; a stretch
	// ends where the next begins.
	first []int
	time  float64 // estimated connection time
	extra int64   // offsets read beyond the planned ranges
}

// plan is the cut of ranges into stretches that minimizes connection time
// plus lambda per extra offset: a stretch of ranges j..i costs a latency
// plus perOffCost per offset of its span, so the best cut ending at each
// range follows from a running minimum over where its last stretch starts.
func (m *costModel) plan(ranges []index.Range, target, lambda float64) stretchPlan {
	n := len(ranges)
	c := m.perOffCost(target)
	best := make([]int, n+1) // best[i+1]: first range of the stretch ending at range i
	var dp, planned float64  // dp: the best cost of ranges before the current one
	minVal, minAt := 0.0, 0
	for i, r := range ranges {
		// A stretch starting at range i: its cost beyond dp[i] is
		// latency + (c+lambda)(End - Start_i) - lambda(planned in it).
		if v := dp - (c+lambda)*float64(r.Start) + lambda*planned; i == 0 || v <= minVal {
			minVal, minAt = v, i
		}
		planned += float64(r.End - r.Start)
		dp = m.latency + (c+lambda)*float64(r.End) - lambda*planned + minVal
		best[i+1] = minAt
	}
	var p stretchPlan
	for i := n; i > 0; i = best[i] {
		j := best[i]
		p.first = append(p.first, j)
		span := ranges[i-1].End - ranges[j].Start
		p.time += m.latency + c*float64(span)
		p.extra += span - spanOffsets(ranges[j:i])
	}
	slices.Reverse(p.first)
	return p
}
