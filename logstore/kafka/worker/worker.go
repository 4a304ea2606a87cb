package worker

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// worker is one topic's state, owned by the dispatcher goroutine.
type worker struct {
	p        *Producer
	pending  []*request         // FIFO of queued requests not yet sent
	busy     map[uint64]int     // regions with a group in flight
	parts    map[*part]struct{} // parts of this topic on lanes
	draining bool               // the producer's closing marker was taken
	aborted  bool               // Close gave up: everything fails
	exited   bool
	latest   int64 // highest acknowledged offset + 1

	// inboxed counts the topic's requests in the dispatcher's inbox
	// (guarded by the inbox's mutex); hot is set while the topic has a
	// ready group, as the dispatcher saw it when it last scanned (hotSeen
	// is its own copy, so that it stores only changes). See inbox.
	inboxed int
	hot     atomic.Bool
	hotSeen bool

	// withdrawals counts the requests their callers withdrew (Wait); a
	// plan that sees it changed plans from scratch, which drops them.
	withdrawals     atomic.Int64
	seenWithdrawals int64

	// Reused by plan, which runs after every change: cleared, not remade.
	dirty    bool     // state changed since the last plan
	replan   bool     // something besides new or taken requests changed: plan from scratch
	merged   bool     // the last plan merged groups (its scan state is stale)
	planned  int      // pending[:planned] went through the last plan's scan
	groups   []*group // planned groups, oldest first
	next     int      // groups[:next] were taken by dispatches since the plan
	blocked  map[uint64]struct{}
	byRegion map[uint64]*group
	spare    []*group
	runs     []index.Run // complete's, reused
}

// group is a part being planned: requests of one region (or, with
// MaxRegions, of a few), in queue order.
type group struct {
	reqs    []*request
	regions []uint64 // distinct
	bytes   int64
	oldest  time.Time
}

func newWorker(p *Producer) *worker {
	return &worker{p: p, busy: make(map[uint64]int), parts: make(map[*part]struct{}),
		blocked: make(map[uint64]struct{}), byRegion: make(map[uint64]*group)}
}

// plan groups the pending requests into w.groups, oldest first. A request
// joins the group holding its regions; one that touches a busy region, a
// region of a held back request, or regions of two groups is held back (and
// its regions with it), which keeps every region's requests in queue order.
//
// When only new requests arrived since the last plan, or groups were taken
// whole by dispatches, the plan continues the last one's scan with the new
// requests: the scan is a pass over pending in queue order, so its state
// after the old requests is what a full plan would reach there. (A taken
// group's requests stay in pending, no longer queued, until a full plan;
// its regions leave byRegion and are busy, so a later request of them is
// held, as a full plan would hold it.) A busy topic (many writers, one
// topic) would otherwise replan every pending request on every arrival and
// dispatch. A full plan runs when something else changed: a request was
// withdrawn or aborted, groups were merged, a completed group's regions may
// free held requests, or taken groups make up most of the plan.
func (w *worker) plan(freeLanes int) {
	if n := w.withdrawals.Load(); w.replan || w.merged || w.planned > len(w.pending) || n != w.seenWithdrawals {
		w.replan, w.merged = false, false
		w.seenWithdrawals = n
		w.removePending()
		w.next = 0
		w.planned = 0
		for _, g := range w.groups {
			g.reqs, g.regions = g.reqs[:0], g.regions[:0]
			w.spare = append(w.spare, g)
		}
		clear(w.groups)
		w.groups = w.groups[:0]
		clear(w.blocked)
		clear(w.byRegion)
	}
	if w.planned == len(w.pending) {
		return
	}
	o := &w.p.opts
	cap := int64(GroupBatches * o.MaxBatchBytes)
	for _, r := range w.pending[w.planned:] {
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
	w.planned = len(w.pending)
	w.mergeBacklog(freeLanes)
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
	groups := w.groups[w.next:] // groups[:next] were taken
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
			w.merged = true
		}
		out = append(out, g)
	}
	clear(groups[len(out):])
	w.groups = w.groups[:w.next+len(out)]
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

// take marks g's requests as sent (leaving out those their callers
// withdrew) and returns them as a part of a dispatch; nil when all were
// withdrawn. w.pending drops them at the next full plan; until then the
// plan goes on without g (its regions leave byRegion, and the dispatch
// makes them busy).
func (w *worker) take(g *group) *part {
	w.dirty = true
	for _, reg := range g.regions {
		delete(w.byRegion, reg)
	}
	var pt *part
	for _, r := range g.reqs {
		if !r.state.CompareAndSwap(stateQueued, stateTaken) {
			w.replan = true // withdrawn by its caller: a full plan frees its room
			continue
		}
		if pt == nil {
			pt = &part{w: w}
		}
		pt.reqs = append(pt.reqs, r)
		pt.nrecs += len(r.recs)
		pt.bytes += r.bytes
		for _, reg := range r.regions {
			if !slices.Contains(pt.regions, reg) {
				pt.regions = append(pt.regions, reg)
			}
		}
	}
	return pt
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
			r.recycle()           // never handed to a lane
		}
	}
	clear(w.pending[len(kept):])
	w.pending = kept
}

// timeout fails a part whose dispatch has not been answered in time. Its
// regions stay busy until the lane returns, so a later request of those
// regions cannot overtake records that may still be written.
func (w *worker) timeout(pt *part, dp *dispatch) {
	err := kwalerr.Errorf("produce to %q not acknowledged within %v; its entries may still be written: %w",
		w.p.opts.Topic, dp.timeout, ErrTimeout)
	for _, r := range pt.reqs {
		w.finish(r, nil, err)
	}
	w.p.opts.Logger.Warn("kwal: produce timed out", "topic", w.p.opts.Topic, "records", pt.nrecs, "timeout", dp.timeout)
}

// expire resolves r, whose Deadline passed: a queued request is withdrawn
// (the next plan drops it; it is never sent), one on a lane is abandoned
// (its regions stay busy and its records unrecycled until the lane
// returns). One its caller withdrew already is left to removePending.
func (w *worker) expire(r *request) {
	switch {
	case r.state.CompareAndSwap(stateQueued, stateCanceled):
		r.expired = withdrawnErr(w.p.opts.Topic, r.deadline.Cause)
		w.dirty, w.replan = true, true
		w.finish(r, nil, r.expired)
	case r.state.Load() == stateTaken:
		w.finish(r, nil, abandonedErr(w.p.opts.Topic, r.deadline.Cause))
	}
}

// complete resolves a part's requests from its dispatch's results: a
// request succeeds only if every one of its records was acknowledged.
func (w *worker) complete(pt *part, dp *dispatch) {
	p := w.p
	w.dirty = true
	// A full plan is needed when requests are held (one of them may wait
	// for these regions), when the producer drains (its pending list must
	// empty for it to exit), or when taken groups are most of the plan
	// (pending still holds their requests).
	if len(w.blocked) > 0 || w.draining || 2*w.next > len(w.groups) {
		w.replan = true
	}
	delete(w.parts, pt)
	for _, reg := range pt.regions {
		if w.busy[reg]--; w.busy[reg] <= 0 {
			delete(w.busy, reg)
		}
	}
	failed := dp.failed
	// The index learns of the records before their callers do, so an
	// append that returned is already in the index.
	runs := w.runs[:0] // Observe copies what it keeps
	var last int64 = -1
	nfailed := 0
	var firstErr error
	for _, r := range pt.reqs {
		for i, rec := range r.recs {
			if e := failed[rec]; e != nil {
				nfailed++
				if firstErr == nil {
					firstErr = e
				}
				continue
			}
			runs = index.AppendRun(runs, index.Run{Start: rec.Offset, Count: 1, Region: r.recRegion[i]})
			last = max(last, rec.Offset)
		}
	}
	if last >= 0 {
		if last+1 > w.latest {
			w.latest = last + 1
			p.latest.Store(last + 1)
			if tm := p.tm; tm != nil {
				tm.latestAcked.Set(float64(last + 1))
			}
		}
		if p.opts.Collector != nil && !w.exited { // after Close gave up, the owner may have closed the collector
			p.opts.Collector.Observe(p.opts.Topic, runs)
		}
	}
	if cap(runs) <= 1024 {
		w.runs = runs
	}
	// One array holds every request's offsets: one allocation per part,
	// not per call. (A caller keeps its slice; the array lives while any does.)
	var offs []int64
	if !dp.timedOut {
		n := 0
		for _, r := range pt.reqs {
			n += len(r.entryFirst)
		}
		offs = make([]int64, n)
	}
	for _, r := range pt.reqs {
		if dp.timedOut {
			continue // already failed; what was written is observed above
		}
		k := len(r.entryFirst)
		offsets := offs[:k:k]
		offs = offs[k:]
		var err error
		if nfailed > 0 {
			for _, rec := range r.recs {
				if e := failed[rec]; e != nil {
					err = e
					break
				}
			}
		}
		if err != nil {
			w.finish(r, nil, kwalerr.Errorf("produce to %q: %w", p.opts.Topic, err))
			continue
		}
		for i, at := range r.entryFirst {
			offsets[i] = r.recs[at].Offset
		}
		w.finish(r, offsets, nil)
	}
	if nfailed > 0 {
		p.opts.Logger.Warn("kwal: produce failed", "topic", p.opts.Topic, "records", pt.nrecs, "failed", nfailed, "err", firstErr)
	}
	// The lane is back: franz-go called every record's promise and holds
	// none of them, and the offsets were read above.
	for _, r := range pt.reqs {
		r.recycle()
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
		err = context.Canceled // Wait returned already
		if r.expired != nil {
			err = r.expired // withdrawn by the dispatcher: Wait returns it
		}
	}
	r.offsets, r.err = offsets, err
	close(r.done)
	p.lanes.deadlines.remove(r)
	p.release(r.held)
	if m := p.opts.Metrics; m != nil {
		tm := p.tm
		tm.queueRequests.Dec()
		tm.queueLen.Sub(float64(r.bytes))
		switch {
		case err == nil:
			tm.entries.Add(float64(len(r.entryFirst))) // err == nil: from complete, before recycle
			tm.bytes.Add(float64(r.dataBytes))
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

func (w *worker) closedErr() error {
	return kwalerr.Errorf("producer of %q closed before Kafka acknowledged: %w", w.p.opts.Topic, logstore.ErrClosed)
}

// abortAll fails every pending and in-flight request of the topic (Close
// gave up waiting); requests still arriving fail on arrival. In-flight
// parts keep their regions busy until their lanes return.
func (w *worker) abortAll() {
	w.aborted = true
	w.dirty, w.replan = true, true
	err := w.closedErr()
	for _, r := range w.pending {
		if r.state.Load() == stateTaken {
			continue // on a lane: failed with its part below, recycled in complete
		}
		w.finish(r, nil, err)
		r.recycle() // never handed to a lane
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	for pt := range w.parts {
		for _, r := range pt.reqs {
			w.finish(r, nil, err)
		}
	}
}
