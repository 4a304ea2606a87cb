package kafka

import (
	"sync"
	"time"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// costModel is what a read has learned about fetching from its topic's
// broker: what a fetch costs before it streams anything (latency), how
// fast a fetch streams bytes, and how many bytes an offset weighs. The
// fetcher consults it to size fetches, to decide between fetching through
// a gap of other regions' records and starting a new fetch, and to pick
// the cheaper of an indexed plan and a full scan.
//
// Costs are in the time of one connection: a fetch occupies its
// connection for latency + bytes/rate, whatever else runs on other
// connections, so two ways to fetch the same records compare by that sum.
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
// nothing (see priced); the rate prior prices gaps until a fetch big
// enough to measure the rate comes (a replay of few regions may fetch none).
const (
	// gapShare bounds the offsets of gaps a pass fetches through, as a
	// share of its planned offsets: merging saves fetches, but a replay
	// must stay close to its own bytes (about 1.1x).
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
		// Mostly latency: the bytes at the current rate are subtracted.
		m.latency = max(ewma(m.latency, d-float64(n)/m.rate, m.nLatency), 1e-6)
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

// fetchCost is the connection time of one fetch of n bytes.
func (m *costModel) fetchCost(n float64) float64 { return m.latency + n/m.rate }

// priced reports whether the latency was measured (by this read, the
// store's last one, or as the store's round trip: see
// modelStore.sampleLatency); until then the model fetches only what the
// plan asks (a prior latency must not talk a read into fetching through
// gaps, nor into a scan).
func (m *costModel) priced() bool { return m.nLatency > 0 || m.latencySeeded }

// throughGap reports whether streaming a gap of gapBytes costs less than
// the latency of the extra fetch that skipping it needs. (The fetcher also
// caps what it fetches through at gapShare of the plan: see cut.)
func (m *costModel) throughGap(gapBytes float64) bool {
	return m.priced() && gapBytes/m.rate <= m.latency
}

// planCosts estimates, in connection time, fetching the ranges as the
// fetcher would (merging through cheap gaps while their offsets stay
// within gapBudget, chunks of at most target bytes) and scanning their
// whole span in chunks of target bytes.
func (m *costModel) planCosts(ranges []index.Range, target float64, gapBudget int64) (indexed, scan float64) {
	if len(ranges) == 0 {
		return 0, 0
	}
	chunks := func(b float64) float64 {
		n := float64(int64(b/target) + 1)
		return n*m.latency + b/m.rate
	}
	cur := m.bytes(ranges[0].End - ranges[0].Start)
	for i := 1; i < len(ranges); i++ {
		gap := m.bytes(ranges[i].Start - ranges[i-1].End)
		next := m.bytes(ranges[i].End - ranges[i].Start)
		if g := ranges[i].Start - ranges[i-1].End; m.throughGap(gap) && cur+gap+next <= target && g <= gapBudget {
			gapBudget -= g
			cur += gap + next
			continue
		}
		indexed += chunks(cur)
		cur = next
	}
	indexed += chunks(cur)
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
// that warm the fetch connections at Open (warm.go) and the reads' own
// log-bounds lookups (bounds.go), the lowest seen. A seed too high costs
// bytes (gaps fetched through, within gapShare; a scan of a span whose
// fetches it overprices), never records; without one the first reads after
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
