package worker

import (
	"sync"
	"sync/atomic"
	"time"
)

// inbox is the hand-off from the callers (Submit, and Close's closing
// marker) to the dispatcher goroutine: a list of requests in arrival order
// that the dispatcher takes whole, and a wake-up channel that an arrival
// signals only when the dispatcher may have to act on it at once.
//
// Why: the package doc ("Why an inbox, not a channel of requests").
//
// While the dispatcher holds (holding is set; it then has a dispatch in
// flight and its wake timer armed for the hold's end, so it will wake and
// take the inbox) an arrival signals only if it could end the hold: its
// topic has a ready group already (hot) or another request in the inbox
// (either may be a second ready group of the topic, which cannot share
// the held dispatch), or the inbox's bytes exceed the room left in the
// held dispatch (room), or its Deadline falls before the hold's end (until:
// the deadline heap must learn of it in time). A closing marker always
// signals. When the dispatcher is not holding, every arrival signals. A
// signal on a pending signal costs nothing (the channel is full; the send
// is skipped without a lock).
//
// Ordering: the dispatcher clears holding after every wake and only then
// takes the inbox, and an arrival appends before it reads holding. So an
// arrival that saw holding set was appended before the dispatcher cleared
// it, and the take after the clear finds it.
type inbox struct {
	mu     sync.Mutex
	reqs   []*request
	spare  []*request // the other of the two lists that take swaps
	bytes  int64      // record bytes in reqs
	closed bool       // the dispatcher stopped: nothing is taken any more

	kick    chan struct{} // capacity 1: wakes the dispatcher
	holding atomic.Bool   // the dispatcher holds ready groups and will wake without a signal
	room    atomic.Int64  // while holding: bytes the held dispatch can still take
	until   atomic.Int64  // while holding: when the dispatcher wakes at the latest (Unix ns)
}

func newInbox() *inbox {
	return &inbox{kick: make(chan struct{}, 1)}
}

// put hands r to the dispatcher; false when it stopped (r was not taken).
func (in *inbox) put(r *request) bool {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return false
	}
	in.reqs = append(in.reqs, r)
	in.bytes += r.bytes
	bytes := in.bytes
	r.w.inboxed++
	again := r.w.inboxed > 1
	in.mu.Unlock()
	if r.closing || again || !in.holding.Load() || r.w.hot.Load() || bytes > in.room.Load() ||
		!r.deadline.At.IsZero() && r.deadline.At.UnixNano() < in.until.Load() {
		in.signal()
	}
	return true
}

func (in *inbox) signal() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// take returns the requests handed over since the last take, in order,
// and resets the per-topic arrival counts. The list is the dispatcher's
// until its next take.
func (in *inbox) take() []*request {
	in.mu.Lock()
	reqs := in.reqs
	for _, r := range reqs {
		r.w.inboxed = 0
	}
	clear(in.spare) // the list taken before: the dispatcher is done with it
	in.reqs = in.spare[:0]
	in.spare = reqs
	in.bytes = 0
	in.mu.Unlock()
	return reqs
}

// close takes what is left and refuses any later put.
func (in *inbox) close() []*request {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	return in.take()
}

// len is the number of requests waiting in the inbox (for tests).
func (in *inbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.reqs)
}

// hold tells arrivals that the dispatcher holds a dispatch that can still
// take room bytes, and will wake by until; release undoes it.
func (in *inbox) hold(room int64, until time.Time) {
	in.room.Store(room)
	in.until.Store(until.UnixNano())
	in.holding.Store(true)
}

func (in *inbox) release() {
	in.holding.Store(false)
}
