package kafka

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

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

// ReadStats counts what one read fetched and yielded.
type ReadStats struct {
	Fetches      int   // fetch requests
	FetchedBytes int64 // record batch bytes fetched
	Records      int64 // records decoded
	Entries      int64 // entries yielded
	EntryBytes   int64 // data bytes of the entries yielded
	ScanRanges   int   // planned ranges read by scanning
	IndexRanges  int   // planned ranges read through the index
	// Missing counts offsets found missing from the log (skipped with
	// SkipCorrupt; without it the read fails with a MissingError).
	Missing int64
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

// ReadWith is ReadRegions with options. The read holds at most
// Config.ReadMemoryBound bytes (its fetch pipeline, and the entries not yet
// yielded up to ReadHoldBytes), whatever the topic's size. Breaking out of
// the loop, cancelling ctx or closing the store ends it and releases
// everything it holds.
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
		// No entry is yielded once ctx ended (Close, or the caller's ctx),
		// even from a response already fetched.
		var cut error
		guarded := func(e logstore.Entry, err error) bool {
			if err == nil {
				if cut = ctx.Err(); cut != nil {
					return false
				}
			}
			return yield(e, err)
		}
		r := &reader{s: s, topic: namespace, opts: opts, asm: record.NewAssembler(), yield: guarded}
		err := r.run(ctx, from)
		if errors.Is(err, errStop) && cut != nil {
			err = fmt.Errorf("kwal: read %q: %w", namespace, cut)
		}
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

// ErrHoldExceeded is matched by read errors for an entry that the read gave
// up as incomplete when it held Config.ReadHoldBytes of entries, and whose
// later part then turned up: the entry is longer, or more interleaved, than
// the bound allows. Raise ReadHoldBytes to read it.
var ErrHoldExceeded = errors.New("kwal: entry longer than a read may hold (Config.ReadHoldBytes)")

// reader is a read's decoding loop: it takes the fetcher's responses in
// plan order, decodes their records, reassembles entries and yields them in
// ID order. It runs in the caller's goroutine (the one that yields) and
// shares no state with the fetcher.
type reader struct {
	s     *LogStore
	topic string
	opts  ReadOptions
	asm   *record.Assembler
	yield func(logstore.Entry, error) bool

	gen   uint64           // the topic's index generation when the read started (see indexGate)
	from  map[uint64]int64 // first offset wanted, per region
	stats ReadStats

	// Per-record counters, added to the metrics when the read ends.
	otherRegion, beforeStart int

	// held are completed entries that began after an entry still open (a
	// split entry whose parts other writers' records interleave): they
	// wait so that entries are yielded in ID order. Sorted by ID. heldBytes
	// is their data; with the open entries' data it stays within
	// Config.ReadHoldBytes (see hold).
	held      []logstore.Entry
	heldBytes int64
}

func (r *reader) run(ctx context.Context, from map[logstore.RegionID]logstore.EntryID) error {
	s := r.s
	if err := validateTopic(r.topic); err != nil {
		return err
	}
	if len(from) == 0 {
		return nil
	}
	r.gen = s.gate.generation(r.topic)
	f := &fetcher{s: s, topic: r.topic}
	if err := f.refreshLeader(ctx); err != nil {
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
	for region, id := range from {
		off := int64(0)
		if id > 0 {
			off = int64(id) - 1
		}
		if off < start {
			return &logstore.PrunedError{Namespace: r.topic, Requested: id, FirstAvailable: logstore.EntryID(start + 1)}
		}
		r.from[uint64(region)] = off
		lo = min(lo, off)
	}
	// lostErr reports records of the read's regions that the index knew
	// of past the log's end: the read yields what the log still has, then
	// fails with it. Checked first, so that a read from past the log's end
	// fails too.
	var lostErr error
	if s.index != nil {
		if w, lost := s.startIndexForRead(r.topic, r.gen, start, end); lost {
			lostErr = r.lostTail(end, w)
		}
	}
	if lo >= end {
		return lostErr
	}
	var plan index.Plan
	if s.index != nil && !r.opts.NoIndex {
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
	if err := r.consume(ctx, f, plan.Ranges); err != nil {
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
	return lostErr
}

// maxScanRuns bounds the runs a scan accumulates for the index before it
// hands them over (about 2 MiB): a scan that reaches the index's accounted
// span from below lets the index account for all of it at once.
const maxScanRuns = 1 << 16

// consume reads the planned ranges. A fetcher goroutine walks the plan one
// fetch ahead of the reader, so the next response is on its way while the
// current one is decoded and yielded (Config.ReadMemoryBound counts what
// that pipeline holds). The goroutine ends before consume returns,
// whatever the reason.
func (r *reader) consume(ctx context.Context, fe *fetcher, ranges []index.Range) error {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan fetched)
	done := make(chan struct{})
	if !r.s.goRead(func() {
		defer close(done)
		defer close(ch)
		fe.fetchAll(ctx, ranges, ch)
	}) {
		cancel()
		return fmt.Errorf("kwal: read %q: %w", r.topic, logstore.ErrClosed)
	}
	defer func() {
		cancel()
		for range ch { // let the fetcher finish a send in progress
		}
		<-done
		r.stats.Fetches += fe.stats.fetches // the fetcher has ended: its counters are final
		r.stats.FetchedBytes += fe.stats.bytes
	}()

	var runs []index.Run // a scan's runs since accFrom, covering [accFrom, off)
	var rg index.Range
	var off, accFrom int64
	report := func() {
		if rg.Scan && off > accFrom && r.s.index != nil {
			r.s.gate.update(r.topic, r.gen, func() { r.s.index.ObserveScan(r.topic, accFrom, off, runs) })
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
			if rec.Offset > off {
				if err := r.gap(off, rec.Offset, f.control); err != nil {
					return err
				}
				if rg.Scan {
					runs = index.AppendRun(runs, index.Run{Start: off, Count: rec.Offset - off, Foreign: true})
				}
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
		// Offsets up to next that returned no record must be transaction
		// markers (see gap).
		if end := min(f.next, rg.End); end > off {
			if err := r.gap(off, end, f.control); err != nil {
				return err
			}
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

// handle decodes one record and feeds the assembler. It reports the
// record's region, whether it is kwal's, and a read-ending error.
func (r *reader) handle(rec *kgo.Record) (uint64, bool, error) {
	s := r.s
	r.stats.Records++
	p, err := record.Decode(rec.Key, rec.Value)
	if err != nil {
		kind := "corrupt"
		if errors.Is(err, record.ErrNotKwal) {
			kind = "foreign"
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
	if errors.Is(err, record.ErrCutShort) {
		return p.Region, true, fmt.Errorf("kwal: read %q: %w (now %d bytes): %w", r.topic, ErrHoldExceeded, s.cfg.ReadHoldBytes, err)
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
		if lo, open := r.asm.MinOpenFirst(); open && st.Entry.First > lo && st.Entry.First == st.Entry.Last {
			// A whole record's data points into its fetch response: held,
			// it would pin the response; a copy holds only its own bytes.
			e.Data = bytes.Clone(e.Data)
		}
		i, _ := slices.BinarySearchFunc(r.held, e.ID, func(h logstore.Entry, id logstore.EntryID) int { return cmp.Compare(h.ID, id) })
		r.held = slices.Insert(r.held, i, e)
		r.heldBytes += int64(len(e.Data))
	}
	if st.Complete || st.Dropped {
		if err := r.release(false); err != nil {
			return p.Region, true, err
		}
	}
	if err := r.hold(rec.Offset); err != nil {
		return p.Region, true, err
	}
	return p.Region, true, nil
}

// hold keeps the read's held entries and open entries within
// Config.ReadHoldBytes: while they hold more, the oldest open entry is
// given up as incomplete (the parts of an entry travel in one group, so
// one still open this far past its first part was cut short by its
// writer) and the entries that waited behind it are yielded. If a later
// part of it turns up after all, the assembler fails the read (see
// ErrHoldExceeded): the bound never loses an entry silently.
func (r *reader) hold(at int64) error {
	s := r.s
	for r.heldBytes+r.asm.OpenBytes() > s.cfg.ReadHoldBytes {
		d, ok := r.asm.Cut()
		if !ok {
			return nil
		}
		s.metrics.skipped.WithLabelValues(record.DropIncomplete.String()).Inc()
		s.log.Warn("kwal: giving up an entry still open after the read held ReadHoldBytes; its writer failed midway", "topic", r.topic,
			"region", d.Region, "first_offset", d.First, "last_offset", d.Last, "at_offset", at, "read_hold_bytes", s.cfg.ReadHoldBytes)
		if err := r.release(false); err != nil {
			return err
		}
	}
	return nil
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
		r.heldBytes -= int64(len(e.Data))
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

// startIndexForRead lets the index learn the log's bounds (a log start
// raised by retention), unless the topic was dropped since the read began
// (see indexGate). Only while the topic has no producer: a producer's
// acknowledgements could be newer than end, and its creation made the same
// check with a fresh end. The store lock keeps a producer from being
// created in between.
//
// When the log ends below the index's watermark w, records the index knew
// of are gone from the log: it returns w and true, and leaves the index as
// it is, so that every read of an affected region fails (see lostTail)
// rather than only the first (Start would discard the coverage, and with
// it the knowledge). A producer's Start discards it: new records reuse the
// lost offsets.
func (s *LogStore) startIndexForRead(topic string, gen uint64, start, end int64) (w int64, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.producers[topic]; ok {
		return 0, false
	}
	if g, ok := s.index.(watermarker); ok {
		if w, covered := g.Watermark(topic); covered && w > end {
			return w, true
		}
	}
	s.gate.update(topic, gen, func() { s.index.Start(topic, start, end) })
	return 0, false
}

// watermarker is what startIndexForRead needs from the index;
// *index.Global has it.
type watermarker interface {
	Watermark(topic string) (int64, bool)
}
