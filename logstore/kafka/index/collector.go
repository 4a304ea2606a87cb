package index

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Collector is the index of every topic of one node: it collects the runs
// that appends and reads report and answers read plans. All methods are
// safe for concurrent use.
//
// It holds one index per topic, created on first use. The Collector's own lock
// guards only the map of topics; each topic has its own locks, so that work
// on one topic (observing, planning, checkpointing) never waits for another.
type Collector struct {
	opts Options
	log  *slog.Logger
	m    *metrics

	mu     sync.Mutex
	topics map[string]*topic
	closed bool
	// failures are the files of each topic that New could not use.
	failures map[string][]LoadFailure

	// The background checkpoint goroutine, when CheckpointInterval > 0:
	// stop asks it to end, bgCancel cancels the checkpoint it may be
	// running, done is closed when it has ended.
	stop     chan struct{}
	bgCancel context.CancelFunc
	done     chan struct{}
}

// New returns a Collector, loading every topic found in opts.Store. Files
// that cannot be used (missing, truncated, corrupt, of a newer version, or
// unreadable) are logged and counted in kwal_index_load_failures_total; the
// topic then keeps the last consistent state its files give, or no coverage
// (reads of it scan): New returns an error only for invalid options or a
// failed metrics registration.
func New(opts Options) (*Collector, error) {
	return Open(context.Background(), opts)
}

// Open is New with ctx bounding the load (an object-store index may be
// slow or hang): when ctx ends before every topic's files are read, Open
// returns an error matching ctx's, and no Collector.
func Open(ctx context.Context, opts Options) (*Collector, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}

	g := &Collector{
		opts:   opts,
		log:    opts.Logger,
		m:      m,
		topics: make(map[string]*topic),
	}
	if opts.Store != nil {
		g.load(ctx)
		if err := ctx.Err(); err != nil {
			m.release()
			return nil, kwalerr.Errorf("index: loading from the store: %w", err)
		}
	}
	if opts.CheckpointInterval > 0 && opts.Store != nil && !opts.ReadOnly {
		ctx, cancel := context.WithCancel(context.Background())
		g.stop, g.bgCancel = make(chan struct{}), cancel
		g.done = make(chan struct{})
		go g.checkpointLoop(ctx, opts.CheckpointInterval)
	}
	return g, nil
}

// load reads every topic's files from the store.
func (g *Collector) load(ctx context.Context) {
	names, err := g.opts.Store.List(ctx, "")
	if err != nil && ctx.Err() != nil {
		return // Open fails
	}
	if err != nil {
		// Topics will list their own files before their first checkpoint.
		g.log.Error("index: listing checkpoint files; starting with no coverage", "err", err)
		g.m.loadFailures.WithLabelValues(reasonIO).Inc()
		return
	}
	byTopic := make(map[string][]storedFile)
	for _, n := range names {
		topic, seq, kind, ok := parseFileName(n)
		if !ok {
			g.log.Debug("index: ignoring a file that is not a checkpoint", "name", n)
			continue
		}
		byTopic[topic] = append(byTopic[topic], storedFile{name: n, seq: seq, kind: kind})
	}
	// Topics load in parallel: on an object store each file is a round trip.
	names = slices.Sorted(maps.Keys(byTopic))
	topics := make([]loadedTopic, len(names))
	var eg errgroup.Group
	eg.SetLimit(loadParallelism)
	for i, name := range names {
		if ctx.Err() != nil {
			break // Open fails
		}
		eg.Go(func() error {
			topics[i] = g.loadTopic(ctx, name, byTopic[name])
			return nil // a topic's unusable files are logged, not fatal
		})
	}
	_ = eg.Wait() // every Go returns nil
	if ctx.Err() != nil {
		return
	}
	for i, t := range topics {
		g.topics[names[i]] = t.topic
		if len(t.failures) > 0 {
			if g.failures == nil {
				g.failures = map[string][]LoadFailure{}
			}
			g.failures[names[i]] = t.failures
		}
	}
}

// loadedTopic is a topic as New loaded it, with the files it could not use.
type loadedTopic struct {
	topic    *topic
	failures []LoadFailure
}

// loadParallelism is the number of topics New loads at once.
const loadParallelism = 8

func (g *Collector) loadTopic(ctx context.Context, name string, files []storedFile) loadedTopic {
	t := newTopic(name, g.log, g.m)
	lt := loadedTopic{topic: t}
	failures := t.load(ctx, g.opts.Store, files)
	if ctx.Err() != nil {
		return lt // Open fails; nothing to report per file
	}
	for _, f := range failures {
		g.m.loadFailures.WithLabelValues(f.reason).Inc()
		t.log.Error("index: checkpoint file unusable; the topic keeps the last consistent state before it",
			"file", f.name, "reason", f.reason, "err", f.err)
		lt.failures = append(lt.failures, LoadFailure{File: f.name, Reason: f.reason, Err: f.err})
	}
	if ts := t.describe(false); ts.Covered {
		t.log.Debug("index: loaded", "accounted_from", ts.C, "watermark", ts.W, "entries", ts.Entries)
	} else {
		t.log.Warn("index: no usable checkpoint; reads will scan until coverage is rebuilt")
	}
	return lt
}

// checkpointLoop is the background checkpoint goroutine. Close stops it:
// it closes stop, cancels ctx (a checkpoint in flight gives up; Close writes
// the final one) and waits for done.
func (g *Collector) checkpointLoop(ctx context.Context, every time.Duration) {
	defer close(g.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
			if _, err := g.checkpointAll(ctx); err != nil && ctx.Err() == nil {
				g.log.Error("index: background checkpoint", "err", err)
			}
		}
	}
}

// topic returns the topic's index, creating it when create is set.
func (g *Collector) topic(name string, create bool) *topic {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.topics[name]
	if t == nil && create {
		t = newTopic(name, g.log, g.m)
		g.topics[name] = t
	}
	return t
}

func (g *Collector) topicList() []*topic {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Collect(maps.Values(g.topics))
}

// Start tells the collector that the topic's log currently ends at offset
// end (the high watermark) and begins at logStart. A topic the collector has
// no coverage for starts its accounted span at end (the history before it
// is unaccounted, so reads scan it). A watermark above end means the topic
// was recreated or truncated: the coverage is discarded. So end must not be
// older than any run already observed: the store calls Start when it opens
// the topic's producer (before any acknowledgement), and from reads only
// while the topic has no producer.
func (g *Collector) Start(topic string, logStart, end int64) {
	g.topic(topic, true).start(logStart, end)
}

// LogStarts tells the index that the topic's log now begins at logStart
// (retention or pruning deleted the records below): the accounted span's
// start C rises to it, dropping the offsets below. Unlike Start it needs no
// log end, so it is safe while the topic has a producer whose
// acknowledgements may be newer than any end the caller knows.
func (g *Collector) LogStarts(topic string, logStart int64) {
	t := g.topic(topic, false)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.covered && logStart > t.c {
		t.raiseCLocked(logStart)
		t.absorbLocked()
		t.wm.Set(float64(t.w))
	}
}

// Observe records runs learned from acknowledged appends or from records
// decoded while reading. Runs may arrive out of order and may repeat; the
// accounted span [C, W) only grows through offsets that are known, never
// past a gap. It keeps copies of the runs, never the slice: a caller may
// reuse it once Observe returns.
func (g *Collector) Observe(topic string, runs []Run) {
	if len(runs) == 0 {
		return
	}
	g.topic(topic, true).observe(runs)
}

// Obsolete records that region no longer needs its records at offsets
// < before; the index may drop them.
func (g *Collector) Obsolete(topic string, region uint64, before int64) {
	g.topic(topic, true).obsolete(region, before)
}

// Plan returns the ranges to fetch to replay the given regions, each from
// its own start offset, up to end (exclusive). For a topic the index does
// not know, the plan is one Scan range [min(from), end).
func (g *Collector) Plan(topic string, from map[uint64]int64, end int64) Plan {
	if t := g.topic(topic, false); t != nil {
		return t.plan(from, end, g.opts.MergeGap)
	}
	lo, ok := minFrom(from)
	if !ok || lo >= end {
		return Plan{}
	}
	return Plan{Ranges: []Range{{Start: lo, End: end, Scan: true}}}
}

// Drop forgets the topic (it was deleted) in memory and deletes its files
// from the Store (with ReadOnly, only forgets it).
func (g *Collector) Drop(ctx context.Context, topic string) error {
	g.mu.Lock()
	closed := g.closed
	t := g.topics[topic]
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if t != nil {
		// Wait for a checkpoint of the topic in flight, and keep any other
		// from starting: the object stays marked dropped.
		t.persistMu.Lock()
		defer t.persistMu.Unlock()
		t.mu.Lock()
		t.dropped = true
		t.resetLocked()
		t.mu.Unlock()
	}
	var err error
	if st := g.opts.Store; st != nil && !g.opts.ReadOnly {
		err = deleteTopicFiles(ctx, st, topic)
	}
	g.mu.Lock()
	if t != nil && g.topics[topic] == t {
		delete(g.topics, topic)
	}
	delete(g.failures, topic)
	g.mu.Unlock()
	g.m.watermark.DeleteLabelValues(topic)
	return err
}

func deleteTopicFiles(ctx context.Context, st Store, topic string) error {
	names, err := st.List(ctx, topicPrefix(topic))
	if err != nil {
		return kwalerr.Errorf("index: dropping topic %q: %w", topic, err)
	}
	var errs []error
	for _, n := range names {
		if tp, _, _, ok := parseFileName(n); !ok || tp != topic {
			continue
		}
		if err := st.Delete(ctx, n); err != nil {
			errs = append(errs, kwalerr.Errorf("index: dropping topic %q: %w", topic, err))
		}
	}
	return kwalerr.Join(errs...)
}

// Checkpoint persists every topic changed since its last checkpoint, one
// file per topic (see the package comment for what a
// checkpoint costs). Without a Store, or with ReadOnly, it does nothing.
func (g *Collector) Checkpoint(ctx context.Context) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	_, err := g.checkpointAll(ctx)
	return err
}

// Close stops the background checkpoint goroutine, then writes a final
// checkpoint, and unregisters the metrics (once no other Collector on the
// same Registerer shares them). Later calls of Close return nil, of
// Checkpoint and Drop ErrClosed; Start, Observe, Obsolete and Plan go on
// working in memory.
func (g *Collector) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	if g.stop != nil {
		close(g.stop)
		g.bgCancel()
		<-g.done
	}
	_, err := g.checkpointAll(ctx)
	g.m.release()
	return err
}
