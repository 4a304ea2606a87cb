package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/kwal/kwal/logstore"
)

// readBounds batches the log-bounds lookups (ListOffsets) of reads of one
// topic: a read that starts while a lookup is in flight waits for the next
// one, which every read that arrived meanwhile shares. A read so never
// takes bounds looked up before it started (its end includes every append
// acknowledged before it), and reads that start together (a datanode
// opening its regions) get one end, and so one pass to share.
type readBounds struct {
	mu      sync.Mutex
	flights map[string]*boundsFlight
}

// boundsFlight is one topic's lookup in flight and the one queued behind it.
type boundsFlight struct {
	running bool
	next    *boundsCall // the lookup the reads arriving now will share
}

// boundsCall is one lookup's outcome, final once done is closed.
type boundsCall struct {
	done       chan struct{}
	start, end int64
	err        error
	// follower is the lookup queued behind this one when it completed (reads
	// that arrived meanwhile), or nil.
	follower *boundsCall
}

// bounds returns the topic's log start and end as looked up after the call
// began.
func (s *LogStore) bounds(ctx context.Context, topic string) (start, end int64, err error) {
	b := &s.readBounds
	b.mu.Lock()
	if b.flights == nil {
		b.flights = make(map[string]*boundsFlight)
	}
	fl := b.flights[topic]
	if fl == nil {
		fl = &boundsFlight{}
		b.flights[topic] = fl
	}
	if fl.next == nil {
		fl.next = &boundsCall{done: make(chan struct{})}
	}
	call := fl.next
	if !fl.running {
		if !s.addReadGoroutines(1) {
			b.mu.Unlock()
			return 0, 0, fmt.Errorf("kwal: read %q: %w", topic, logstore.ErrClosed)
		}
		fl.running = true
		fl.next = nil
		go s.lookUpBounds(topic, fl, call)
	}
	b.mu.Unlock()
	select {
	case <-call.done:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if f := call.follower; f != nil && call.err == nil {
		// Reads started while this lookup ran: wait for theirs too, so
		// that this read starts its pass with them rather than a round
		// trip ahead (and alone). Its bounds stay its own.
		select {
		case <-f.done:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	return call.start, call.end, call.err
}

// lookUpBounds runs call's lookup, then the one queued meanwhile, until
// none is queued. The lookups are bounded by RequestTimeout and end with
// the store.
func (s *LogStore) lookUpBounds(topic string, fl *boundsFlight, call *boundsCall) {
	defer s.passWG.Done()
	b := &s.readBounds
	for call != nil {
		ctx, cancel := context.WithTimeout(s.readCtx, s.cfg.RequestTimeout)
		call.start, call.end, call.err = s.offsets(ctx, topic)
		cancel()
		b.mu.Lock()
		next := fl.next
		fl.next = nil
		call.follower = next
		if next == nil {
			fl.running = false
			delete(b.flights, topic)
		}
		b.mu.Unlock()
		close(call.done)
		call = next
	}
}

// addReadGoroutines counts n goroutines of reads for Close to wait for,
// unless the store is closed (then Close may be waiting already).
func (s *LogStore) addReadGoroutines(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.passWG.Add(n)
	return true
}
