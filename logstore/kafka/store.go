package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/logstore/kafka/worker"
)

// ErrTimeout is matched by append errors whose produce was not acknowledged
// within Config.ProduceTimeout; the entries may still be written.
var ErrTimeout = worker.ErrTimeout

// ErrUnknownNamespace is matched by errors for a namespace whose topic does
// not exist (and AutoCreateTopics is off, or the call does not create).
var ErrUnknownNamespace = errors.New("kwal: unknown namespace")

// partition is the only partition kwal writes and reads. A topic created
// with more partitions by someone else is used on partition 0 only.
const partition int32 = 0

// LogStore is the Kafka log store. Namespaces are topics.
type LogStore struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	admin *kgo.Client // metadata, admin requests and fetches
	adm   *kadm.Client

	laneClients []*kgo.Client
	lanes       *worker.Lanes
	// markClient writes marks (Obsolete and prune marks). It is not a lane:
	// a lane's buffer must hold nothing but its dispatch, or a mark could
	// land inside a group's batch, between the parts of a split entry.
	markClient *kgo.Client

	index index.Collector // nil when DisableIndex

	mu        sync.Mutex
	closed    bool
	producers map[string]*producerSlot
	ops       sync.WaitGroup // calls in progress, so Close can wait for them
	closeErr  error
	closeOnce sync.Once

	metaMu sync.Mutex
	meta   map[string]topicMeta // partition-0 leader and topic ID, for reads

	readCtx   context.Context // cancelled by Close: reads in progress end
	stopReads context.CancelFunc

	passMu     sync.Mutex
	passes     map[string][]*pass // running passes that take joining reads, per topic
	passSeq    uint64
	passWG     sync.WaitGroup // the passes' goroutines and the bounds lookups
	readBounds readBounds
	joinHook   func()     // tests: called when a read joins a running pass
	models     modelStore // the last read's cost model, where the next starts
	// fetchWarm marks the fetch clients (lanes, then admin) that fetched
	// once already.
	fetchWarm []atomic.Bool

	stopPrune   chan struct{} // closed by Close when the pruner runs
	pruneExited chan struct{}

	marks knownMarks // prune marks known, per topic (marks.go)
}

var _ logstore.LogStore = (*LogStore)(nil)

// producerSlot is a topic's producer, created once; callers that find the
// slot being created wait on ready.
type producerSlot struct {
	ready chan struct{}
	p     *worker.Producer
	err   error
}

// Open validates cfg, connects to the brokers and loads the index. It
// fails if no broker answers within cfg.RequestTimeout.
func Open(ctx context.Context, cfg Config) (*LogStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &LogStore{cfg: cfg, log: cfg.Logger, producers: make(map[string]*producerSlot), metrics: newMetrics(), meta: make(map[string]topicMeta), passes: make(map[string][]*pass)}
	s.marks.prune, s.marks.searched = make(map[string]pruneMark), make(map[string]int64)
	s.readCtx, s.stopReads = context.WithCancel(context.Background())
	if err := s.metrics.register(cfg.Registerer); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.stopReads()
			s.shutdownClients()
			s.metrics.unregister(cfg.Registerer)
		}
	}()
	base, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	if s.admin, err = kgo.NewClient(base...); err != nil {
		return nil, fmt.Errorf("kwal: open: %w", err)
	}
	s.adm = kadm.NewClient(s.admin)
	pctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	err = s.admin.Ping(pctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("kwal: open: no broker of %v answered within %v: %w", cfg.Brokers, cfg.RequestTimeout, err)
	}
	codec, _ := CompressionCodec(cfg.Compression)
	clients := make([]worker.Client, cfg.ProduceLanes)
	for i := range cfg.ProduceLanes {
		cl, err := kgo.NewClient(append(base[:len(base):len(base)],
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchMaxBytes(int32(cfg.MaxBatchBytes)),
			kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			// franz-go refuses record timeouts under 1s; the worker fails a
			// group at ProduceTimeout whatever the client does.
			kgo.ProduceRequestTimeout(max(cfg.ProduceTimeout, time.Second)),
			kgo.RecordDeliveryTimeout(max(cfg.ProduceTimeout, time.Second)),
			// Nothing leaves a lane before its Flush: every record of a
			// dispatch is buffered first, so each topic's group becomes one
			// batch and the topics' batches share the produce request(s) to
			// their leader. (A linger gave the same guarantee at the price of
			// the linger on every request.) A lane holds one dispatch at a
			// time, so its buffer never holds more than one; the store's
			// queue bounds (MaxStoreQueuedBytes) bound what dispatches hold,
			// and a buffer limit here would only fail a large call's records.
			kgo.ManualFlushing(),
			kgo.MaxBufferedBytes(1<<40),
			kgo.MaxBufferedRecords(1<<40),
			kgo.UnknownTopicRetries(-1),
		)...)
		if err != nil {
			return nil, fmt.Errorf("kwal: open: produce lane %d: %w", i, err)
		}
		s.laneClients = append(s.laneClients, cl)
		clients[i] = cl
	}
	if s.markClient, err = kgo.NewClient(append(base[:len(base):len(base)],
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(max(cfg.ProduceTimeout, time.Second)),
		kgo.RecordDeliveryTimeout(max(cfg.ProduceTimeout, time.Second)),
		kgo.UnknownTopicRetries(-1),
	)...); err != nil {
		return nil, fmt.Errorf("kwal: open: mark client: %w", err)
	}
	s.lanes = worker.NewLanes(worker.LanesOptions{
		Clients: clients, MaxRequestBytes: cfg.MaxRequestBytes, MaxQueuedBytes: max(cfg.MaxStoreQueuedBytes, cfg.MaxQueuedBytes),
		Metrics: s.metrics.worker, Logger: cfg.Logger,
	})
	s.fetchWarm = make([]atomic.Bool, len(s.laneClients)+1)
	if !cfg.DisableIndex {
		st := cfg.IndexStore
		switch {
		case st != nil:
		case cfg.IndexDir != "" && cfg.IndexReadOnly:
			st = index.OpenDirStoreReadOnly(cfg.IndexDir)
		case cfg.IndexDir != "":
			if st, err = index.NewDirStore(cfg.IndexDir); err != nil {
				return nil, fmt.Errorf("kwal: open: IndexDir: %w", err)
			}
		}
		interval := cfg.IndexCheckpointInterval
		if st == nil {
			interval = 0
		}
		g, err := index.New(index.Options{
			Store: st, MergeGap: cfg.IndexMergeGap, CheckpointInterval: interval, ReadOnly: cfg.IndexReadOnly,
			Logger: cfg.Logger, Registerer: cfg.Registerer,
		})
		if err != nil {
			return nil, fmt.Errorf("kwal: open: index: %w", err)
		}
		s.index = g
	}
	if g, isLister := s.index.(topicLister); isLister && cfg.PruneInterval > 0 && !cfg.IndexReadOnly {
		s.stopPrune, s.pruneExited = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.pruneExited)
			s.pruneLoop(g, cfg.PruneInterval, s.stopPrune)
		}()
	}
	ok = true
	s.log.Debug("kwal: store open", "config", cfg)
	return s, nil
}

// begin registers a call in progress; it fails once the store is closed.
func (s *LogStore) begin(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("kwal: %s: %w", op, logstore.ErrClosed)
	}
	s.ops.Add(1)
	return nil
}

func (s *LogStore) end() { s.ops.Done() }

// producer returns the topic's producer, creating the topic (when allowed)
// and the producer on first use. Creating one topic's producer never blocks
// another topic's appends: the map lock is held only to find or insert the
// slot.
func (s *LogStore) producer(ctx context.Context, topic string, create bool) (*worker.Producer, error) {
	s.mu.Lock()
	slot, found := s.producers[topic]
	if !found {
		slot = &producerSlot{ready: make(chan struct{})}
		s.producers[topic] = slot
	}
	s.mu.Unlock()
	if found {
		select {
		case <-slot.ready:
			if slot.err != nil && create && errors.Is(slot.err, ErrUnknownNamespace) {
				// Another caller was not allowed to create the topic; this
				// one is (its failed slot is gone from the map).
				return s.producer(ctx, topic, create)
			}
			if slot.err != nil {
				return nil, slot.err
			}
			return slot.p, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("kwal: waiting for the producer of %q: %w", topic, context.Cause(ctx))
		}
	}
	err := s.ensureTopic(ctx, topic, create)
	if err == nil {
		slot.p = worker.NewProducer(worker.Options{
			Topic: topic, Partition: partition, MaxBatchBytes: s.cfg.MaxBatchBytes,
			MaxQueuedBytes: s.cfg.MaxQueuedBytes, ProduceTimeout: s.cfg.ProduceTimeout,
			Linger: s.cfg.Linger, MaxRegions: s.cfg.MaxRegionsPerBatch, Lanes: s.lanes, Collector: s.collector(),
			Metrics: s.metrics.worker, Logger: s.log,
		})
	}
	if err != nil {
		slot.err = err
		s.mu.Lock()
		delete(s.producers, topic) // a later call tries again
		s.mu.Unlock()
	}
	close(slot.ready)
	return slot.p, err
}

func (s *LogStore) collector() worker.Collector {
	if s.index == nil {
		return nil
	}
	return s.index
}

// ensureTopic checks that the topic exists, creating it when create is set,
// and starts the index's accounting for it.
func (s *LogStore) ensureTopic(ctx context.Context, topic string, create bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := validateTopic(topic); err != nil {
		return err
	}
	details, err := s.adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("kwal: namespace %q: metadata: %w", topic, err)
	}
	td, ok := details[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		if !create {
			return fmt.Errorf("kwal: namespace %q: %w", topic, ErrUnknownNamespace)
		}
		if err := s.createTopic(ctx, topic); err != nil {
			return err
		}
	} else if td.Err != nil {
		return fmt.Errorf("kwal: namespace %q: metadata: %w", topic, td.Err)
	} else if n := len(td.Partitions); n > 1 {
		s.log.Warn("kwal: topic has more than one partition; kwal uses partition 0 only", "topic", topic, "partitions", n)
	}
	if s.index != nil {
		start, end, err := s.offsets(ctx, topic)
		if err != nil {
			return err
		}
		s.index.Start(topic, start, end)
	}
	return nil
}

func (s *LogStore) createTopic(ctx context.Context, topic string) error {
	configs := map[string]*string{}
	for k, v := range s.cfg.TopicConfigs {
		configs[k] = &v
	}
	if _, ok := configs["max.message.bytes"]; !ok {
		v := strconv.Itoa(s.cfg.MaxBatchBytes + 64<<10)
		configs["max.message.bytes"] = &v
	}
	resp, err := s.adm.CreateTopic(ctx, 1, s.cfg.ReplicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kwal: namespace %q: create topic: %w", topic, err)
	}
	if err == nil {
		s.log.Info("kwal: created topic", "topic", topic, "replication_factor", s.cfg.ReplicationFactor)
	}
	// A new topic's partition may not have a leader yet; wait for one so
	// that the first fetch or ListOffsets does not fail.
	for {
		details, err := s.adm.ListTopics(ctx, topic)
		if err == nil {
			if td, ok := details[topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
				if p, ok := td.Partitions[partition]; ok && p.Err == nil && p.Leader >= 0 {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kwal: namespace %q: created topic has no leader yet: %w", topic, ctx.Err())
		case <-time.After(s.cfg.RetryBackoff):
		}
	}
}

// offsets returns the partition's log start and end (high watermark),
// asked concurrently. Retriable errors (a leader that moved) are retried
// after a metadata refresh until ctx ends.
func (s *LogStore) offsets(ctx context.Context, topic string) (start, end int64, err error) {
	for attempt := 0; ; attempt++ {
		start, end, err = s.offsetsOnce(ctx, topic)
		if err == nil || !kerr.IsRetriable(err) || errors.Is(err, ErrUnknownNamespace) {
			return start, end, err
		}
		s.log.Debug("kwal: retrying list offsets", "topic", topic, "attempt", attempt, "err", err)
		s.admin.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(s.cfg.RetryBackoff):
		}
	}
}

func (s *LogStore) offsetsOnce(ctx context.Context, topic string) (start, end int64, err error) {
	var starts kadm.ListedOffsets
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		starts, serr = s.adm.ListStartOffsets(ctx, topic)
		if serr == nil {
			serr = starts.Error()
		}
	}()
	ends, err := s.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	<-done
	if serr != nil {
		return 0, 0, fmt.Errorf("kwal: namespace %q: list start offset: %w", topic, mapUnknown(serr))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("kwal: namespace %q: list end offset: %w", topic, mapUnknown(err))
	}
	so, ok1 := starts.Lookup(topic, partition)
	eo, ok2 := ends.Lookup(topic, partition)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("kwal: namespace %q: partition %d: %w", topic, partition, ErrUnknownNamespace)
	}
	return so.Offset, eo.Offset, nil
}

// mapUnknown makes a missing topic match ErrUnknownNamespace.
func mapUnknown(err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		return errors.Join(ErrUnknownNamespace, err)
	}
	return err
}

// topicMeta is what reads need to address a topic's partition 0.
type topicMeta struct {
	leader int32
	id     [16]byte
}

// topicMeta returns the topic's partition-0 leader and ID, cached; refresh
// asks the broker again (after a fetch found the leader moved).
func (s *LogStore) topicMeta(ctx context.Context, topic string, refresh bool) (topicMeta, error) {
	if !refresh {
		s.metaMu.Lock()
		m, ok := s.meta[topic]
		s.metaMu.Unlock()
		if ok {
			return m, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	details, err := s.adm.ListTopics(ctx, topic)
	if err != nil {
		return topicMeta{}, fmt.Errorf("metadata: %w", err)
	}
	td, ok := details[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		s.forgetMeta(topic)
		return topicMeta{}, ErrUnknownNamespace
	}
	if td.Err != nil {
		return topicMeta{}, fmt.Errorf("metadata: %w", td.Err)
	}
	p, ok := td.Partitions[partition]
	if !ok {
		return topicMeta{}, fmt.Errorf("partition %d: %w", partition, ErrUnknownNamespace)
	}
	if p.Err != nil || p.Leader < 0 {
		return topicMeta{}, fmt.Errorf("partition %d has no leader: %w", partition, errors.Join(p.Err, kerr.LeaderNotAvailable))
	}
	m := topicMeta{leader: p.Leader, id: td.ID}
	s.metaMu.Lock()
	s.meta[topic] = m
	s.metaMu.Unlock()
	return m, nil
}

func (s *LogStore) forgetMeta(topic string) {
	s.metaMu.Lock()
	delete(s.meta, topic)
	s.metaMu.Unlock()
}

// validateTopic applies Kafka's topic name rules, so a bad namespace is
// reported by name before any request.
func validateTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("kwal: namespace %q is not a valid topic name (1-249 characters, not . or ..)", t)
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("kwal: namespace %q is not a valid topic name: %q is not one of [a-zA-Z0-9._-]", t, c)
		}
	}
	return nil
}

// AppendBatch appends entries and returns once Kafka acknowledged all of
// them (acks=all). Entries are grouped by namespace; namespaces proceed in
// parallel, and within a namespace the call's entries keep their order. A
// region must appear under one namespace only in a call.
//
// When ctx ends first, AppendBatch returns ctx's error at once: entries not
// yet handed to Kafka are withdrawn, those already handed may still be
// written (the error says which).
func (s *LogStore) AppendBatch(ctx context.Context, entries []logstore.Entry) (logstore.AppendResult, error) {
	if err := s.begin("append"); err != nil {
		return logstore.AppendResult{}, err
	}
	defer s.end()
	if len(entries) == 0 {
		return logstore.AppendResult{LastEntryIDs: map[logstore.RegionID]logstore.EntryID{}}, nil
	}
	type nsBatch struct {
		topic   string
		regions []logstore.RegionID
		entries []worker.Entry
	}
	var batches []*nsBatch
	byNS := make(map[string]*nsBatch)
	regionNS := make(map[logstore.RegionID]string)
	for i, e := range entries {
		if ns, ok := regionNS[e.Region]; ok && ns != e.Namespace {
			return logstore.AppendResult{}, fmt.Errorf("kwal: append: entry %d: region %d appears under namespaces %q and %q in one call", i, e.Region, ns, e.Namespace)
		}
		regionNS[e.Region] = e.Namespace
		b := byNS[e.Namespace]
		if b == nil {
			if err := validateTopic(e.Namespace); err != nil {
				return logstore.AppendResult{}, fmt.Errorf("kwal: append: entry %d: %w", i, err)
			}
			b = &nsBatch{topic: e.Namespace}
			byNS[e.Namespace] = b
			batches = append(batches, b)
		}
		b.regions = append(b.regions, e.Region)
		b.entries = append(b.entries, worker.Entry{Region: uint64(e.Region), Data: e.Data})
	}
	start := time.Now()
	// ProduceTimeout bounds the call as a whole: a request still queued at
	// the deadline (behind its region's earlier group, which may still
	// land) is withdrawn and never written, so it cannot overtake it.
	ctx, cancel := context.WithDeadlineCause(ctx, start.Add(s.cfg.ProduceTimeout),
		fmt.Errorf("kwal: append not acknowledged within ProduceTimeout (%v): %w", s.cfg.ProduceTimeout, ErrTimeout))
	defer cancel()
	pendings := make([]*worker.Pending, len(batches))
	for i, b := range batches {
		p, err := s.producer(ctx, b.topic, s.cfg.AutoCreateTopics)
		if err != nil {
			return logstore.AppendResult{}, s.failAfterQueued(ctx, pendings[:i], err)
		}
		if pendings[i], err = p.Submit(ctx, b.entries); err != nil {
			return logstore.AppendResult{}, s.failAfterQueued(ctx, pendings[:i], err)
		}
	}
	res := logstore.AppendResult{LastEntryIDs: make(map[logstore.RegionID]logstore.EntryID, len(regionNS))}
	var errs []error
	for i, pd := range pendings {
		offsets, err := pd.Wait(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b := batches[i]
		for j, off := range offsets {
			id := logstore.EntryID(off + 1)
			if id > res.LastEntryIDs[b.regions[j]] {
				res.LastEntryIDs[b.regions[j]] = id
			}
		}
	}
	s.metrics.appendLatency.Observe(time.Since(start).Seconds())
	if len(errs) > 0 {
		return logstore.AppendResult{}, errors.Join(errs...)
	}
	return res, nil
}

// failAfterQueued handles a failure after some namespaces' requests were already
// queued: they cannot be taken back once sent, so the call waits for them
// (or ctx) and reports err.
func (s *LogStore) failAfterQueued(ctx context.Context, queued []*worker.Pending, err error) error {
	for _, pd := range queued {
		if _, werr := pd.Wait(ctx); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return err
}

// LatestEntryID returns the namespace's high watermark: the ID the newest
// record in the log would have as an entry (0 when empty). Every entry's ID
// is <= it, and an entry appended later gets a greater ID.
func (s *LogStore) LatestEntryID(ctx context.Context, namespace string) (logstore.EntryID, error) {
	if err := s.begin("latest entry ID"); err != nil {
		return 0, err
	}
	defer s.end()
	if err := validateTopic(namespace); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, end, err := s.offsets(ctx, namespace)
	if err != nil {
		return 0, err
	}
	return logstore.EntryID(end), nil
}

// Obsolete records that the region no longer needs entries with ID <= upTo.
// It writes an Obsolete mark into the topic (one small record), so that the
// point survives restarts and a lost index, and every store sharing the
// topic learns it; the index drops the region's records below it.
func (s *LogStore) Obsolete(ctx context.Context, namespace string, region logstore.RegionID, upTo logstore.EntryID) error {
	if err := s.begin("obsolete"); err != nil {
		return err
	}
	defer s.end()
	if err := validateTopic(namespace); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if upTo == 0 {
		return nil
	}
	// Entry upTo starts at offset upTo-1; every record before offset upTo
	// belongs to an entry with ID <= upTo. The point goes into the log as a
	// mark, so that every node sharing the topic (and this one after losing
	// its index) learns it; the index takes it in when the mark is written.
	m := record.Mark{Obsolete: []record.RegionPoint{{Region: uint64(region), Before: int64(upTo)}}}
	if _, err := s.writeMark(ctx, namespace, m); err != nil {
		return fmt.Errorf("kwal: obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
	}
	return nil
}

// CreateNamespace creates the namespace's topic (one partition,
// ReplicationFactor, TopicConfigs) and opens its producer; an existing
// topic is not an error.
func (s *LogStore) CreateNamespace(ctx context.Context, namespace string) error {
	if err := s.begin("create namespace"); err != nil {
		return err
	}
	defer s.end()
	// Opening the producer creates the topic and starts the index's
	// accounting, so the namespace's first append pays for neither.
	_, err := s.producer(ctx, namespace, true)
	return err
}

// DeleteNamespace deletes the namespace's topic and its index. Appends to
// it that are in flight fail.
func (s *LogStore) DeleteNamespace(ctx context.Context, namespace string) error {
	if err := s.begin("delete namespace"); err != nil {
		return err
	}
	defer s.end()
	if err := validateTopic(namespace); err != nil {
		return err
	}
	s.mu.Lock()
	slot := s.producers[namespace]
	delete(s.producers, namespace)
	s.mu.Unlock()
	if slot != nil {
		<-slot.ready
		if slot.p != nil {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
			_ = slot.p.Close(cctx) // its pending appends fail if this times out
			cancel()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.adm.DeleteTopic(ctx, namespace)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("kwal: delete namespace %q: %w", namespace, err)
	}
	s.forgetMeta(namespace)
	s.forgetMarks(namespace)
	s.models.forget(namespace)
	if s.index != nil {
		if err := s.index.Drop(ctx, namespace); err != nil {
			return fmt.Errorf("kwal: delete namespace %q: index: %w", namespace, err)
		}
	}
	return nil
}

// ListNamespaces lists the cluster's topics that are not internal, sorted.
func (s *LogStore) ListNamespaces(ctx context.Context) ([]string, error) {
	if err := s.begin("list namespaces"); err != nil {
		return nil, err
	}
	defer s.end()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	details, err := s.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("kwal: list namespaces: %w", err)
	}
	var out []string
	for name, td := range details {
		if td.IsInternal || strings.HasPrefix(name, "__") {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// Close fails new calls with ErrClosed, ends reads in progress with
// ErrClosed, waits for appends in progress (each is acknowledged or fails
// within ProduceTimeout), stops the producers, persists a final index
// checkpoint and closes the clients. Idempotent.
func (s *LogStore) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.stopReads() // reads in progress end with ErrClosed
		s.passWG.Wait()
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
		if s.index != nil {
			ictx, icancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
			if err := s.index.Close(ictx); err != nil {
				errs = append(errs, fmt.Errorf("kwal: close: index: %w", err))
			}
			icancel()
		}
		s.shutdownClients()
		s.metrics.unregister(s.cfg.Registerer)
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *LogStore) shutdownClients() {
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
