package kafka

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// ErrFutureID is matched by the error of a call given an entry ID the
// namespace's log never held: above its latest entry ID (LatestEntryID).
// Obsolete refuses such an ID rather than let Prune delete entries
// appended later, and a read from beyond the log's end fails with it
// rather than return nothing, since the caller learned that ID somewhere:
// a log that ended below it lost entries (a recreated or truncated topic).
var ErrFutureID = errors.New("kwal: entry ID beyond the namespace's latest")

// Obsolete records that the region no longer needs entries with ID <= upTo.
// It writes an Obsolete mark into the topic (one small record), so that the
// point survives restarts and a lost index, and every store sharing the
// topic learns it; the index drops the region's records below it. The mark
// takes the entry ID of its offset, which no entry gets: LatestEntryID
// moves past it, and the namespace's next entry's ID is one more than it
// would have been (entry IDs grow with gaps).
//
// upTo must be an ID the namespace holds: above its latest entry ID it is
// refused with an error matching ErrFutureID that names both (Prune would
// otherwise delete the region's entries appended later). A point at or
// below the region's current one changes nothing and writes nothing (a
// retried call), and returns nil; kwal_obsolete_stale_total counts such
// calls. upTo 0 does nothing.
func (s *LogStore) Obsolete(ctx context.Context, namespace string, region logstore.RegionID, upTo logstore.EntryID) (err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("obsolete"); err != nil {
		return err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return kwalerr.Errorf("obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
	}
	if upTo == 0 {
		return nil
	}
	gen := s.reads.Gate().Generation(namespace)
	// The producer's creation checks that the topic exists and starts the
	// index's accounting of it, as for an append.
	p, err := s.producer(ctx, namespace, false)
	if err != nil {
		return kwalerr.Errorf("obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
	}
	epoch, err := s.checkObsolete(ctx, namespace, uint64(region))
	if err != nil {
		return kwalerr.Errorf("obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
	}
	if upTo > math.MaxInt64 || int64(upTo) > p.LatestAcked() {
		if err := s.checkHeld(ctx, namespace, upTo); err != nil {
			return kwalerr.Errorf("obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
		}
	}
	// Entry upTo starts at offset upTo-1; every record before offset upTo
	// belongs to an entry with ID <= upTo.
	before := int64(upTo)
	if s.index != nil && before <= s.index.ObsoletePoint(namespace, uint64(region)) {
		s.metrics.obsoleteStale.Inc()
		s.log.Debug("kwal: obsolete: the region's point is already at or above it; nothing to write",
			"topic", namespace, "region", region, "up_to", upTo, "current_point", s.index.ObsoletePoint(namespace, uint64(region)))
		return nil
	}
	// The point goes into the log as a mark, so that every node sharing
	// the topic (and this one after losing its index) learns it. It
	// carries the epoch this store writes the region under: every store
	// ignores it where a newer owner's claim lies below it. The index takes
	// it in once the check after the write passed, as an append is
	// acknowledged: the index cannot give a point back.
	m := record.Mark{Obsolete: []record.RegionPoint{{Region: uint64(region), Before: before, Epoch: epoch}}}
	off, err := s.writeMark(ctx, namespace, m)
	if err != nil {
		return kwalerr.Errorf("obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
	}
	if err := s.checkObsoleteWritten(ctx, namespace, uint64(region), epoch); err != nil {
		return kwalerr.Errorf("obsolete %q region %d up to %d: %w", namespace, region, upTo, err)
	}
	s.reads.NoteMark(namespace, gen, off, m)
	return nil
}

// checkHeld fails with ErrFutureID when id is above the namespace's latest
// entry ID, as the index or, failing that, the log's end says.
func (s *LogStore) checkHeld(ctx context.Context, topic string, id logstore.EntryID) error {
	if id <= math.MaxInt64 && s.index != nil {
		if w, covered := s.index.Watermark(topic); covered && int64(id) <= w {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, end, err := s.offsets(ctx, topic)
	if err != nil {
		return err
	}
	if id > math.MaxInt64 || int64(id) > end {
		return kwalerr.Errorf("the namespace's latest entry ID is %d: %w", end, ErrFutureID)
	}
	return nil
}

// CreateNamespace creates the namespace's topic (one partition,
// ReplicationFactor, TopicConfigs) and opens its producer; an existing
// topic is not an error.
func (s *LogStore) CreateNamespace(ctx context.Context, namespace string) (err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("create namespace"); err != nil {
		return err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return err
	}
	// Opening the producer creates the topic and starts the index's
	// accounting, so the namespace's first append pays for neither.
	if _, err = s.producer(ctx, namespace, true); err != nil {
		return kwalerr.Errorf("create namespace %q: %w", namespace, err)
	}
	return nil
}

// ErrNamespaceDeleting is matched by the error of a call that would write
// or create a namespace while DeleteNamespace deletes it: an append
// acknowledged then would be deleted with the topic. It also matches
// ErrUnknownNamespace.
var ErrNamespaceDeleting = errors.New("kwal: the namespace is being deleted")

// DeleteNamespace deletes the namespace's topic and its index. Appends to
// it in flight finish first, or fail; appends and CreateNamespace calls
// that arrive while it runs fail with an error matching
// ErrNamespaceDeleting (and ErrUnknownNamespace), so that nothing is
// acknowledged and then deleted with the topic. Once it returns, the name
// may be used again (with AutoCreateTopics, the next append creates a new
// topic). When appends in flight did not finish within ProduceTimeout, the
// topic is deleted all the same and the error says so.
func (s *LogStore) DeleteNamespace(ctx context.Context, namespace string) (err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("delete namespace"); err != nil {
		return err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return err
	}
	// The tombstone turns away appends and creations of the namespace until
	// the topic is gone.
	tomb := &producerSlot{ready: make(chan struct{}), err: kwalerr.Cause(ErrNamespaceDeleting, ErrUnknownNamespace)}
	close(tomb.ready)
	s.mu.Lock()
	slot := s.producers[namespace]
	if slot != nil && slot.deleting {
		s.mu.Unlock()
		return kwalerr.Errorf("delete namespace %q: %w", namespace, ErrNamespaceDeleting)
	}
	tomb.deleting = true
	s.producers[namespace] = tomb
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.producers[namespace] == tomb {
			delete(s.producers, namespace)
		}
		s.mu.Unlock()
	}()
	var closeErr error
	if slot != nil {
		<-slot.ready
		if slot.p != nil {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
			if err := slot.p.Close(cctx); err != nil {
				closeErr = kwalerr.Errorf("delete namespace %q: appends in flight were failed (their entries may have been written, and are deleted with the topic): %w", namespace, err)
			}
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
		return kwalerr.Join(closeErr, kwalerr.Errorf("delete namespace %q: %w", namespace, err))
	}
	// Reads that started before the topic was deleted must not bring its
	// index back from what they decoded, nor the marks they find: they
	// stop updating the index and the store's marks now, before those are
	// forgotten.
	s.reads.Drop(namespace)
	s.purgeFromClients(namespace)
	s.metrics.forget(namespace)
	s.owning.forget(namespace)
	s.metrics.worker.Forget(namespace)
	if s.index != nil {
		if err := s.index.Drop(ctx, namespace); err != nil {
			return kwalerr.Join(closeErr, kwalerr.Errorf("delete namespace %q: index: %w", namespace, err))
		}
	}
	return closeErr
}

// ListNamespaces lists the cluster's topics that are not internal, sorted;
// the claims topic (Config.ClaimsTopic) is not a namespace.
func (s *LogStore) ListNamespaces(ctx context.Context) ([]string, error) {
	if err := s.begin("list namespaces"); err != nil {
		return nil, err
	}
	defer s.end()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	details, err := s.adm.ListTopics(ctx)
	if err != nil {
		return nil, kwalerr.Errorf("list namespaces: %w", err)
	}
	var out []string
	for name, td := range details {
		if td.IsInternal || strings.HasPrefix(name, "__") || name == s.cfg.ClaimsTopic {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// purgeFromClients makes the producing clients forget a deleted topic.
// A franz-go client keeps every topic it produced to in its metadata and,
// once the topic is gone, refreshes its metadata again and again for it
// (a load error each time). The producer was closed and the namespace's
// tombstone keeps appends away until DeleteNamespace returns, so no lane
// buffers a record of it.
func (s *LogStore) purgeFromClients(namespace string) {
	for _, cl := range s.laneClients {
		cl.PurgeTopicsFromClient(namespace)
	}
	if s.markClient != nil {
		s.markClient.PurgeTopicsFromClient(namespace)
	}
}
