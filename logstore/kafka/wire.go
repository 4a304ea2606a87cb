package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
)

// The wire side of the fetcher: one fetch request and what Kafka's answers
// mean (retry after a leader lookup, ErrPruned, a final error).

// fetchClient picks a client for a read's i-th concurrent fetch: the
// admin client and the produce lanes' clients each have their own fetch
// connection, which the broker serves in parallel. warm is false the first
// time a client fetches: that fetch may open its connection, so its time
// does not price a fetch.
func (s *LogStore) fetchClient(i int) (cl *kgo.Client, warm bool) {
	n := s.cfg.FetchConnections()
	k := i % n
	warm = s.fetchWarm[k].Swap(true)
	if k < len(s.laneClients) {
		return s.laneClients[k], warm
	}
	return s.admin, warm
}

// refreshLeader looks up partition 0's leader and the topic's ID, from
// the store's cache unless a fetch found it stale.
func (f *fetcher) refreshLeader(ctx context.Context) error {
	m, err := f.s.topicMeta(ctx, f.topic, f.leaderStale)
	if err != nil {
		return fmt.Errorf("kwal: read %q: %w", f.topic, err)
	}
	f.leader, f.topicID = m.leader, m.id
	f.leaderStale = true // a second lookup in this read goes to the broker
	return nil
}

// fetchResult is one fetch request's outcome.
type fetchResult struct {
	fp      kgo.FetchPartition
	next    int64
	control []span        // offsets of the control batches fetched (see controlSpans)
	bytes   int           // record batch bytes fetched
	took    time.Duration // the request's round trip
	base    int64         // first offset of the first batch (may be below the offset asked for)
	warm    bool          // sent on a connection already used: took prices the fetch
	retry   error         // a retriable failure: fetch again (after a leader lookup)
	err     error         // a final failure
}

// newFetchRequest is a sessionless consumer fetch request with no topic
// yet, as the reads (and warmReads) send it.
func newFetchRequest(maxWaitMillis, minBytes, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMillis
	req.MinBytes = minBytes
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	return req
}

// withPartition adds the topic's partition to req, fetched from off with
// at most maxBytes.
func withPartition(req *kmsg.FetchRequest, topic string, topicID [16]byte, off int64, maxBytes int32) *kmsg.FetchRequest {
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, topicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, off, maxBytes
	p.LogStartOffset, p.CurrentLeaderEpoch = -1, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// fetchOnce issues one fetch request at off to the given leader. It touches
// no reader state, so several may run at once.
func (f *fetcher) fetchOnce(ctx context.Context, cl *kgo.Client, leader int32, topicID [16]byte, off int64, maxBytes int32, mode string) fetchResult {
	s := f.s
	req := withPartition(newFetchRequest(100, 1, max(maxBytes, 1)), f.topic, topicID, off, max(maxBytes, 1))

	began := time.Now()
	kresp, err := cl.Broker(int(leader)).Request(ctx, req)
	took := time.Since(began)
	s.metrics.fetchLatency.Observe(took.Seconds())
	s.metrics.fetches.WithLabelValues(mode).Inc()
	if err != nil {
		return fetchResult{retry: err}
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fetchResult{retry: err}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fetchResult{err: fmt.Errorf("kwal: read %q: fetch at offset %d: malformed response", f.topic, off)}
	}
	rp := &resp.Topics[0].Partitions[0]
	perr := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case perr == nil:
		n := len(rp.RecordBatches)
		s.metrics.fetchedBytes.WithLabelValues(f.topic, mode).Add(float64(n))
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: off, Topic: f.topic, Partition: partition,
		}, rp, kgo.DefaultDecompressor(), nil)
		base := off
		if len(rp.RecordBatches) >= 8 {
			base = min(off, int64(binary.BigEndian.Uint64(rp.RecordBatches)))
		}
		return fetchResult{fp: fp, next: next, bytes: n, took: took, base: base, control: controlSpans(rp.RecordBatches)}
	case errors.Is(perr, kerr.OffsetOutOfRange):
		return fetchResult{err: f.outOfRange(ctx, off, perr)}
	case errors.Is(perr, kerr.UnknownTopicOrPartition), errors.Is(perr, kerr.UnknownTopicID):
		// Perhaps a cached topic ID went stale; the metadata lookup before
		// the retry tells a deleted topic apart.
		s.forgetMeta(f.topic)
		return fetchResult{retry: perr}
	case kerr.IsRetriable(perr):
		return fetchResult{retry: perr}
	default:
		return fetchResult{err: fmt.Errorf("kwal: read %q: fetch at offset %d: %w", f.topic, off, perr)}
	}
}

// fetch issues fetch requests at off until one succeeds, fails for good, or
// RequestTimeout passes, looking the leader up again between attempts. Only
// the fetcher goroutine calls it.
func (f *fetcher) fetch(ctx context.Context, off int64, maxBytes int32, mode string) (fetchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.RequestTimeout)
	defer cancel()
	var res fetchResult
	ended, err := retryEvery(ctx, f.s.cfg.RetryBackoff, func(attempt int) (bool, error) {
		if attempt > 0 {
			// The leader may have moved: look it up before fetching again.
			if err := f.refreshLeader(ctx); err != nil {
				return true, fmt.Errorf("%w (after a fetch at offset %d failed: %w)", err, off, res.retry)
			}
		}
		res = f.fetchOnce(ctx, f.s.admin, f.leader, f.topicID, off, maxBytes, mode)
		f.stats.fetches++
		f.stats.bytes += int64(res.bytes)
		if res.err != nil {
			return true, res.err
		}
		if res.retry != nil {
			f.s.log.Debug("kwal: retrying fetch", "topic", f.topic, "offset", off, "attempt", attempt, "err", res.retry)
			return false, res.retry
		}
		return true, nil
	})
	if ended {
		return fetchResult{}, fmt.Errorf("kwal: read %q: fetch at offset %d: %w", f.topic, off, err)
	}
	if err != nil {
		return fetchResult{}, err
	}
	return res, nil
}

// outOfRange turns an OFFSET_OUT_OF_RANGE into ErrPruned when the log
// start moved past off (retention or pruning ran during the read); the
// fetcher then checks whether the pass needed what went (startMovedError,
// pruned.go).
func (f *fetcher) outOfRange(ctx context.Context, off int64, cause error) error {
	start, end, err := f.s.offsets(ctx, f.topic)
	if err == nil && start > off {
		return &startMovedError{
			pruned: &logstore.PrunedError{Namespace: f.topic, Requested: logstore.EntryID(off + 1), FirstAvailable: logstore.EntryID(start + 1)},
			start:  start, end: end, cause: cause,
		}
	}
	return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", f.topic, off, cause)
}
