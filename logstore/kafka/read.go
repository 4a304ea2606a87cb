package kafka

import (
	"bytes"
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
	// Missing counts offsets found missing from the log (skipped with
	// SkipCorrupt; without it the read fails with a MissingError).
	Missing int64

	// Plan says how the pass read its plan: "indexed" (every planned range
	// fetched on its own), "scan", "scan (cheaper than indexed)" when the
	// cost model priced reading the plan's whole span below the
	// alternatives, or "mixed (dense stretches scanned)" when it read some
	// stretches of the plan whole and fetched the ranges elsewhere (see
	// Stretches).
	Plan string
	// Stretches counts the stretches of several planned ranges that were
	// read whole (the gaps of other regions' records between them
	// included), and StretchExtra the offsets they read beyond the planned
	// ranges.
	Stretches    int
	StretchExtra int64
	// Pass identifies the pass over the log that served the read; Reads
	// is how many reads it served (1: none shared it).
	Pass  uint64
	Reads int
	// MergedGaps counts gaps between planned ranges that were fetched
	// through (inside Stretches) because that cost less than fetching the
	// ranges alone.
	MergedGaps int
	// FetchLatency and StreamBytesPerSec are the cost model as the read
	// left it: what a fetch costs beyond its bytes, and how fast a fetch
	// streams. EstIndexed and EstScan are its prices, in connection time,
	// of the indexed plan (every range fetched on its own) and of a scan
	// of its span, and EstPlan of the cut it chose, when it last cut the
	// plan left.
	FetchLatency      time.Duration
	StreamBytesPerSec float64
	EstIndexed        time.Duration
	EstScan           time.Duration
	EstPlan           time.Duration
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
// A pass holds at most Config.ReadMemoryBound bytes, whatever the topic's
// size or the number of reads: FetchMaxBytes of fetch limits in flight or
// waiting to be decoded, the response being decoded, and the entries of
// the two responses before it that its slowest read has not taken yet (the
// pass waits for it; they point into those responses), plus up to
// ReadHoldBytes of entries not yet yielded (unfinished split entries and
// those waiting behind one). Two reads of one region get copies of its
// entries.
func (s *LogStore) ReadWith(ctx context.Context, namespace string, from map[logstore.RegionID]logstore.EntryID, opts ReadOptions) iter.Seq2[logstore.Entry, error] {
	return func(yield func(logstore.Entry, error) bool) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			yield(logstore.Entry{}, fmt.Errorf("kwal: read %q: %w", namespace, logstore.ErrClosed))
			return
		}
		if err := validateTopic(namespace); err != nil {
			yield(logstore.Entry{}, err)
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
	gen := s.gate.generation(topic)
	start, end, pl, err := s.bounds(ctx, topic)
	if err != nil {
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		return err
	}
	// Every way out before joining a pass releases the read's cohort.
	defer pl.placed()
	offs := make(map[uint64]int64, len(from))
	lo := end
	var below []regionFrom // regions asking for offsets below the log start
	for region, id := range from {
		if id > logstore.EntryID(end)+1 {
			// Every ID a caller learned from this log is at most its end:
			// one above it means the log lost entries (a recreated or
			// truncated topic), or the ID is not this log's.
			return fmt.Errorf("kwal: read %q region %d from ID %d: the namespace's latest entry ID is %d: %w", topic, region, id, end, ErrFutureID)
		}
		off := fromOffset(id)
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
		if err := s.proveNothingPruned(ctx, topic, gen, below, start, end); err != nil {
			return err
		}
	}
	// lostErr reports records of the read's regions that the index knew
	// of past the log's end: the read yields what the log still has, then
	// fails with it. Checked before the early return, so that a read from
	// past the log's end fails too.
	var lostErr error
	if s.index != nil {
		if w, lost := s.startIndexForRead(topic, gen, start, end); lost {
			lostErr = s.lostTail(topic, offs, end, w, st)
		}
	}
	if lo >= end {
		return lostErr
	}
	var plan index.Plan
	if s.index != nil && !opts.NoIndex {
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
		return lostErr
	}
	sb := &sub{from: offs, out: make(chan []logstore.Entry, 1), gone: make(chan struct{})}
	p, err := s.joinOrStart(topic, opts.NoIndex, end, sb, plan.Ranges, pl)
	if err != nil {
		return err
	}
	if err := sb.consume(ctx, p, yield, st); err != nil {
		return err
	}
	return lostErr
}

// flushMetrics adds the pass's per-record counts to the metrics.
func (r *reader) flushMetrics() {
	m := r.s.metrics
	m.skipped.WithLabelValues("other_region").Add(float64(r.otherRegion))
	m.skipped.WithLabelValues("before_start").Add(float64(r.beforeStart))
}

// errStop ends a read whose caller broke out of the loop.
var errStop = errors.New("kwal: read stopped by its caller")

// ErrHoldExceeded is matched by read errors for an entry that the read gave
// up as incomplete when it held Config.ReadHoldBytes of entries, and whose
// later part then turned up: the entry is longer, or more interleaved, than
// the bound allows. Raise ReadHoldBytes to read it.
var ErrHoldExceeded = errors.New("kwal: entry longer than a read may hold (Config.ReadHoldBytes)")

// reader is a pass's decoding loop: it takes the fetcher's responses in
// offset order, decodes their records, reassembles entries and yields them
// in ID order to the router, which hands each to the reads of its region.
// It runs in its own goroutine and shares no state with the fetcher.
type reader struct {
	s     *LogStore
	topic string
	gen   uint64 // the topic's index generation when the pass started (see indexGate)
	end   int64  // the log end the pass reads to
	asm   *record.Assembler
	yield func(logstore.Entry, error) bool
	route *router

	from  map[uint64]int64 // first offset wanted, per region (the lowest of its reads')
	stats ReadStats

	// indexOnly marks a scan that only feeds the index (scanIntoIndex):
	// records that are not kwal's count as holding no entry instead of
	// failing, and a corrupt record or a gap fails it even with
	// SkipCorrupt (it yields nothing, so skipping gains nothing, and
	// Prune's error then names the damage).
	indexOnly bool

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
			if h := r.s.scanReportHook; h != nil {
				h(r.topic)
			}
			r.s.gate.update(r.topic, r.gen, func() { r.s.index.ObserveScan(r.topic, accFrom, off, runs) })
		}
		runs, accFrom = runs[:0], off
	}
	defer report()
	// skip leaves [from, to) unaccounted: a record skipped under
	// SkipCorrupt (undecodable, it may be any region's entry) or offsets
	// missing from the log. Reported as holding no entry, they would let
	// every later read, with SkipCorrupt or not, pass them by silently;
	// left out, the index's span stops below them (W cannot cross offsets
	// nobody reported), so later reads scan them and meet the damage.
	skip := func(from, to int64) {
		off = from
		report()
		off, accFrom = to, to
	}
	// accountGap accounts for [off, to), offsets that returned no record:
	// transaction markers hold no entry; the missing runs are skipped.
	accountGap := func(to int64, missing []span) {
		for _, m := range missing {
			if m.from > off {
				runs = index.AppendRun(runs, index.Run{Start: off, Count: m.from - off, Foreign: true})
			}
			skip(m.from, m.to)
		}
		if to > off {
			runs = index.AppendRun(runs, index.Run{Start: off, Count: to - off, Foreign: true})
		}
	}
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
			if rec.Offset > off {
				missing, err := r.gap(off, rec.Offset, f.control)
				if err != nil {
					return err
				}
				if rg.Scan {
					accountGap(rec.Offset, missing)
				}
				off = rec.Offset
			}
			region, holds, err := r.handle(rec)
			if err != nil {
				// Not accounted for: a record that ends the read (one
				// that fails to decode may be any region's entry) must
				// not become "no entry" in the index, or the next read
				// would pass it by.
				return err
			}
			switch {
			case !rg.Scan:
			case holds == holdsUnknown:
				skip(rec.Offset, rec.Offset+1)
			default:
				runs = index.AppendRun(runs, index.Run{Start: rec.Offset, Count: 1, Region: region, Foreign: holds == holdsNone})
			}
			off = rec.Offset + 1
		}
		if f.fp.Err != nil {
			return &logstore.CorruptError{Namespace: r.topic, Offset: f.next, Err: f.fp.Err}
		}
		// Offsets up to next that returned no record must be transaction
		// markers (see gap).
		if end := min(f.next, rg.End); end > off {
			missing, err := r.gap(off, end, f.control)
			if err != nil {
				return err
			}
			if rg.Scan {
				accountGap(end, missing)
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

// skipCorrupt reports whether the pass skips corrupt records and gaps.
func (r *reader) skipCorrupt() bool { return r.s.cfg.SkipCorrupt && !r.indexOnly }

// holding is what a scanned record tells the index about its offset.
type holding int8

const (
	holdsNone    holding = iota // no entry: a mark, or a record that is not kwal's
	holdsEntry                  // a part of its region's entry
	holdsUnknown                // skipped under SkipCorrupt: undecodable, it may be any region's entry
)

// handle decodes one record and feeds the assembler. It reports the
// record's region, what it holds, and a read-ending error.
func (r *reader) handle(rec *kgo.Record) (uint64, holding, error) {
	s := r.s
	r.stats.Records++
	p, err := record.Decode(rec.Key, rec.Value)
	if err == nil && p.Kind == record.KindMark {
		r.noteMark(rec.Offset, p)
		return 0, holdsNone, nil
	}
	if err != nil {
		kind := "corrupt"
		if errors.Is(err, record.ErrNotKwal) {
			kind = "foreign"
		}
		if r.indexOnly && kind == "foreign" {
			return 0, holdsNone, nil
		}
		if !r.skipCorrupt() {
			return 0, holdsNone, &logstore.CorruptError{Namespace: r.topic, Offset: rec.Offset, Err: err}
		}
		s.metrics.skipped.WithLabelValues(kind).Inc()
		s.log.Warn("kwal: skipping a record that is not a valid kwal record", "topic", r.topic, "offset", rec.Offset, "kind", kind, "err", err)
		if kind == "foreign" {
			return 0, holdsNone, nil // not kwal's: no entry (index/doc.go)
		}
		return 0, holdsUnknown, nil
	}
	from, ok := r.from[p.Region]
	if !ok {
		r.otherRegion++ // counted once per read: this runs for every record
		return p.Region, holdsEntry, nil
	}
	if rec.Offset < from {
		r.beforeStart++
		return p.Region, holdsEntry, nil
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
		return p.Region, holdsEntry, fmt.Errorf("kwal: read %q: %w (now %d bytes): %w", r.topic, ErrHoldExceeded, s.cfg.ReadHoldBytes, err)
	}
	if err != nil {
		if !r.skipCorrupt() {
			return p.Region, holdsEntry, &logstore.CorruptError{Namespace: r.topic, Offset: rec.Offset, Err: err}
		}
		s.metrics.skipped.WithLabelValues("corrupt").Inc()
		s.log.Warn("kwal: skipping an entry that fails its checksum", "topic", r.topic, "offset", rec.Offset, "err", err)
		return p.Region, holdsEntry, nil
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
			return p.Region, holdsEntry, err
		}
	}
	if err := r.hold(rec.Offset); err != nil {
		return p.Region, holdsEntry, err
	}
	return p.Region, holdsEntry, nil
}

// hold keeps the pass's held entries and open entries within
// Config.ReadHoldBytes: while they hold more, the oldest open entry is
// given up as incomplete (the parts of an entry travel in one group, so
// one still open this far past its first part was cut short by its
// writer) and the entries that waited behind it are released. If a later
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
	if w, covered := s.index.Watermark(topic); covered && w > end {
		return w, true
	}
	s.gate.update(topic, gen, func() { s.index.Start(topic, start, end) })
	return 0, false
}
