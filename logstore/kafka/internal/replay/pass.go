package replay

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// pass is one walk over a topic's log that one or more reads share: a
// fetcher goroutine fetches, a decoder goroutine decodes, and a router
// hands each complete entry to the reads of its region. Reads owns running
// passes (Close ends them); a pass ends when its plan is done, when it
// fails, or when its last read leaves.
//
// Reads join only a pass with their own end (the log end they saw) and
// NoIndex setting, so that what a read yields is exactly what it would
// yield alone.
type pass struct {
	owner   *Reads
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
	stats Stats
}

// topicPasses are a topic's passes that take joining reads. Its lock is
// held while a read of the topic looks for a pass to join or starts one,
// so that reads starting together find each other's pass; reads of other
// topics never wait for it.
type topicPasses struct {
	mu     sync.Mutex
	passes []*pass
}

// joinWait bounds how long a starting read waits for a running pass's
// fetcher to answer its join: a fetcher busy elsewhere (retrying a fetch,
// looking its leader up again) would otherwise hold up every read of its
// topic. A read not answered in time starts a pass of its own.
const joinWait = 100 * time.Millisecond

// joinOrStart puts the read sb, which plans ranges, into a running pass of
// topic that can take it, or starts a pass for it. The read is placed (pl)
// once it is in a pass: a pass started by a read of its cohort may then
// plan.
func (r *Reads) joinOrStart(topic string, noIndex bool, end int64, sb *sub, ranges []index.Range, pl *placement) (*pass, error) {
	r.passMu.Lock()
	tp := r.topics[topic]
	if tp == nil {
		tp = &topicPasses{}
		r.topics[topic] = tp
	}
	r.passMu.Unlock()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	defer pl.placed()
	for _, p := range tp.passes {
		if p.noIndex == noIndex && p.end == end && p.tryJoin(sb, ranges) {
			return p, nil
		}
	}
	if !r.goroutines(2) {
		return nil, closedErr(topic)
	}
	p := r.startPass(topic, noIndex, end, sb, ranges, pl.awaits)
	tp.passes = append(tp.passes, p)
	if h := r.hooks.Start; h != nil {
		h()
	}
	return p, nil
}

// tryJoin asks p's fetcher to take the read in, waiting at most joinWait.
// A pass that has handed entries to a read takes no more: a read could
// then be started inside the loop of one of its reads, and wait on the
// pass while the pass waits on that loop.
func (p *pass) tryJoin(sb *sub, ranges []index.Range) bool {
	req := joinReq{sub: sb, ranges: ranges, reply: make(chan bool, 1)}
	wait := joinWait
	if w := p.owner.hooks.JoinWait; w > 0 {
		wait = w
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case p.joins <- req:
		return <-req.reply
	case <-p.fetching:
		return false
	case <-p.flushed:
		return false
	case <-t.C:
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
	if h := p.owner.hooks.Join; h != nil {
		h()
	}
	return true
}

// leave takes a read out of the pass before the pass ended; the last read
// to leave stops the pass and waits for its goroutines.
func (p *pass) leave(sb *sub) {
	close(sb.gone)
	sb.drain()
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

// startPass starts a pass over ranges for the read sb; its two goroutines
// are counted in r.wg.
func (r *Reads) startPass(topic string, noIndex bool, end int64, sb *sub, ranges []index.Range, cohorts []*cohort) *pass {
	ctx, cancel := context.WithCancel(r.ctx)
	r.passMu.Lock()
	r.passID++
	id := r.passID
	r.passMu.Unlock()
	p := &pass{owner: r, id: id, topic: topic, noIndex: noIndex, end: end, cancel: cancel, joins: make(chan joinReq),
		fetching: make(chan struct{}), flushed: make(chan struct{}), finished: make(chan struct{}), subs: 1, reads: 1}

	gen := r.gate.generation(topic)
	charged := new(atomic.Int64)
	f := &fetcher{reads: r, topic: topic, gen: gen, noIndex: noIndex, charged: charged,
		pending: slices.Clone(ranges), frontier: ranges[0].Start, planned: spanOffsets(ranges), queue: []*chunk{{join: sb}}, cohorts: cohorts}
	f.est = r.startEstimate(topic)
	f.stats.scan = noIndex || (len(ranges) == 1 && ranges[0].Scan)
	rt := newRouter(r, p.flushed)
	d := newDecoder(r, topic, gen, end, rt)
	ch := make(chan fetched)
	go func() {
		defer r.wg.Done()
		f.run(ctx, ch, p.joins, p.accept)
		close(ch)
		close(p.fetching) // before forgetPass: a join holding the topic's lock waits on it
		r.sizes.finished(f.est)
		r.forgetPass(p)
	}()
	go func() {
		defer r.wg.Done()
		err := d.decode(ctx, ch)
		cancel()
		for m := range ch { // let the fetcher finish a send in progress
			m.charge.done()
		}
		<-p.fetching // the fetcher has ended: its counters are final
		d.flushMetrics()
		p.mu.Lock()
		p.stopping = true
		p.err = err
		p.stats = Stats{
			Fetches: f.stats.fetches, FetchedBytes: f.stats.bytes, Records: d.stats.Records, Missing: d.stats.Missing,
			Plan: f.planName(), Pass: p.id, MergedGaps: f.stats.mergedGaps, Stretches: f.stats.stretches,
			StretchExtra: f.stats.extra, Spilled: d.route.spilled, ReadBack: d.route.readBack, Fenced: d.stats.Fenced,
			FetchLatency:      time.Duration(f.est.latency * float64(time.Second)),
			StreamBytesPerSec: f.est.rate,
		}
		p.mu.Unlock()
		close(p.finished)
	}()
	return p
}

// forgetPass removes a pass whose fetcher ended (it takes no more reads).
func (r *Reads) forgetPass(p *pass) {
	r.passMu.Lock()
	tp := r.topics[p.topic]
	r.passMu.Unlock()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.passes = slices.DeleteFunc(tp.passes, func(q *pass) bool { return q == p })
}

// sub is one read's end of a pass.
type sub struct {
	from  map[uint64]int64 // first offset wanted, per region
	multi bool             // more than one region: entries wait for open entries of the others
	out   chan delivery    // the read's entries in ID order (one batch buffered)
	gone  chan struct{}    // closed when the read leaves
}

func newSub(from map[uint64]int64) *sub {
	return &sub{from: from, multi: len(from) > 1, out: make(chan delivery, 1), gone: make(chan struct{})}
}

// delivery is a batch of a read's entries and what they hold: references
// to the responses their data points into, and hold-budget bytes of data
// of their own (assembled or read back), both released once the read took
// them.
type delivery struct {
	entries []logstore.Entry
	charges []*charge
	hold    int64
	budget  *holdBudget
}

// release gives back what d holds.
func (d *delivery) release() {
	for _, c := range d.charges {
		c.done()
	}
	d.charges = nil
	if d.hold != 0 {
		d.budget.add(-d.hold)
		d.hold = 0
	}
}

// drain releases a delivery left in the read's channel when it leaves.
func (sb *sub) drain() {
	select {
	case d := <-sb.out:
		d.release()
	default:
	}
}

// consume yields the read's entries as the pass hands them over, until the
// pass ends (its error is the read's), the caller stops, or ctx ends.
func (sb *sub) consume(ctx context.Context, p *pass, yield func(logstore.Entry) bool, st *Stats) error {
	take := func(d delivery) error {
		defer d.release()
		for _, e := range d.entries {
			if err := ctx.Err(); err != nil {
				// No entry is yielded once ctx ended (Close, or the
				// caller's ctx), even one already handed over.
				p.leave(sb)
				p.statsInto(st)
				return err
			}
			st.Entries++
			st.EntryBytes += int64(len(e.Data))
			if !yield(e) {
				p.leave(sb)
				p.statsInto(st)
				return errStop
			}
		}
		return nil
	}
	for {
		select {
		case d := <-sb.out:
			if err := take(d); err != nil {
				return err
			}
		case <-p.finished:
			// Every hand-over happened before finished closed; the last
			// may still wait in the channel's buffer.
			select {
			case d := <-sb.out:
				if err := take(d); err != nil {
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
func (p *pass) statsInto(st *Stats) {
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
	st.Plan, st.MergedGaps, st.Stretches, st.StretchExtra = ps.Plan, ps.MergedGaps, ps.Stretches, ps.StretchExtra
	st.FetchLatency, st.StreamBytesPerSec = ps.FetchLatency, ps.StreamBytesPerSec
	st.Spilled, st.ReadBack, st.Fenced = ps.Spilled, ps.ReadBack, ps.Fenced
}

// assembled is a complete entry for the router: its record.Assembled and
// whether its data points into the response being decoded (a whole
// record's value) rather than a buffer of its own.
type assembled struct {
	record.Assembled
	inResponse bool
}
