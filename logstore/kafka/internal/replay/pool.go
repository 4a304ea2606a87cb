package replay

import (
	"sync"
	"sync/atomic"
)

// Pool is a store's fetch connections and the byte budget of every read's
// fetches, shared by all passes: the two limits a store's reads keep
// together, whatever their number.
//
//   - A connection carries one fetch at a time, store-wide: a broker serves
//     one request per connection at a time, so a second fetch on a busy
//     connection would only queue behind the first (a small fetch behind a
//     large chunk).
//   - Bytes: a fetch is charged the memory its byte limit is expected to
//     take once processed when it starts (the memory its response takes
//     once landed, when that is more: a compressed batch decompressed, or a
//     batch Kafka returned whole) until its response is decoded and
//     every read has taken the entries it got from it: in flight, waiting for
//     the decoder, being decoded, handed over and not yet yielded. A fetch
//     starts while the charges stay within the limit (FetchMaxBytes); the
//     head of a pass's queue (the fetch everything else of the pass waits
//     for) may go up to twice the limit. So a pass whose chunks behind the
//     head hold its share, or a read started in the loop body of another
//     that holds the rest, still makes progress. The reading back of a
//     spilled entry (one at a time, store-wide) adds one fetch's limit on
//     top. A response larger than expected (a batch larger than the bytes
//     asked for, which Kafka returns whole, or compressed harder than the
//     pass's estimate) is charged what it takes, so the charges may pass
//     those limits by such excess.
//
// Waiters (fetchers with nothing to start) watch Changed, which is closed and
// replaced whenever a connection or bytes are freed.
type Pool struct {
	mu     sync.Mutex
	busy   []bool
	next   int // the connection the next search starts at
	limit  int64
	used   int64
	peak   int64 // the most used has been (tests check the bound)
	onWire int
	wake   chan struct{}
}

// NewPool returns a pool of conns connections and limit bytes.
func NewPool(conns int, limit int64) *Pool {
	return &Pool{busy: make([]bool, max(conns, 1)), limit: limit, wake: make(chan struct{})}
}

// take reserves a free connection and n bytes, or reports false when no
// connection is free or the bytes would pass the limit (twice the limit for
// a pass's head). It returns the connection and the fetches on the wire,
// itself included.
func (p *Pool) take(n int64, head bool) (conn, onWire int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fits(n, head) {
		return 0, 0, false
	}
	for i := range p.busy {
		c := (p.next + i) % len(p.busy)
		if !p.busy[c] {
			p.busy[c] = true
			p.next = c + 1
			p.used += n
			p.peak = max(p.peak, p.used)
			p.onWire++
			return c, p.onWire, true
		}
	}
	return 0, 0, false
}

// fits reports whether n more bytes may be charged; p.mu is held.
func (p *Pool) fits(n int64, head bool) bool {
	if head {
		return p.used+n <= 2*p.limit || p.used == 0
	}
	return p.used+n <= p.limit
}

// readBack charges n bytes for reading a spilled entry back, without
// waiting: the decoder that reads it back holds the response it is
// decoding, and the fetchers behind the decoders hold the rest of the
// budget, so waiting for room here could wait forever. One read-back runs
// at a time store-wide (readBackTurn), so they add at most one fetch's
// limit beyond the budget.
func (p *Pool) readBack(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used += n
	p.peak = max(p.peak, p.used)
}

// landed frees a fetch's connection, and charges extra bytes (a response
// larger than its limit); it returns the fetches on the wire, itself
// included.
func (p *Pool) landed(conn int, extra int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.onWire
	p.busy[conn] = false
	p.onWire--
	p.used += extra
	p.peak = max(p.peak, p.used)
	p.signal()
	return n
}

// release frees n bytes.
func (p *Pool) release(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	p.signal()
}

// signal wakes the waiters; p.mu is held.
func (p *Pool) signal() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Changed returns a channel closed the next time a connection or bytes are
// freed.
func (p *Pool) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake
}

// Peak is the most bytes ever charged at once.
func (p *Pool) Peak() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// Used is the bytes charged now.
func (p *Pool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// charge is one response's share of the pool, and of its pass's: released
// once the decoder and every read that got entries from the response are
// done with it (refs reaches 0).
type charge struct {
	refs  atomic.Int32
	bytes int64
	pool  *Pool
	pass  *atomic.Int64 // the pass's bytes charged
}

func newCharge(p *Pool, pass *atomic.Int64, bytes int64) *charge {
	c := &charge{bytes: bytes, pool: p, pass: pass}
	c.refs.Store(1)
	return c
}

// grow charges n more bytes when n > 0 (a response that takes more memory
// than charged), without waiting, as Pool.readBack: the response is here.
func (c *charge) grow(n int64) {
	if n <= 0 {
		return
	}
	c.bytes += n
	c.pass.Add(n)
	c.pool.readBack(n)
}

// hold takes one more reference; nil-safe.
func (c *charge) hold() {
	if c != nil {
		c.refs.Add(1)
	}
}

// done drops a reference, releasing the bytes with the last; nil-safe.
func (c *charge) done() {
	if c == nil {
		return
	}
	if c.refs.Add(-1) == 0 {
		c.pass.Add(-c.bytes)
		c.pool.release(c.bytes)
	}
}

// holdBudget is the entry data all of a store's reads hold before yielding
// it (open entries, entries waiting behind an open one of their read, and
// spilled entries read back and handed over but not yet taken). A pass that
// makes the total pass the limit spills what it holds (see router.fit).
type holdBudget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64 // the most used has been (tests check the bound)
}

func (h *holdBudget) add(n int64) int64 {
	u := h.used.Add(n)
	for p := h.peak.Load(); u > p && !h.peak.CompareAndSwap(p, u); p = h.peak.Load() {
	}
	return u
}
func (h *holdBudget) over() bool { return h.used.Load() > h.limit }
