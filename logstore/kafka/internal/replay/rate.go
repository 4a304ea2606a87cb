package replay

import (
	"sync"
	"time"
)

// estimate is what a pass learns from its own fetches: how many bytes an
// offset weighs (to size fetches of a number of offsets), how many bytes of
// records a fetched byte decompresses to (expand), what a fetch
// costs before it streams anything (latency) and how fast it streams
// (rate). It decides one thing beyond sizes: a gap of other regions'
// records between two planned ranges is read through, in the same fetch,
// when its bytes stream in less time than a fetch's latency (gapWorth).
// Only the pass's fetcher goroutine touches it.
//
// A fetch's time is taken as its share of the broker: what it took divided
// by the fetches on the wire while it ran (see shareOf), so that fetches
// that overlap do not each count the others' time.
type estimate struct {
	perOff float64 // bytes per offset; 0 until known
	// expand is the bytes of records a fetched byte of compressed batches
	// decompresses to (0 until measured). Fetches ask for their chunk
	// divided by it, so that a response of a log that compresses well
	// decompresses to about a chunk, which its fetch goroutine can decode
	// within its budget (decodeEarly). It sizes fetches only: the Pool
	// charges what a response takes, so a wrong expansion costs fetches or
	// decoding on one goroutine, never memory or progress.
	expand  float64
	seeded  bool    // perOff and expand are another topic's: the first measurement replaces them
	pinned  bool    // latency and rate are fixed (tests)
	latency float64 // seconds; 0 until measured
	rate    float64 // bytes per second; 0 until measured
}

// smallFetch is the size under which a fetch's time is taken as latency;
// bigger fetches measure the rate.
const smallFetch = 64 << 10

// chunk is what a pass asks of one fetch where a range is longer: about
// ChunkBytes of records once decompressed.
func (e *estimate) chunk(chunkBytes int64) float64 { return float64(chunkBytes) / max(e.expand, 1) }

// known reports whether the estimate can size fetches.
func (e *estimate) known() bool { return e.perOff > 0 }

// bytes estimates the bytes of offsets offsets.
func (e *estimate) bytes(offsets int64) float64 { return float64(offsets) * e.perOff }

// learn folds in one fetch that took took (its share), returned n
// record-batch bytes and advanced offsets offsets, and whose compressed
// batches of wire bytes decompressed to mem bytes of records.
func (e *estimate) learn(took time.Duration, n int, offsets, wire, mem int64) {
	if n <= 0 || offsets <= 0 {
		return
	}
	avg := func(old, x float64) float64 {
		if old <= 0 {
			return x
		}
		return 0.7*old + 0.3*x
	}
	if e.seeded {
		e.perOff, e.expand, e.seeded = 0, 0, false
	}
	e.perOff = avg(e.perOff, float64(n)/float64(offsets))
	if wire > 0 {
		e.expand = avg(e.expand, float64(mem)/float64(wire))
	}
	d := took.Seconds()
	if d <= 0 || e.pinned {
		return
	}
	if n <= smallFetch {
		e.latency = avg(e.latency, d)
		return
	}
	// Streaming time is what the fetch took beyond a fetch's latency, and
	// at least half of it (a latency measured high must not make the rate
	// look infinite).
	e.rate = avg(e.rate, float64(n)/max(d-e.latency, d/2))
}

// gapWorth is how many offsets of other regions' records a pass reads
// through rather than start another fetch: those it streams in less than a
// fetch's latency (within the pass's gapShare). Until the pass measured a
// latency or a rate, it prices with priors: a local broker's round trip,
// and the rate a broker streams from its page cache. A pass of few regions
// may never fetch enough at once to measure the rate, and without a rate it
// would read every range alone, a round trip each (docs/benchmarks.md,
// "Recovery after a restart").
func (e *estimate) gapWorth() int64 {
	if e.perOff <= 0 {
		return 0
	}
	latency, rate := e.latency, e.rate
	if latency <= 0 {
		latency = priorLatency.Seconds()
	}
	if rate <= 0 {
		rate = priorRate
	}
	return int64(latency * rate / e.perOff)
}

// The priors of gapWorth: about a local Kafka broker's fetch round trip,
// and about the rate it streams from its page cache to a pipelined scan.
const (
	priorLatency = 500 * time.Microsecond
	priorRate    = 1e9
)

// shareOf is a fetch's share of the time it took: took divided by the
// fetches on the wire while it ran, taken as the mean of their count when
// it started and when it landed (itself included in both).
func shareOf(took time.Duration, atStart, atEnd int) time.Duration {
	return time.Duration(float64(took) * 2 / float64(max(atStart, 1)+max(atEnd, 1)))
}

// sizes keeps each topic's bytes per offset as the last pass measured
// it, and the last measured on any topic, so that a pass starts with sized
// fetches: a pass that knows nothing of its topic probes each range with a
// one-batch fetch first. A wrong size costs fetches or bytes, never
// records: the reader keeps exactly each chunk's offsets, and a short
// response is continued.
//
// It also keeps the last pass's latency and rate, where the next pass
// starts (the broker's costs are the store's, not a topic's), so that the
// first chunks a pass cuts may read through gaps already.
type sizes struct {
	mu            sync.Mutex
	perOff        map[string]float64
	expand        map[string]float64
	last          float64
	latency, rate float64
}

// start is a new pass's estimate for topic.
func (s *sizes) start(topic string) estimate {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := estimate{perOff: s.perOff[topic], expand: s.expand[topic], latency: s.latency, rate: s.rate}
	if e.perOff == 0 && s.last > 0 {
		e.perOff, e.seeded = s.last, true
	}
	return e
}

// finished keeps a finished pass's latency and rate for the next.
func (s *sizes) finished(e estimate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.latency > 0 {
		s.latency = e.latency
	}
	if e.rate > 0 {
		s.rate = e.rate
	}
}

// measured records a topic's bytes per offset.
func (s *sizes) measured(topic string, e estimate) {
	if e.perOff <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perOff == nil {
		s.perOff, s.expand = make(map[string]float64), make(map[string]float64)
	}
	s.perOff[topic], s.last = e.perOff, e.perOff
	s.expand[topic] = e.expand
}

func (s *sizes) forget(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.perOff, topic)
	delete(s.expand, topic)
}

// startEstimate is a new pass's estimate for topic (pinned by a test hook,
// if set).
func (r *Reads) startEstimate(topic string) estimate {
	e := r.sizes.start(topic)
	if r.hooks.PinnedLatency > 0 {
		e.latency, e.rate, e.pinned = r.hooks.PinnedLatency.Seconds(), r.hooks.PinnedRate, true
	}
	return e
}
