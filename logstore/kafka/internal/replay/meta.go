package replay

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/internal/kwalerr"
)

// topicMeta is what reads need to address a topic's partition 0.
type topicMeta struct {
	leader int32
	id     [16]byte
}

// metaCache is the reads' cache of each topic's partition-0 leader and ID.
type metaCache struct {
	mu sync.Mutex
	m  map[string]topicMeta
}

func (c *metaCache) get(topic string) (topicMeta, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[topic]
	return m, ok
}

func (c *metaCache) set(topic string, m topicMeta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]topicMeta)
	}
	c.m[topic] = m
}

func (c *metaCache) forget(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, topic)
}

// topicMeta returns the topic's partition-0 leader and ID, cached; refresh
// asks the broker again (after a fetch found the leader moved).
func (r *Reads) topicMeta(ctx context.Context, topic string, refresh bool) (topicMeta, error) {
	if !refresh {
		if m, ok := r.meta.get(topic); ok {
			return m, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	details, err := r.opts.Host.Admin().ListTopics(ctx, topic)
	if err != nil {
		return topicMeta{}, kwalerr.Errorf("metadata: %w", err)
	}
	td, ok := details[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		r.meta.forget(topic)
		return topicMeta{}, kwalerr.Cause(r.opts.ErrUnknownNamespace, td.Err)
	}
	if td.Err != nil {
		return topicMeta{}, kwalerr.Errorf("metadata: %w", td.Err)
	}
	p, ok := td.Partitions[partition]
	if !ok {
		return topicMeta{}, kwalerr.Errorf("partition %d: %w", partition, r.opts.ErrUnknownNamespace)
	}
	if p.Err != nil || p.Leader < 0 {
		return topicMeta{}, kwalerr.Errorf("partition %d has no leader: %w", partition, kwalerr.Join(p.Err, kerr.LeaderNotAvailable))
	}
	m := topicMeta{leader: p.Leader, id: td.ID}
	r.meta.set(topic, m)
	return m, nil
}
