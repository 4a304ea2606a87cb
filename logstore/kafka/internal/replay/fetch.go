package replay

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// fetcher issues a pass's fetch requests and hands each response, in
// offset order, to the pass's decoding loop (decoder) as a fetched message.
// It owns everything about the wire: the partition leader and topic ID, the
// estimate that sizes fetches and decides which gaps to read through,
// retries and the mapping of Kafka's errors (wire.go). It shares no state
// with the decoder; its counters are read once its goroutine has ended.
//
// Pipelining: the plan is cut into chunks of about ChunkBytes, and chunks
// are fetched concurrently over the store's connections, within the
// store's Pool (one fetch per connection, a byte budget shared by every
// pass) and at most twice as many chunks started as there are connections
// before the decoder took them. A response that lands frees its connection
// at once, before the decoder takes it: a slow fetch at the head holds no
// other connection idle; while the decoder is busy, the fetcher goes on
// landing and starting the fetches behind it. A response that ends before
// its chunk does is continued at once by a fetch of the rest, ahead of the
// chunks behind it.
//
// Joins: a read of the same topic that starts while the pass runs sends
// its planned ranges on the joins channel; when none of them lies below
// what the fetcher already handed over, the fetcher adds them (parts below
// its frontier as extra chunks in offset order, the rest to its plan) and
// places a join marker in its stream before the first chunk that may hold
// the joining read's records. Reads that looked their bounds up together
// with the pass's first read (its cohorts) join before anything is cut:
// the fetcher waits for them, so that a restart's replays are one plan
// whose ranges merge across regions, not the first read's plan and late
// joins fetched range by range.
type fetcher struct {
	reads   *Reads
	topic   string
	gen     uint64 // the topic's generation when the pass started (Gate)
	noIndex bool
	ld      leader

	est   estimate
	stats fetchStats

	pending  []index.Range // planned, not yet cut into chunks: ascending, disjoint, >= frontier
	queue    []*chunk      // chunks and join markers not yet handed over, in offset order
	frontier int64         // end of the last chunk cut from pending
	sent     int64         // the decoder has been handed every record below sent
	planned  int64         // offsets of the planned ranges (the reads' joined)
	started  int           // started chunks in queue
	landed   chan *chunk   // chunks whose response landed, in landing order
	// charged is the pass's bytes held in the Pool (its chunks' charges,
	// released as the decoder and the reads finish with them).
	charged *atomic.Int64
	// cohorts are the reads that started with the pass's first read (see
	// readBounds): nothing is cut from the plan until each has joined a
	// pass or given up, so that their ranges are planned together.
	cohorts []*cohort
	cutAny  bool // a chunk was cut from the plan
	// joined are the pass's reads, noted as their join markers are handed
	// over, and provenTo how far they were proven to have lost nothing
	// (pruned.go).
	joined   []*sub
	provenTo int64
}

// fetchStats counts a fetcher's requests and what it read through.
type fetchStats struct {
	fetches    int   // fetch requests
	bytes      int64 // record batch bytes fetched
	mergedGaps int   // gaps between planned ranges read through
	extra      int64 // offsets read through beyond the planned ranges
	stretches  int   // runs of planned ranges read as one
	scan       bool  // the pass reads its whole span from the start
	alone      int   // chunks of one planned range
}

// fetched is one message from the fetcher to the decoder: a response for
// the chunk rg, a final error, or a read joining the pass.
type fetched struct {
	rg     index.Range
	res    fetchResult
	charge *charge // the response's share of the Pool; the decoder holds one reference
	err    error
	join   *sub
}

// chunk is a queued fetch (or, with join set, a join marker).
type chunk struct {
	rg       index.Range // the chunk; records outside it are not the decoder's
	off      int64       // where this fetch starts (rg.Start, or further for a continuation)
	maxBytes int32
	started  bool
	conn     int // the connection it went on
	// onWire is the store's fetches on the wire when it started and when
	// it landed, itself included (see shareOf).
	onWire, onWireEnd int
	// res is the response, set by the fetch goroutine before it sends the
	// chunk on landed; the fetcher reads it once it took the chunk from
	// there (isLanded).
	res      fetchResult
	isLanded bool
	charged  int64  // its bytes in the Pool
	budget   budget // the Pool budget they are charged to
	join     *sub
}

// joinReq asks a running pass to take a read in.
type joinReq struct {
	sub    *sub
	ranges []index.Range
	reply  chan bool
}

func mode(rg index.Range) string {
	if rg.Scan {
		return "scan"
	}
	return "indexed"
}

// limit turns an estimate of a chunk's bytes into a fetch's byte limit: a
// little above it, so that the broker's whole batches reach the chunk's
// end (an estimate just short costs another fetch for the chunk's last
// offsets), and at most what decompresses to FetchMaxBytes at the
// expansion measured. What a chunk gets beyond its end the next chunk
// fetches again.
func (f *fetcher) limit(est float64) int32 {
	return int32(max(min(est*1.02+1, f.est.chunk(int64(f.reads.opts.FetchMaxBytes))), 1))
}

// run fetches until the plan is done, an error is sent, or ctx ends. accept
// admits a joining read (false once the pass is stopping). The fetch
// goroutines it starts end before it returns.
func (f *fetcher) run(ctx context.Context, ch chan<- fetched, joins <-chan joinReq, accept func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	f.landed = make(chan *chunk, f.reads.opts.Conns)
	defer func() {
		cancel()
		running.Wait()
		f.releaseQueue()
	}()
	// send hands msg to the decoder. While the decoder is still busy with
	// what it was handed before, the fetcher keeps the pipeline going:
	// landed responses free their connections and the queue's next chunks
	// start. A join is taken while msg is a join marker (it carries no
	// records, and join keeps the queue's head, msg, first); while msg
	// holds records it is answered no (the join could be placed after
	// records the read needs): the read starts a pass of its own. The
	// decoder takes the pass's first message only after its claims
	// catch-up, a round trip in which the reads starting together with
	// the pass arrive. A final error starts nothing more.
	send := func(msg fetched) bool {
		more := f.landed
		var freed <-chan struct{}
		if msg.err != nil {
			more = nil
		}
		for {
			if more != nil {
				freed = f.reads.pool.Changed() // before fill: a release after it wakes us
				f.fill(ctx, &running)
			}
			select {
			case ch <- msg:
				return true
			case c := <-more:
				f.land(c)
			case <-freed:
			case j := <-joins:
				j.reply <- msg.join != nil && f.join(j, accept)
			case <-ctx.Done():
				msg.charge.done()
				return false
			}
		}
	}
	if err := f.ld.refresh(ctx, f.reads, f.topic); err != nil {
		send(fetched{err: err})
		return
	}
	for _, c := range f.cohorts {
		for waiting := true; waiting; {
			select {
			case <-c.placed:
				waiting = false
			case j := <-joins:
				j.reply <- f.join(j, accept)
			case <-ctx.Done():
				return
			}
		}
	}
	for {
		freed := f.reads.pool.Changed() // before fill: a release after it wakes us
		f.fill(ctx, &running)
		if len(f.queue) == 0 {
			return
		}
		head := f.queue[0]
		if head.join != nil {
			if !send(fetched{join: head.join}) {
				return
			}
			f.noteJoined(head.join)
			f.popHead()
			continue
		}
		if !head.isLanded {
			select {
			case c := <-f.landed:
				f.land(c)
			case <-freed:
			case j := <-joins:
				j.reply <- f.join(j, accept)
			case <-ctx.Done():
				return
			}
			continue
		}
		res := head.res
		f.started--
		f.stats.fetches++
		f.stats.bytes += int64(res.bytes)
		chg := newCharge(f.reads.pool, head.budget, f.charged, head.charged)
		head.charged = 0 // the charge is the decoder's now
		res, err := f.settle(ctx, head, res)
		// A response fetched again by settle is charged its bytes too.
		chg.grow(int64(res.bytes) - chg.bytes)
		if err != nil {
			chg.done()
			if err = f.pastPruned(ctx, err); err == nil {
				continue // the log start rose above head, and the pass needed nothing below it
			}
			send(fetched{err: err})
			return
		}
		if res.bytes > 0 {
			f.est.learn(shareOf(res.took, head.onWire, head.onWireEnd), res.bytes, res.next-res.base, res.earlyWire, res.earlyBytes)
			f.reads.sizes.measured(f.topic, f.est)
		}
		if !send(fetched{rg: head.rg, res: res, charge: chg}) {
			return
		}
		head.res = fetchResult{} // the decoder's now
		f.sent = max(f.sent, min(res.next, head.rg.End))
		if rest := (index.Range{Start: res.next, End: head.rg.End, Scan: head.rg.Scan}); rest.Start < rest.End &&
			len(f.queue) == 1 && rest.End == f.frontier && f.est.bytes(rest.End-rest.Start) > f.est.chunk(f.reads.opts.ChunkBytes) {
			// A big rest with nothing queued behind it (the first fetch,
			// sent before the pass knew what an offset weighs, took a
			// whole range): back to the plan, to be cut into chunks that
			// are fetched concurrently.
			f.pending = slices.Insert(f.pending, 0, rest)
			f.frontier = rest.Start
			clear(f.queue)
			f.queue = f.queue[:0]
			continue
		}
		if res.next < head.rg.End {
			// The rest of the chunk comes before anything behind it.
			f.queue[0] = &chunk{rg: head.rg, off: res.next, maxBytes: f.limit(f.est.bytes(head.rg.End - res.next))}
			continue
		}
		f.popHead()
	}
}

// popHead drops the queue's head, and clears it from the queue's array: a
// slice advanced past its head keeps its array, and with it the chunks
// handed over and the responses they point to.
func (f *fetcher) popHead() {
	f.queue[0] = nil
	f.queue = f.queue[1:]
}

// releaseQueue gives back the connections and Pool charges of the chunks
// the fetcher still holds when it ends (started, landed or not, never
// handed over). Their fetch goroutines have ended (running.Wait runs
// before it): a goroutine cancelled on the wire freed its connection, one
// whose response landed left it to the fetcher.
func (f *fetcher) releaseQueue() {
	for {
		select {
		case c := <-f.landed:
			f.land(c)
			continue
		default:
		}
		break
	}
	for _, c := range f.queue {
		if c != nil && c.charged > 0 {
			f.charged.Add(-c.charged)
			f.reads.pool.release(c.budget, c.charged)
			c.charged = 0
		}
	}
}

// settle turns a chunk's first response into a usable one: it retries a
// retriable failure (after a leader lookup), and asks again for
// FetchMaxBytes when the byte limit fitted no complete batch.
func (f *fetcher) settle(ctx context.Context, c *chunk, res fetchResult) (fetchResult, error) {
	maxBytes := c.maxBytes
	for {
		if res.err != nil {
			return res, res.err
		}
		if res.retry != nil {
			var err error
			f.ld.stale = true
			if res, err = f.reads.fetchAt(ctx, f.topic, &f.ld, c.off, maxBytes, mode(c.rg)); err != nil {
				return res, err
			}
			f.stats.fetches++
			f.stats.bytes += int64(res.bytes)
		}
		if res.next > c.off {
			return res, nil
		}
		if maxBytes >= f.reads.opts.FetchMaxBytes {
			return res, kwalerr.Errorf("read %q: fetch at offset %d returned no complete record (%d bytes)", f.topic, c.off, res.bytes)
		}
		maxBytes = f.reads.opts.FetchMaxBytes
		res = fetchResult{retry: errNoCompleteBatch}
	}
}

// errNoCompleteBatch makes settle fetch again with a larger limit.
var errNoCompleteBatch = errors.New("kwal: fetch fitted no complete batch")

// start sends c's fetch on a free connection of the store, when the Pool
// has one and its bytes, and reports whether it did. head says that c is
// the first chunk of the queue, which everything else of the pass waits
// for: it is charged to the heads' budget (Pool).
func (f *fetcher) start(ctx context.Context, running *sync.WaitGroup, c *chunk, head bool) bool {
	// Charged the memory it is expected to take once its batches are
	// decoded, at the expansion measured: what keeps the fetches started
	// in step with what their goroutines can decode ahead of the decoder
	// (decodeEarly). What a response takes beyond it (Kafka returns the
	// first batch whole, and a one-batch probe asks for 1 byte) is charged
	// as it is decoded or lands, which delays only fetches of its budget.
	n := min(int64(math.Ceil(float64(c.maxBytes)*max(f.est.expand, 1))), int64(f.reads.opts.FetchMaxBytes))
	b := budgetOf(head)
	conn, onWire, ok := f.reads.pool.take(n, b)
	if !ok {
		return false
	}
	c.budget = b
	f.charged.Add(n)
	c.started, c.conn, c.onWire, c.charged = true, conn, onWire, n
	f.started++
	cl := f.reads.opts.Host.FetchClient(conn)
	m, topic, md, end := f.ld.m, f.topic, mode(c.rg), c.rg.End
	f.reads.warm[conn].set()
	running.Add(1)
	go func() {
		defer running.Done()
		fctx, cancel := context.WithTimeout(ctx, f.reads.opts.RequestTimeout)
		defer cancel()
		c.res = f.reads.fetchOnce(fctx, cl, topic, m, c.off, c.maxBytes, md)
		f.reads.decodeEarly(topic, &c.res, c.budget, n, end)
		select {
		case f.landed <- c:
		case <-ctx.Done():
			f.reads.pool.landed(c.conn, c.budget, 0)
			f.reads.pool.release(c.budget, c.res.earlyCharged)
		}
	}()
	return true
}

// land notes a landed response: its connection is free, and it counts in
// the Pool at its bytes until the decoder and the reads are done with it.
func (f *fetcher) land(c *chunk) {
	c.isLanded = true
	// What decodeEarly charged is in the Pool already.
	c.charged += c.res.earlyCharged
	extra := max(int64(c.res.bytes)+c.res.earlyBytes-c.charged, 0)
	c.onWireEnd = f.reads.pool.landed(c.conn, c.budget, extra)
	f.charged.Add(extra + c.res.earlyCharged)
	c.charged += extra
}

// fill starts queued chunks in order while the Pool takes them, cutting new
// chunks from the plan as the queue drains, at most twice as many started
// and not handed over as there are connections besides the head (small
// chunks would otherwise fill the budget with responses waiting for the
// decoder).
func (f *fetcher) fill(ctx context.Context, running *sync.WaitGroup) {
	for {
		head := true
		for _, c := range f.queue {
			if c.join != nil {
				continue
			}
			// The head is exempt from the cap: everything queued waits
			// for it, and chunks behind it may have filled the cap while
			// it was replaced (the rest of a partial response, a joined
			// read's chunk sorted before them).
			if !c.started && ((!head && f.started >= 2*f.reads.opts.Conns) || !f.start(ctx, running, c, head)) {
				return
			}
			head = false
		}
		// Until the pass knows what an offset weighs, ranges start with a
		// one-batch fetch each (indexed ones run concurrently): a fetch of
		// an indexed range sized blind would read through other regions'
		// records. A scan range waits for the first answer, which sizes
		// its chunks.
		if len(f.pending) == 0 || (!f.est.known() && f.started > 0 && f.pending[0].Scan) {
			return
		}
		f.queue = append(f.queue, f.cut())
	}
}

// cut takes the next chunk from pending: the first range, or the first
// target bytes of a larger one, reading through the gaps to the ranges
// after it while each gap is worth reading through (estimate.gapWorth) and
// the chunk stays within target bytes.
func (f *fetcher) cut() *chunk {
	f.cutAny = true
	rg := f.pending[0]
	target := f.est.chunk(f.reads.opts.ChunkBytes)
	if !f.est.known() {
		f.pending = f.pending[1:]
		f.frontier = rg.End
		f.stats.alone++
		// Exactly one batch, which tells what an offset weighs.
		return &chunk{rg: rg, off: rg.Start, maxBytes: 1}
	}
	maxOffs := max(int64(target/f.est.perOff), 1)
	if rg.End-rg.Start > maxOffs {
		// A range longer than a chunk: its first chunk alone.
		part := index.Range{Start: rg.Start, End: rg.Start + maxOffs, Scan: rg.Scan}
		f.pending[0].Start = part.End
		f.frontier = part.End
		f.stats.alone++
		return &chunk{rg: part, off: part.Start, maxBytes: f.limit(f.est.bytes(maxOffs))}
	}
	worth := f.est.gapWorth()
	if f.noIndex {
		worth = 0
	}
	c := rg
	i := 1
	for ; i < len(f.pending); i++ {
		next := f.pending[i]
		gap := next.Start - c.End
		if gap > worth || next.End-c.Start > maxOffs || f.stats.extra+gap > int64(gapShare*float64(f.planned)) {
			break
		}
		f.stats.mergedGaps++
		f.stats.extra += next.Start - c.End
		c.End, c.Scan = next.End, c.Scan || next.Scan
	}
	if i > 1 {
		f.stats.stretches++
	} else {
		f.stats.alone++
	}
	f.pending = f.pending[i:]
	f.frontier = c.End
	return &chunk{rg: c, off: c.Start, maxBytes: f.limit(f.est.bytes(c.End - c.Start))}
}

// planName says what the pass read (Stats.Plan).
func (f *fetcher) planName() string {
	switch {
	case f.stats.scan || f.noIndex:
		return "scan"
	case f.stats.stretches == 0:
		return "indexed"
	default:
		return "mixed (gaps read through)"
	}
}

// join takes a read's planned ranges into the running pass, or reports
// that it cannot: part of them lies below what the decoder was handed.
func (f *fetcher) join(j joinReq, accept func() bool) bool {
	if len(j.ranges) == 0 || j.ranges[0].Start < f.sent || !accept() {
		return false
	}
	first := j.ranges[0].Start
	if !f.cutAny {
		// Nothing planned was cut yet: the whole read joins the plan.
		f.frontier = min(f.frontier, first)
	}
	// Split at the frontier: what lies below it and no queued chunk
	// covers becomes chunks of its own; the rest joins the plan.
	var below, above []index.Range
	for _, r := range j.ranges {
		if r.Start < f.frontier {
			below = append(below, index.Range{Start: r.Start, End: min(r.End, f.frontier), Scan: r.Scan})
		}
		if r.End > f.frontier {
			above = append(above, index.Range{Start: max(r.Start, f.frontier), End: r.End, Scan: r.Scan})
		}
	}
	var covered []index.Range
	for _, c := range f.queue {
		if c.join == nil {
			covered = append(covered, index.Range{Start: c.off, End: c.rg.End})
		}
	}
	for _, r := range subtractRanges(below, covered) {
		mb := int32(1) // a one-batch probe, as cut's
		if f.est.known() {
			mb = f.limit(f.est.bytes(r.End - r.Start))
		}
		f.queue = append(f.queue, &chunk{rg: r, off: r.Start, maxBytes: mb})
	}
	// Markers not yet sent sort to the front (off 0): a read registered
	// early is harmless, its entries are filtered by its own from points.
	slices.SortStableFunc(f.queue, func(a, b *chunk) int { return cmp.Compare(a.off, b.off) })
	// The marker goes before the first chunk that may hold the read's
	// records; everything before it ends at or below first.
	at := len(f.queue)
	for i, c := range f.queue {
		if c.join == nil && c.rg.End > first {
			at = i
			break
		}
	}
	f.queue = slices.Insert(f.queue, at, &chunk{join: j.sub})
	f.pending = unionRanges(f.pending, above)
	f.planned += spanOffsets(j.ranges)
	return true
}

// gapShare bounds the offsets a pass reads through beyond its planned
// ranges, as a share of them. Reading gaps through saves round trips, and
// a replay of many regions gains from it (their gaps are small and many);
// a replay of one region would otherwise read most of a small topic while
// the priors still price its gaps (docs/benchmarks.md, "Recovery after a restart").
const gapShare = 0.5

// spanOffsets is the number of offsets the ranges cover.
func spanOffsets(rs []index.Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.End - r.Start
	}
	return n
}

// unionRanges merges two ascending lists of ranges into one ascending list
// of disjoint, non-touching ranges (Scan where either part is), in one walk
// of both.
func unionRanges(a, b []index.Range) []index.Range {
	out := make([]index.Range, 0, len(a)+len(b))
	add := func(r index.Range) {
		if r.Start >= r.End {
			return
		}
		if n := len(out); n > 0 && r.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, r.End)
			out[n-1].Scan = out[n-1].Scan || r.Scan
			return
		}
		out = append(out, r)
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if b[j].Start < a[i].Start {
			add(b[j])
			j++
		} else {
			add(a[i])
			i++
		}
	}
	for ; i < len(a); i++ {
		add(a[i])
	}
	for ; j < len(b); j++ {
		add(b[j])
	}
	return out
}

// subtractRanges returns the parts of rs (ascending, disjoint) that no
// range of cover (ascending, disjoint) overlaps.
func subtractRanges(rs, cover []index.Range) []index.Range {
	var out []index.Range
	for _, r := range rs {
		cur := r.Start
		for _, c := range cover {
			if c.End <= cur || c.Start >= r.End {
				continue
			}
			if c.Start > cur {
				out = append(out, index.Range{Start: cur, End: c.Start, Scan: r.Scan})
			}
			cur = max(cur, c.End)
		}
		if cur < r.End {
			out = append(out, index.Range{Start: cur, End: r.End, Scan: r.Scan})
		}
	}
	return out
}
