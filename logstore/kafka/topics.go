package kafka

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sync/errgroup"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/internal/retry"
	"github.com/kwal/kwal/logstore/kafka/worker"
)

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
		if h := s.producerWaitForTesting; h != nil {
			h(topic)
		}
		select {
		case <-slot.ready:
			if slot.err != nil && create && !slot.deleting && errors.Is(slot.err, ErrUnknownNamespace) {
				// Another caller was not allowed to create the topic; this
				// one is (its failed slot is gone from the map).
				return s.producer(ctx, topic, create)
			}
			if slot.err != nil && !slot.deleting && ctx.Err() == nil &&
				(errors.Is(slot.err, context.Canceled) || errors.Is(slot.err, context.DeadlineExceeded)) {
				// The call that was creating it gave up (its context
				// ended): this one tries with its own.
				return s.producer(ctx, topic, create)
			}
			if slot.err != nil {
				return nil, slot.err
			}
			return slot.p, nil
		case <-ctx.Done():
			return nil, kwalerr.Errorf("waiting for the namespace's producer: %w", context.Cause(ctx))
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
// checks its configs (checkTopic), and starts the index's accounting for it.
// A topic that vanishes between the checks (a namespace deleted a moment
// ago, which metadata still showed) is looked up again, and created when
// create is set.
func (s *LogStore) ensureTopic(ctx context.Context, topic string, create bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.checkNamespace(topic); err != nil {
		return err
	}
	_, err := retry.Every(ctx, s.cfg.RetryBackoff, func(int) (bool, error) {
		err := s.ensureTopicOnce(ctx, topic, create)
		return !create || !errors.Is(err, ErrUnknownNamespace), err
	})
	return err
}

func (s *LogStore) ensureTopicOnce(ctx context.Context, topic string, create bool) error {
	details, err := s.adm.ListTopics(ctx, topic)
	if err != nil {
		return kwalerr.Errorf("metadata: %w", err)
	}
	td, ok := details[topic]
	var created *Retention
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		if !create {
			return kwalerr.Cause(ErrUnknownNamespace, td.Err)
		}
		if created, err = s.createTopic(ctx, topic); err != nil {
			return err
		}
	} else if td.Err != nil {
		return kwalerr.Errorf("metadata: %w", td.Err)
	} else if n := len(td.Partitions); n > 1 {
		s.log.Warn("kwal: topic has more than one partition; kwal uses partition 0 only", "topic", topic, "partitions", n)
	}
	if err := s.checkTopic(ctx, topic, created); err != nil {
		return err
	}
	s.metrics.prune.known(topic)
	s.metrics.reads.Known(topic)
	if s.index != nil {
		start, end, err := s.offsets(ctx, topic)
		if err != nil {
			return err
		}
		if w, covered := s.index.Watermark(topic); covered && w > end {
			// The index is discarded now (new records reuse the offsets),
			// and with it what made reads of the lost entries fail.
			s.log.Error("kwal: the log ends below offsets the index accounted for: records were lost; writing resumes at the log's end and the index forgets them",
				"topic", topic, "log_end", end, "index_watermark", w)
		}
		s.index.Start(topic, start, end)
		s.reads.CatchUp(topic, end)
	}
	return nil
}

// createTopic creates the topic with kwal's configs; the retention it was
// created with is returned, nil when someone else created it meanwhile
// (then its configs are described like any existing topic's).
func (s *LogStore) createTopic(ctx context.Context, topic string) (*Retention, error) {
	configs := s.topicConfigsForCreate()
	resp, err := s.adm.CreateTopic(ctx, 1, s.cfg.ReplicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, kwalerr.Errorf("create topic: %w", err)
	}
	var created *Retention
	if err == nil {
		r := retentionOfCreated(topic, configs)
		created = &r
		s.log.Debug("kwal: created topic", "topic", topic, "replication_factor", s.cfg.ReplicationFactor)
	}
	// A new topic's partition may not have a leader yet; wait for one so
	// that the first fetch or ListOffsets does not fail.
	_, err = retry.Every(ctx, s.cfg.RetryBackoff, func(int) (bool, error) {
		details, err := s.adm.ListTopics(ctx, topic)
		if err == nil {
			if td, ok := details[topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
				if p, ok := td.Partitions[partition]; ok && p.Err == nil && p.Leader >= 0 {
					return true, nil
				}
			}
		}
		return false, err
	})
	if err != nil {
		return nil, kwalerr.Errorf("created topic has no leader yet: %w", err)
	}
	return created, nil
}

// offsetsWithin is offsets bounded by RequestTimeout.
func (s *LogStore) offsetsWithin(ctx context.Context, topic string) (start, end int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	return s.offsets(ctx, topic)
}

// offsets returns the partition's log start and end (high watermark),
// asked concurrently. Retriable errors (a leader that moved) are retried
// after a metadata refresh until ctx ends.
func (s *LogStore) offsets(ctx context.Context, topic string) (start, end int64, err error) {
	_, err = retry.Every(ctx, s.cfg.RetryBackoff, func(attempt int) (bool, error) {
		start, end, err = s.offsetsOnce(ctx, topic)
		if err == nil || !kerr.IsRetriable(err) || errors.Is(err, ErrUnknownNamespace) {
			return true, err
		}
		s.log.Debug("kwal: retrying list offsets", "topic", topic, "attempt", attempt, "err", err)
		s.admin.ForceMetadataRefresh()
		return false, err
	})
	if err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

func (s *LogStore) offsetsOnce(ctx context.Context, topic string) (start, end int64, err error) {
	var starts, ends kadm.ListedOffsets
	g, gctx := errgroup.WithContext(ctx)
	// Both lists run at once; the first failure cancels the other.
	list := func(into *kadm.ListedOffsets, which string, call func(context.Context, ...string) (kadm.ListedOffsets, error)) func() error {
		return func() error {
			lo, err := call(gctx, topic)
			if err == nil {
				err = lo.Error()
			}
			if err != nil {
				return stepErr("list "+which+" offset", err)
			}
			*into = lo
			return nil
		}
	}
	g.Go(list(&starts, "start", s.adm.ListStartOffsets))
	g.Go(list(&ends, "end", s.adm.ListEndOffsets))
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	so, ok1 := starts.Lookup(topic, partition)
	eo, ok2 := ends.Lookup(topic, partition)
	if !ok1 || !ok2 {
		return 0, 0, kwalerr.Errorf("partition %d: %w", partition, ErrUnknownNamespace)
	}
	return so.Offset, eo.Offset, nil
}

// mapUnknown makes a missing topic match ErrUnknownNamespace. It reads
// as that alone: Kafka's error (UNKNOWN_TOPIC_OR_PARTITION) stays in the
// chain for errors.Is and errors.As, and is not said twice.
func mapUnknown(err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		return kwalerr.Cause(ErrUnknownNamespace, err)
	}
	return err
}

// stepErr is the error of a step of a call on a namespace (a metadata,
// offsets or configs request): an unknown namespace is said as that
// alone, whatever the step; other errors name the step. The call's entry
// point names itself and the namespace (the rule in doc.go).
func stepErr(step string, err error) error {
	if err = mapUnknown(err); errors.Is(err, ErrUnknownNamespace) {
		return err
	}
	return kwalerr.Errorf("%s: %w", step, err)
}

// ErrInvalidNamespace is matched by the error of a call given a name that
// cannot be a namespace: not a valid Kafka topic name, the store's claims
// topic (Config.ClaimsTopic), or a name starting with "__", which Kafka
// keeps for its internal topics (__consumer_offsets, __transaction_state).
// The error names the namespace and why; nothing was sent for it.
var ErrInvalidNamespace = errors.New("kwal: invalid namespace")

// checkNamespace refuses a name that is not a namespace of this store:
// validateTopic's syntax, then the names kwal must never write, delete or
// prune as a namespace. Writing the claims topic as a namespace would put
// records there that no claim event decodes from (every store would then
// stop acknowledging appends), and deleting it would forget every claim.
func (s *LogStore) checkNamespace(ns string) error {
	if err := validateTopic(ns); err != nil {
		return err
	}
	if ns == s.cfg.ClaimsTopic {
		return kwalerr.Errorf("%w: %q is the claims topic (Config.ClaimsTopic), where every store records its region claims", ErrInvalidNamespace, ns)
	}
	return refuseInternalTopic(ns)
}

// refuseInternalTopic refuses a name Kafka keeps for its internal topics;
// unlike the claims topic's name, it does not depend on a store.
func refuseInternalTopic(ns string) error {
	if strings.HasPrefix(ns, "__") {
		return kwalerr.Errorf("%w: %q starts with \"__\", which Kafka keeps for its internal topics (such as __consumer_offsets)", ErrInvalidNamespace, ns)
	}
	return nil
}

// validateTopic applies Kafka's topic name rules, so a bad namespace is
// reported by name before any request.
func validateTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return kwalerr.Errorf("%w: %q is not a valid topic name (1-249 characters, not . or ..)", ErrInvalidNamespace, t)
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return kwalerr.Errorf("%w: %q is not a valid topic name: %q is not one of [a-zA-Z0-9._-]", ErrInvalidNamespace, t, c)
		}
	}
	return nil
}
