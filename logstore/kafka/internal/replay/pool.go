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
//     connection would only queue behind the first.
//   - Bytes: a fetch is charged, when it starts, what its byte limit is
//     expected to take once decoded (the limit times the expansion the
//     pass measured, at most the Pool's limit); then what its response
//     takes beyond that (a batch Kafka returned whole, batches its fetch
//     goroutine decoded: decodeEarly), until the decoder has decoded it and
//     every read has taken the entries that point into it. Batches the
//     decoder decompresses itself are not charged: it copies out what it
//     keeps into the hold budget.
//
// Who waits, and who frees. The bytes are two budgets of the limit each:
// one for the chunks started behind their pass's head, one for heads (the
// fetch everything else of its pass waits for). A chunk starts while its
// budget stays within the limit, or when its budget holds nothing. So a
// head waits only for other heads, which their decoders take without
// waiting for it, and for the entries reads were handed from them, which
// the reads' callers take: never for a chunk that waits for a head. A read
// started in the loop body of another still starts its heads while what
// the outer read pins leaves room for one: a head asks for about a chunk
// (ChunkBytes, FetchMaxBytes spread over the fetch connections), so at the
// defaults the outer pins a small share of the head budget.
//
// Waiters (fetchers with nothing to start) watch Changed, which is closed and
// replaced whenever a connection or bytes are freed.
type Pool struct {
	mu     sync.Mutex
	busy   []bool
	next   int // the connection the next search starts at
	limit  int64
	used   [2]int64 // bytes charged to chunks started behind a head, and to heads (budgets)
	peak   int64    // the most charged at once, both together (tests check the bound)
	onWire int
	wake   chan struct{}
}

// NewPool returns a pool of conns connections and limit bytes.
func NewPool(conns int, limit int64) *Pool {
	return &Pool{busy: make([]bool, max(conns, 1)), limit: limit, wake: make(chan struct{})}
}

// budget is one of the Pool's two budgets.
type budget int8

const (
	behindBudget budget = iota // chunks started behind their pass's head
	headBudget                 // heads, and reading spilled entries back
)

func budgetOf(head bool) budget {
	if head {
		return headBudget
	}
	return behindBudget
}

// take reserves a free connection and n bytes of budget b, or reports false
// when no connection is free or the bytes do not fit (see Pool). It returns
// the connection and the fetches on the wire, itself included.
func (p *Pool) take(n int64, b budget) (conn, onWire int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used[b] > 0 && p.used[b]+n > p.limit {
		return 0, 0, false
	}
	for i := range p.busy {
		c := (p.next + i) % len(p.busy)
		if !p.busy[c] {
			p.busy[c] = true
			p.next = c + 1
			p.onWire++
			p.addLocked(b, n)
			return c, p.onWire, true
		}
	}
	return 0, 0, false
}

// room reports whether budget b is within the limit.
func (p *Pool) room(b budget) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used[b] < p.limit
}

// add charges n bytes to budget b without waiting: a response that landed
// larger than it was charged (it is here), batches a fetch goroutine
// decoded early, or the reading back of a spilled entry (the decoder that
// reads it back holds what the others wait for; one runs at a time
// store-wide, readBackTurn).
func (p *Pool) add(b budget, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addLocked(b, n)
}

func (p *Pool) addLocked(b budget, n int64) {
	p.used[b] += n
	p.peak = max(p.peak, p.used[0]+p.used[1])
}

// landed frees a fetch's connection, and charges extra bytes to b (a
// response larger than its limit); it returns the fetches on the wire,
// itself included.
func (p *Pool) landed(conn int, b budget, extra int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.onWire
	p.busy[conn] = false
	p.onWire--
	p.addLocked(b, extra)
	p.signal()
	return n
}

// release frees n bytes of budget b.
func (p *Pool) release(b budget, n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used[b] -= n
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
	return p.used[0] + p.used[1]
}

// charge is one response's share of the pool, and of its pass's: released
// once the decoder and every read that got entries from the response are
// done with it (refs reaches 0).
type charge struct {
	refs   atomic.Int32
	bytes  int64
	pool   *Pool
	budget budget
	pass   *atomic.Int64 // the pass's bytes charged
}

func newCharge(p *Pool, b budget, pass *atomic.Int64, bytes int64) *charge {
	c := &charge{bytes: bytes, pool: p, budget: b, pass: pass}
	c.refs.Store(1)
	return c
}

// grow charges n more bytes when n > 0 (a response larger than charged),
// without waiting: the response is here.
func (c *charge) grow(n int64) {
	if n <= 0 {
		return
	}
	c.bytes += n
	c.pass.Add(n)
	c.pool.add(c.budget, n)
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
		c.pool.release(c.budget, c.bytes)
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
