package kafka

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/dirlock"
	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/internal/replay"
	"github.com/kwal/kwal/logstore/kafka/worker"
)

// ErrTimeout is matched by append errors whose produce was not acknowledged
// within Config.ProduceTimeout; the entries may still be written.
var ErrTimeout = worker.ErrTimeout

// ErrUnknownNamespace is matched by errors for a namespace whose topic does
// not exist (and AutoCreateTopics is off, or the call does not create).
var ErrUnknownNamespace = errors.New("kwal: unknown namespace")

// ErrIndexDirInUse is matched by Open's error when another store (in this
// process or another) holds Config.IndexDir: two stores writing one index
// directory could persist coverage that neither scanned, and an index that
// claims offsets it never saw lets Prune delete live records. The error
// names the holder's process.
var ErrIndexDirInUse = dirlock.ErrInUse

// indexLockFile is the lock file in an IndexDir (a dot file: the index
// store lists no such name).
const indexLockFile = ".kwal-index.lock"

// partition is the only partition kwal writes and reads. A topic created
// with more partitions by someone else is used on partition 0 only.
const partition int32 = 0

// LogStore is the Kafka log store. Namespaces are topics.
type LogStore struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	// producerWaitForTesting, when set, is called as a call finds another
	// call creating its topic's producer and waits for it.
	producerWaitForTesting func(topic string)

	admin *kgo.Client // metadata, admin requests and fetches
	adm   *kadm.Client

	laneClients []*kgo.Client
	lanes       *worker.Lanes
	// appendTimeout is the cause of an AppendBatch's ProduceTimeout deadline
	// (made once: the call is hot).
	appendTimeout error
	// markClient writes marks (Obsolete and prune marks). It is not a lane:
	// a lane's buffer must hold nothing but its dispatch, or a mark could
	// land inside a group's batch, between the parts of a split entry.
	markClient *kgo.Client

	index *index.Collector // nil when DisableIndex
	// indexLock holds IndexDir for this store (nil without one, or
	// read-only); released by Close after the final checkpoint.
	indexLock *dirlock.Lock
	// claimsSnaps saves the claims topic's fold beside the index (nil
	// without an index store).
	claimsSnaps *claimsSnapshots

	mu        sync.Mutex
	closed    bool
	producers map[string]*producerSlot
	ops       sync.WaitGroup // calls in progress, so Close can wait for them
	closeErr  error
	closeOnce sync.Once

	// reads is the read path: reads, their passes and what they learn
	// (package replay). Close ends it before the index closes.
	reads *replay.Reads

	// owning is the store's part in fencing (fencing.go).
	owning owning

	stopPrune   chan struct{} // closed by Close when the pruner runs
	pruneExited chan struct{}
}

var _ logstore.LogStore = (*LogStore)(nil)

// producerSlot is a topic's producer, created once; callers that find the
// slot being created wait on ready.
type producerSlot struct {
	ready chan struct{}
	p     *worker.Producer
	err   error
	// deleting marks DeleteNamespace's tombstone: calls fail with err
	// until the topic is gone.
	deleting bool
}

// Open validates cfg, connects to the brokers, loads the index and opens
// the fetch connections to the leaders of the topics it knows (warm.go). It
// fails with an error matching ErrUnreachable if no broker answers within
// cfg.RequestTimeout (and with ErrRefused, ErrAuthFailed, ErrTLS or
// ErrBrokerTimeout, what happened), and when ctx ends before the index is
// loaded (a slow or hanging IndexStore).
func Open(ctx context.Context, cfg Config) (*LogStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Fencing == FencingLease && cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	s := &LogStore{cfg: cfg, log: cfg.Logger, producers: make(map[string]*producerSlot), metrics: newMetrics()}
	s.appendTimeout = kwalerr.Errorf("append not acknowledged within ProduceTimeout (%v): %w", cfg.ProduceTimeout, ErrTimeout)
	if err := s.metrics.register(cfg.Registerer); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			if s.reads != nil {
				s.reads.Close()
			}
			s.shutdownClients()
			s.metrics.unregister(cfg.Registerer)
			_ = s.indexLock.Release()
		}
	}()
	base, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	if s.admin, err = kgo.NewClient(append(base[:len(base):len(base)], kgo.WithHooks(s.metrics.clients.admin))...); err != nil {
		return nil, kwalerr.Errorf("open: %w", err)
	}
	s.adm = kadm.NewClient(s.admin)
	if err := Ping(ctx, s.admin, cfg); err != nil {
		return nil, err
	}
	compress := compression(cfg.Compression)
	clients := make([]worker.Client, cfg.ProduceLanes)
	for i := range cfg.ProduceLanes {
		cl, err := kgo.NewClient(append(base[:len(base):len(base)],
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchMaxBytes(int32(cfg.MaxBatchBytes)),
			compress,
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			// franz-go refuses record timeouts under 1s; the worker fails a
			// group at ProduceTimeout whatever the client does.
			kgo.ProduceRequestTimeout(max(cfg.ProduceTimeout, time.Second)),
			kgo.RecordDeliveryTimeout(max(cfg.ProduceTimeout, time.Second)),
			// Nothing leaves a lane before its Flush: every record of a
			// dispatch is buffered first, so each topic's group becomes one
			// batch and the topics' batches share the produce request(s) to
			// their leader. (A linger would give the same guarantee at the
			// price of its wait on every request.) A lane holds one dispatch
			// at a time, so its buffer never holds more than one; the store's
			// queue bounds (MaxStoreQueuedBytes) bound what dispatches hold,
			// and a buffer limit here would only fail a large call's records.
			kgo.ManualFlushing(),
			// No linger: with ManualFlushing it cannot send anything
			// earlier, and franz-go's default (10 ms) arms a timer for
			// every batch a lane buffers.
			kgo.ProducerLinger(0),
			kgo.MaxBufferedBytes(math.MaxInt),
			kgo.MaxBufferedRecords(math.MaxInt),
			kgo.UnknownTopicRetries(-1),
			kgo.WithHooks(s.metrics.clients.lane),
		)...)
		if err != nil {
			return nil, kwalerr.Errorf("open: produce lane %d: %w", i, err)
		}
		s.laneClients = append(s.laneClients, cl)
		clients[i] = cl
	}
	if s.markClient, err = kgo.NewClient(append(base[:len(base):len(base)],
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Each record is waited for alone (produceWithin): a linger would
		// only delay it (franz-go's default is 10 ms).
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(max(cfg.ProduceTimeout, time.Second)),
		kgo.RecordDeliveryTimeout(max(cfg.ProduceTimeout, time.Second)),
		kgo.UnknownTopicRetries(-1),
		kgo.WithHooks(s.metrics.clients.mark),
	)...); err != nil {
		return nil, kwalerr.Errorf("open: mark client: %w", err)
	}
	if err := s.metrics.registerClients(cfg.Registerer); err != nil {
		return nil, err
	}
	s.owning.owner, s.owning.acked = cfg.Owner, make(map[ownKey]logstore.EntryID)
	if s.owning.owner == "" {
		s.owning.owner = defaultOwner()
	}
	if cfg.AutoCreateTopics {
		// The follower's consumer then finds it; without it, a claim
		// fails until an operator creates it.
		if err := s.ensureClaimsTopic(ctx); err != nil {
			return nil, kwalerr.Errorf("open: %w", err)
		}
	}
	if s.owning.follower, err = newClaimsFollower(cfg, base, cfg.Logger, s.metrics.claimsRecords, s.metrics.claimsCheckFailures); err != nil {
		return nil, err
	}
	s.lanes = worker.NewLanes(worker.LanesOptions{
		Clients: clients, MaxRequestBytes: cfg.MaxRequestBytes, MaxQueuedBytes: max(cfg.MaxStoreQueuedBytes, cfg.MaxQueuedBytes),
		Metrics: s.metrics.worker, Logger: cfg.Logger,
	})
	if !cfg.DisableIndex {
		st := cfg.IndexStore
		switch {
		case st != nil:
		case cfg.IndexDir != "" && cfg.IndexReadOnly:
			st = index.OpenDirStoreReadOnly(cfg.IndexDir)
		case cfg.IndexDir != "":
			if s.indexLock, err = dirlock.Acquire(cfg.IndexDir, indexLockFile, dirlock.Holder{}); err != nil {
				return nil, kwalerr.Errorf("open: IndexDir: %w", err)
			}
			if st, err = index.NewDirStore(cfg.IndexDir); err != nil {
				return nil, kwalerr.Errorf("open: IndexDir: %w", err)
			}
		}
		if st != nil {
			s.claimsSnaps = s.openClaimsSnapshots(ctx, st, cfg.IndexReadOnly)
		}
		if st != nil && !cfg.IndexReadOnly {
			if err := s.openHeldEpochs(ctx, st); err != nil {
				return nil, err
			}
		}
		interval := cfg.IndexCheckpointInterval
		if st == nil {
			interval = 0
		}
		g, err := index.Open(ctx, index.Options{
			Store: st, MergeGap: cfg.IndexMergeGap, CheckpointInterval: interval, ReadOnly: cfg.IndexReadOnly,
			Logger: cfg.Logger, Registerer: cfg.Registerer,
		})
		if err != nil {
			return nil, kwalerr.Errorf("open: index: %w", err)
		}
		s.index = g
	}
	s.reads = replay.New(replay.Options{
		Host: readHost{s}, Index: s.index, Conns: cfg.FetchConnections(),
		FetchMaxBytes: cfg.FetchMaxBytes, ChunkBytes: cfg.FetchChunkBytes(),
		HoldBytes: cfg.ReadHoldBytes, MaxEntryBytes: cfg.MaxEntryBytes,
		RequestTimeout: cfg.RequestTimeout, RetryBackoff: cfg.RetryBackoff, SkipCorrupt: cfg.SkipCorrupt,
		Logger: cfg.Logger, Metrics: s.metrics.reads,
		ErrUnknownNamespace: ErrUnknownNamespace, ErrFutureID: ErrFutureID,
	})
	if g := s.index; g != nil && cfg.PruneInterval > 0 && !cfg.IndexReadOnly {
		s.stopPrune, s.pruneExited = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.pruneExited)
			s.pruneLoop(g, cfg.PruneInterval, s.stopPrune)
		}()
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	s.reads.Warm(wctx)
	cancel()
	ok = true
	s.log.Debug("kwal: store open", "config", cfg)
	return s, nil
}

// begin registers a call in progress; it fails once the store is closed.
func (s *LogStore) begin(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return kwalerr.Errorf("%s: %w", op, logstore.ErrClosed)
	}
	s.ops.Add(1)
	return nil
}

func (s *LogStore) end() { s.ops.Done() }

// Close fails new calls with ErrClosed, ends reads in progress with
// ErrClosed, waits for appends in progress (each is acknowledged or fails
// within ProduceTimeout), stops the producers, persists a final index
// checkpoint and closes the clients. Idempotent.
//
// A read in progress yields no entry after Close began: its next step
// yields an error matching ErrClosed. Close waits for the reads' passes
// (their fetch and decoding goroutines) to end, but not for a read's loop
// body (the caller's code, which may itself call Close); from Close on, no
// read changes the index.
func (s *LogStore) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.reads.Close() // reads in progress end with ErrClosed; no read changes the index from here on
		if s.stopPrune != nil {
			close(s.stopPrune)
			<-s.pruneExited
		}
		// Appends in progress finish on their own: every queued request is
		// sent, and each fails at the latest after ProduceTimeout.
		s.ops.Wait()

		s.mu.Lock()
		slots := make([]*producerSlot, 0, len(s.producers))
		for _, slot := range s.producers {
			slots = append(slots, slot)
		}
		s.mu.Unlock()
		var errs []error
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ProduceTimeout)
		for _, slot := range slots {
			<-slot.ready
			if slot.p != nil {
				if err := slot.p.Close(ctx); err != nil {
					errs = append(errs, err)
				}
			}
		}
		cancel()
		if s.claimsSnaps != nil {
			s.claimsSnaps.close() // before the IndexDir's lock is released
		}
		if err := s.owning.flushHeld(); err != nil {
			errs = append(errs, err)
		}
		if s.index != nil {
			ictx, icancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
			if err := s.index.Close(ictx); err != nil {
				errs = append(errs, kwalerr.Errorf("close: index: %w", err))
			}
			icancel()
		}
		if err := s.indexLock.Release(); err != nil {
			errs = append(errs, kwalerr.Errorf("close: releasing IndexDir: %w", err))
		}
		s.shutdownClients()
		s.metrics.unregister(s.cfg.Registerer)
		s.closeErr = kwalerr.Join(errs...)
	})
	return s.closeErr
}

func (s *LogStore) shutdownClients() {
	if s.claimsSnaps != nil {
		s.claimsSnaps.stopSaving() // Close saved the last one already
	}
	if s.owning.follower != nil {
		s.owning.follower.close()
	}
	for _, cl := range s.laneClients {
		cl.Close() // unblocks any produce stuck on a lane
	}
	if s.lanes != nil {
		s.lanes.Close()
	}
	if s.markClient != nil {
		s.markClient.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
}

// readHost is what the read path asks of the store (replay.Host).
type readHost struct{ s *LogStore }

// FetchClient returns the client of fetch connection i: the produce lanes'
// clients, then the admin client, each its own connection to a broker.
func (h readHost) FetchClient(i int) *kgo.Client {
	if i < len(h.s.laneClients) {
		return h.s.laneClients[i]
	}
	return h.s.admin
}

func (h readHost) Admin() *kadm.Client { return h.s.adm }

func (h readHost) Offsets(ctx context.Context, topic string) (int64, int64, error) {
	return h.s.offsets(ctx, topic)
}

func (h readHost) StartIndex(topic string, gen uint64, start, end int64) (int64, bool) {
	return h.s.startIndexForRead(topic, gen, start, end)
}
