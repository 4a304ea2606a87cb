package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/record"
)

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
	s.purgeFromClients(namespace)
	s.forgetMarks(namespace)
	s.models.forget(namespace)
	// Reads that started before the topic was deleted must not bring its
	// index back from what they decoded: they stop updating it now.
	s.gate.drop(namespace)
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

// purgeFromClients makes the producing clients forget a deleted topic.
// A franz-go client keeps every topic it produced to in its metadata and,
// once the topic is gone, refreshes its metadata again and again for it
// (a load error each time): with 16 lanes that was up to 3% of the
// clients' CPU in a benchmark that deletes its topics between layouts.
// Purging fails records of the topic still buffered; the producer was
// closed above, so only an append that recreated the namespace
// meanwhile can have any, and it gets the error. Left alone when such an
// append already made the namespace's producer again.
func (s *LogStore) purgeFromClients(namespace string) {
	s.mu.Lock()
	_, again := s.producers[namespace]
	s.mu.Unlock()
	if again {
		return
	}
	for _, cl := range s.laneClients {
		cl.PurgeTopicsFromClient(namespace)
	}
	if s.markClient != nil {
		s.markClient.PurgeTopicsFromClient(namespace)
	}
}
