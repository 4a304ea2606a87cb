package kafka

import "sync"

// appendsInFlight counts, per region, the AppendBatch calls in flight that
// carry it, so that Release waits for its own region's appends only: an
// append never waits for a Release, and a Release of one region never waits
// for another region's appends (a produce may take up to ProduceTimeout).
type appendsInFlight struct {
	mu    sync.Mutex
	calls map[ownKey]int // appends in flight carrying the region (absent: none)
	// drained holds, for a region a Release waits for, the channel closed
	// when its last append in flight ends.
	drained map[ownKey]chan struct{}
	// waitingForTesting, when set, is called as a Release begins to wait
	// for its region's appends in flight.
	waitingForTesting func(ns string, region uint64)
}

// enterAppend counts an append carrying k as in flight, unless this store
// released k, and returns what the store holds of k (released when the
// append was not counted). Release marks k released before it looks at the
// count under the same mutex, so either Release waits for this append or
// this append sees the mark; an append that arrives after the mark is not
// counted, so a stream of refused appends never holds a Release up.
func (o *owning) enterAppend(k ownKey) (ownState, bool) {
	a := &o.appends
	a.mu.Lock()
	defer a.mu.Unlock()
	st, _ := o.own(k)
	if st.released {
		return st, false
	}
	if a.calls == nil {
		a.calls = make(map[ownKey]int)
	}
	a.calls[k]++
	return st, true
}

// leaveAppends ends what enterAppend counted for each of keys (a region may
// be listed once per enterAppend), and wakes a Release waiting for a region
// whose last append in flight this was.
func (o *owning) leaveAppends(keys []ownKey) {
	if len(keys) == 0 {
		return
	}
	a := &o.appends
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		if n := a.calls[k] - 1; n > 0 {
			a.calls[k] = n
			continue
		}
		delete(a.calls, k)
		if ch, ok := a.drained[k]; ok {
			close(ch)
			delete(a.drained, k)
		}
	}
}

// appendsDrained returns a channel closed once no append carrying k is in
// flight, or nil when none is now. Call it after marking k released: no
// append of k is counted after that (until this store claims k again), so
// the channel closes once those counted before end.
func (o *owning) appendsDrained(k ownKey) <-chan struct{} {
	a := &o.appends
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.calls[k] == 0 {
		return nil
	}
	ch, ok := a.drained[k]
	if !ok {
		if a.drained == nil {
			a.drained = make(map[ownKey]chan struct{})
		}
		ch = make(chan struct{})
		a.drained[k] = ch
	}
	return ch
}
