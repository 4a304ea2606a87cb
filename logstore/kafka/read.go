package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// ReadOptions tune one read (an extension of the logstore contract).
type ReadOptions struct {
	// NoIndex scans the whole range instead of fetching only the regions'
	// indexed offsets.
	NoIndex bool
	// Stats, when set, receives the read's counters when it ends.
	Stats *ReadStats
}

// ReadStats counts what one read fetched and yielded.
type ReadStats struct {
	Fetches      int   // fetch requests
	FetchedBytes int64 // record batch bytes fetched
	Records      int64 // records decoded
	Entries      int64 // entries yielded
	EntryBytes   int64 // data bytes of the entries yielded
	ScanRanges   int   // planned ranges read by scanning
	IndexRanges  int   // planned ranges read through the index
}

// Read yields the region's entries with ID >= from, in log order, up to the
// log's end when the read started. See logstore.LogStore.
func (s *LogStore) Read(ctx context.Context, namespace string, region logstore.RegionID, from logstore.EntryID) iter.Seq2[logstore.Entry, error] {
	return s.ReadWith(ctx, namespace, map[logstore.RegionID]logstore.EntryID{region: from}, ReadOptions{})
}

// ReadRegions replays several regions of one namespace in one pass, each
// from its own start, in log order.
func (s *LogStore) ReadRegions(ctx context.Context, namespace string, from map[logstore.RegionID]logstore.EntryID) iter.Seq2[logstore.Entry, error] {
	return s.ReadWith(ctx, namespace, from, ReadOptions{})
}

// ReadWith is ReadRegions with options. The read holds at most one fetch
// response (<= FetchMaxBytes) plus the regions' unfinished split entries in
// memory, whatever the topic's size. Breaking out of the loop, cancelling
// ctx or closing the store ends it and releases everything it holds.
func (s *LogStore) ReadWith(ctx context.Context, namespace string, from map[logstore.RegionID]logstore.EntryID, opts ReadOptions) iter.Seq2[logstore.Entry, error] {
	return func(yield func(logstore.Entry, error) bool) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			yield(logstore.Entry{}, fmt.Errorf("kwal: read %q: %w", namespace, logstore.ErrClosed))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.readCtx, cancel)()
		r := &reader{s: s, topic: namespace, opts: opts, asm: record.NewAssembler(), yield: yield}
		err := r.run(ctx, from)
		r.flushMetrics()
		if opts.Stats != nil {
			*opts.Stats = r.stats
		}
		if err != nil && !errors.Is(err, errStop) {
			if s.readCtx.Err() != nil && ctx.Err() != nil {
				err = fmt.Errorf("kwal: read %q: %w", namespace, logstore.ErrClosed)
			}
			yield(logstore.Entry{}, err)
		}
	}
}

// flushMetrics adds the read's per-record counts to the metrics.
func (r *reader) flushMetrics() {
	m := r.s.metrics
	m.skipped.WithLabelValues("other_region").Add(float64(r.otherRegion))
	m.skipped.WithLabelValues("before_start").Add(float64(r.beforeStart))
	m.entriesRead.WithLabelValues(r.topic).Add(float64(r.stats.Entries))
	m.bytesRead.WithLabelValues(r.topic).Add(float64(r.stats.EntryBytes))
}

// errStop ends a read whose caller broke out of the loop.
var errStop = errors.New("kwal: read stopped by its caller")

type reader struct {
	s     *LogStore
	topic string
	opts  ReadOptions
	asm   *record.Assembler
	yield func(logstore.Entry, error) bool

	from        map[uint64]int64 // first offset wanted, per region
	leaderStale bool
	leader      int32
	topicID     [16]byte

	avgRecord float64 // fetched bytes per offset so far, to size indexed fetches
	stats     ReadStats

	// foreignOK accounts records that are not kwal's as holding no entry
	// instead of failing (Prune's catch-up scan; pruned.go).
	foreignOK bool

	// Per-record counters, added to the metrics when the read ends.
	otherRegion, beforeStart int

	// held are completed entries that began after an entry still open (a
	// split entry whose parts other writers' records interleave): they
	// wait so that entries are yielded in ID order. Sorted by ID.
	held []logstore.Entry
}

func (r *reader) run(ctx context.Context, from map[logstore.RegionID]logstore.EntryID) error {
	s := r.s
	if err := validateTopic(r.topic); err != nil {
		return err
	}
	if len(from) == 0 {
		return nil
	}
	if err := r.refreshLeader(ctx); err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	start, end, err := s.offsets(octx, r.topic)
	cancel()
	if err != nil {
		return err
	}
	r.from = make(map[uint64]int64, len(from))
	lo := end
	var below []regionFrom // regions asking for offsets below the log start
	for region, id := range from {
		off := int64(0)
		if id > 0 {
			off = int64(id) - 1
		}
		if off < start {
			below = append(below, regionFrom{region: region, id: id})
			off = start
		}
		r.from[uint64(region)] = off
		lo = min(lo, off)
	}
	if len(below) > 0 {
		// Only an entry of the region itself that was deleted fails the
		// read (pruned.go).
		if err := r.proveNothingPruned(ctx, below, start, end); err != nil {
			return err
		}
	}
	if lo >= end {
		return nil
	}
	var plan index.Plan
	if s.index != nil && !r.opts.NoIndex {
		s.startIndexForRead(r.topic, start, end)
		plan = s.index.Plan(r.topic, r.from, end)
	} else {
		plan = index.Plan{Ranges: []index.Range{{Start: lo, End: end, Scan: true}}}
	}
	for _, rg := range plan.Ranges {
		if rg.Scan {
			r.stats.ScanRanges++
		} else {
			r.stats.IndexRanges++
		}
	}
	if err := r.consume(ctx, plan.Ranges); err != nil {
		return err
	}
	if err := r.release(true); err != nil {
		return err
	}
	for _, d := range r.asm.Open() {
		s.metrics.skipped.WithLabelValues("incomplete").Inc()
		s.log.Info("kwal: entry not complete at the end of the read; not yielded",
			"topic", r.topic, "region", d.Region, "first_offset", d.First, "last_offset", d.Last, "read_end", end)
	}
	return nil
}

// maxScanRuns bounds the runs a scan accumulates for the index before it
// hands them over (about 2 MiB): a scan that reaches the index's accounted
// span from below lets the index account for all of it at once.
const maxScanRuns = 1 << 16

// fetched is one fetch response handed from the fetcher to the reader.
type fetched struct {
	rg   index.Range
	from int64 // the offset fetched at
	fp   kgo.FetchPartition
	next int64 // the offset after the last record processed
	err  error
}

// consume reads the planned ranges. A fetcher goroutine walks the plan one
// fetch ahead of the reader, so the next response is on its way while the
// current one is decoded and yielded: the read holds at most two fetch
// responses (2 x FetchMaxBytes). The goroutine ends before consume
// returns, whatever the reason.
func (r *reader) consume(ctx context.Context, ranges []index.Range) error {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan fetched)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		r.fetchAll(ctx, ranges, ch)
	}()
	defer func() {
		cancel()
		for range ch { // let the fetcher finish a send in progress
		}
		<-done
	}()

	var runs []index.Run // a scan's runs since accFrom, covering [accFrom, off)
	var rg index.Range
	var off, accFrom int64
	report := func() {
		if rg.Scan && off > accFrom && r.s.index != nil {
			r.s.index.ObserveScan(r.topic, accFrom, off, runs)
		}
		runs, accFrom = runs[:0], off
	}
	defer report()
	for f := range ch {
		if f.err != nil {
			return f.err
		}
		if f.rg != rg || f.from < off {
			report()
			rg, off, accFrom = f.rg, f.rg.Start, f.rg.Start
		}
		for _, rec := range f.fp.Records {
			if rec.Offset < off {
				continue
			}
			if rec.Offset >= rg.End {
				break
			}
			if rg.Scan && rec.Offset > off {
				runs = index.AppendRun(runs, index.Run{Start: off, Count: rec.Offset - off, Foreign: true})
			}
			region, kwal, err := r.handle(rec)
			if rg.Scan {
				runs = index.AppendRun(runs, index.Run{Start: rec.Offset, Count: 1, Region: region, Foreign: !kwal})
			}
			off = rec.Offset + 1
			if err != nil {
				return err
			}
		}
		if f.fp.Err != nil {
			return &logstore.CorruptError{Namespace: r.topic, Offset: f.next, Err: f.fp.Err}
		}
		// Offsets up to next that returned no record (transaction markers,
		// compacted records) hold no entry.
		if end := min(f.next, rg.End); end > off {
			if rg.Scan {
				runs = index.AppendRun(runs, index.Run{Start: off, Count: end - off, Foreign: true})
			}
			off = end
		}
		if len(runs) >= maxScanRuns {
			report()
		}
	}
	return ctx.Err()
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
func (r *reader) fetchAll(ctx context.Context, ranges []index.Range, ch chan<- fetched) {
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	send := func(f fetched) bool {
		select {
		case ch <- f:
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
			mb := r.fetchSize(rg, rg.Start)
			if len(window) > 0 && windowBytes+int64(mb) > int64(r.s.cfg.FetchMaxBytes) {
				return
			}
			pf := &prefetch{rg: rg, maxBytes: mb, done: make(chan fetchResult, 1)}
			leader, id := r.leader, r.topicID
			cl := r.s.fetchClient(nextRange)
			running.Add(1)
			go func() {
				defer running.Done()
				fctx, fcancel := context.WithTimeout(ctx, r.s.cfg.RequestTimeout)
				defer fcancel()
				pf.done <- r.fetchOnce(fctx, cl, leader, id, rg.Start, mb, "indexed")
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
			r.stats.Fetches++
			r.stats.FetchedBytes += int64(res.bytes)
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
				maxBytes = r.fetchSize(rg, off)
				if grow {
					maxBytes = r.s.cfg.FetchMaxBytes
				}
				var err error
				if res, err = r.fetch(ctx, off, maxBytes, mode); err != nil {
					send(fetched{err: err})
					return
				}
			}
			first = nil
			if res.fp.Err == nil && res.next <= off {
				if maxBytes < r.s.cfg.FetchMaxBytes {
					grow = true
					continue
				}
				send(fetched{err: fmt.Errorf("kwal: read %q: fetch at offset %d returned no complete record (%d bytes)", r.topic, off, res.bytes)})
				return
			}
			grow = false
			if res.bytes > 0 {
				r.learnRecordSize(res.bytes, res.next-off)
			}
			if !send(fetched{rg: rg, from: off, fp: res.fp, next: res.next}) || res.fp.Err != nil {
				return
			}
			off = res.next
		}
	}
}

// learnRecordSize folds a fetch's bytes per offset into the running
// estimate that sizes indexed fetches. Only the fetcher goroutine uses it.
func (r *reader) learnRecordSize(fetched int, offsets int64) {
	if offsets <= 0 {
		return
	}
	per := float64(fetched) / float64(offsets)
	if r.avgRecord <= 0 {
		r.avgRecord = per
		return
	}
	r.avgRecord = 0.7*r.avgRecord + 0.3*per
}

// fetchSize picks a fetch's byte limit. A scan takes as much as allowed.
// An indexed range asks for about what its offsets should weigh, so that
// the broker does not send the batches that follow it (other regions');
// before anything is known, 1 byte returns exactly one batch.
func (r *reader) fetchSize(rg index.Range, off int64) int32 {
	limit := int64(r.s.cfg.FetchMaxBytes)
	if rg.Scan {
		return int32(limit)
	}
	if r.avgRecord <= 0 {
		return 1
	}
	est := int64(float64(rg.End-off)*r.avgRecord*1.02) + 1
	return int32(min(max(est, 1), limit))
}

// handle decodes one record and feeds the assembler. It reports the
// record's region, whether it is kwal's, and a read-ending error.
func (r *reader) handle(rec *kgo.Record) (uint64, bool, error) {
	s := r.s
	r.stats.Records++
	p, err := record.Decode(rec.Key, rec.Value)
	if err == nil && p.Kind == record.KindMark {
		r.noteMark(rec.Offset, p)
		return 0, false, nil // holds no entry
	}
	if err != nil {
		kind := "corrupt"
		if errors.Is(err, record.ErrNotKwal) {
			kind = "foreign"
		}
		if r.foreignOK && kind == "foreign" {
			return 0, false, nil // holds no entry of kwal's
		}
		if !s.cfg.SkipCorrupt {
			return 0, false, &logstore.CorruptError{Namespace: r.topic, Offset: rec.Offset, Err: err}
		}
		s.metrics.skipped.WithLabelValues(kind).Inc()
		s.log.Warn("kwal: skipping a record that is not a valid kwal record", "topic", r.topic, "offset", rec.Offset, "kind", kind, "err", err)
		return 0, false, nil
	}
	from, ok := r.from[p.Region]
	if !ok {
		r.otherRegion++ // counted once per read: this runs for every record
		return p.Region, true, nil
	}
	if rec.Offset < from {
		r.beforeStart++
		return p.Region, true, nil
	}
	st, err := r.asm.Add(rec.Offset, p)
	if st.Dropped {
		s.metrics.skipped.WithLabelValues(st.Drop.Reason.String()).Inc()
		if st.Drop.Reason == record.DropIncomplete {
			s.log.Warn("kwal: dropping an incomplete entry (its writer failed midway)", "topic", r.topic,
				"region", st.Drop.Region, "first_offset", st.Drop.First, "last_offset", st.Drop.Last)
		}
	}
	if err != nil {
		if !s.cfg.SkipCorrupt {
			return p.Region, true, &logstore.CorruptError{Namespace: r.topic, Offset: rec.Offset, Err: err}
		}
		s.metrics.skipped.WithLabelValues("corrupt").Inc()
		s.log.Warn("kwal: skipping an entry that fails its checksum", "topic", r.topic, "offset", rec.Offset, "err", err)
		return p.Region, true, nil
	}
	if st.Complete {
		e := logstore.Entry{Namespace: r.topic, Region: logstore.RegionID(st.Entry.Region), ID: logstore.EntryID(st.Entry.First + 1), Data: st.Entry.Data}
		i, _ := slices.BinarySearchFunc(r.held, e.ID, func(h logstore.Entry, id logstore.EntryID) int { return cmp.Compare(h.ID, id) })
		r.held = slices.Insert(r.held, i, e)
	}
	if st.Complete || st.Dropped {
		if err := r.release(false); err != nil {
			return p.Region, true, err
		}
	}
	return p.Region, true, nil
}

// release yields the held entries that no open entry precedes (all of
// them at the end of the read).
func (r *reader) release(all bool) error {
	limit, open := r.asm.MinOpenFirst()
	n := 0
	for _, e := range r.held {
		if !all && open && int64(e.ID)-1 > limit {
			break
		}
		n++
		r.stats.Entries++
		r.stats.EntryBytes += int64(len(e.Data))
		if !r.yield(e, nil) {
			return errStop
		}
	}
	clear(r.held[:n])
	r.held = r.held[n:]
	return nil
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

// startIndexForRead lets the index check its coverage against the log's
// bounds (a topic recreated while this process was down has an end below
// the persisted watermark). Only while the topic has no producer: a
// producer's acknowledgements could be newer than end, and its creation
// made the same check with a fresh end. The store lock keeps a producer
// from being created in between.
func (s *LogStore) startIndexForRead(topic string, start, end int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.producers[topic]; ok {
		return
	}
	s.index.Start(topic, start, end)
}

// refreshLeader looks up partition 0's leader and the topic's ID, from
// the store's cache unless a fetch found it stale.
func (r *reader) refreshLeader(ctx context.Context) error {
	m, err := r.s.topicMeta(ctx, r.topic, r.leaderStale)
	if err != nil {
		return fmt.Errorf("kwal: read %q: %w", r.topic, err)
	}
	r.leader, r.topicID = m.leader, m.id
	r.leaderStale = true // a second lookup in this read goes to the broker
	return nil
}

// fetchResult is one fetch request's outcome.
type fetchResult struct {
	fp    kgo.FetchPartition
	next  int64
	bytes int   // record batch bytes fetched
	retry error // a retriable failure: fetch again (after a leader lookup)
	err   error // a final failure
}

// fetchOnce issues one fetch request at off to the given leader. It touches
// no reader state, so several may run at once.
func (r *reader) fetchOnce(ctx context.Context, cl *kgo.Client, leader int32, topicID [16]byte, off int64, maxBytes int32, mode string) fetchResult {
	s := r.s
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = max(maxBytes, 1)
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = r.topic, topicID
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
		return fetchResult{err: fmt.Errorf("kwal: read %q: fetch at offset %d: malformed response", r.topic, off)}
	}
	rp := &resp.Topics[0].Partitions[0]
	perr := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case perr == nil:
		n := len(rp.RecordBatches)
		s.metrics.fetchedBytes.WithLabelValues(r.topic, mode).Add(float64(n))
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: off, Topic: r.topic, Partition: partition,
		}, rp, kgo.DefaultDecompressor(), nil)
		return fetchResult{fp: fp, next: next, bytes: n}
	case errors.Is(perr, kerr.OffsetOutOfRange):
		return fetchResult{err: r.outOfRange(ctx, off, perr)}
	case errors.Is(perr, kerr.UnknownTopicOrPartition), errors.Is(perr, kerr.UnknownTopicID):
		// Perhaps a cached topic ID went stale; the metadata lookup before
		// the retry tells a deleted topic apart.
		s.forgetMeta(r.topic)
		return fetchResult{retry: perr}
	case kerr.IsRetriable(perr):
		return fetchResult{retry: perr}
	default:
		return fetchResult{err: fmt.Errorf("kwal: read %q: fetch at offset %d: %w", r.topic, off, perr)}
	}
}

// fetch issues fetch requests at off until one succeeds, fails for good, or
// RequestTimeout passes, looking the leader up again between attempts. Only
// the fetcher goroutine calls it.
func (r *reader) fetch(ctx context.Context, off int64, maxBytes int32, mode string) (fetchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.cfg.RequestTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		res := r.fetchOnce(ctx, r.s.admin, r.leader, r.topicID, off, maxBytes, mode)
		r.stats.Fetches++
		r.stats.FetchedBytes += int64(res.bytes)
		if res.err != nil {
			return fetchResult{}, res.err
		}
		if res.retry == nil {
			return res, nil
		}
		if err := r.backoff(ctx, off, attempt, res.retry); err != nil {
			return fetchResult{}, err
		}
	}
}

// backoff waits RetryBackoff after a retriable fetch failure and looks the
// leader up again; it fails when ctx ends first.
func (r *reader) backoff(ctx context.Context, off int64, attempt int, cause error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", r.topic, off, errors.Join(ctx.Err(), cause))
	}
	r.s.log.Debug("kwal: retrying fetch", "topic", r.topic, "offset", off, "attempt", attempt, "err", cause)
	select {
	case <-ctx.Done():
		return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", r.topic, off, errors.Join(ctx.Err(), cause))
	case <-time.After(r.s.cfg.RetryBackoff):
	}
	if err := r.refreshLeader(ctx); err != nil {
		return fmt.Errorf("%w (after a fetch at offset %d failed: %w)", err, off, cause)
	}
	return nil
}

// outOfRange turns an OFFSET_OUT_OF_RANGE into ErrPruned when the log
// start moved past off (retention or pruning ran during the read).
func (r *reader) outOfRange(ctx context.Context, off int64, cause error) error {
	start, _, err := r.s.offsets(ctx, r.topic)
	if err == nil && start > off {
		return errors.Join(&logstore.PrunedError{Namespace: r.topic, Requested: logstore.EntryID(off + 1), FirstAvailable: logstore.EntryID(start + 1)}, cause)
	}
	return fmt.Errorf("kwal: read %q: fetch at offset %d: %w", r.topic, off, cause)
}
