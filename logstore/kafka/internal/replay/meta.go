package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
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
	ctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	details, err := r.o.Host.Admin().ListTopics(ctx, topic)
	if err != nil {
		return topicMeta{}, fmt.Errorf("metadata: %w", err)
	}
	td, ok := details[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		r.meta.forget(topic)
		return topicMeta{}, r.o.ErrUnknownNamespace
	}
	if td.Err != nil {
		return topicMeta{}, fmt.Errorf("metadata: %w", td.Err)
	}
	p, ok := td.Partitions[partition]
	if !ok {
		return topicMeta{}, fmt.Errorf("partition %d: %w", partition, r.o.ErrUnknownNamespace)
	}
	if p.Err != nil || p.Leader < 0 {
		return topicMeta{}, fmt.Errorf("partition %d has no leader: %w", partition, errors.Join(p.Err, kerr.LeaderNotAvailable))
	}
	m := topicMeta{leader: p.Leader, id: td.ID}
	r.meta.set(topic, m)
	return m, nil
}
