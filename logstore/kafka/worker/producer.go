package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/semaphore"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// ErrTimeout is matched by errors of appends whose produce was not
// acknowledged within the produce timeout. Their entries may still be
// written.
var ErrTimeout = errors.New("kwal: produce timed out")

// Collector receives what the worker learned from acknowledgements: which
// offsets hold which region's records. index.Collector has it. Observe
// must not keep runs past its return: the worker reuses the slice.
type Collector interface {
	Observe(topic string, runs []index.Run)
}

// Entry is one entry to append.
type Entry struct {
	Region uint64
	Epoch  uint64 // the region's owner epoch the store holds (0: never claimed)
	Data   []byte
}

// Options configure one topic's producer.
type Options struct {
	Topic     string
	Partition int32 // the partition written; kwal uses 0
	// MaxBatchBytes: entries are split into parts that fit a batch of this
	// size, and a group is capped at GroupBatches of these.
	MaxBatchBytes int
	// MaxQueuedBytes bounds the bytes of the topic's requests queued or in
	// flight; the Lanes' MaxQueuedBytes bounds them across topics.
	MaxQueuedBytes int64
	// ProduceTimeout fails a sent group's requests with ErrTimeout when
	// Kafka has not answered by then. (A caller that also wants to bound its
	// wait in the queue submits with SubmitBy's Deadline, or gives Wait a
	// context with a deadline.)
	ProduceTimeout time.Duration
	// Linger holds back groups smaller than MaxBatchBytes until their oldest
	// request is this old, to let more requests of the region join.
	Linger time.Duration
	// MaxRegions lets a produce carry up to this many regions' groups when
	// the topic has a backlog: more groups planned than lanes free. Then
	// adjacent groups (oldest first) are merged, up to MaxBatchBytes, so
	// fewer and larger requests drain the backlog; with lanes to spare,
	// groups go out alone. 0 or 1 keeps every produce to one region.
	MaxRegions int
	Lanes      *Lanes
	Collector  Collector // nil: nothing observes acknowledgements
	Metrics    *Metrics  // nil: no metrics
	Logger     *slog.Logger
}

// GroupBatches caps a group at this many MaxBatchBytes, so that one busy
// region cannot hold a lane for long while others wait.
const GroupBatches = 8

// Producer is one topic's ordered batch producer: Submit queues a request
// (one AppendBatch call's entries for the topic) and the store-wide
// dispatcher (Lanes) sends it, grouped with other pending requests of its
// region and packed with other topics' groups, and resolves it.
type Producer struct {
	opts  Options
	tm    *topicMetrics // nil: no metrics
	lanes *Lanes
	w     *worker // owned by the dispatcher goroutine
	sem   *semaphore.Weighted

	mu         sync.Mutex
	closed     bool
	submitters sync.WaitGroup
	stopCtx    context.Context // cancelled when Close starts
	stop       context.CancelFunc
	abortOnce  sync.Once
	exited     chan struct{} // closed by the dispatcher once the topic holds nothing

	// latest is the highest offset this producer had acknowledged, plus 1
	// (0: none yet); set by the dispatcher before the calls it acknowledges
	// return.
	latest atomic.Int64
}

// LatestAcked is the ID the newest entry this producer acknowledged has, or
// a higher one (the offset after its newest acknowledged record); 0 when it
// acknowledged none.
func (p *Producer) LatestAcked() int64 { return p.latest.Load() }

// NewProducer registers the topic with the dispatcher; Close unregisters it.
func NewProducer(opts Options) *Producer {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxQueuedBytes < int64(opts.MaxBatchBytes) {
		opts.MaxQueuedBytes = int64(opts.MaxBatchBytes)
	}
	if l := opts.Lanes; l.sem != nil && opts.MaxQueuedBytes > l.opts.MaxQueuedBytes {
		opts.MaxQueuedBytes = l.opts.MaxQueuedBytes
	}
	p := &Producer{
		opts:   opts,
		tm:     opts.Metrics.forTopic(opts.Topic),
		lanes:  opts.Lanes,
		sem:    semaphore.NewWeighted(opts.MaxQueuedBytes),
		exited: make(chan struct{}),
	}
	p.stopCtx, p.stop = context.WithCancel(context.Background())
	p.w = newWorker(p)
	select {
	case p.lanes.ctl <- ctlMsg{w: p.w}:
	case <-p.lanes.exited:
		p.closed = true
		close(p.exited)
	}
	return p
}

// request is one Submit: a call's entries for this topic, encoded.
type request struct {
	recs       []*kgo.Record
	recRegion  []uint64 // region of each record
	regions    []uint64 // distinct, in first-seen order
	entryFirst []int    // index in recs of each entry's first record
	mem        *recMem  // what recs, recRegion and entryFirst live in; nil once recycled
	bytes      int64    // record bytes (keys and values)
	dataBytes  int64    // entry data bytes
	held       int64    // semaphore weight held (of the topic's and of the store's)
	enqueued   time.Time
	deadline   Deadline
	dlIdx      int   // position + 1 in the dispatcher's deadline heap; 0: not in it
	expired    error // set when the dispatcher withdrew the request at its deadline
	w          *worker
	closing    bool // a producer's closing marker, not a request

	pd      Pending      // what Submit returns: one allocation less per call
	state   atomic.Int32 // stateQueued, stateTaken, stateCanceled
	done    chan struct{}
	offsets []int64 // first offset of each entry, set before done is closed
	err     error
}

// recycle returns the request's record memory to the pool. Only for a
// request no one can read the records of any more: never handed to a lane,
// or its dispatch came back (the lane's Flush returned).
func (r *request) recycle() {
	if r.mem == nil {
		return
	}
	putRecMem(r.mem)
	r.mem, r.recs, r.recRegion, r.entryFirst = nil, nil, nil, nil
}

const (
	stateQueued int32 = iota
	stateTaken
	stateCanceled
)

// Pending is a submitted request; Wait returns its result.
type Pending struct {
	r     *request
	topic string
}

// Submit encodes entries and queues them as one request; it blocks while the
// topic's queue is full. Entries keep their slice order in the log. The
// records carry a copy of the entries' data, taken before Submit returns:
// the caller may reuse its buffers at once, even while franz-go still holds
// the records (a Wait that returned early on its context or ErrTimeout).
func (p *Producer) Submit(ctx context.Context, entries []Entry) (*Pending, error) {
	return p.SubmitBy(ctx, entries, Deadline{})
}

// SubmitBy is Submit with a deadline that bounds the request as a whole:
// waiting for queue room, in the queue and on a lane. Past it, Submit fails
// (nothing was queued) or the request is resolved with dl.Cause. Unlike a
// context deadline it costs no timer per request: the dispatcher enforces
// every request's deadline from one heap.
func (p *Producer) SubmitBy(ctx context.Context, entries []Entry, dl Deadline) (*Pending, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, kwalerr.Errorf("append to %q: %w", p.opts.Topic, logstore.ErrClosed)
	}
	p.submitters.Add(1)
	p.mu.Unlock()
	defer p.submitters.Done()

	r, err := p.encode(entries)
	if err != nil {
		return nil, err
	}
	// The topic's bound first, then the store's: a topic holds at most its
	// own bound of the store's, and the store's semaphore serves waiters in
	// order, so one hot topic cannot starve the others. The common case
	// takes room and queues without waiting (TryAcquire never jumps ahead
	// of a waiter); only a call that must wait makes the context that Close
	// ends.
	r.held = min(r.bytes, p.opts.MaxQueuedBytes)
	r.w = p.w
	r.deadline = dl
	held := 0 // semaphores held: 1 the topic's, 2 the store's too
	if ctx.Err() == nil && p.sem.TryAcquire(r.held) {
		held = 1
		if s := p.lanes.sem; s == nil || s.TryAcquire(r.held) {
			held = 2
			r.enqueued = time.Now()
			if !dl.At.IsZero() && !r.enqueued.Before(dl.At) {
				return p.submitWaiting(ctx, r, held) // past the deadline: fails there
			}
			if p.lanes.in.put(r) {
				return p.queued(r), nil
			}
			p.release(r.held)
			r.recycle()
			return nil, kwalerr.Errorf("append to %q: %w", p.opts.Topic, logstore.ErrClosed)
		}
	}
	return p.submitWaiting(ctx, r, held)
}

// submitWaiting is Submit's slow path: it waits for the room Submit could
// not take at once (held says what it holds) and for queue space, until ctx
// ends or Close starts.
func (p *Producer) submitWaiting(ctx context.Context, r *request, held int) (*Pending, error) {
	var cancel context.CancelFunc
	if r.deadline.At.IsZero() {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithDeadlineCause(ctx, r.deadline.At, r.deadline.Cause)
	}
	defer cancel()
	defer context.AfterFunc(p.stopCtx, cancel)()
	if held < 1 {
		if err := p.sem.Acquire(ctx, r.held); err != nil {
			r.recycle()
			return nil, p.submitErr(context.Cause(ctx))
		}
	}
	if s := p.lanes.sem; s != nil && held < 2 {
		if err := s.Acquire(ctx, r.held); err != nil {
			p.sem.Release(r.held)
			r.recycle()
			return nil, p.submitErr(context.Cause(ctx))
		}
	}
	r.enqueued = time.Now()
	if ctx.Err() == nil {
		if p.lanes.in.put(r) {
			return p.queued(r), nil
		}
		p.release(r.held)
		r.recycle()
		return nil, kwalerr.Errorf("append to %q: %w", p.opts.Topic, logstore.ErrClosed)
	}
	p.release(r.held)
	r.recycle()
	return nil, p.submitErr(context.Cause(ctx))
}

// queued counts r, just handed to the dispatcher, and returns its Pending.
func (p *Producer) queued(r *request) *Pending {
	if tm := p.tm; tm != nil {
		tm.queueRequests.Inc()
		tm.queueLen.Add(float64(r.bytes))
	}
	r.pd = Pending{r: r, topic: p.opts.Topic}
	return &r.pd
}

// release frees n bytes of queue room, the topic's and the store's.
func (p *Producer) release(n int64) {
	p.sem.Release(n)
	if s := p.lanes.sem; s != nil {
		s.Release(n)
	}
}

func (p *Producer) submitErr(err error) error {
	if p.stopCtx.Err() != nil {
		return kwalerr.Errorf("append to %q: %w", p.opts.Topic, logstore.ErrClosed)
	}
	return kwalerr.Errorf("append to %q: waiting for queue room; nothing was written: %w", p.opts.Topic, err)
}

func (p *Producer) encode(entries []Entry) (*request, error) {
	// The records' values point into one copy of every entry's data, never
	// into the caller's buffers: franz-go may still hold (and retry) the
	// records after the caller's Wait returned early, and a caller that then
	// reused a pooled buffer would change a record under its checksum. The
	// copy, the record structs and their keys come from recMemPool in the
	// common case of entries that fit one record each.
	total, keySize := 0, record.KeySize
	for i, e := range entries {
		if e.Epoch != 0 {
			keySize = record.KeySizeEpoch
		}
		if uint64(len(e.Data)) > record.MaxEntrySize {
			return nil, kwalerr.Errorf("append to %q: entry %d of region %d: %w: %d bytes, the limit is %d",
				p.opts.Topic, i, e.Region, record.ErrTooLarge, len(e.Data), uint64(record.MaxEntrySize))
		}
		total += len(e.Data)
	}
	mem := getRecMem(total, len(entries), keySize)
	r := &request{
		done:       make(chan struct{}),
		mem:        mem,
		entryFirst: mem.entryFirst[:len(entries)],
		recs:       mem.recs,
		recRegion:  mem.recRegion,
	}
	structs, keys, data := mem.structs, mem.keys, mem.data
	var seen map[uint64]struct{}
	for i, e := range entries {
		data = append(data, e.Data...)
		own := data[len(data)-len(e.Data) : len(data) : len(data)]
		parts, err := record.Split(e.Region, own, p.opts.MaxBatchBytes)
		if err != nil {
			r.recycle()
			return nil, kwalerr.Errorf("append to %q: entry %d of region %d: %w", p.opts.Topic, i, e.Region, err)
		}
		r.entryFirst[i] = len(r.recs)
		for j := range parts {
			parts[j].Epoch = e.Epoch
			kl := parts[j].KeyLen()
			if len(keys)+kl > cap(keys) {
				keys = make([]byte, 0, (len(entries)-i+len(parts))*keySize)
			}
			keys = parts[j].AppendKey(keys)
			key := keys[len(keys)-kl : len(keys) : len(keys)]
			if len(structs) == cap(structs) {
				structs = make([]kgo.Record, 0, len(entries)-i+len(parts))
			}
			structs = append(structs, kgo.Record{Topic: p.opts.Topic, Partition: p.opts.Partition, Key: key, Value: parts[j].Data})
			r.recs = append(r.recs, &structs[len(structs)-1])
			r.recRegion = append(r.recRegion, e.Region)
			r.bytes += int64(len(key) + len(parts[j].Data))
		}
		r.dataBytes += int64(len(e.Data))
		switch {
		case seen != nil:
			if _, ok := seen[e.Region]; !ok {
				seen[e.Region] = struct{}{}
				r.regions = append(r.regions, e.Region)
			}
		case !slices.Contains(r.regions, e.Region):
			r.regions = append(r.regions, e.Region)
			if len(r.regions) > 16 { // many regions: stop scanning the slice
				seen = make(map[uint64]struct{}, 2*len(r.regions))
				for _, reg := range r.regions {
					seen[reg] = struct{}{}
				}
			}
		}
	}
	return r, nil
}

// Wait returns the offset of each entry's first record, in the order the
// entries were submitted, once Kafka acknowledged every record of the
// request. When ctx ends first, Wait returns at once: if the request was
// still queued it is withdrawn and none of its entries is written;
// otherwise its records were already handed to Kafka and may still be
// written (the error says which).
func (pd *Pending) Wait(ctx context.Context) ([]int64, error) {
	r := pd.r
	select {
	case <-r.done:
		return r.offsets, r.err
	default:
	}
	select {
	case <-r.done:
		return r.offsets, r.err
	case <-ctx.Done():
		// Cause: a deadline set with a cause (the store's ErrTimeout) says so.
		// (A request the dispatcher withdrew at its Deadline is canceled too.)
		if r.state.CompareAndSwap(stateQueued, stateCanceled) {
			r.w.withdrawals.Add(1) // the dispatcher's next plan drops it
			return nil, withdrawnErr(pd.topic, context.Cause(ctx))
		}
		if r.state.Load() == stateCanceled {
			return nil, withdrawnErr(pd.topic, context.Cause(ctx))
		}
		return nil, abandonedErr(pd.topic, context.Cause(ctx))
	}
}

// Close stops accepting requests, sends and resolves every queued request,
// and unregisters the topic from the dispatcher. If ctx ends first, every
// request not yet resolved fails with ErrClosed (its entries may still be
// written) and Close returns ctx's error. A produce stuck on a lane is
// released when the caller closes the lanes' clients. Close is idempotent.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	first := !p.closed
	p.closed = true
	p.mu.Unlock()
	l := p.lanes
	if first {
		p.stop()
		p.submitters.Wait()
		// The marker follows every request of the topic in the queue.
		if !l.in.put(&request{w: p.w, closing: true}) {
			return nil // the dispatcher failed everything when it stopped
		}
	}
	select {
	case <-p.exited:
		return nil
	case <-l.exited:
		return nil
	case <-ctx.Done():
		p.abortOnce.Do(func() {
			select {
			case l.ctl <- ctlMsg{w: p.w, abort: true}:
			case <-l.exited:
			}
		})
		select {
		case <-p.exited:
		case <-l.exited:
		}
		return kwalerr.Errorf("close producer %q: %w", p.opts.Topic, ctx.Err())
	}
}

// withdrawnErr is the error of a request withdrawn from the queue (by its
// caller's Wait or at its Deadline): it was never sent.
func withdrawnErr(topic string, cause error) error {
	return kwalerr.Errorf("append to %q withdrawn before it was sent; none of its entries was written: %w", topic, cause)
}

// abandonedErr is the error of a request given up on after a lane took it:
// franz-go may still write it.
func abandonedErr(topic string, cause error) error {
	return kwalerr.Errorf("append to %q abandoned after it was handed to Kafka; its entries may still be written: %w", topic, cause)
}
