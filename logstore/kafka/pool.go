package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
)

// TopicPool is a fixed set of namespaces (topics) that many regions share:
// GreptimeDB's num_topics, topic_name_prefix and topic selector. Its topics
// are named Prefix_0 … Prefix_{N-1}, as GreptimeDB names them. A region is
// mapped to a topic either by a stable hash (Topic: the same answer in
// every process and version, nothing to persist) or by round robin from a
// random start (RoundRobin: an even spread, but the datanode must persist
// the assignment it returns).
type TopicPool struct {
	prefix string
	names  []string
}

// NewTopicPool returns the pool of n topics named prefix_0 … prefix_{n-1};
// it fails if n < 1 or a name is not a valid topic name or starts with
// "__" (ErrInvalidNamespace). Create refuses a pool that holds the store's
// claims topic.
func NewTopicPool(prefix string, n int) (*TopicPool, error) {
	if n < 1 {
		return nil, kwalerr.Errorf("topic pool %q: %d topics; at least 1 is needed", prefix, n)
	}
	p := &TopicPool{prefix: prefix, names: make([]string, n)}
	for i := range n {
		p.names[i] = fmt.Sprintf("%s_%d", prefix, i)
		err := validateTopic(p.names[i])
		if err == nil {
			err = refuseInternalTopic(p.names[i])
		}
		if err != nil {
			return nil, kwalerr.Errorf("topic pool %q: %w", prefix, err)
		}
	}
	return p, nil
}

// Names returns the pool's topics, in order.
func (p *TopicPool) Names() []string { return append([]string(nil), p.names...) }

// Len is the number of topics.
func (p *TopicPool) Len() int { return len(p.names) }

// Create creates every topic of the pool that does not exist yet, through
// the store (one partition, with the store's ReplicationFactor and
// TopicConfigs), a few at a time; existing topics are left as they are.
func (p *TopicPool) Create(ctx context.Context, s *LogStore) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, n := range p.names {
		g.Go(func() error { return s.CreateNamespace(ctx, n) })
	}
	if err := g.Wait(); err != nil {
		return kwalerr.Errorf("topic pool %q: %w", p.prefix, err)
	}
	return nil
}

// Topic maps a region to its topic by a stable hash: FNV-1a (64 bit) of
// the region ID's 8 big-endian bytes, modulo the pool size. The mapping
// depends only on the region and the pool size, so it needs no storage;
// changing the pool size moves most regions.
func (p *TopicPool) Topic(region logstore.RegionID) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(region))
	h := fnv.New64a()
	_, _ = h.Write(b[:])
	return p.names[h.Sum64()%uint64(len(p.names))]
}

// RoundRobin returns a selector that hands out the pool's topics in turn,
// starting at a random one (so that datanodes started together do not all
// begin with topic 0). Safe for concurrent use.
func (p *TopicPool) RoundRobin() *RoundRobin {
	return &RoundRobin{pool: p, next: rand.IntN(len(p.names))}
}

// RoundRobin assigns regions to a pool's topics in turn. Its choices are
// not reproducible: the caller persists the assignment (as GreptimeDB keeps
// a region's topic in its metadata).
type RoundRobin struct {
	pool *TopicPool
	mu   sync.Mutex
	next int
}

// Next returns the next topic.
func (r *RoundRobin) Next() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.pool.names[r.next]
	r.next = (r.next + 1) % len(r.pool.names)
	return t
}

// Assign gives each region (in the order given; a repeated region keeps its
// first topic) the next topic and returns the assignment to persist.
func (r *RoundRobin) Assign(regions []logstore.RegionID) map[logstore.RegionID]string {
	out := make(map[logstore.RegionID]string, len(regions))
	for _, reg := range regions {
		if _, ok := out[reg]; !ok {
			out[reg] = r.Next()
		}
	}
	return out
}
