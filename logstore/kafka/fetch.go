package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// fetcher issues a read's fetch requests and hands each response, in plan
// order, to the read's decoding loop (reader) as a fetched message. It owns
// everything about the wire: the partition leader and topic ID, the record
// size estimate that sizes fetches, retries and the mapping of Kafka's
// errors. It shares no state with the reader; its counters are read once
// its goroutine has ended.
type fetcher struct {
	s     *LogStore
	topic string

	leaderStale bool
	leader      int32
	topicID     [16]byte

	avgRecord float64 // fetched bytes per offset so far, to size indexed fetches
	stats     fetchStats
}

// fetchStats counts a fetcher's requests.
type fetchStats struct {
	fetches int   // fetch requests
	bytes   int64 // record batch bytes fetched
}

// fetched is one fetch response handed from the fetcher to the reader.
type fetched struct {
	rg   index.Range
	from int64 // the offset fetched at
	fp   kgo.FetchPartition
	next int64 // the offset after the last record processed
	// control are the offsets of the control batches (transaction markers)
	// in the response: they hold no record, and are no gap.
	control []span
	err     error
}

// prefetchDepth bounds the indexed ranges whose first fetch is in flight
// at once (their byte limits also add up to at most FetchMaxBytes).
const prefetchDepth = 16

// prefetch is an indexed range's first fetch, running in its own goroutine.
type prefetch struct {
	rg       index.Range
	maxBytes int32
	done     chan fetchResult
}

// fetchAll fetches every range in order, sending each response on ch; it
// stops at the first error (sent) or when ctx ends. The first fetch of
// each indexed range is started ahead, up to prefetchDepth ranges and
// FetchMaxBytes of byte limits, spread over the store's clients (a broker
// serves one request per connection at a time), so that a replay of many
// small ranges pays the broker's round trip about once per window rather
// than once per range; a range's further fetches, and scans, go one at a
// time.
func (f *fetcher) fetchAll(ctx context.Context, ranges []index.Range, ch chan<- fetched) {
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	send := func(msg fetched) bool {
		select {
		case ch <- msg:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var window []*prefetch
	var windowBytes int64
	nextRange := 0
	fill := func() {
		for nextRange < len(ranges) && len(window) < prefetchDepth {
			rg := ranges[nextRange]
			if rg.Scan {
				return // a scan starts once the ranges before it are done
			}
			mb := f.fetchSize(rg, rg.Start)
			if len(window) > 0 && windowBytes+int64(mb) > int64(f.s.cfg.FetchMaxBytes) {
				return
			}
			pf := &prefetch{rg: rg, maxBytes: mb, done: make(chan fetchResult, 1)}
			leader, id := f.leader, f.topicID
			cl := f.s.fetchClient(nextRange)
			running.Add(1)
			go func() {
				defer running.Done()
				fctx, fcancel := context.WithTimeout(ctx, f.s.cfg.RequestTimeout)
				defer fcancel()
				pf.done <- f.fetchOnce(fctx, cl, leader, id, rg.Start, mb, "indexed")
			}()
			window = append(window, pf)
			windowBytes += int64(mb)
			nextRange++
		}
	}
	for {
		fill()
		var rg index.Range
		var first *fetchResult
		var firstMax int32
		switch {
		case len(window) > 0:
			pf := window[0]
			window = window[1:]
			windowBytes -= int64(pf.maxBytes)
			var res fetchResult
			select {
			case res = <-pf.done:
			case <-ctx.Done():
				return
			}
			f.stats.fetches++
			f.stats.bytes += int64(res.bytes)
			if res.err != nil {
				send(fetched{err: res.err})
				return
			}
			rg, firstMax = pf.rg, pf.maxBytes
			if res.retry == nil {
				first = &res
			}
		case nextRange < len(ranges):
			rg = ranges[nextRange]
			nextRange++
		default:
			return
		}
		mode := "indexed"
		if rg.Scan {
			mode = "scan"
		}
		grow := false // the last fetch fitted no complete batch: ask for FetchMaxBytes
		for off := rg.Start; off < rg.End; {
			var res fetchResult
			maxBytes := firstMax
			if first != nil && off == rg.Start {
				res = *first
			} else {
				maxBytes = f.fetchSize(rg, off)
				if grow {
					maxBytes = f.s.cfg.FetchMaxBytes
				}
				var err error
				if res, err = f.fetch(ctx, off, maxBytes, mode); err != nil {
					send(fetched{err: err})
					return
				}
			}
			first = nil
			if res.fp.Err == nil && res.next <= off {
				if maxBytes < f.s.cfg.FetchMaxBytes {
					grow = true
					continue
				}
				send(fetched{err: fmt.Errorf("kwal: read %q: fetch at offset %d returned no complete record (%d bytes)", f.topic, off, res.bytes)})
				return
			}
			grow = false
			if res.bytes > 0 {
				f.learnRecordSize(res.bytes, res.next-off)
			}
			if !send(fetched{rg: rg, from: off, fp: res.fp, next: res.next, control: res.control}) || res.fp.Err != nil {
				return
			}
			off = res.next
		}
	}
}

// learnRecordSize folds a fetch's bytes per offset into the running
// estimate that sizes indexed fetches. Only the fetcher goroutine uses it.
func (f *fetcher) learnRecordSize(fetched int, offsets int64) {
	if offsets <= 0 {
		return
	}
	per := float64(fetched) / float64(offsets)
	if f.avgRecord <= 0 {
		f.avgRecord = per
		return
	}
	f.avgRecord = 0.7*f.avgRecord + 0.3*per
}

// fetchSize picks a fetch's byte limit. A scan takes as much as allowed.
// An indexed range asks for about what its offsets should weigh, so that
// the broker does not send the batches that follow it (other regions');
// before anything is known, 1 byte returns exactly one batch.
func (f *fetcher) fetchSize(rg index.Range, off int64) int32 {
	limit := int64(f.s.cfg.FetchMaxBytes)
	if rg.Scan {
		return int32(limit)
	}
	if f.avgRecord <= 0 {
		return 1
	}
	est := int64(float64(rg.End-off)*f.avgRecord*1.02) + 1
	return int32(min(max(est, 1), limit))
}

// fetchClient picks a client for a read's i-th concurrent fetch: the
// admin client and the produce lanes' clients each have their own fetch
// connection, which the broker serves in parallel.
func (s *LogStore) fetchClient(i int) *kgo.Client {
	n := len(s.laneClients) + 1
	if k := i % n; k < len(s.laneClients) {
		return s.laneClients[k]
	}
	return s.admin
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
	control []span // offsets of the control batches fetched (see controlSpans)
	bytes   int    // record batch bytes fetched
	retry   error  // a retriable failure: fetch again (after a leader lookup)
	err     error  // a final failure
}

// fetchOnce issues one fetch request at off to the given leader. It touches
// no reader state, so several may run at once.
func (f *fetcher) fetchOnce(ctx context.Context, cl *kgo.Client, leader int32, topicID [16]byte, off int64, maxBytes int32, mode string) fetchResult {
	s := f.s
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = max(maxBytes, 1)
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = f.topic, topicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, off, max(maxBytes, 1)
	p.LogStartOffset, p.CurrentLeaderEpoch = -1, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)

	began := time.Now()
	kresp, err := cl.Broker(int(leader)).Request(ctx, req)
	s.metrics.fetchLatency.Observe(time.Since(began).Seconds())
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
		return fetchResult{fp: fp, next: next, bytes: n, control: controlSpans(rp.RecordBatches)}
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
	for attempt := 0; ; attempt++ {
		res := f.fetchOnce(ctx, f.s.admin, f.leader, f.topicID, off, maxBytes, mode)
		f.stats.fetches++
		f.stats.bytes += int64(res.bytes)
		if res.err != nil {
			return fetchResult{}, res.err
		}
		if res.retry == nil {
			return res, nil
		}
		if err := f.backoff(ctx, off, attempt, res.retry); err != nil {
			return fetchResult{}, err
		}
	}
}

// backoff waits RetryBackoff after a retriable fetch failure and looks the
// leader up again; it fails when ctx ends first.
func (f *fetcher) backoff(ctx context.Context, off int64, attempt int, cause error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", f.topic, off, errors.Join(ctx.Err(), cause))
	}
	f.s.log.Debug("kwal: retrying fetch", "topic", f.topic, "offset", off, "attempt", attempt, "err", cause)
	select {
	case <-ctx.Done():
		return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", f.topic, off, errors.Join(ctx.Err(), cause))
	case <-time.After(f.s.cfg.RetryBackoff):
	}
	if err := f.refreshLeader(ctx); err != nil {
		return fmt.Errorf("%w (after a fetch at offset %d failed: %w)", err, off, cause)
	}
	return nil
}

// outOfRange turns an OFFSET_OUT_OF_RANGE into ErrPruned when the log
// start moved past off (retention or pruning ran during the read).
func (f *fetcher) outOfRange(ctx context.Context, off int64, cause error) error {
	start, _, err := f.s.offsets(ctx, f.topic)
	if err == nil && start > off {
		return errors.Join(&logstore.PrunedError{Namespace: f.topic, Requested: logstore.EntryID(off + 1), FirstAvailable: logstore.EntryID(start + 1)}, cause)
	}
	return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", f.topic, off, cause)
}
