package kafka

import (
	"context"
	"slices"
	"sync"

	"github.com/kwal/kwal/logstore"
)

// earlyFetches are the fetches a read sends while its log-bounds lookup is
// in flight: the first chunks of the plan it expects, so that the lookup's
// round trip is no longer paid before the first fetch (measured on the
// local Kafka broker: 0.5–1.0 ms of a 4–9 ms replay of one region after a
// restart).
//
// The plan is only expected: the bounds are not known yet. It is the
// index's plan up to its watermark W (the log ends at or above it unless
// records were lost, which the read then finds as before), cut into chunks
// exactly as the read's pass will cut its plan (fetcher.cut, after
// fetcher.decide), and only its indexed chunks are fetched. Nothing of the
// read's own logic depends on them: the read looks its bounds up, checks
// the log start (pruned.go), plans and starts or joins a pass exactly as
// without them. The pass's fetcher then adopts, for a chunk it cut, the
// early fetch sent at the same offset of the same topic ID instead of
// sending its own. A fetch response at an offset is the log's records from
// there whenever it was sent: records below the high watermark do not
// change, and the reader keeps only each chunk's offsets, checks every gap
// (gaps.go) and reports scans from the chunk's start, as for any response.
// A response the pass cannot use as is (an error, a log start above the
// offset, a moved leader) is fetched again by the pass (settle). What the
// pass does not adopt it drops, and counts as fetched.
//
// Only a read that starts a lookup (no other read of the topic waits for
// one: a restart's first replay of a namespace) fetches early, and the
// store keeps at most one connection's worth (one per fetch connection) in
// flight: a restart that replays many regions at once shares passes whose
// merged plans the early chunks of one read would not match.
//
// Memory: at most FetchMaxBytes of byte limits, counted against the pass's
// byte budget once its fetcher owns them (what a read holds before that
// is dropped when it joins another pass or fails).
type earlyFetches struct {
	topicID [16]byte
	// The log bounds the first successful response carried (see
	// lookUpBounds): final once bounded is closed, which happens when one
	// succeeded (ok) or all failed.
	bounded    chan struct{}
	start, end int64
	ok         bool
	pending    int // fetches not yet answered; guarded by mu

	mu      sync.Mutex
	owned   bool          // a pass's fetcher took them (handOver): only it touches left
	dropped bool          // dropped by the read: a fetcher may not take them
	left    []*earlyFetch // neither adopted nor dropped, ascending by offset
}

// earlyFetch is one early fetch.
type earlyFetch struct {
	off      int64
	maxBytes int32
	conn     int // the store's fetch connection it went on (fetchClient)
	cancel   context.CancelFunc
	done     chan struct{}
	res      fetchResult // final once done is closed
}

// fetchEarly starts the early fetches of a read of topic from from (see
// earlyFetches), or returns nil when there are none to send: no index or
// none covering topic, NoIndex, no leader cached, a cost model that cannot
// size or price chunks yet, a plan whose first chunk is a scan, or the
// store's early fetches in flight already.
func (s *LogStore) fetchEarly(topic string, from map[logstore.RegionID]logstore.EntryID, noIndex bool) *earlyFetches {
	if s.index == nil || noIndex || s.noEarly {
		return nil
	}
	wm, ok := s.index.(watermarker)
	if !ok {
		return nil
	}
	w, covered := wm.Watermark(topic)
	if !covered {
		return nil
	}
	s.metaMu.Lock()
	m, known := s.meta[topic]
	s.metaMu.Unlock()
	if !known {
		return nil
	}
	offs := make(map[uint64]int64, len(from))
	for region, id := range from {
		offs[uint64(region)] = fromOffset(id)
	}
	plan := s.index.Plan(topic, offs, w)
	if len(plan.Ranges) == 0 {
		return nil
	}
	// The pass's own chunking, on a model loaded and seeded as the pass's
	// will be.
	f := &fetcher{s: s, topic: topic, model: s.models.load(topic), pending: slices.Clone(plan.Ranges),
		frontier: plan.Ranges[0].Start, planned: spanOffsets(plan.Ranges)}
	s.models.seed(&f.model)
	if !f.model.known() || !f.model.priced() {
		return nil
	}
	f.decide()
	wire := &fetcher{s: s, topic: topic, speculative: true}
	e := &earlyFetches{topicID: m.id, bounded: make(chan struct{})}
	budget := int64(s.cfg.FetchMaxBytes)
	for k := 0; k < f.conns() && len(f.pending) > 0; k++ {
		sl := f.cut()
		if sl.rg.Scan || int64(sl.maxBytes) > budget || !s.reserveEarly() {
			break
		}
		if !s.addReadGoroutines(1) {
			s.earlyInFlight.Add(-1)
			break
		}
		budget -= int64(sl.maxBytes)
		e.left = append(e.left, &earlyFetch{off: sl.off, maxBytes: sl.maxBytes, conn: k, done: make(chan struct{})})
	}
	if len(e.left) == 0 {
		return nil
	}
	// Every fetch is counted before the first can answer.
	e.pending = len(e.left)
	for _, ef := range e.left {
		ctx, cancel := context.WithTimeout(s.readCtx, s.cfg.RequestTimeout)
		ef.cancel = cancel
		cl, warm := s.fetchClient(ef.conn)
		go func() {
			defer s.passWG.Done()
			defer s.earlyInFlight.Add(-1)
			defer cancel()
			res := wire.fetchOnce(ctx, cl, m.leader, m.id, ef.off, ef.maxBytes, "indexed")
			res.warm = warm
			ef.res = res
			close(ef.done)
			e.answered(res)
		}()
	}
	return e
}

// answered notes an early fetch's response: the first that succeeded gives
// the log bounds.
func (e *earlyFetches) answered(res fetchResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending--
	if e.ok {
		return
	}
	if res.err == nil && res.retry == nil && res.logStart >= 0 && res.hw >= res.logStart {
		e.start, e.end, e.ok = res.logStart, res.hw, true
		close(e.bounded)
		return
	}
	if e.pending == 0 {
		close(e.bounded)
	}
}

// bounds waits for the log bounds an early fetch answered; ok is false
// when none did (or ctx ended first). Nil-safe.
func (e *earlyFetches) bounds(ctx context.Context) (start, end int64, ok bool) {
	if e == nil {
		return 0, 0, false
	}
	select {
	case <-e.bounded:
	case <-ctx.Done():
		return 0, 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.start, e.end, e.ok
}

// reserveEarly takes a place for one early fetch in flight, if the store
// has one left (one per fetch connection).
func (s *LogStore) reserveEarly() bool {
	limit := int32(len(s.laneClients) + 1)
	for {
		n := s.earlyInFlight.Load()
		if n >= limit {
			return false
		}
		if s.earlyInFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// handOver gives the early fetches to a pass's fetcher, unless the read
// dropped them. Nil-safe.
func (e *earlyFetches) handOver() *earlyFetches {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped {
		return nil
	}
	e.owned = true
	return e
}

// drop cancels the early fetches no fetcher took (the read joined another
// pass, or ended before starting one). Nil-safe; a no-op once handed over.
func (e *earlyFetches) drop() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.owned || e.dropped {
		return
	}
	e.dropped = true
	for _, ef := range e.left {
		ef.cancel()
	}
	e.left = nil
}

// takeEarly charges the early fetches a pass's fetcher took against its
// byte budget (they count until adopted or dropped).
func (f *fetcher) takeEarly(e *earlyFetches) {
	f.early = e
	if e == nil {
		return
	}
	for _, ef := range e.left {
		f.inBytes += int64(ef.maxBytes)
	}
}

// adopt attaches to the chunk sl just cut the early fetch sent at its
// offset, if there is one and it went to the topic ID the pass fetches
// (the topic was not recreated in between).
func (f *fetcher) adopt(sl *slot) {
	e := f.early
	if e == nil || sl.join != nil {
		return
	}
	i := slices.IndexFunc(e.left, func(ef *earlyFetch) bool { return ef.off == sl.off })
	if i < 0 {
		return
	}
	ef := e.left[i]
	e.left = slices.Delete(e.left, i, i+1)
	f.inBytes -= int64(ef.maxBytes)
	if e.topicID != f.topicID {
		f.dropEarly(ef)
		return
	}
	sl.early = ef
}

// dropEarlyBelow drops the early fetches below off: chunks are cut in
// ascending order, so none will start there any more.
func (f *fetcher) dropEarlyBelow(off int64) {
	e := f.early
	if e == nil {
		return
	}
	for len(e.left) > 0 && e.left[0].off < off {
		ef := e.left[0]
		e.left = e.left[1:]
		f.inBytes -= int64(ef.maxBytes)
		f.dropEarly(ef)
	}
}

// dropEarly gives up an early fetch the pass does not use, and counts it:
// it was sent, and what it returned was fetched.
func (f *fetcher) dropEarly(ef *earlyFetch) {
	ef.cancel()
	f.stats.fetches++
	select {
	case <-ef.done:
		f.stats.bytes += int64(ef.res.bytes)
	default:
	}
}

// dropAllEarly drops the early fetches the pass did not adopt (the
// fetcher is ending).
func (f *fetcher) dropAllEarly() {
	if f.early == nil {
		return
	}
	for _, ef := range f.early.left {
		f.inBytes -= int64(ef.maxBytes)
		f.dropEarly(ef)
	}
	f.early.left = nil
}
