package kafka

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// pass is one walk over a topic's log that one or more reads share: a
// fetcher goroutine fetches, a reader goroutine decodes, and a router hands
// each complete entry to the reads of its region. The store owns running
// passes (Close ends them); a pass ends when its plan is done, when it
// fails, or when its last read leaves.
//
// Reads join only a pass with their own end (the log end they saw) and
// NoIndex setting, so that what a read yields is exactly what it would
// yield alone.
type pass struct {
	s       *LogStore
	id      uint64
	topic   string
	noIndex bool
	end     int64

	joins    chan joinReq
	fetching chan struct{} // closed when the fetcher ended: joins are refused
	flushed  chan struct{} // closed when the pass first hands entries over: joins are refused
	finished chan struct{} // closed when the pass ended: err and stats are final
	cancel   context.CancelFunc

	mu       sync.Mutex
	subs     int  // reads taking part (joined and not left)
	reads    int  // reads that joined in all
	stopping bool // the last read left: no more joins

	err   error
	stats ReadStats
}

// sub is one read's end of a pass.
type sub struct {
	from map[uint64]int64      // first offset wanted, per region
	out  chan []logstore.Entry // the read's entries in ID order (one batch buffered)
	gone chan struct{}         // closed when the read leaves
}

// joinOrStart puts the read sb, which plans ranges, into a running pass of
// topic that can take it, or starts a pass for it. The store's pass lock
// is held throughout, so that reads starting together find each other's
// pass rather than each starting one; a join waits at most for the
// fetcher to finish handing over a response. The read is placed (pl)
// once it is in a pass: a pass started by a read of its cohort may then
// plan.
func (s *LogStore) joinOrStart(topic string, noIndex bool, end int64, sb *sub, ranges []index.Range, pl *placement) (*pass, error) {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	defer pl.placed()
	for _, p := range s.passes[topic] {
		if p.noIndex == noIndex && p.end == end && p.tryJoin(sb, ranges) {
			return p, nil
		}
	}
	if !s.addReadGoroutines(2) {
		return nil, fmt.Errorf("kwal: read %q: %w", topic, logstore.ErrClosed)
	}
	return s.startPass(topic, noIndex, end, sb, ranges, pl.awaits), nil
}

// tryJoin asks p's fetcher to take the read in. A pass that has handed
// entries to a read takes no more: a read could then be started inside the
// loop of one of its reads, and wait on the pass while the pass waits on
// that loop.
func (p *pass) tryJoin(sb *sub, ranges []index.Range) bool {
	req := joinReq{sub: sb, ranges: ranges, reply: make(chan bool, 1)}
	select {
	case p.joins <- req:
		return <-req.reply
	case <-p.fetching:
		return false
	case <-p.flushed:
		return false
	}
}

// accept admits a joining read unless the pass is stopping.
func (p *pass) accept() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return false
	}
	select {
	case <-p.flushed:
		return false
	default:
	}
	p.subs++
	p.reads++
	if h := p.s.joinHook; h != nil {
		h()
	}
	return true
}

// leave takes a read out of the pass before the pass ended; the last read
// to leave stops the pass and waits for its goroutines.
func (p *pass) leave(sb *sub) {
	close(sb.gone)
	p.mu.Lock()
	p.subs--
	last := p.subs == 0
	if last {
		p.stopping = true
	}
	p.mu.Unlock()
	if last {
		p.cancel()
		<-p.finished
	}
}

// startPass starts a pass over ranges for the read sb; s.passMu is held,
// and its two goroutines are counted in s.passWG.
func (s *LogStore) startPass(topic string, noIndex bool, end int64, sb *sub, ranges []index.Range, cohorts []*cohort) *pass {
	ctx, cancel := context.WithCancel(s.readCtx)
	s.passSeq++
	p := &pass{s: s, id: s.passSeq, topic: topic, noIndex: noIndex, end: end, cancel: cancel, joins: make(chan joinReq),
		fetching: make(chan struct{}), flushed: make(chan struct{}), finished: make(chan struct{}), subs: 1, reads: 1}
	s.passes[topic] = append(s.passes[topic], p)

	gen := s.gate.generation(topic)
	f := &fetcher{s: s, topic: topic, gen: gen, noIndex: noIndex, model: s.models.load(topic),
		pending: slices.Clone(ranges), frontier: ranges[0].Start, planned: spanOffsets(ranges), queue: []*slot{{join: sb}},
		cohorts: cohorts}
	f.stats.scan = noIndex || (len(ranges) == 1 && ranges[0].Scan)
	rt := &router{regions: make(map[uint64][]*route), flushed: p.flushed}
	r := &reader{s: s, topic: topic, gen: gen, end: end, asm: record.NewAssembler(), from: make(map[uint64]int64), route: rt, yield: rt.dispatch}
	ch := make(chan fetched)
	go func() {
		defer s.passWG.Done()
		f.run(ctx, ch, p.joins, p.accept)
		close(ch)
		close(p.fetching) // before forgetPass: a join holding s.passMu waits on it
		s.models.save(topic, f.model)
		s.forgetPass(p)
	}()
	go func() {
		defer s.passWG.Done()
		err := r.decode(ctx, ch)
		cancel()
		for range ch { // let the fetcher finish a send in progress
		}
		<-p.fetching // the fetcher has ended: its counters are final
		r.flushMetrics()
		p.mu.Lock()
		p.stopping = true
		p.err = err
		p.stats = ReadStats{
			Fetches: f.stats.fetches, FetchedBytes: f.stats.bytes, Records: r.stats.Records, Missing: r.stats.Missing,
			Plan: f.planName(), Pass: p.id, MergedGaps: f.stats.mergedGaps,
			FetchLatency:      time.Duration(f.model.latency * float64(time.Second)),
			StreamBytesPerSec: f.model.rate, EstIndexed: f.stats.estIndexed, EstScan: f.stats.estScan, EstPlan: f.stats.estPlan,
			Stretches: f.stats.stretches, StretchExtra: f.stats.stretchExtra,
		}
		p.mu.Unlock()
		close(p.finished)
	}()
	return p
}

// forgetPass removes a pass whose fetcher ended (it takes no more reads).
func (s *LogStore) forgetPass(p *pass) {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	ps := slices.DeleteFunc(s.passes[p.topic], func(q *pass) bool { return q == p })
	if len(ps) == 0 {
		delete(s.passes, p.topic)
	} else {
		s.passes[p.topic] = ps
	}
}

// consume yields the read's entries as the pass hands them over, until the
// pass ends (its error is the read's), the caller stops, or ctx ends.
func (sb *sub) consume(ctx context.Context, p *pass, yield func(logstore.Entry, error) bool, st *ReadStats) error {
	take := func(es []logstore.Entry) error {
		for _, e := range es {
			if err := ctx.Err(); err != nil {
				// No entry is yielded once ctx ended (Close, or the
				// caller's ctx), even one already handed over.
				p.leave(sb)
				p.statsInto(st)
				return err
			}
			st.Entries++
			st.EntryBytes += int64(len(e.Data))
			if !yield(e, nil) {
				p.leave(sb)
				p.statsInto(st)
				return errStop
			}
		}
		return nil
	}
	for {
		select {
		case es := <-sb.out:
			if err := take(es); err != nil {
				return err
			}
		case <-p.finished:
			// Every hand-over happened before finished closed; the last
			// may still wait in the channel's buffer.
			select {
			case es := <-sb.out:
				if err := take(es); err != nil {
					return err
				}
			default:
			}
			p.statsInto(st)
			return p.err
		case <-ctx.Done():
			p.leave(sb)
			p.statsInto(st)
			return ctx.Err()
		}
	}
}

// statsInto fills in the pass's counters: all of them once the pass ended,
// only its identity while it runs on for other reads.
func (p *pass) statsInto(st *ReadStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st.Pass, st.Reads = p.id, p.reads
	select {
	case <-p.finished:
	default:
		return
	}
	ps := p.stats
	st.Fetches, st.FetchedBytes, st.Records = ps.Fetches, ps.FetchedBytes, ps.Records
	st.Missing += ps.Missing
	st.Plan, st.MergedGaps = ps.Plan, ps.MergedGaps
	st.FetchLatency, st.StreamBytesPerSec, st.EstIndexed, st.EstScan, st.EstPlan = ps.FetchLatency, ps.StreamBytesPerSec, ps.EstIndexed, ps.EstScan, ps.EstPlan
	st.Stretches, st.StretchExtra = ps.Stretches, ps.StretchExtra
}

// router hands the reader's entries to the reads of their regions. Only
// the reader goroutine uses it.
type router struct {
	regions map[uint64][]*route
	routes  []*route
	flushed chan struct{} // closed at the first hand-over
}

// route is one read's queue of entries for the response being decoded.
type route struct {
	sub   *sub
	batch []logstore.Entry
	gone  bool
}

// add registers a joining read; from, the reader's lowest wanted offset
// per region, takes its regions in.
func (rt *router) add(sb *sub, from map[uint64]int64) {
	ro := &route{sub: sb}
	rt.routes = append(rt.routes, ro)
	for region, off := range sb.from {
		rt.regions[region] = append(rt.regions[region], ro)
		if cur, ok := from[region]; !ok || off < cur {
			from[region] = off
		}
	}
}

// dispatch queues e for every read of its region that wants it. Two reads
// of one region each get their own copy of the data.
func (rt *router) dispatch(e logstore.Entry, _ error) bool {
	given := false
	for _, ro := range rt.regions[uint64(e.Region)] {
		if ro.gone || int64(e.ID)-1 < ro.sub.from[uint64(e.Region)] {
			continue
		}
		if given {
			e.Data = bytes.Clone(e.Data)
		}
		ro.batch = append(ro.batch, e)
		given = true
	}
	return true
}

// flush hands each read its queued entries, waiting only for a read that
// has a batch waiting already. This is what bounds a pass's memory: it
// runs at most two responses ahead of its slowest read, however many reads
// it serves.
func (rt *router) flush(ctx context.Context) error {
	for _, ro := range rt.routes {
		if ro.gone || len(ro.batch) == 0 {
			continue
		}
		if rt.flushed != nil {
			close(rt.flushed)
			rt.flushed = nil
		}
		select {
		case ro.sub.out <- ro.batch:
		case <-ro.sub.gone:
			ro.gone = true
		case <-ctx.Done():
			return ctx.Err()
		}
		ro.batch = nil
	}
	return nil
}
