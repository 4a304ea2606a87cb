package worker

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
)

// dispatcher is the state of the Lanes goroutine; only run touches it.
type dispatcher struct {
	l        *Lanes
	free     []*lane
	workers  []*worker // registered producers, in registration order
	inflight int       // dispatches on lanes
	rr       int       // the worker a dispatch starts packing at, rotated for fairness
	wake     *time.Timer
	wakeAt   time.Time
	latency  time.Duration // moving average of produce latency
	stopping bool
}

// dispatch is what one lane carries at a time: at most one group per topic,
// every group's records contiguous, sent with one Flush.
type dispatch struct {
	lane     *lane
	parts    []*part
	recs     []*kgo.Record
	bytes    int64
	start    time.Time
	timeout  time.Duration
	failed   map[*kgo.Record]error // set by the lane goroutine before it reports
	timer    *time.Timer
	timedOut bool
	done     bool // completed: a late timeout is ignored
}

// part is one topic's group in a dispatch.
type part struct {
	w       *worker
	reqs    []*request
	regions []uint64
	nrecs   int
	bytes   int64
}

func newDispatcher(l *Lanes) *dispatcher {
	d := &dispatcher{l: l}
	for _, c := range l.opts.Clients {
		d.free = append(d.free, &lane{client: c})
	}
	return d
}

// run is the dispatch loop: it takes requests, plans each dirty topic's
// groups, and sends what is ready while lanes are free.
func (d *dispatcher) run() {
	l := d.l
	defer close(l.exited)
	stop := l.stop
	for {
		if d.stopping && d.inflight == 0 {
			d.failRemaining()
			return
		}
		if len(l.deadlines) > 0 {
			now := time.Now()
			if next := d.expire(now); !next.IsZero() {
				d.armWake(next.Sub(now))
			}
		}
		exiting := false
		for _, w := range d.workers {
			if w.dirty {
				w.plan(len(d.free))
				w.dirty = false
				exiting = exiting || w.draining
			}
		}
		if exiting {
			for _, w := range slices.Clone(d.workers) {
				d.maybeExit(w)
			}
		}
		d.pump()
		var wakeC <-chan time.Time
		if !d.wakeAt.IsZero() {
			wakeC = d.wake.C
		}
		select {
		case <-l.in.kick:
		case m := <-l.ctl:
			if m.abort {
				m.w.abortAll()
				d.maybeExit(m.w)
			} else {
				d.workers = append(d.workers, m.w)
			}
		case dp := <-l.results:
			d.complete(dp)
			for n := len(l.results); n > 0; n-- {
				d.complete(<-l.results)
			}
		case dp := <-l.timeouts:
			d.timeout(dp)
		case <-wakeC:
			d.wakeAt = time.Time{}
		case <-stop:
			stop = nil // a nil channel blocks: handled once
			d.stopping = true
		}
		// Awake: arrivals signal again until the next hold, and whatever
		// arrived without a signal is taken now (see inbox).
		l.in.release()
		for _, r := range l.in.take() {
			d.take(r)
		}
	}
}

// take adds a submitted request (or a producer's closing marker) to its
// topic's pending list.
func (d *dispatcher) take(r *request) {
	w := r.w
	w.dirty = true
	if r.closing {
		w.draining = true
		w.replan = true // a full plan drops withdrawn requests, so the topic can exit
		d.maybeExit(w)
		return
	}
	if w.aborted {
		w.finish(r, nil, w.closedErr())
		r.recycle()
		return
	}
	w.pending = append(w.pending, r)
	d.l.deadlines.add(r)
}

// maybeExit closes a producer's exited channel once it is draining and
// holds nothing: everything it queued is resolved.
func (d *dispatcher) maybeExit(w *worker) {
	if !w.draining || w.exited || !w.aborted && (len(w.pending) > 0 || len(w.parts) > 0) {
		return
	}
	w.exited = true
	close(w.p.exited)
	for i, x := range d.workers {
		if x == w {
			d.workers = append(d.workers[:i], d.workers[i+1:]...)
			break
		}
	}
}

// pump sends ready groups while lanes are free. Adaptive lane policy: up
// to MinInFlight dispatches go at once; beyond that, another lane is used
// only when the ready groups cannot all share one request (two ready
// groups of one topic, or more bytes than MaxRequestBytes), or when the
// ready groups have waited about one produce round trip. Otherwise the
// ready groups wait for a dispatch to return and then leave together:
// requests are filled before more lanes are used, as one plain producer
// fills its next request while the previous one is in flight.
func (d *dispatcher) pump() {
	for len(d.free) > 0 {
		ready, oldest, leftover, bytes := d.scan()
		if ready == 0 {
			return
		}
		if d.inflight >= d.l.opts.MinInFlight && !leftover && bytes < d.l.opts.MaxRequestBytes && !d.stopping {
			hold := min(max(d.latency, 100*time.Microsecond), 10*time.Millisecond)
			if wait := time.Until(oldest.Add(hold)); wait > 0 {
				d.armWake(wait)
				d.l.in.hold(d.l.opts.MaxRequestBytes-bytes, d.wakeAt)
				return
			}
		}
		d.send(d.pack())
	}
}

// scan counts the ready groups (the next group of each topic whose linger
// is over), the oldest one's age, whether any topic has a second ready
// group, and the ready bytes of the first groups. It arms the wake timer
// for the earliest linger still running.
func (d *dispatcher) scan() (ready int, oldest time.Time, leftover bool, bytes int64) {
	var lingerWait time.Duration
	for _, w := range d.workers {
		hot := false
		for i := w.next; i < len(w.groups); i++ {
			g := w.groups[i]
			if wait := w.lingerFor(g); wait > 0 {
				if lingerWait == 0 || wait < lingerWait {
					lingerWait = wait
				}
				break // later groups are younger
			}
			if i > w.next {
				leftover = true
				break
			}
			ready++
			hot = true
			bytes += g.bytes
			if oldest.IsZero() || g.oldest.Before(oldest) {
				oldest = g.oldest
			}
		}
		if hot != w.hotSeen {
			w.hotSeen = hot
			w.hot.Store(hot)
		}
	}
	if bytes > d.l.opts.MaxRequestBytes {
		leftover = true
	}
	if lingerWait > 0 {
		d.armWake(lingerWait)
	}
	return ready, oldest, leftover, bytes
}

// pack takes the next ready group of each topic, starting at a rotating
// topic, while the dispatch stays within MaxRequestBytes (its first group
// always fits).
func (d *dispatcher) pack() *dispatch {
	dp := &dispatch{start: time.Now()}
	n := len(d.workers)
	start := d.rr % max(n, 1)
	d.rr++
	for k := range n {
		w := d.workers[(start+k)%n]
		if w.next >= len(w.groups) {
			continue
		}
		g := w.groups[w.next]
		if w.lingerFor(g) > 0 {
			continue
		}
		if len(dp.parts) > 0 && dp.bytes+g.bytes > d.l.opts.MaxRequestBytes {
			continue
		}
		w.next++
		if pt := w.take(g); pt != nil {
			dp.parts = append(dp.parts, pt)
			dp.bytes += pt.bytes
			dp.timeout = max(dp.timeout, w.p.opts.ProduceTimeout)
		}
	}
	return dp
}

// send hands dp to a free lane, or does nothing when every request in it
// was withdrawn meanwhile.
func (d *dispatcher) send(dp *dispatch) {
	if len(dp.parts) == 0 {
		return
	}
	n := 0
	for _, pt := range dp.parts {
		n += pt.nrecs
	}
	dp.recs = make([]*kgo.Record, 0, n)
	for _, pt := range dp.parts {
		for _, r := range pt.reqs {
			dp.recs = append(dp.recs, r.recs...)
		}
		pt.w.parts[pt] = struct{}{}
		for _, reg := range pt.regions {
			pt.w.busy[reg]++
		}
		if m := d.l.opts.Metrics; m != nil {
			m.ProduceRecords.Observe(float64(pt.nrecs))
			m.ProduceBytes.Observe(float64(pt.bytes))
			m.ProduceRegions.Observe(float64(len(pt.regions)))
		}
	}
	if m := d.l.opts.Metrics; m != nil {
		m.DispatchTopics.Observe(float64(len(dp.parts)))
	}
	ln := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	dp.lane = ln
	d.inflight++
	timeouts, exited := d.l.timeouts, d.l.exited
	dp.timer = time.AfterFunc(dp.timeout, func() {
		select {
		case timeouts <- dp:
		case <-exited:
		}
	})
	d.l.produce(ln, dp, dp.timeout)
}

// complete resolves a dispatch's requests from the lane's results and
// returns its lane.
func (d *dispatcher) complete(dp *dispatch) {
	dp.timer.Stop()
	dp.done = true
	d.free = append(d.free, dp.lane)
	d.inflight--
	lat := time.Since(dp.start)
	if d.latency == 0 {
		d.latency = lat
	} else {
		d.latency += (lat - d.latency) / 8
	}
	if m := d.l.opts.Metrics; m != nil {
		m.ProduceLatency.Observe(lat.Seconds())
	}
	for _, pt := range dp.parts {
		pt.w.complete(pt, dp)
		d.maybeExit(pt.w)
	}
}

// timeout fails a dispatch whose produce has not been answered in time. Its
// regions stay busy until the lane returns, so a later request of those
// regions cannot overtake records that may still be written.
func (d *dispatcher) timeout(dp *dispatch) {
	if dp.timedOut || dp.done {
		return
	}
	dp.timedOut = true
	for _, pt := range dp.parts {
		pt.w.timeout(pt, dp)
	}
}

func (d *dispatcher) armWake(wait time.Duration) {
	at := time.Now().Add(wait)
	if !d.wakeAt.IsZero() && !at.Before(d.wakeAt) {
		return
	}
	d.wakeAt = at
	if d.wake == nil {
		d.wake = time.NewTimer(wait)
		return
	}
	d.wake.Stop()
	select {
	case <-d.wake.C:
	default:
	}
	d.wake.Reset(wait)
}

// failRemaining runs when the dispatcher stops: any producer still
// registered (not closed by its owner) has its requests failed.
func (d *dispatcher) failRemaining() {
	for _, w := range d.workers {
		w.abortAll()
	}
	for _, r := range d.l.in.close() {
		if !r.closing {
			r.w.finish(r, nil, kwalerr.Errorf("append to %q: %w", r.w.p.opts.Topic, logstore.ErrClosed))
			r.recycle()
		}
	}
}
