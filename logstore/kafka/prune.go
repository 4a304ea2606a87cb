package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// ErrCannotPrune is matched by Prune's error when the index cannot prove
// that any record is safe to delete (it is off, or does not account for the
// log from its start).
var ErrCannotPrune = errors.New("kwal: nothing can be proven safe to prune")

// Prune deletes the namespace's records that no region needs any more
// (an extension of the logstore contract), and returns the first entry ID
// still available. A record may go only when the index accounts for every
// offset from the log's start up to it and no region still holds an entry
// there: every region with indexed records has declared them obsolete
// (Obsolete) below that point. So a region that never called Obsolete
// keeps everything from its first record on, and records the index has not
// seen (another writer's, not yet read) are never deleted. A read from
// below the new start then fails with ErrPruned. Kafka's DeleteRecords does
// the deletion; services that refuse it return its error.
func (s *LogStore) Prune(ctx context.Context, namespace string) (logstore.EntryID, error) {
	if err := s.begin("prune"); err != nil {
		return 0, err
	}
	defer s.end()
	if err := validateTopic(namespace); err != nil {
		return 0, err
	}
	g, ok := s.index.(statser)
	if !ok {
		return 0, fmt.Errorf("kwal: prune %q: the index is off: %w", namespace, ErrCannotPrune)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	start, _, err := s.offsets(ctx, namespace)
	if err != nil {
		return 0, err
	}
	point, err := prunePoint(g, namespace, start)
	if err != nil {
		return 0, err
	}
	if point <= start {
		return logstore.EntryID(start + 1), nil
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: namespace, Partition: partition, At: point})
	resp, err := s.adm.DeleteRecords(ctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kwal: prune %q below offset %d: %w", namespace, point, err)
	}
	s.log.Info("kwal: pruned", "topic", namespace, "before_offset", point, "first_id", point+1)
	return logstore.EntryID(point + 1), nil
}

// statser is what Prune needs from the index; *index.Global has it.
type statser interface {
	Stats(topic string, regions bool) (index.TopicStats, bool)
}

// prunePoint is the offset below which nothing is needed: the lowest
// offset any region still holds, or the index's watermark, whichever is
// lower; an error when the index does not account for the log from start.
func prunePoint(g statser, topic string, start int64) (int64, error) {
	ts, ok := g.Stats(topic, true)
	if !ok || !ts.Covered || ts.C > start {
		return 0, fmt.Errorf("kwal: prune %q: the index does not account for the log from its start (offset %d): %w", topic, start, ErrCannotPrune)
	}
	point := ts.W
	for _, r := range ts.Regions {
		if r.Entries > 0 {
			point = min(point, r.First)
		}
	}
	return point, nil
}

// pruneLoop runs Prune on every namespace the index knows, every interval,
// until stop is closed. Close stops it before the index closes.
func (s *LogStore) pruneLoop(g topicLister, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, ns := range g.Topics() {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			_, err := s.Prune(ctx, ns)
			cancel()
			switch {
			case err == nil, errors.Is(err, ErrCannotPrune), errors.Is(err, ErrUnknownNamespace):
			case errors.Is(err, logstore.ErrClosed):
				return
			default:
				s.log.Warn("kwal: background prune failed", "topic", ns, "err", err)
			}
		}
	}
}

// topicLister is what the pruner needs from the index.
type topicLister interface {
	Topics() []string
}
