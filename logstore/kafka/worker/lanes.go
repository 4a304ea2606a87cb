package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/semaphore"
)

// Client is what a lane needs from a Kafka client; *kgo.Client has it. The
// client must be created with kgo.ManualFlushing, so that nothing leaves
// before Flush: then every record a lane buffers for a dispatch goes out in
// the same produce request(s), each partition's records as one batch.
type Client interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
}

// LanesOptions configure the store-wide dispatcher.
type LanesOptions struct {
	Clients []Client
	// MaxRequestBytes bounds the record bytes of one dispatch (the groups of
	// several topics that share a produce request). A single group larger
	// than it still goes out, alone. Default 4 MiB.
	MaxRequestBytes int64
	// MaxQueuedBytes bounds the bytes queued or in flight across every
	// producer of the store; 0 leaves only each producer's own bound.
	MaxQueuedBytes int64
	// MinInFlight is how many dispatches may be in flight before ready
	// groups that could share a request wait for one to return (at most
	// about one produce round trip). Default 2.
	MinInFlight int
	Metrics     *Metrics // nil: no metrics
	Logger      *slog.Logger
}

// Lanes is the store-wide dispatcher: one goroutine that owns every topic's
// pending requests (each Producer's worker state), plans region-pure groups
// per topic, packs at most one group per topic into a dispatch, and hands
// the dispatch to a free lane. A lane is one Kafka client that carries one
// dispatch at a time. Close stops the goroutine, after every producer is
// closed.
type Lanes struct {
	opts LanesOptions
	sem  *semaphore.Weighted // store-wide bound; nil when none

	in       *inbox         // from Submit and Close (a closing marker), in order
	ctl      chan ctlMsg    // register and abort
	results  chan *dispatch // from lane goroutines
	timeouts chan *dispatch // from timers
	stop     chan struct{}  // closed by Close
	exited   chan struct{}  // closed when run returns
	running  sync.WaitGroup // lane goroutines

	deadlines deadlines // requests with a Deadline; owned by the dispatcher goroutine
	once      sync.Once
}

type lane struct {
	client Client
}

type ctlMsg struct {
	w     *worker
	abort bool // false: register w
}

// NewLanes starts the dispatcher over o.Clients; the caller keeps owning the
// clients and closes them before Lanes.Close when a produce may be stuck
// (closing a client ends it).
func NewLanes(o LanesOptions) *Lanes {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 4 << 20
	}
	if o.MinInFlight <= 0 {
		o.MinInFlight = 2
	}
	n := len(o.Clients)
	l := &Lanes{
		opts:     o,
		in:       newInbox(),
		ctl:      make(chan ctlMsg),
		results:  make(chan *dispatch, n),
		timeouts: make(chan *dispatch, n),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	if o.MaxQueuedBytes > 0 {
		l.sem = semaphore.NewWeighted(o.MaxQueuedBytes)
	}
	d := newDispatcher(l)
	go d.run()
	return l
}

// Len is the number of lanes.
func (l *Lanes) Len() int { return len(l.opts.Clients) }

// Close stops the dispatcher goroutine and waits for every lane goroutine.
// Producers are closed first; a lane goroutine stuck in a produce ends when
// its client is closed. Idempotent.
func (l *Lanes) Close() {
	l.once.Do(func() { close(l.stop) })
	<-l.exited
	l.running.Wait()
}

// produce runs d on ln in a goroutine tracked by l.running: every record is
// buffered on the lane's client, then one Flush sends them (one batch per
// partition, every partition of a broker in one request, as far as the
// request's size allows) and waits for all of them.
func (l *Lanes) produce(ln *lane, d *dispatch, timeout time.Duration) {
	l.running.Add(1)
	go func() {
		defer l.running.Done()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		var mu sync.Mutex
		var wg sync.WaitGroup
		wg.Add(len(d.recs))
		promise := func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if d.failed == nil {
					d.failed = make(map[*kgo.Record]error)
				}
				d.failed[r] = err
				mu.Unlock()
			}
			wg.Done()
		}
		// One timestamp for the dispatch: franz-go reads the clock for
		// every record left unstamped, which shows in kwal's client CPU
		// profile; the records of a dispatch are produced within
		// microseconds of each other anyway, and franz-go times a batch's
		// delivery out from its first record's stamp either way.
		now := time.Now()
		for _, r := range d.recs {
			r.Timestamp = now
			ln.client.Produce(ctx, r, promise)
		}
		// Flush returns once every buffered record is acknowledged or
		// failed (each within the client's delivery timeout, or when the
		// client is closed); the promises have run by then.
		_ = ln.client.Flush(context.Background())
		wg.Wait()
		cancel()
		select {
		case l.results <- d:
		case <-l.exited:
		}
	}()
}
