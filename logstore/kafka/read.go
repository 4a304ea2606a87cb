package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// ReadStats counts what one read fetched and yielded. Reads of one
// namespace that run at the same time share fetches (see ReadWith): the
// fetch and record counters are then those of the shared pass, the same
// for every read with the same Pass, and the entry counters the read's own.
type ReadStats struct {
	Fetches      int   // fetch requests
	FetchedBytes int64 // record batch bytes fetched
	Records      int64 // records decoded
	Entries      int64 // entries yielded
	EntryBytes   int64 // data bytes of the entries yielded
	ScanRanges   int   // planned ranges read by scanning
	IndexRanges  int   // planned ranges read through the index

	// Plan is what the fetcher chose: "indexed", "scan", or "scan (cheaper
	// than indexed)" when the cost model priced scanning the indexed plan's
	// span below fetching its ranges.
	Plan string
	// Pass identifies the pass over the log that served the read; Reads
	// is how many reads it served (1: none shared it).
	Pass  uint64
	Reads int
	// MergedGaps counts gaps between planned ranges that were fetched
	// through because streaming them cost less than another fetch.
	MergedGaps int
	// FetchLatency and StreamBytesPerSec are the cost model as the read
	// left it: what a fetch costs beyond its bytes, and how fast a fetch
	// streams. EstIndexed and EstScan are its prices, in connection time,
	// of the indexed plan and of a scan of its span when it chose.
	FetchLatency      time.Duration
	StreamBytesPerSec float64
	EstIndexed        time.Duration
	EstScan           time.Duration
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

// ReadWith is ReadRegions with options.
//
// Reads of one namespace that run at the same time (a datanode opening its
// regions) share one pass over the log: a read joins a running pass when
// the pass has not yet handed over any offset the read needs, and every
// fetched batch then feeds all the reads whose regions it holds. Each read
// keeps its own iterator, its own from points, its own order (a region's
// entries in ID order) and its own cancellation: breaking out of the loop,
// cancelling ctx or closing the store ends it and releases what it holds,
// and the pass goes on for the others. What the pass fetches is shared, and
// so are its failures: a fetch that fails or a record that fails to decode
// ends every read of the pass with that error, as it would end a
// ReadRegions of their regions.
//
// A pass holds at most FetchMaxBytes of fetch limits in flight or waiting
// to be decoded, the response being decoded, and the entries of the two
// responses before it that its slowest read has not taken yet (the pass
// waits for it), plus the regions' unfinished split entries, whatever the
// topic's size or the number of reads.
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
		var st ReadStats
		err := s.read(ctx, namespace, from, opts, yield, &st)
		s.metrics.entriesRead.WithLabelValues(namespace).Add(float64(st.Entries))
		s.metrics.bytesRead.WithLabelValues(namespace).Add(float64(st.EntryBytes))
		if opts.Stats != nil {
			*opts.Stats = st
		}
		if err != nil && !errors.Is(err, errStop) {
			if s.readCtx.Err() != nil && errors.Is(err, context.Canceled) {
				err = fmt.Errorf("kwal: read %q: %w", namespace, logstore.ErrClosed)
			}
			yield(logstore.Entry{}, err)
		}
	}
}

// read is one read: its own bounds, ErrPruned check and plan, then the
// entries of a pass it joins or starts.
func (s *LogStore) read(ctx context.Context, topic string, from map[logstore.RegionID]logstore.EntryID, opts ReadOptions, yield func(logstore.Entry, error) bool, st *ReadStats) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	if len(from) == 0 {
		return nil
	}
	start, end, err := s.bounds(ctx, topic)
	if err != nil {
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		return err
	}
	offs := make(map[uint64]int64, len(from))
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
		offs[uint64(region)] = off
		lo = min(lo, off)
	}
	if len(below) > 0 {
		// Only a deleted entry of the region itself fails the read
		// (pruned.go).
		if err := s.proveNothingPruned(ctx, topic, below, start, end); err != nil {
			return err
		}
	}
	if lo >= end {
		return nil
	}
	var plan index.Plan
	if s.index != nil && !opts.NoIndex {
		s.startIndexForRead(topic, start, end)
		plan = s.index.Plan(topic, offs, end)
	} else {
		plan = index.Plan{Ranges: []index.Range{{Start: lo, End: end, Scan: true}}}
	}
	for _, rg := range plan.Ranges {
		if rg.Scan {
			st.ScanRanges++
		} else {
			st.IndexRanges++
		}
	}
	if len(plan.Ranges) == 0 {
		return nil
	}
	sb := &sub{from: offs, out: make(chan []logstore.Entry, 1), gone: make(chan struct{})}
	p, err := s.joinOrStart(topic, opts.NoIndex, end, sb, plan.Ranges)
	if err != nil {
		return err
	}
	return sb.consume(ctx, p, yield, st)
}

// flushMetrics adds the pass's per-record counts to the metrics.
func (r *reader) flushMetrics() {
	m := r.s.metrics
	m.skipped.WithLabelValues("other_region").Add(float64(r.otherRegion))
	m.skipped.WithLabelValues("before_start").Add(float64(r.beforeStart))
}

// errStop ends a read whose caller broke out of the loop.
var errStop = errors.New("kwal: read stopped by its caller")

// reader is a pass's decoding loop: it takes the fetcher's responses in
// offset order, decodes their records, reassembles entries and yields them
// in ID order to the router, which hands each to the reads of its region.
// It runs in its own goroutine and shares no state with the fetcher.
type reader struct {
	s     *LogStore
	topic string
	end   int64 // the log end the pass reads to
	asm   *record.Assembler
	yield func(logstore.Entry, error) bool
	route *router

	from  map[uint64]int64 // first offset wanted, per region (the lowest of its reads')
	stats ReadStats

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

// decode runs the pass's decoding loop over ch until it closes or fails,
// then yields what it holds.
func (r *reader) decode(ctx context.Context, ch <-chan fetched) error {
	if err := r.consume(ctx, ch); err != nil {
		// The entries before the failure are the reads' as they would be
		// without sharing; then the failure.
		if ferr := r.route.flush(ctx); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	if err := r.release(true); err != nil {
		return err
	}
	if err := r.route.flush(ctx); err != nil {
		return err
	}
	for _, d := range r.asm.Open() {
		r.s.metrics.skipped.WithLabelValues("incomplete").Inc()
		r.s.log.Info("kwal: entry not complete at the end of the read; not yielded",
			"topic", r.topic, "region", d.Region, "first_offset", d.First, "last_offset", d.Last, "read_end", r.end)
	}
	return nil
}

// maxScanRuns bounds the runs a scan accumulates for the index before it
// hands them over (about 2 MiB): a scan that reaches the index's accounted
// span from below lets the index account for all of it at once.
const maxScanRuns = 1 << 16

// consume decodes the fetcher's messages in order: responses (whose
// entries go to the router, handed over after each response) and joining
// reads.
func (r *reader) consume(ctx context.Context, ch <-chan fetched) error {

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
		if f.join != nil {
			r.route.add(f.join, r.from)
			continue
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
		if err := r.route.flush(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
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
