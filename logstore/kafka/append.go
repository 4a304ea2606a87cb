package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/worker"
)

// AppendBatch appends entries and returns once Kafka acknowledged all of
// them (acks=all). Entries are grouped by namespace; namespaces proceed in
// parallel, and within a namespace the call's entries keep their order. A
// region must appear under one namespace only in a call.
//
// When ctx ends first, AppendBatch returns ctx's error at once: entries not
// yet handed to Kafka are withdrawn, those already handed may still be
// written (the error says which).
func (s *LogStore) AppendBatch(ctx context.Context, entries []logstore.Entry) (_ logstore.AppendResult, err error) {
	defer func() { s.metrics.noteRefused(err) }()
	var first string
	if len(entries) > 0 {
		first = entries[0].Namespace
	}
	firstSlot, err := s.beginAppend(first)
	if err != nil {
		return logstore.AppendResult{}, err
	}
	defer s.end()
	if len(entries) == 0 {
		return logstore.AppendResult{LastEntryIDs: map[logstore.RegionID]logstore.EntryID{}}, nil
	}
	sc := appendScratchPool.Get().(*appendScratch)
	defer sc.put()
	// The call's regions are in flight until it returns, its noteAcked
	// included: Release of one of them waits for that (inflight.go).
	sc.entered = sc.entered[:0]
	defer func() { s.owning.leaveAppends(sc.entered) }()
	batches := sc.batches[:0]
	// Most calls write one namespace: they need no maps to split the entries
	// by namespace, nor to find a region under two namespaces.
	single := true
	for _, e := range entries[1:] {
		if e.Namespace != entries[0].Namespace {
			single = false
			break
		}
	}
	var byNS map[string]*nsBatch
	var regionNS map[logstore.RegionID]string
	if !single {
		byNS = make(map[string]*nsBatch)
		regionNS = make(map[logstore.RegionID]string)
	}
	for i, e := range entries {
		if int64(len(e.Data)) > s.cfg.MaxEntryBytes {
			return logstore.AppendResult{}, kwalerr.Errorf("append: entry %d of region %d in %q: %d bytes: %w (Config.MaxEntryBytes %d); nothing was written",
				i, e.Region, e.Namespace, len(e.Data), ErrEntryTooLarge, s.cfg.MaxEntryBytes)
		}
		var b *nsBatch
		if single {
			if i == 0 {
				if err := s.checkNamespace(e.Namespace); err != nil {
					return logstore.AppendResult{}, kwalerr.Errorf("append: entry %d: %w", i, err)
				}
				sc.one = nsBatch{topic: e.Namespace, regions: sc.one.regions[:0], entries: sc.one.entries[:0]}
				batches = append(batches, &sc.one)
			}
			b = batches[0]
		} else {
			if ns, ok := regionNS[e.Region]; ok && ns != e.Namespace {
				return logstore.AppendResult{}, kwalerr.Errorf("append: entry %d: region %d appears under namespaces %q and %q in one call", i, e.Region, ns, e.Namespace)
			}
			regionNS[e.Region] = e.Namespace
			b = byNS[e.Namespace]
			if b == nil {
				if err := s.checkNamespace(e.Namespace); err != nil {
					return logstore.AppendResult{}, kwalerr.Errorf("append: entry %d: %w", i, err)
				}
				b = &nsBatch{topic: e.Namespace}
				byNS[e.Namespace] = b
				batches = append(batches, b)
			}
		}
		var epoch uint64
		if i == 0 || e.Region != entries[i-1].Region || e.Namespace != entries[i-1].Namespace {
			k := ownKey{e.Namespace, uint64(e.Region)}
			st, entered := s.owning.enterAppend(k)
			if entered {
				sc.entered = append(sc.entered, k)
			}
			var err error
			if epoch, err = s.epochFor(ctx, e.Namespace, uint64(e.Region), st); err != nil {
				return logstore.AppendResult{}, err
			}
		} else {
			epoch = b.entries[len(b.entries)-1].Epoch
		}
		b.regions = append(b.regions, e.Region)
		b.entries = append(b.entries, worker.Entry{Region: uint64(e.Region), Epoch: epoch, Data: e.Data})
	}
	start := time.Now()
	// ProduceTimeout bounds the call as a whole: a request still queued at
	// the deadline (behind its region's earlier group, which may still
	// land) is withdrawn and never written, so it cannot overtake it. The
	// dispatcher enforces the deadline of every queued or sent request
	// from one heap (worker.Deadline); only the waits before a request is
	// queued (a producer being made, queue room) derive a context for it.
	dl := worker.Deadline{At: start.Add(s.cfg.ProduceTimeout), Cause: s.appendTimeout}
	sc.batches = batches
	pendings := append(sc.pendings[:0], make([]*worker.Pending, len(batches))...)
	sc.pendings = pendings
	for i, b := range batches {
		slot := firstSlot // batches[0] is entries[0]'s namespace
		if i > 0 {
			s.mu.Lock()
			slot = s.producers[b.topic]
			s.mu.Unlock()
		}
		p, err := s.producerBy(ctx, b.topic, slot, dl)
		if err != nil {
			return logstore.AppendResult{}, s.failAfterQueued(ctx, pendings[:i], kwalerr.Errorf("append to %q: %w", b.topic, err))
		}
		if pendings[i], err = p.SubmitBy(ctx, b.entries, dl); err != nil {
			return logstore.AppendResult{}, s.failAfterQueued(ctx, pendings[:i], err)
		}
	}
	res := logstore.AppendResult{LastEntryIDs: make(map[logstore.RegionID]logstore.EntryID, min(len(entries), 8))}
	var errs []error
	for i, pd := range pendings {
		offsets, err := pd.Wait(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lastIDs(res.LastEntryIDs, batches[i].regions, offsets)
	}
	if len(errs) > 0 {
		s.metrics.appendLatency.Observe(time.Since(start).Seconds())
		return logstore.AppendResult{}, kwalerr.Join(errs...)
	}
	if s.cfg.Fencing != FencingOff {
		// ProduceTimeout bounds the call as a whole, the check included.
		cctx, cancel := context.WithDeadlineCause(ctx, dl.At, dl.Cause)
		checked := time.Now()
		err := s.checkAppended(cctx, batches)
		s.metrics.fencingCheck.Observe(time.Since(checked).Seconds())
		cancel()
		if err != nil {
			s.metrics.appendLatency.Observe(time.Since(start).Seconds())
			return logstore.AppendResult{}, err
		}
	}
	s.metrics.appendLatency.Observe(time.Since(start).Seconds())
	s.noteAcked(batches, res.LastEntryIDs)
	return res, nil
}

// epochFor is the epoch this store writes region of ns under, given what
// the store holds of it (st); it fails with ErrFenced, before anything is
// written, when the store released the region or already knows a newer
// claim of it.
func (s *LogStore) epochFor(ctx context.Context, ns string, region uint64, st ownState) (uint64, error) {
	if st.released {
		s.metrics.fencedAppends.WithLabelValues("before_write").Inc()
		return 0, kwalerr.Errorf("%w; nothing was written", &FencedError{Op: "append", Namespace: ns, Region: logstore.RegionID(region), Epoch: st.epoch, Released: true})
	}
	r, fenced, err := s.newer(ctx, ns, region, st.epoch)
	if err != nil {
		return 0, kwalerr.Errorf("append to %q: %w", ns, err)
	}
	if fenced {
		s.metrics.fencedAppends.WithLabelValues("before_write").Inc()
		return 0, kwalerr.Errorf("%w; nothing was written", fencedBy("append", ns, region, st.epoch, r))
	}
	return st.epoch, nil
}

// ErrEntryTooLarge is matched by AppendBatch's error for an entry larger
// than Config.MaxEntryBytes; nothing of the call was written.
var ErrEntryTooLarge = errors.New("kwal: entry larger than Config.MaxEntryBytes")

// lastIDs records in ids, for each region of regions (one per entry), the
// greatest ID among its entries' offsets. It touches the map once per run
// of consecutive entries of one region, not once per entry: a call
// usually carries a few entries of each region together, and a lookup and
// assignment per entry shows in kwal's client CPU per MB appended. The
// map's allocation at its first assignment stays: the contract's map
// needs it anyway.
func lastIDs(ids map[logstore.RegionID]logstore.EntryID, regions []logstore.RegionID, offsets []int64) {
	for j := 0; j < len(offsets); {
		reg := regions[j]
		var id logstore.EntryID
		for ; j < len(offsets) && regions[j] == reg; j++ {
			id = max(id, logstore.EntryID(offsets[j]+1))
		}
		if id > ids[reg] {
			ids[reg] = id
		}
	}
}

// nsBatch is an AppendBatch call's entries of one namespace.
type nsBatch struct {
	topic   string
	regions []logstore.RegionID // of each entry
	entries []worker.Entry
}

// appendScratch is what an AppendBatch call needs only while it runs,
// pooled: the producers copy the entries' data before Submit returns, and
// the call reads the rest before it returns.
type appendScratch struct {
	one      nsBatch // the common call: one namespace
	batches  []*nsBatch
	pendings []*worker.Pending
	entered  []ownKey // the regions enterAppend counted, once per run
}

var appendScratchPool = sync.Pool{New: func() any { return new(appendScratch) }}

// put returns sc to the pool without the references it held (the
// caller's data, other namespaces' batches, results), unless it grew
// beyond a usual call.
func (sc *appendScratch) put() {
	if cap(sc.one.entries) > 4096 || cap(sc.batches) > 256 || cap(sc.entered) > 4096 {
		return
	}
	clear(sc.entered[:cap(sc.entered)])
	clear(sc.one.entries[:cap(sc.one.entries)])
	clear(sc.batches[:cap(sc.batches)])
	clear(sc.pendings[:cap(sc.pendings)])
	appendScratchPool.Put(sc)
}

// beginAppend is begin for AppendBatch that also looks up topic's
// producer slot (nil: none yet) under the same lock, so a call writing one
// namespace takes the store's mutex once.
func (s *LogStore) beginAppend(topic string) (*producerSlot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, kwalerr.Errorf("append: %w", logstore.ErrClosed)
	}
	s.ops.Add(1)
	return s.producers[topic], nil
}

// producerBy is producer for AppendBatch given topic's slot as looked up
// (nil: none): a ready producer costs nothing more; otherwise making it (or
// waiting for another caller making it) is bounded by dl.
func (s *LogStore) producerBy(ctx context.Context, topic string, slot *producerSlot, dl worker.Deadline) (*worker.Producer, error) {
	if slot != nil {
		select {
		case <-slot.ready:
			if slot.err == nil {
				return slot.p, nil
			}
		default:
		}
	}
	ctx, cancel := context.WithDeadlineCause(ctx, dl.At, dl.Cause)
	defer cancel()
	return s.producer(ctx, topic, s.cfg.AutoCreateTopics)
}

// failAfterQueued handles a failure after some namespaces' requests were already
// queued: they cannot be taken back once sent, so the call waits for them
// (or ctx) and reports err.
func (s *LogStore) failAfterQueued(ctx context.Context, queued []*worker.Pending, err error) error {
	for _, pd := range queued {
		if _, werr := pd.Wait(ctx); werr != nil {
			err = kwalerr.Join(err, werr)
		}
	}
	return err
}

// LatestEntryID returns the namespace's high watermark: the ID the newest
// record in the log would have as an entry (0 when empty). Every entry's ID
// is <= it, and an entry appended later gets a greater ID.
func (s *LogStore) LatestEntryID(ctx context.Context, namespace string) (_ logstore.EntryID, err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("latest entry ID"); err != nil {
		return 0, err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, end, err := s.offsets(ctx, namespace)
	if err != nil {
		return 0, kwalerr.Errorf("latest entry ID of %q: %w", namespace, err)
	}
	return logstore.EntryID(end), nil
}
