package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

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
		var b *nsBatch
		if single {
			if i == 0 {
				if err := validateTopic(e.Namespace); err != nil {
					return logstore.AppendResult{}, fmt.Errorf("kwal: append: entry %d: %w", i, err)
				}
				b = &nsBatch{topic: e.Namespace, regions: make([]logstore.RegionID, 0, len(entries)), entries: make([]worker.Entry, 0, len(entries))}
				batches = append(batches, b)
			}
			b = batches[0]
		} else {
			if ns, ok := regionNS[e.Region]; ok && ns != e.Namespace {
				return logstore.AppendResult{}, fmt.Errorf("kwal: append: entry %d: region %d appears under namespaces %q and %q in one call", i, e.Region, ns, e.Namespace)
			}
			regionNS[e.Region] = e.Namespace
			b = byNS[e.Namespace]
			if b == nil {
				if err := validateTopic(e.Namespace); err != nil {
					return logstore.AppendResult{}, fmt.Errorf("kwal: append: entry %d: %w", i, err)
				}
				b = &nsBatch{topic: e.Namespace}
				byNS[e.Namespace] = b
				batches = append(batches, b)
			}
		}
		b.regions = append(b.regions, e.Region)
		b.entries = append(b.entries, worker.Entry{Region: uint64(e.Region), Data: e.Data})
	}
	start := time.Now()
	// ProduceTimeout bounds the call as a whole: a request still queued at
	// the deadline (behind its region's earlier group, which may still
	// land) is withdrawn and never written, so it cannot overtake it.
	ctx, cancel := context.WithDeadlineCause(ctx, start.Add(s.cfg.ProduceTimeout), s.appendTimeout)
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
	res := logstore.AppendResult{LastEntryIDs: make(map[logstore.RegionID]logstore.EntryID, min(len(entries), 8))}
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
