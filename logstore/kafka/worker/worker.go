package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// worker is the state of one topic's worker goroutine; only run touches it.
type worker struct {
	p        *Producer
	pending  []*request     // FIFO of queued requests not yet sent
	busy     map[uint64]int // regions with a group in flight
	inflight map[*dispatch]struct{}
	draining bool
	linger   *time.Timer
	latest   int64 // highest acknowledged offset + 1

	// Reused by plan, which runs after every event: cleared, not remade.
	dirty    bool // state changed since the last plan
	groups   []*group
	blocked  map[uint64]struct{}
	byRegion map[uint64]*group
	spare    []*group
}

// dispatch is one group handed to a lane: requests whose records go out as
// their own batch(es).
type dispatch struct {
	reqs     []*request
	recs     []*kgo.Record
	regions  []uint64
	bytes    int64
	start    time.Time
	results  kgo.ProduceResults
	timer    *time.Timer
	timedOut bool
}

// group is a dispatch being planned.
type group struct {
	reqs    []*request
	regions []uint64 // distinct
	bytes   int64
	oldest  time.Time
}

func newWorker(p *Producer) *worker {
	return &worker{p: p, busy: make(map[uint64]int), inflight: make(map[*dispatch]struct{}),
		blocked: make(map[uint64]struct{}), byRegion: make(map[uint64]*group)}
}

// run is the group-commit loop. Ordering argument: a request is sent only
// when none of its regions has a group in flight and no earlier pending
// request of those regions is held back, and a request always travels in
// one group, whose records a lane produces in order on one idempotent
// producer. So the requests of one region reach the log in queue order,
// and the entries of one request keep their slice order. Requests of
// different regions may overtake each other.
func (w *worker) run() {
	p := w.p
	defer close(p.exited)
	queue := p.queue
	for {
		if w.dirty {
			w.plan()
			w.dirty = false
		}
		// After plan: its removePending may have emptied pending of requests
		// their callers withdrew, and no event would follow to end a drain
		// checked before it (Close then waited out its whole context).
		if w.draining && len(w.pending) == 0 && len(w.inflight) == 0 && len(queue) == 0 {
			return
		}
		var free chan *lane
		var lingerC <-chan time.Time
		if len(w.groups) > 0 {
			if wait := w.lingerFor(w.groups[0]); wait > 0 {
				w.armLinger(wait)
				lingerC = w.linger.C
			} else {
				free = p.opts.Lanes.free
			}
		}
		select {
		case r := <-queue:
			w.dirty = true
			w.take(r)
			for n := len(queue); n > 0; n-- {
				w.take(<-queue)
			}
		case ln := <-free:
			w.dirty = true
			w.mergeBacklog(1 + len(free))
			w.send(w.groups[0], ln)
			// Use every lane that is free right now before replanning.
			for _, g := range w.groups[1:] {
				if w.lingerFor(g) > 0 {
					break
				}
				ln, ok := tryLane(free)
				if !ok {
					break
				}
				w.send(g, ln)
			}
			w.removePending()
		case d := <-p.results:
			w.dirty = true
			w.complete(d)
		case d := <-p.timeouts:
			w.dirty = true
			w.timeout(d)
		case <-lingerC:
		case <-p.closing:
			w.dirty = true
			p.closing = nil // a nil channel blocks: handled once
			w.draining = true
		case <-p.abort:
			w.failAll(fmt.Errorf("kwal: producer of %q closed before Kafka acknowledged: %w", p.opts.Topic, logstore.ErrClosed))
			return
		}
	}
}

// tryLane takes a lane if one is free right now.
func tryLane(free chan *lane) (*lane, bool) {
	select {
	case ln := <-free:
		return ln, true
	default:
		return nil, false
	}
}

func (w *worker) take(r *request) {
	w.pending = append(w.pending, r)
}

// plan groups the pending requests into w.groups, oldest first. A request
// joins the group holding its regions; one that touches a busy region, a
// region of a held back request, or regions of two groups is held back (and
// its regions with it), which keeps every region's requests in queue order.
func (w *worker) plan() {
	w.removePending()
	for _, g := range w.groups {
		g.reqs, g.regions = g.reqs[:0], g.regions[:0]
		w.spare = append(w.spare, g)
	}
	clear(w.groups)
	w.groups = w.groups[:0]
	if len(w.pending) == 0 {
		return
	}
	o := &w.p.opts
	cap := int64(GroupBatches * o.MaxBatchBytes)
	clear(w.blocked)
	clear(w.byRegion)
	for _, r := range w.pending {
		var g *group
		hold := false
		for _, reg := range r.regions {
			if _, ok := w.blocked[reg]; ok || w.busy[reg] > 0 {
				hold = true
				break
			}
			if rg := w.byRegion[reg]; rg != nil {
				if g != nil && g != rg {
					hold = true
					break
				}
				g = rg
			}
		}
		if !hold && g != nil && g.bytes+r.bytes > cap {
			hold = true
		}
		if hold {
			for _, reg := range r.regions {
				w.blocked[reg] = struct{}{}
			}
			continue
		}
		if g == nil {
			g = w.newGroup()
			g.oldest = r.enqueued
			w.groups = append(w.groups, g)
		}
		g.reqs = append(g.reqs, r)
		g.bytes += r.bytes
		for _, reg := range r.regions {
			if w.byRegion[reg] == nil {
				g.regions = append(g.regions, reg)
				w.byRegion[reg] = g
			}
		}
	}
}

func (w *worker) newGroup() *group {
	if n := len(w.spare); n > 0 {
		g := w.spare[n-1]
		w.spare = w.spare[:n-1]
		*g = group{reqs: g.reqs[:0], regions: g.regions[:0]}
		return g
	}
	return &group{}
}

// mergeBacklog merges adjacent groups of w.groups while there are more
// groups than lanes (about) free, each merged produce staying within
// MaxRegions regions and MaxBatchBytes.
func (w *worker) mergeBacklog(lanes int) {
	o := &w.p.opts
	groups := w.groups
	if o.MaxRegions <= 1 || len(groups) <= lanes {
		return
	}
	limit := int64(o.MaxBatchBytes)
	out := groups[:0]
	excess := len(groups) - lanes
	for i := 0; i < len(groups); i++ {
		g := groups[i]
		for excess > 0 && i+1 < len(groups) {
			n := groups[i+1]
			if len(g.regions)+len(n.regions) > o.MaxRegions || g.bytes+n.bytes > limit {
				break
			}
			g.reqs = append(g.reqs, n.reqs...)
			g.bytes += n.bytes
			g.oldest = minTime(g.oldest, n.oldest)
			g.regions = append(g.regions, n.regions...) // groups never share a region
			i++
			excess--
		}
		out = append(out, g)
	}
	clear(groups[len(out):])
	w.groups = out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// lingerFor is how much longer g should wait for more requests.
func (w *worker) lingerFor(g *group) time.Duration {
	o := &w.p.opts
	if o.Linger <= 0 || g.bytes >= int64(o.MaxBatchBytes) || w.draining {
		return 0
	}
	return time.Until(g.oldest.Add(o.Linger))
}

func (w *worker) armLinger(d time.Duration) {
	if w.linger == nil {
		w.linger = time.NewTimer(d)
		return
	}
	w.linger.Stop()
	select {
	case <-w.linger.C:
	default:
	}
	w.linger.Reset(d)
}

// send hands g to lane ln. Requests withdrawn by their callers are left
// out; the caller then drops the sent requests from w.pending.
func (w *worker) send(g *group, ln *lane) {
	p := w.p
	d := &dispatch{start: time.Now()}
	for _, r := range g.reqs {
		if !r.state.CompareAndSwap(stateQueued, stateTaken) {
			continue // withdrawn by its caller
		}
		d.reqs = append(d.reqs, r)
		d.recs = append(d.recs, r.recs...)
		d.bytes += r.bytes
		for _, reg := range r.regions {
			if !slices.Contains(d.regions, reg) {
				d.regions = append(d.regions, reg)
			}
		}
	}
	if len(d.reqs) == 0 {
		p.opts.Lanes.free <- ln
		return
	}
	for _, reg := range d.regions {
		w.busy[reg]++
	}
	w.inflight[d] = struct{}{}
	if m := p.opts.Metrics; m != nil {
		m.ProduceRecords.Observe(float64(len(d.recs)))
		m.ProduceBytes.Observe(float64(d.bytes))
		m.ProduceRegions.Observe(float64(len(d.regions)))
	}
	timeout := p.opts.ProduceTimeout
	d.timer = time.AfterFunc(timeout, func() { p.timeouts <- d })
	p.opts.Lanes.produce(ln, func(c Client) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		d.results = c.ProduceSync(ctx, d.recs...)
		cancel()
		p.results <- d
	})
}

// removePending keeps in w.pending only the requests still queued, and
// frees the room of those their callers withdrew.
func (w *worker) removePending() {
	kept := w.pending[:0]
	for _, r := range w.pending {
		switch r.state.Load() {
		case stateQueued:
			kept = append(kept, r)
		case stateCanceled:
			w.finish(r, nil, nil) // already failed by Wait; free its room
		}
	}
	clear(w.pending[len(kept):])
	w.pending = kept
}

// timeout fails a group whose produce has not been answered in time. Its
// regions stay busy until the lane returns, so a later request of those
// regions cannot overtake records that may still be written.
func (w *worker) timeout(d *dispatch) {
	if _, ok := w.inflight[d]; !ok || d.timedOut {
		return
	}
	d.timedOut = true
	err := fmt.Errorf("kwal: produce to %q not acknowledged within %v; its entries may still be written: %w",
		w.p.opts.Topic, w.p.opts.ProduceTimeout, ErrTimeout)
	for _, r := range d.reqs {
		w.finish(r, nil, err)
	}
	w.p.opts.Logger.Warn("kwal: produce timed out", "topic", w.p.opts.Topic, "records", len(d.recs), "timeout", w.p.opts.ProduceTimeout)
}

// complete resolves a group's requests from its produce results: a request
// succeeds only if every one of its records was acknowledged.
func (w *worker) complete(d *dispatch) {
	p := w.p
	d.timer.Stop()
	delete(w.inflight, d)
	for _, reg := range d.regions {
		if w.busy[reg]--; w.busy[reg] <= 0 {
			delete(w.busy, reg)
		}
	}
	var failed map[*kgo.Record]error
	if d.results.FirstErr() != nil {
		failed = make(map[*kgo.Record]error)
		for _, res := range d.results {
			if res.Err != nil {
				failed[res.Record] = res.Err
			}
		}
	}
	if m := p.opts.Metrics; m != nil {
		m.ProduceLatency.Observe(time.Since(d.start).Seconds())
	}
	// The index learns of the records before their callers do, so an
	// append that returned is already in the index.
	var runs []index.Run
	var last int64 = -1
	for _, r := range d.reqs {
		for i, rec := range r.recs {
			if failed[rec] == nil {
				runs = index.AppendRun(runs, index.Run{Start: rec.Offset, Count: 1, Region: r.recRegion[i]})
				last = max(last, rec.Offset)
			}
		}
	}
	if last >= 0 {
		if last+1 > w.latest {
			w.latest = last + 1
			if m := p.opts.Metrics; m != nil {
				m.LatestAcked.WithLabelValues(p.opts.Topic).Set(float64(last + 1))
			}
		}
		if p.opts.Collector != nil {
			p.opts.Collector.Observe(p.opts.Topic, runs)
		}
	}
	for _, r := range d.reqs {
		if d.timedOut {
			continue // already failed; what was written is observed above
		}
		var err error
		for _, rec := range r.recs {
			if e := failed[rec]; e != nil {
				err = e
				break
			}
		}
		if err != nil {
			w.finish(r, nil, fmt.Errorf("kwal: produce to %q: %w", p.opts.Topic, err))
			continue
		}
		offsets := make([]int64, len(r.entryFirst))
		for i, at := range r.entryFirst {
			offsets[i] = r.recs[at].Offset
		}
		w.finish(r, offsets, nil)
	}
	if len(failed) > 0 {
		p.opts.Logger.Warn("kwal: produce failed", "topic", p.opts.Topic, "records", len(d.recs), "failed", len(failed), "err", d.results.FirstErr())
	}
}

// finish resolves r (unless it was withdrawn) and frees its queue room.
func (w *worker) finish(r *request, offsets []int64, err error) {
	p := w.p
	select {
	case <-r.done:
		return
	default:
	}
	if r.state.Load() == stateCanceled {
		err = context.Canceled
	}
	r.offsets, r.err = offsets, err
	close(r.done)
	p.sem.Release(r.held)
	if m := p.opts.Metrics; m != nil {
		m.QueueRequests.WithLabelValues(p.opts.Topic).Dec()
		m.QueueBytes.WithLabelValues(p.opts.Topic).Sub(float64(r.bytes))
		switch {
		case err == nil:
			m.EntriesAppended.WithLabelValues(p.opts.Topic).Add(float64(len(r.entryFirst)))
			m.BytesAppended.WithLabelValues(p.opts.Topic).Add(float64(r.dataBytes))
		case errors.Is(err, ErrTimeout):
			m.Errors.WithLabelValues("timeout").Inc()
		case errors.Is(err, context.Canceled):
			m.Errors.WithLabelValues("canceled").Inc()
		case errors.Is(err, logstore.ErrClosed):
			m.Errors.WithLabelValues("closed").Inc()
		default:
			m.Errors.WithLabelValues("produce").Inc()
		}
	}
}

// failAll fails every pending and in-flight request.
func (w *worker) failAll(err error) {
	for _, r := range w.pending {
		w.finish(r, nil, err)
	}
	w.pending = nil
	for d := range w.inflight {
		d.timer.Stop()
		for _, r := range d.reqs {
			w.finish(r, nil, err)
		}
	}
}
