package kafka

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// fetcher issues a pass's fetch requests and hands each response, in offset
// order, to the pass's decoding loop (reader) as a fetched message. It owns
// everything about the wire: the partition leader and topic ID, the cost
// model that sizes and merges fetches, retries and the mapping of Kafka's
// errors (wire.go). It shares no state with the reader; its counters are
// read once its goroutine has ended.
//
// Pipelining: once the cost model can price the plan, it is cut into
// stretches (decide: where the ranges lie dense, a run of them is read
// whole, gaps of other regions' records included; where they lie sparse,
// each is fetched alone), these are cut into chunks of about target bytes,
// and chunks are fetched concurrently over the store's
// connections, at most one on the wire per connection and at most
// FetchMaxBytes of byte limits (responses received but not yet handed over
// included, at their size when a probe's response is larger), so the
// broker's latency is paid about once per window rather than once per
// range. A response that lands frees its connection at once, before the
// reader takes it: a slow fetch at the head holds no other connection idle
// (as many landed responses as there are connections may wait for it); and
// while the reader is busy with a response, the fetcher goes on landing
// and starting the fetches behind it, within those limits. A
// response that ends before its chunk does is continued at once
// by a fetch of the rest, ahead of the chunks behind it.
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
// joins fetched range by range (measured: 880 fetches for 64 regions
// instead of about 330).
type fetcher struct {
	s       *LogStore
	topic   string
	gen     uint64 // the topic's generation when the pass started (indexGate)
	noIndex bool

	leaderStale bool
	leader      int32
	topicID     [16]byte

	model costModel
	stats fetchStats

	pending  []index.Range // planned, not yet cut into chunks: ascending, disjoint, >= frontier
	queue    []*slot       // chunks and join markers not yet handed over, in offset order
	frontier int64         // end of the last chunk cut from pending
	sent     int64         // the reader has been handed every record below sent
	inflight int           // started chunks in queue
	inBytes  int64         // their byte limits (a landed response's bytes when more)
	onWire   int           // started chunks whose response has not landed
	busy     []int         // fetches on the wire per store connection
	landed   chan *slot    // chunks whose response landed, in landing order
	decided  bool          // the plan is cut into stretches
	// stretches are the spans of pending read whole (decide): ascending,
	// each made of whole pending ranges. inStretch is set while chunks of
	// the first one are being cut.
	stretches []index.Range
	inStretch bool
	decidedAt int   // the model's learned count at the last decide
	planned   int64 // offsets of the planned ranges (the reads' joined)
	client    int   // round-robin over the store's connections
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

// fetchStats counts a fetcher's requests and records its plan choice.
type fetchStats struct {
	fetches    int   // fetch requests
	bytes      int64 // record batch bytes fetched
	mergedGaps int   // gaps between planned ranges read through (inside stretches)
	scan       bool  // the pass reads its whole span from the start (ReadStats.Plan "scan")
	estIndexed time.Duration
	estScan    time.Duration
	estPlan    time.Duration // of the plan chosen
	// stretches of several planned ranges read whole, and the offsets
	// they read beyond those ranges; alone counts chunks of ranges
	// fetched on their own
	stretches    int
	stretchExtra int64
	alone        int
}

// fetched is one message from the fetcher to the reader: a response for
// the chunk rg fetched at from, a final error, or a read joining the pass.
type fetched struct {
	rg   index.Range
	from int64 // the offset fetched at
	fp   kgo.FetchPartition
	next int64 // the offset after the last record processed
	// control are the offsets of the control batches (transaction markers)
	// in the response: they hold no record, and are no gap.
	control []span
	err     error
	join    *sub
}

// slot is a queued chunk (or, with join set, a join marker).
type slot struct {
	rg       index.Range // the chunk; records outside it are not the reader's
	off      int64       // where this fetch starts (rg.Start, or further for a continuation)
	maxBytes int32
	started  bool
	// shared and sharedEnd are the store's fetches on the wire when it
	// started and when it landed, itself included (see shareOf).
	shared, sharedEnd int
	conn              int // the store connection it went on
	// res is the response, set by the fetch goroutine before it sends the
	// slot on landed; the fetcher reads it once it took the slot from
	// there (isLanded).
	res      fetchResult
	isLanded bool
	charged  int64 // what it counts in inBytes
	join     *sub
}

// joinReq asks a running pass to take a read in.
type joinReq struct {
	sub    *sub
	ranges []index.Range
	reply  chan bool
}

func (f *fetcher) mode(rg index.Range) string {
	if rg.Scan {
		return "scan"
	}
	return "indexed"
}

// conns is how many fetches may be in flight: one per store connection.
func (f *fetcher) conns() int { return f.s.cfg.FetchConnections() }

// target is a chunk's size in bytes: the read's byte budget spread over
// the connections, and at least one record batch.
func (f *fetcher) target() float64 { return float64(f.s.cfg.FetchChunkBytes()) }

// limit turns an estimate of a chunk's bytes into a fetch's byte limit: a
// little above it, so that the broker's whole batches reach the chunk's
// end. An estimate just short costs another fetch for the chunk's last
// offsets; a scan chunk that asked for its estimate exactly ended one batch
// short whenever the chunk's offsets were not a whole number of batches
// (measured on the local Kafka broker: 78 fetches for a 40 MB scan of 39
// chunks). What a scan chunk gets beyond its end (at most about a batch and
// 2%) the next chunk fetches again.
func (f *fetcher) limit(est float64, _ bool) int32 {
	est = est*1.02 + 1
	return int32(min(max(est, 1), float64(f.s.cfg.FetchMaxBytes)))
}

// run fetches until the plan is done, an error is sent, or ctx ends. accept
// admits a joining read (false once the pass is stopping). The fetch
// goroutines it starts end before it returns.
func (f *fetcher) run(ctx context.Context, ch chan<- fetched, joins <-chan joinReq, accept func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	// send hands msg to the reader. While the reader is still busy with
	// what it was handed before, the fetcher keeps the pipeline going:
	// landed responses free their connections and the queue's next chunks
	// start, so that the broker serves while the reader decodes (blocked
	// on the hand-over, the fetcher left connections idle for as long as
	// the reader took). Joins wait: one taken now could be placed before
	// msg. A final error starts nothing more.
	send := func(msg fetched) bool {
		more := f.landed
		if msg.err != nil {
			more = nil
		}
		for {
			select {
			case ch <- msg:
				return true
			case sl := <-more:
				f.land(sl)
				f.fill(ctx, &running)
			case <-ctx.Done():
				return false
			}
		}
	}
	if err := f.refreshLeader(ctx); err != nil {
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
		if !head.started {
			f.start(ctx, &running, head)
		}
		if !head.isLanded {
			select {
			case sl := <-f.landed:
				f.land(sl)
			case j := <-joins:
				j.reply <- f.join(j, accept)
			case <-ctx.Done():
				return
			}
			continue
		}
		res := head.res
		f.inflight--
		f.inBytes -= head.charged
		f.stats.fetches++
		f.stats.bytes += int64(res.bytes)
		res, err := f.settle(ctx, head, res)
		if err != nil {
			if err = f.pastPruned(ctx, err); err == nil {
				continue // the log start rose above head, and the pass needed nothing below it
			}
			send(fetched{err: err})
			return
		}
		if res.bytes > 0 {
			// The first batch may begin below head.off: its bytes
			// span from its base. A fetch that shared the broker with
			// others (this pass's or other passes') took their time
			// too: its own cost is its share.
			own := f.model.known() && !f.model.seeded
			f.model.learn(shareOf(res.took, head.shared, head.sharedEnd), res.bytes, res.next-res.base, res.warm)
			if !own {
				f.s.models.measured(f.topic, f.model.perOff)
			}
		}
		if !send(fetched{rg: head.rg, from: head.off, fp: res.fp, next: res.next, control: res.control}) || res.fp.Err != nil {
			return
		}
		head.res = fetchResult{} // the reader's now
		f.sent = max(f.sent, min(res.next, head.rg.End))
		if rest := (index.Range{Start: res.next, End: head.rg.End, Scan: head.rg.Scan}); rest.Start < rest.End &&
			len(f.queue) == 1 && rest.End == f.frontier && f.model.bytes(rest.End-rest.Start) > f.target() {
			// A big rest with nothing queued behind it (the first fetch,
			// sent before the model knew what an offset weighs, took a
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
			cont := &slot{rg: head.rg, off: res.next, maxBytes: f.limit(f.model.bytes(head.rg.End-res.next), head.rg.Scan)}
			f.queue[0] = cont
			f.start(ctx, &running, cont)
			continue
		}
		f.popHead()
	}
}

// popHead drops the queue's head, and clears it from the queue's array: a
// slice advanced past its head keeps its array, and with it the slots
// handed over and the responses they point to, until an append moves the
// queue to a new array (measured on the local Kafka broker: (b)'s pass
// held up to the whole 40 MB topic's responses, a 42 MiB peak heap
// whatever FetchMaxBytes).
func (f *fetcher) popHead() {
	f.queue[0] = nil
	f.queue = f.queue[1:]
}

// settle turns a chunk's first response into a usable one: it retries a
// retriable failure (after a leader lookup), and asks again for
// FetchMaxBytes when the byte limit fitted no complete batch.
func (f *fetcher) settle(ctx context.Context, sl *slot, res fetchResult) (fetchResult, error) {
	maxBytes := sl.maxBytes
	for {
		if res.err != nil {
			return res, res.err
		}
		if res.retry != nil {
			var err error
			if res, err = f.fetch(ctx, sl.off, maxBytes, f.mode(sl.rg)); err != nil {
				return res, err
			}
		}
		if res.fp.Err != nil || res.next > sl.off {
			return res, nil
		}
		if maxBytes >= f.s.cfg.FetchMaxBytes {
			return res, fmt.Errorf("kwal: read %q: fetch at offset %d returned no complete record (%d bytes)", f.topic, sl.off, res.bytes)
		}
		maxBytes = f.s.cfg.FetchMaxBytes
		res = fetchResult{retry: errNoCompleteBatch}
	}
}

// errNoCompleteBatch makes settle fetch again with a larger limit.
var errNoCompleteBatch = fmt.Errorf("kwal: fetch fitted no complete batch")

// room reports whether a fetch of maxBytes may start now: a connection
// is free (a landed response frees its connection at once, not when the
// reader takes it: the pipeline stays full behind a slow head), at most
// twice as many fetches as connections are started and not yet handed
// over (small chunks would otherwise fill the whole byte budget with
// responses waiting for the reader), and the pass's byte budget takes it.
func (f *fetcher) room(maxBytes int32) bool {
	return f.inflight == 0 || (f.onWire < f.conns() && f.inflight < 2*f.conns() &&
		f.inBytes+int64(maxBytes) <= int64(f.s.cfg.FetchMaxBytes))
}

// start sends sl's fetch on a connection with no fetch of the pass on the
// wire (the next one round-robin when all have one).
func (f *fetcher) start(ctx context.Context, running *sync.WaitGroup, sl *slot) {
	n := f.conns()
	if f.busy == nil {
		f.busy = make([]int, n)
		f.landed = make(chan *slot, n)
	}
	k := f.client % n
	for i := range n {
		if c := (f.client + i) % n; f.busy[c] == 0 {
			k = c
			break
		}
	}
	f.client = k + 1
	sl.started, sl.conn = true, k
	f.busy[k]++
	f.inflight++
	f.onWire++
	sl.shared = int(f.s.fetchesOnWire.Add(1))
	sl.charged = int64(sl.maxBytes)
	f.inBytes += sl.charged
	cl, warm := f.s.fetchClient(k)
	leader, id, mode := f.leader, f.topicID, f.mode(sl.rg)
	running.Add(1)
	go func() {
		defer running.Done()
		fctx, cancel := context.WithTimeout(ctx, f.s.cfg.RequestTimeout)
		defer cancel()
		res := f.fetchOnce(fctx, cl, leader, id, sl.off, sl.maxBytes, mode)
		sl.sharedEnd = int(f.s.fetchesOnWire.Add(-1)) + 1
		res.warm = warm
		sl.res = res
		select {
		case f.landed <- sl:
		case <-ctx.Done():
		}
	}()
}

// land notes a landed response: its connection is free, and what it holds
// until the reader takes it counts against the pass's byte budget (a
// one-batch probe asks for 1 byte and gets a whole batch).
func (f *fetcher) land(sl *slot) {
	sl.isLanded = true
	f.onWire--
	f.busy[sl.conn]--
	if n := int64(sl.res.bytes); n > sl.charged {
		f.inBytes += n - sl.charged
		sl.charged = n
	}
}

// fill starts queued chunks in order while there is room, cutting new
// chunks from the plan as the queue drains.
func (f *fetcher) fill(ctx context.Context, running *sync.WaitGroup) {
	// Another topic's measured sizes beat probing (see modelStore).
	f.s.models.seed(&f.model)
	for {
		for _, sl := range f.queue {
			if sl.join != nil || sl.started {
				continue
			}
			if !f.room(sl.maxBytes) {
				return
			}
			f.start(ctx, running, sl)
		}
		// Until the model knows what an offset weighs, indexed ranges
		// start with a one-batch fetch each (they run concurrently); a
		// scan range waits for the first answer, which sizes its chunks.
		if len(f.pending) == 0 || (!f.model.known() && f.inflight > 0 && f.pending[0].Scan) {
			return
		}
		if f.shouldDecide() {
			f.decide()
		}
		f.queue = append(f.queue, f.cut())
	}
}

// cut takes the next chunk from pending: the first range, or the first
// target bytes of a larger range, or, where the first range begins a
// stretch (decide), the first target bytes of the stretch.
func (f *fetcher) cut() *slot {
	f.cutAny = true
	rg := f.pending[0]
	target := f.target()
	for len(f.stretches) > 0 && f.stretches[0].End <= rg.Start {
		f.stretches, f.inStretch = f.stretches[1:], false
	}
	if len(f.stretches) > 0 && f.stretches[0].Start <= rg.Start {
		return f.cutStretch(target)
	}
	f.stats.alone++
	if !f.model.known() {
		f.pending = f.pending[1:]
		f.frontier = rg.End
		mb := int32(1) // exactly one batch, which tells what an offset weighs
		if rg.Scan {
			mb = int32(target)
		}
		return &slot{rg: rg, off: rg.Start, maxBytes: mb}
	}
	est := f.model.bytes(rg.End - rg.Start)
	if est > target {
		n := max(int64(target/f.model.perOff), 1)
		if rg.Start+n < rg.End {
			chunk := index.Range{Start: rg.Start, End: rg.Start + n, Scan: rg.Scan}
			f.pending[0].Start = chunk.End
			f.frontier = chunk.End
			return &slot{rg: chunk, off: chunk.Start, maxBytes: f.limit(f.model.bytes(n), rg.Scan)}
		}
	}
	f.pending = f.pending[1:]
	f.frontier = rg.End
	return &slot{rg: rg, off: rg.Start, maxBytes: f.limit(est, rg.Scan)}
}

// cutStretch cuts the next chunk of the first stretch, which the first
// pending range lies in: from that range's start, up to target bytes and
// the stretch's end, whatever lies between the planned ranges included.
// The planned ranges it covers leave pending (one it ends inside keeps its
// rest).
func (f *fetcher) cutStretch(target float64) *slot {
	st := &f.stretches[0]
	chunk := index.Range{Start: f.pending[0].Start, End: st.End}
	if n := max(int64(target/f.model.perOff), 1); chunk.Start+n < chunk.End {
		chunk.End = chunk.Start + n
	}
	var planned int64
	touched, i := 0, 0
	for ; i < len(f.pending) && f.pending[i].Start < chunk.End; i++ {
		r := f.pending[i]
		chunk.Scan = chunk.Scan || r.Scan
		touched++
		if r.End > chunk.End {
			planned += chunk.End - r.Start
			f.pending[i].Start = chunk.End
			break
		}
		planned += r.End - r.Start
	}
	f.stats.mergedGaps += touched - 1 // the gaps read through
	f.pending = f.pending[i:]
	if !f.inStretch {
		f.inStretch = true
		f.stats.stretches++
	}
	f.stats.stretchExtra += chunk.End - chunk.Start - planned
	if st.Start = chunk.End; st.Start >= st.End {
		f.stretches, f.inStretch = f.stretches[1:], false
	}
	f.frontier = chunk.End
	return &slot{rg: chunk, off: chunk.Start, maxBytes: f.limit(f.model.bytes(chunk.End-chunk.Start), chunk.Scan)}
}

// gapBudget is how many offsets beyond its planned ranges the pass may
// read to save fetches (see costModel.stretches).
func (f *fetcher) gapBudget() int64 { return int64(gapShare * float64(f.planned)) }

// shouldDecide reports whether the plan left is to be cut into stretches
// now. Deciding needs a priced model with sizes: with no bytes per offset
// a plan prices as its fetches' latencies only, and a scan always wins.
// What is left of the plan is cut again as the pass's own fetches measure
// the broker (after 1, 2, 4, 8, ... of them): the first cut was priced on
// Open's samples, which a busy broker's fetches of data can cost many
// times over.
func (f *fetcher) shouldDecide() bool {
	if !f.model.priced() || !f.model.known() {
		return false
	}
	return !f.decided || (f.model.learned > 0 && f.model.learned >= 2*f.decidedAt)
}

// decide cuts the remaining plan into stretches once the model can price
// it (costModel.stretches): where the ranges lie dense, a run of them is
// read whole, in chunks, as one scan; where they lie sparse, each is
// fetched on its own. A stretch read whole keeps every record its ranges
// would have given (it covers them), so the choice changes cost only. It
// runs again on what is left of the plan as the model learns, and when a
// read joins.
func (f *fetcher) decide() {
	f.decided, f.decidedAt = true, f.model.learned
	within := f.inStretch // a stretch being cut that goes on counts once
	f.stretches, f.inStretch = f.stretches[:0], false
	if f.noIndex || len(f.pending) == 0 || (len(f.pending) == 1 && f.pending[0].Scan) {
		return
	}
	target := f.target()
	idx, scan := f.model.planCosts(f.pending, target)
	f.stats.estIndexed = time.Duration(idx * float64(time.Second))
	f.stats.estScan = time.Duration(scan * float64(time.Second))
	p := f.model.stretches(f.pending, target, f.gapBudget())
	f.stats.estPlan = time.Duration(p.time * float64(time.Second))
	for k, j := range p.first {
		end := len(f.pending)
		if k+1 < len(p.first) {
			end = p.first[k+1]
		}
		if end-j > 1 {
			f.stretches = append(f.stretches, index.Range{Start: f.pending[j].Start, End: f.pending[end-1].End})
		}
	}
	f.inStretch = within && len(f.stretches) > 0 && f.stretches[0].Start == f.pending[0].Start
}

// planName says what the pass read (ReadStats.Plan).
func (f *fetcher) planName() string {
	switch {
	case f.stats.scan || f.noIndex:
		return "scan"
	case f.stats.stretches == 0:
		return "indexed"
	case f.stats.alone == 0 && f.stats.stretches == 1:
		return "scan (cheaper than indexed)"
	default:
		return "mixed (dense stretches scanned)"
	}
}

// join takes a read's planned ranges into the running pass, or reports
// that it cannot: part of them lies below what the reader was handed.
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
	for _, sl := range f.queue {
		if sl.join == nil {
			covered = append(covered, index.Range{Start: sl.off, End: sl.rg.End})
		}
	}
	for _, r := range subtractRanges(below, covered) {
		mb := int32(f.target())
		if f.model.known() {
			mb = f.limit(f.model.bytes(r.End-r.Start), r.Scan)
		} else if !r.Scan {
			mb = 1
		}
		f.queue = append(f.queue, &slot{rg: r, off: r.Start, maxBytes: mb})
	}
	// Markers not yet sent sort to the front (off 0): a read registered
	// early is harmless, its entries are filtered by its own from points.
	slices.SortStableFunc(f.queue, func(a, b *slot) int { return cmp.Compare(a.off, b.off) })
	// The marker goes before the first chunk that may hold the read's
	// records; everything before it ends at or below first.
	at := len(f.queue)
	for i, sl := range f.queue {
		if sl.join == nil && sl.rg.End > first {
			at = i
			break
		}
	}
	f.queue = slices.Insert(f.queue, at, &slot{join: j.sub})
	f.pending = unionRanges(f.pending, above)
	f.planned += spanOffsets(j.ranges)
	if f.decided {
		// Its ranges may fall inside stretches or between them: the plan
		// left is cut again.
		f.decide()
	}
	return true
}

// unionRanges merges two ascending lists of ranges into one ascending list
// of disjoint, non-touching ranges (Scan where either part is). It walks
// both lists once: a pass's pending plan takes every joining read's ranges
// this way, and sorting the whole plan again at each of a restart's many
// joins was most of what a join cost (1.5–2.8% of the client's CPU in 64
// regions' concurrent replays on the local Kafka broker).
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

// spanOffsets is the number of offsets the ranges cover.
func spanOffsets(rs []index.Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.End - r.Start
	}
	return n
}
