package replay

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
)

// listBatches puts the bounds lookups of many topics led by one broker
// into one pair of ListOffsets requests (one request names every topic):
// a lookup that starts while the leader's pair is in flight waits for the
// next pair, which carries every topic asked for meanwhile. A lookup so
// never takes offsets asked for before it started.
//
// A datanode that restarts starts the replays of all its topics at once;
// with a pair per topic on the same two connections, which a broker serves
// one request at a time, the last of 64 topics' pairs waited behind 63
// others.
type listBatches struct {
	mu      sync.Mutex
	leaders map[int32]*leaderLists // a leader is here while its pairs are in flight
}

// leaderLists is one leader's pairs: one in flight, and the next gathering.
type leaderLists struct {
	next *listBatch
}

// listBatch is one pair of ListOffsets requests and its outcome, final
// once done is closed.
type listBatch struct {
	topics []string // each at most once: a topic's lookups run one at a time (readBounds)
	done   chan struct{}
	listed map[string]listedBounds
	err    error // the pair failed as a whole
}

// listedBounds is one topic's log start and end, or why the leader gave
// none.
type listedBounds struct {
	start, end int64
	err        error
}

func newListBatch() *listBatch { return &listBatch{done: make(chan struct{})} }

// listAtLeader returns partition 0's log start and end (the high
// watermark, as kadm's ListEndOffsets) of topic as leader answers them,
// asked after the call began, in a pair shared with the lookups of other
// topics on that leader (see listBatches).
func (r *Reads) listAtLeader(ctx context.Context, topic string, leader int32) (start, end int64, err error) {
	lb := &r.lists
	lb.mu.Lock()
	if lb.leaders == nil {
		lb.leaders = make(map[int32]*leaderLists)
	}
	var b *listBatch
	if l := lb.leaders[leader]; l != nil {
		if l.next == nil {
			l.next = newListBatch()
		}
		b = l.next
	} else {
		if !r.goroutines(1) {
			lb.mu.Unlock()
			return 0, 0, closedErr(topic)
		}
		l = &leaderLists{}
		lb.leaders[leader] = l
		b = newListBatch()
		go r.sendListBatches(leader, l, b)
	}
	b.topics = append(b.topics, topic)
	lb.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if b.err != nil {
		return 0, 0, b.err
	}
	lb2 := b.listed[topic] // listPair answers every topic asked
	return lb2.start, lb2.end, lb2.err
}

// sendListBatches sends b's pair to leader, then the pair gathered
// meanwhile, until none gathered. Each pair is bounded by RequestTimeout
// and ends with the store.
func (r *Reads) sendListBatches(leader int32, l *leaderLists, b *listBatch) {
	defer r.wg.Done()
	lb := &r.lists
	for b != nil {
		// The topics are final: a lookup arriving now joins l.next.
		lb.mu.Lock()
		topics := b.topics
		lb.mu.Unlock()
		ctx, cancel := context.WithTimeout(r.ctx, r.o.RequestTimeout)
		b.listed, b.err = r.listPair(ctx, leader, topics)
		cancel()
		lb.mu.Lock()
		next := l.next
		l.next = nil
		if next == nil {
			delete(lb.leaders, leader)
		}
		lb.mu.Unlock()
		close(b.done)
		b = next
	}
}

// listPair asks leader for the log start and end of partition 0 of every
// topic (each gets an answer: a topic the leader left out gets
// errNoBounds), both requests at once and on two connections: a broker
// serves one connection's requests one at a time, so on one connection the
// second would wait for the first. The start goes on the first fetch
// connection, the end on the last (boundsClients); Warm opens both.
func (r *Reads) listPair(ctx context.Context, leader int32, topics []string) (map[string]listedBounds, error) {
	startCl, endCl := r.boundsClients()
	var starts, ends map[string]listedOffset
	var g errgroup.Group
	g.Go(func() (err error) { starts, err = listOffsets(ctx, startCl, leader, topics, -2); return err }) // earliest: the log start
	g.Go(func() (err error) { ends, err = listOffsets(ctx, endCl, leader, topics, -1); return err })     // latest: the high watermark
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]listedBounds, len(topics))
	for _, t := range topics {
		st, ok1 := starts[t]
		en, ok2 := ends[t]
		switch {
		case !ok1 || !ok2:
			out[t] = listedBounds{err: errNoBounds}
		case st.err != nil || en.err != nil:
			out[t] = listedBounds{err: errors.Join(st.err, en.err)}
		default:
			out[t] = listedBounds{start: st.off, end: en.off}
		}
	}
	return out, nil
}

// listedOffset is one topic's partition 0 offset in a ListOffsets answer,
// or its error.
type listedOffset struct {
	off int64
	err error
}

// listOffsets asks leader, through cl, for partition 0's offset at
// timestamp ts (-2 the log start, -1 the high watermark) of every topic, in
// one request. A topic the answer leaves out is missing from the map.
func listOffsets(ctx context.Context, cl *kgo.Client, leader int32, topics []string, ts int64) (map[string]listedOffset, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, topic := range topics {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = topic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.Timestamp = partition, -1, ts
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return nil, err
	}
	out := make(map[string]listedOffset, len(topics))
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Partition != partition {
				continue
			}
			out[rt.Topic] = listedOffset{off: rp.Offset, err: kerr.ErrorForCode(rp.ErrorCode)}
		}
	}
	return out, nil
}

// listOffset is listOffsets for one topic.
func listOffset(ctx context.Context, cl *kgo.Client, topic string, leader int32, ts int64) (int64, error) {
	got, err := listOffsets(ctx, cl, leader, []string{topic}, ts)
	if err != nil {
		return 0, err
	}
	r, ok := got[topic]
	if !ok {
		return 0, errNoBounds
	}
	return r.off, r.err
}
