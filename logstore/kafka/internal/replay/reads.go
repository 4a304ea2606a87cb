package replay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// partition is the only partition kwal writes and reads.
const partition int32 = 0

// Host is what the read path needs from the store that owns it.
type Host interface {
	// FetchClient returns the client of fetch connection i, 0 <= i <
	// Options.Conns: each holds its own connection to every broker, which
	// the broker serves one request at a time.
	FetchClient(i int) *kgo.Client
	// Admin asks for metadata.
	Admin() *kadm.Client
	// Offsets returns the topic's log start and end (high watermark), with
	// retries through metadata refreshes; an unknown topic's error matches
	// ErrUnknownNamespace.
	Offsets(ctx context.Context, topic string) (start, end int64, err error)
	// StartIndex lets the index learn the log's bounds for a read, unless a
	// producer of the topic may have acknowledged appends newer than end
	// (then it does nothing). It reports the index's watermark and true when
	// the log ends below it (records the index knew are gone), and then
	// leaves the index alone. gen is the topic's generation when the read
	// began (Gate).
	StartIndex(topic string, gen uint64, start, end int64) (w int64, lost bool)
	// Fenced reports whether a record of region with epoch at offset is
	// fenced by a newer owner's claim (package claim): a read drops it
	// before reassembly. It is called for every record of a region read,
	// so it must be cheap.
	Fenced(topic string, region uint64, offset int64, epoch uint64) bool
	// JudgeMark applies the fencing rule to a mark's statement about
	// region, made under epoch at offset: it counts, it is fenced (a
	// record of region with epoch at offset would be), or the store's view
	// cannot tell yet (fencedmarks.go).
	JudgeMark(topic string, region uint64, offset int64, epoch uint64) Verdict
	// Sync brings what Fenced and JudgeMark know up to date; a pass calls
	// it once, before it decodes its first record (its fetches and joins
	// go on meanwhile), and so does every other reader of marks before it
	// judges them (syncClaims).
	Sync(ctx context.Context, topic string) error
}

// Options configure a store's read path.
type Options struct {
	Host  Host
	Index *index.Collector // nil: every read scans
	// Conns is how many fetch connections Host.FetchClient has.
	Conns int
	// FetchMaxBytes bounds one fetch's response and the byte limits of
	// every read's fetches that are in flight, waiting to be decoded, or
	// whose entries a read has not taken yet, all reads of the store
	// together (see Pool).
	FetchMaxBytes int32
	// ChunkBytes is the most one fetch asks for where a planned range is
	// longer.
	ChunkBytes int64
	// HoldBytes bounds the entry data all reads hold before yielding it
	// (entries still open, and those waiting behind an open one); beyond
	// it they spill entries and read them again when their turn comes.
	HoldBytes int64
	// MaxEntryBytes is what one entry may hold; a longer one fails the
	// read with ErrHoldExceeded (HoldBytes >= MaxEntryBytes).
	MaxEntryBytes  int64
	RequestTimeout time.Duration
	RetryBackoff   time.Duration
	SkipCorrupt    bool
	Logger         *slog.Logger
	Metrics        *Metrics

	// ErrUnknownNamespace and ErrFutureID are the store's sentinels, which
	// the read path's errors match.
	ErrUnknownNamespace, ErrFutureID error
}

// ErrHoldExceeded is matched by read errors for an entry longer than a read
// may hold (Options.MaxEntryBytes): written by a store allowed longer
// entries. Raise ReadHoldBytes and MaxEntryBytes to read it.
var ErrHoldExceeded = errors.New("kwal: entry longer than a read may hold (Config.ReadHoldBytes)")

// errStop ends a read whose caller broke out of the loop.
var errStop = errors.New("kwal: read stopped by its caller")

// Reads is a store's read path: its reads, the passes they share, the
// fetch connections' budget, the metadata and marks reads learn, and the
// gate of their index updates. Close ends it.
type Reads struct {
	opts    Options
	log     *slog.Logger
	metrics *Metrics

	ctx  context.Context // cancelled by Close: reads in progress end
	stop context.CancelFunc
	mu   sync.Mutex
	done bool
	wg   sync.WaitGroup // every goroutine of the read path

	gate   Gate
	marks  marks
	meta   metaCache
	sizes  sizes
	bounds readBounds
	pool   *Pool
	hold   holdBudget
	// readBackTurn lets one spilled entry be read back at a time (see
	// Pool.readBack).
	readBackTurn chan struct{}
	warm         []warmFlag
	// decompress decompresses every fetch's compressed batches: one for
	// the store, so that its pooled decoders (and their buffers) are
	// reused, not made again for each fetch.
	decompress kgo.Decompressor

	passMu sync.Mutex
	topics map[string]*topicPasses // per topic: its passes that take joining reads
	passID uint64

	catchUps catchUps

	hooks Hooks
}

// Hooks let tests stop the read path at chosen points; nil fields do
// nothing. Set them before any read starts.
type Hooks struct {
	Join       func()             // a read joined a running pass
	Start      func()             // a read started a pass of its own
	ScanReport func(topic string) // a read is about to hand what it scanned to the index
	// JoinWait, when set, replaces joinWait: a test that counts joins
	// must not see a read start a pass of its own because a loaded
	// machine kept the pass's fetcher from answering within joinWait.
	JoinWait time.Duration
	// PinnedLatency and PinnedRate, when set, are every pass's fetch
	// latency and streaming rate, never learned.
	PinnedLatency time.Duration
	PinnedRate    float64
}

// New returns the read path of a store.
func New(o Options) *Reads {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	r := &Reads{opts: o, log: o.Logger, metrics: o.Metrics, topics: make(map[string]*topicPasses), decompress: kgo.DefaultDecompressor()}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.marks.init()
	r.pool = NewPool(o.Conns, int64(o.FetchMaxBytes))
	r.readBackTurn = make(chan struct{}, 1)
	r.hold.limit = o.HoldBytes
	r.warm = make([]warmFlag, o.Conns)
	r.catchUps = catchUps{slots: make(chan struct{}, catchUpSlots), running: make(map[string]chan struct{})}
	return r
}

// SetHooksForTesting sets the read path's test hooks.
func (r *Reads) SetHooksForTesting(h Hooks, gateClosed func()) {
	if h.Join != nil {
		r.hooks.Join = h.Join
	}
	if h.Start != nil {
		r.hooks.Start = h.Start
	}
	if h.ScanReport != nil {
		r.hooks.ScanReport = h.ScanReport
	}
	if h.JoinWait > 0 {
		r.hooks.JoinWait = h.JoinWait
	}
	if h.PinnedLatency > 0 {
		r.hooks.PinnedLatency, r.hooks.PinnedRate = h.PinnedLatency, h.PinnedRate
	}
	if gateClosed != nil {
		r.gate.closedHook = gateClosed
	}
}

// Gate returns the gate of the reads' index updates.
func (r *Reads) Gate() *Gate { return &r.gate }

// Close ends every read in progress (with ErrClosed as far as the caller
// sees: a read's next step after Close yields it), closes the gate (no read
// changes the index from now on) and waits for the read path's goroutines.
// Idempotent.
func (r *Reads) Close() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.stop()
	r.gate.close()
	r.wg.Wait()
}

// Closed reports whether Close began, so that a read ending with ctx's
// error can tell it was the store that closed.
func (r *Reads) Closed() bool { return r.ctx.Err() != nil }

// goroutines counts n goroutines of the read path for Close to wait for,
// unless Close began.
func (r *Reads) goroutines(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	r.wg.Add(n)
	return true
}

// Drop forgets what the read path knew of a topic that DeleteNamespace
// deleted: reads that began before stop updating the index and the marks
// (the gate's generation moves on), and the cached leader, sizes and marks
// go.
func (r *Reads) Drop(topic string) {
	r.gate.drop(topic)
	r.meta.forget(topic)
	r.marks.forget(topic)
	r.sizes.forget(topic)
}

// ForgetMeta drops the topic's cached leader and ID.
func (r *Reads) ForgetMeta(topic string) { r.meta.forget(topic) }

// Request is one read: its regions, each from the first offset it wants
// (an entry ID's offset is the ID - 1; 0 for ID 0).
type Request struct {
	Topic string
	From  map[logstore.RegionID]logstore.EntryID
	// NoIndex scans the whole range instead of the index's plan.
	NoIndex bool
	// End, when above 0, ends the read below that offset if the log ends
	// further: it yields only the entries whose every record lies below
	// it (a claim's sealed history).
	End int64
}

// Read runs one read, handing its entries to yield in ID order, up to the
// log's end as it was when the read began. It returns the read's error (nil
// when it ended at the log's end, errStop-wrapped never: a caller that
// stops gets nil). st receives the read's counters.
func (r *Reads) Read(ctx context.Context, req Request, yield func(logstore.Entry) bool, st *Stats) error {
	err := r.read(ctx, req, yield, st)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// read is one read: its own bounds, ErrPruned check and plan, then the
// entries of a pass it joins or starts.
func (r *Reads) read(ctx context.Context, req Request, yield func(logstore.Entry) bool, st *Stats) error {
	topic := req.Topic
	if len(req.From) == 0 {
		return nil
	}
	gen := r.gate.generation(topic)
	start, end, pl, err := r.lookUp(ctx, topic)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = kwalerr.Join(cerr, err)
		}
		if errors.Is(err, logstore.ErrClosed) {
			return err // closedErr names the read
		}
		return kwalerr.Errorf("read %q: %w", topic, err)
	}
	// Every way out before joining a pass releases the read's cohort.
	defer pl.placed()
	offs := make(map[uint64]int64, len(req.From))
	lo := end
	var below []regionFrom // regions asking for offsets below the log start
	for region, id := range req.From {
		if id > logstore.EntryID(end)+1 {
			// Every ID a caller learned from this log is at most its end:
			// one above it means the log lost entries (a recreated or
			// truncated topic), or the ID is not this log's.
			return kwalerr.Errorf("read %q region %d from ID %d: the namespace's latest entry ID is %d: %w", topic, region, id, end, r.opts.ErrFutureID)
		}
		off := fromOffset(id)
		if off < start {
			below = append(below, regionFrom{region: region, id: id})
			off = start
		}
		offs[uint64(region)] = off
		lo = min(lo, off)
	}
	if len(below) > 0 {
		// Only a deleted entry of the region itself fails the read
		// (pruned.go).
		if err := r.proveNothingPruned(ctx, topic, gen, below, start, end); err != nil {
			return err
		}
	}
	// lostErr reports records of the read's regions that the index knew
	// of past the log's end: the read yields what the log still has, then
	// fails with it. Checked before the early return, so that a read from
	// past the log's end fails too.
	var lostErr error
	if r.opts.Index != nil {
		if w, lost := r.opts.Host.StartIndex(topic, gen, start, end); lost {
			lostErr = r.lostTail(topic, offs, end, w, st)
		}
	}
	if req.End > 0 {
		// Only the read's range ends early: the index and the checks
		// above are the log's.
		end = min(end, req.End)
	}
	if lo >= end {
		return lostErr
	}
	var plan index.Plan
	if r.opts.Index != nil && !req.NoIndex {
		plan = r.opts.Index.Plan(topic, offs, end)
	} else {
		plan = index.Plan{Ranges: []index.Range{{Start: lo, End: end, Scan: true}}}
	}
	for _, rg := range plan.Ranges {
		if rg.Scan {
			st.ScanRanges++
		} else {
			st.IndexRanges++
		}
	}
	if len(plan.Ranges) == 0 {
		return lostErr
	}
	sb := newSub(offs)
	p, err := r.joinOrStart(topic, req.NoIndex, end, sb, plan.Ranges, pl)
	if err != nil {
		return err
	}
	if err := sb.consume(ctx, p, yield, st); err != nil {
		return err
	}
	return lostErr
}

// fromOffset is the first offset a read from entry ID id needs; id is at
// most the log's end + 1, so it fits an int64.
func fromOffset(id logstore.EntryID) int64 {
	if id == 0 {
		return 0
	}
	return int64(id) - 1
}

// closedErr is the error of a read that the store's Close ended.
func closedErr(topic string) error {
	return kwalerr.Errorf("read %q: %w", topic, logstore.ErrClosed)
}

// Context is done once Close began: a read's caller ends with it.
func (r *Reads) Context() context.Context { return r.ctx }

// PoolUsed is the bytes the reads hold in their fetch budget now.
func (r *Reads) PoolUsed() int64 { return r.pool.Used() }

// PoolPeak is the most bytes the reads' fetch budget has held at once.
func (r *Reads) PoolPeak() int64 { return r.pool.Peak() }

// HoldPeak is the most entry data the reads have held at once.
func (r *Reads) HoldPeak() int64 { return r.hold.peak.Load() }

// HoldUsed is the entry data the reads hold now.
func (r *Reads) HoldUsed() int64 { return r.hold.used.Load() }
