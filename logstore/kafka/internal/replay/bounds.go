package replay

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readBounds batches the log-bounds lookups (ListOffsets) of reads of one
// topic: a read that starts while a lookup is in flight waits for the next
// one, which every read that arrived meanwhile shares. A read so never
// takes bounds looked up before it started (its end includes every append
// acknowledged before it), and reads that start together (a datanode
// opening its regions) get one end, and so one pass to share.
//
// Each lookup also counts the reads sharing it (a cohort): a pass started
// by one of them plans nothing until every read of its cohort (and of the
// follower cohort it waited for) has joined a pass or given up, so that
// the pass plans the reads' ranges together (one plan, merged across the
// regions) instead of planning the first read's and taking the rest as
// late joins. Between its lookup and joining, a read waits on no pass, so
// the wait ends.
type readBounds struct {
	mu      sync.Mutex
	flights map[string]*boundsFlight
}

// boundsFlight is one topic's lookup in flight (it is in readBounds.flights
// exactly while its goroutine runs) and the one queued behind it.
type boundsFlight struct {
	next *boundsCall // the lookup the reads arriving now will share
}

// boundsCall is one lookup's outcome, final once done is closed.
type boundsCall struct {
	done       chan struct{}
	start, end int64
	err        error
	// follower is the lookup queued behind this one when it completed (reads
	// that arrived meanwhile), or nil.
	follower *boundsCall
	cohort   *cohort // the reads sharing this lookup
}

// cohort counts the reads of one bounds lookup that have not yet joined or
// started a pass (nor given up). Reads register before the lookup starts,
// so once the lookup is done the count only falls.
type cohort struct {
	mu      sync.Mutex
	pending int
	closed  bool
	placed  chan struct{} // closed when pending reaches 0
}

func newCohort() *cohort { return &cohort{placed: make(chan struct{})} }

func (c *cohort) add() {
	c.mu.Lock()
	c.pending++
	c.mu.Unlock()
}

func (c *cohort) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending--
	// A read that gave up before the lookup ended may bring the count to
	// 0 early; the cohort then stops holding its pass back (waiting is
	// only an optimisation), and stays released.
	if c.pending == 0 && !c.closed {
		c.closed = true
		close(c.placed)
	}
}

// placement is one read's membership in the cohorts it must report to
// (its lookup's), and the cohorts a pass it starts waits for (its lookup's
// and the follower's it waited for).
type placement struct {
	once   sync.Once
	own    *cohort
	awaits []*cohort
}

// placed reports the read joined or started a pass, or gave up. Idempotent;
// nil-safe.
func (p *placement) placed() {
	if p == nil || p.own == nil {
		return
	}
	p.once.Do(p.own.done)
}

// lookUp returns the topic's log start and end as looked up after the call
// began, and the read's placement: the caller must call its placed once it
// joined or started a pass, or gave up.
func (r *Reads) lookUp(ctx context.Context, topic string) (start, end int64, pl *placement, err error) {
	b := &r.bounds
	b.mu.Lock()
	if b.flights == nil {
		b.flights = make(map[string]*boundsFlight)
	}
	var call *boundsCall
	if fl := b.flights[topic]; fl != nil {
		// A lookup is in flight: share the one queued behind it.
		if fl.next == nil {
			fl.next = &boundsCall{done: make(chan struct{}), cohort: newCohort()}
		}
		call = fl.next
	} else {
		if !r.goroutines(1) {
			b.mu.Unlock()
			return 0, 0, nil, closedErr(topic)
		}
		fl = &boundsFlight{}
		b.flights[topic] = fl
		call = &boundsCall{done: make(chan struct{}), cohort: newCohort()}
		go r.lookUpBounds(topic, fl, call)
	}
	call.cohort.add()
	b.mu.Unlock()
	pl = &placement{own: call.cohort, awaits: []*cohort{call.cohort}}
	select {
	case <-call.done:
	case <-ctx.Done():
		pl.placed()
		return 0, 0, nil, ctx.Err()
	}
	if f := call.follower; f != nil && call.err == nil {
		// Reads started while this lookup ran: wait for theirs too, so
		// that this read starts its pass with them rather than a round
		// trip ahead (and alone). Its bounds stay its own.
		select {
		case <-f.done:
		case <-ctx.Done():
			pl.placed()
			return 0, 0, nil, ctx.Err()
		}
		if f.err == nil {
			pl.awaits = append(pl.awaits, f.cohort)
		}
	}
	if call.err != nil {
		pl.placed()
		return 0, 0, nil, call.err
	}
	return call.start, call.end, pl, nil
}

// lookUpBounds runs call's lookup, then the one queued meanwhile, until
// none is queued. The lookups are bounded by RequestTimeout and end with
// the store.
func (r *Reads) lookUpBounds(topic string, fl *boundsFlight, call *boundsCall) {
	defer r.wg.Done()
	b := &r.bounds
	for call != nil {
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.RequestTimeout)
		call.start, call.end, call.err = r.boundsOf(ctx, topic)
		cancel()
		b.mu.Lock()
		next := fl.next
		fl.next = nil
		call.follower = next
		if next == nil {
			delete(b.flights, topic)
		}
		b.mu.Unlock()
		close(call.done)
		call = next
	}
}

// boundsOf is Host.Offsets for a read's bounds lookup, in one round trip:
// both ListOffsets requests go at once straight to the partition's leader,
// known from the reads' metadata cache (which Open's warming fills, see
// warm.go). Host.Offsets (kadm) asks for the topic's metadata before each
// list, a second round trip in every read's way.
//
// Only a clean answer is taken: any failure (a moved leader, a deleted
// topic, a stale cache) forgets the cached leader and falls back to
// Host.Offsets, whose retries and errors are the reads' as before.
func (r *Reads) boundsOf(ctx context.Context, topic string) (start, end int64, err error) {
	if m, err := r.topicMeta(ctx, topic, false); err == nil {
		start, end, err := r.listBounds(ctx, m.leader, topic)
		if err == nil {
			return start, end, nil
		}
		// The cache may be stale: the fetches look the leader up again.
		r.meta.forget(topic)
		r.log.Debug("kwal: read bounds at the cached leader failed; asking again", "topic", topic, "err", err)
	}
	return r.opts.Host.Offsets(ctx, topic)
}

// errNoBounds is a leader's answer that lacks the partition's offset.
var errNoBounds = errors.New("kwal: list offsets: no offset for the partition")

// boundsClients are the clients whose connections carry a bounds lookup's
// two requests (see listPair): two clients, two connections.
func (r *Reads) boundsClients() (startCl, endCl *kgo.Client) {
	return r.opts.Host.FetchClient(0), r.opts.Host.FetchClient(r.opts.Conns - 1)
}
