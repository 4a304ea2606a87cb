package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// decoder is a pass's decoding loop: it takes the fetcher's responses in
// offset order, decodes their records, reassembles entries and hands them
// to the router. It runs in its own goroutine and shares no state with the
// fetcher.
type decoder struct {
	reads *Reads
	topic string
	gen   uint64 // the topic's generation when the pass started (Gate)
	end   int64  // the log end the pass reads to
	asm   *record.Assembler
	route *router

	from  map[uint64]int64 // first offset wanted, per region (the lowest of its reads')
	stats Stats

	// indexOnly marks a scan that only feeds the index (ScanIntoIndex):
	// records that are not kwal's count as carrying no entry instead of
	// failing, and a corrupt record or a gap fails it even with
	// SkipCorrupt (it yields nothing, so skipping gains nothing, and
	// Prune's error then names the damage).
	indexOnly bool

	// Per-record counters, added to the metrics when the pass ends.
	otherRegion, beforeStart int
	// fenced is the span of the fenced entries met (logged once when the
	// pass ends; stats.Fenced counts them).
	fenced offsetSpan
}

func newDecoder(r *Reads, topic string, gen uint64, end int64, rt *router) *decoder {
	d := &decoder{reads: r, topic: topic, gen: gen, end: end, asm: record.NewAssembler(), route: rt, from: make(map[uint64]int64)}
	rt.asm, rt.topic = d.asm, topic
	return d
}

// decode runs the pass's decoding loop over ch until it closes or fails,
// then hands the reads what they still hold.
func (d *decoder) decode(ctx context.Context, ch <-chan fetched) error {
	defer func() {
		d.reads.hold.add(-d.asm.OpenBytes())
		d.route.abandon()
	}()
	if !d.indexOnly {
		if err := d.reads.syncClaims(ctx, d.topic); err != nil {
			return err
		}
	}
	if err := d.consume(ctx, ch); err != nil {
		// The entries before the failure are the reads' as they would be
		// without sharing; then the failure.
		if ferr := d.route.flush(ctx); ferr != nil {
			return kwalerr.Join(err, ferr)
		}
		return err
	}
	if err := d.route.release(ctx, true); err != nil {
		return err
	}
	if err := d.route.flush(ctx); err != nil {
		return err
	}
	for _, o := range d.asm.Open() {
		d.reads.metrics.skipped.WithLabelValues(d.topic, "incomplete").Inc()
		// An entry still being appended, or one a crashed writer left
		// unfinished: neither was acknowledged, so nothing is lost; counted in
		// kwal_read_skipped_records_total{kind="incomplete"}.
		d.reads.log.Debug("kwal: entry not complete at the end of the read; not yielded",
			"topic", d.topic, "region", o.Region, "first_offset", o.First, "last_offset", o.Last, "read_end", d.end)
	}
	return nil
}

// maxScanRuns bounds the runs a scan accumulates for the index before it
// hands them over (the index keeps consecutive pieces below its span until
// one reaches it).
const maxScanRuns = 1 << 16

// consume decodes the fetcher's messages in order: responses (whose
// entries go to the router, handed over after each response) and joining
// reads.
func (d *decoder) consume(ctx context.Context, ch <-chan fetched) error {
	var runs []index.Run // a scan's runs since accFrom, covering [accFrom, off)
	var rg index.Range
	var off, accFrom int64
	report := func() {
		if rg.Scan && off > accFrom && d.reads.opts.Index != nil {
			if h := d.reads.hooks.ScanReport; h != nil {
				h(d.topic)
			}
			d.reads.gate.update(d.topic, d.gen, func() { d.reads.opts.Index.ObserveScan(d.topic, accFrom, off, runs) })
		}
		runs, accFrom = runs[:0], off
	}
	defer report()
	// skip leaves [from, to) unaccounted: a record skipped under
	// SkipCorrupt (undecodable, it may be any region's entry) or offsets
	// missing from the log. Reported as carrying no entry, they would let
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
	accountGap := func(to int64, missing []offsetSpan) {
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
			d.route.add(f.join, d.from)
			continue
		}
		d.route.cur = f.charge
		err := func() error {
			res := &f.res
			if f.rg != rg || res.off < off {
				report()
				rg, off, accFrom = f.rg, f.rg.Start, f.rg.Start
			}
		batches:
			for b, err := range d.reads.batches(d.topic, res) {
				if err != nil {
					return err
				}
				for _, rec := range b.records {
					if rec.Offset < off {
						continue
					}
					if rec.Offset >= rg.End {
						break batches
					}
					if rec.Offset > off {
						missing, err := d.gap(off, rec.Offset, res.control)
						if err != nil {
							return err
						}
						if rg.Scan {
							accountGap(rec.Offset, missing)
						}
						off = rec.Offset
					}
					region, carries, err := d.handle(ctx, rec, b.uncharged)
					if err != nil {
						// Not accounted for: a record that ends the read (one
						// that fails to decode may be any region's entry) must
						// not become "no entry" in the index, or the next read
						// would pass it by.
						return err
					}
					switch {
					case !rg.Scan:
					case carries == carriesUnknown:
						skip(rec.Offset, rec.Offset+1)
					default:
						runs = index.AppendRun(runs, index.Run{Start: rec.Offset, Count: 1, Region: region, Foreign: carries == carriesNone})
					}
					off = rec.Offset + 1
				}
			}
			// Offsets up to next that returned no record must be transaction
			// markers (see gap).
			if end := min(res.next, rg.End); end > off {
				missing, err := d.gap(off, end, res.control)
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
			return d.route.flush(ctx)
		}()
		d.route.cur = nil
		f.charge.done()
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// skipCorrupt reports whether the pass skips corrupt records and gaps.
func (d *decoder) skipCorrupt() bool { return d.reads.opts.SkipCorrupt && !d.indexOnly }

// carrying is what a scanned record tells the index about its offset.
type carrying int8

const (
	carriesNone    carrying = iota // no entry: a mark, or a record that is not kwal's
	carriesEntry                   // a part of its region's entry
	carriesUnknown                 // skipped under SkipCorrupt: undecodable, it may be any region's entry
)

// handle decodes one record and feeds the assembler. It reports the
// record's region, what it carries, and a read-ending error. uncharged
// says that rec points into a batch the decoder decompressed, which no
// Pool charge covers: a whole entry is copied out of it.
func (d *decoder) handle(ctx context.Context, rec *kgo.Record, uncharged bool) (uint64, carrying, error) {
	r := d.reads
	d.stats.Records++
	p, err := record.Decode(rec.Key, rec.Value)
	if err == nil && p.Kind == record.KindMark {
		r.noteMarkPart(d.topic, d.gen, rec.Offset, p)
		return 0, carriesNone, nil
	}
	if err == nil && p.Kind == record.KindClaim {
		// Where an epoch begins; the claims topic says what it means. An
		// entry of an older epoch still open here can complete only with
		// records above it, which a committed claim fences: give it up
		// now rather than hold what follows behind it.
		var stale []record.Writer
		d.asm.EachOpen(func(w record.Writer, _, _ int64) bool {
			if w.Region == p.Region && r.opts.Host.Fenced(d.topic, w.Region, rec.Offset+1, w.Epoch) {
				stale = append(stale, w)
			}
			return true
		})
		for _, w := range stale {
			if err := d.abandonFenced(ctx, w, rec.Offset); err != nil {
				return 0, carriesNone, err
			}
		}
		return 0, carriesNone, nil
	}
	if err != nil {
		kind := "corrupt"
		if errors.Is(err, record.ErrNotKwal) {
			kind = "foreign"
		}
		if d.indexOnly && kind == "foreign" {
			return 0, carriesNone, nil
		}
		if !d.skipCorrupt() {
			return 0, carriesNone, &logstore.CorruptError{Namespace: d.topic, Offset: rec.Offset, Err: err}
		}
		r.metrics.skipped.WithLabelValues(d.topic, kind).Inc()
		r.log.Warn("kwal: skipping a record that is not a valid kwal record", "topic", d.topic, "offset", rec.Offset, "kind", kind, "err", err)
		if kind == "foreign" {
			return 0, carriesNone, nil // not kwal's: no entry (index/doc.go)
		}
		return 0, carriesUnknown, nil
	}
	from, ok := d.from[p.Region]
	if !ok {
		d.otherRegion++ // counted once per pass: this runs for every record
		return p.Region, carriesEntry, nil
	}
	if rec.Offset < from {
		d.beforeStart++
		return p.Region, carriesEntry, nil
	}
	if r.opts.Host.Fenced(d.topic, p.Region, rec.Offset, p.Epoch) {
		// An older owner's record above a newer owner's claim: dropped
		// before the assembler, so that it never abandons, completes or
		// moves an entry of the owner that claimed the region. A split
		// entry with any part above the claim was never acknowledged (its
		// writer's check came after that part), so it is left incomplete.
		d.fence(rec.Offset, p.Kind == record.KindWhole || p.Kind == record.KindFirst)
		return p.Region, carriesEntry, d.abandonFenced(ctx, record.Writer{Region: p.Region, Epoch: p.Epoch}, rec.Offset)
	}
	if p.Kind == record.KindFirst && int64(p.Size) > r.opts.MaxEntryBytes {
		return p.Region, carriesEntry, kwalerr.Errorf("read %q: the entry of region %d at offset %d holds %d bytes, more than a read of this store may hold (%d): %w",
			d.topic, p.Region, rec.Offset, p.Size, r.opts.MaxEntryBytes, ErrHoldExceeded)
	}
	before := d.asm.OpenBytes()
	st, err := d.asm.Add(rec.Offset, p)
	r.hold.add(d.asm.OpenBytes() - before)
	if st.Dropped {
		r.metrics.skipped.WithLabelValues(d.topic, st.Drop.Reason.String()).Inc()
		if st.Drop.Reason == record.DropIncomplete {
			r.log.Warn("kwal: dropping an incomplete entry: its writer went on to another entry of the region before writing all of it", "topic", d.topic,
				"region", st.Drop.Region, "first_offset", st.Drop.First, "last_offset", st.Drop.Last)
		}
	}
	if err != nil {
		if !d.skipCorrupt() {
			return p.Region, carriesEntry, &logstore.CorruptError{Namespace: d.topic, Offset: rec.Offset, Err: err}
		}
		r.metrics.skipped.WithLabelValues(d.topic, "corrupt").Inc()
		r.log.Warn("kwal: skipping an entry that fails its checksum", "topic", d.topic, "offset", rec.Offset, "err", err)
		return p.Region, carriesEntry, nil
	}
	if st.Complete {
		e := st.Entry
		whole := e.First == e.Last && !e.Spilled
		if whole && uncharged {
			e.Data = bytes.Clone(e.Data)
		}
		if err := d.route.dispatch(ctx, assembled{Assembled: e, inResponse: whole && !uncharged}); err != nil {
			return p.Region, carriesEntry, err
		}
	}
	if (st.Complete || st.Dropped) && len(d.route.waiting) > 0 {
		if err := d.route.release(ctx, false); err != nil {
			return p.Region, carriesEntry, err
		}
	}
	d.route.fit()
	return p.Region, carriesEntry, nil
}

// gap checks offsets [from, to) that the response held no record for: they
// must all be control batches' offsets. Otherwise the read fails with a
// MissingError naming the first missing run, or, with SkipCorrupt, counts
// every missing offset, logs each run and returns the runs (which the
// index must not account for: see consume).
func (d *decoder) gap(from, to int64, control []offsetSpan) ([]offsetSpan, error) {
	var missing []offsetSpan
	for from < to {
		covered := false
		for _, c := range control {
			if c.from <= from && from < c.to {
				from, covered = min(c.to, to), true
				break
			}
		}
		if covered {
			continue
		}
		// The missing run ends at the next control batch, or at to.
		end := to
		for _, c := range control {
			if c.from > from && c.from < end {
				end = c.from
			}
		}
		if !d.skipCorrupt() {
			return nil, &logstore.MissingError{Namespace: d.topic, From: from, To: end,
				Why: fmt.Sprintf("the fetched records jump from offset %d to %d, and no transaction marker fills the gap (records deleted from the middle of the log)", from, end)}
		}
		d.stats.Missing += end - from
		d.reads.skipMissing(d.topic, end-from, from, end, "gap in the log")
		missing = append(missing, offsetSpan{from, end})
		from = end
	}
	return missing, nil
}

// abandonFenced gives up w's open entry (if it has one), whose writer is
// fenced from off on: the entry's first part lies below the claim and the
// rest, if any, above it, so it was never acknowledged. It counts as a
// fenced entry.
func (d *decoder) abandonFenced(ctx context.Context, w record.Writer, off int64) error {
	before := d.asm.OpenBytes()
	if _, ok := d.asm.Abandon(w); !ok {
		return nil
	}
	d.reads.hold.add(d.asm.OpenBytes() - before)
	d.fence(off, true)
	if len(d.route.waiting) > 0 {
		return d.route.release(ctx, false)
	}
	return nil
}

// fence notes a fenced record: its offset joins the span logged when the
// pass ends, and an entry's first record counts the entry.
func (d *decoder) fence(off int64, entry bool) {
	if d.fenced.to == 0 {
		d.fenced.from = off
	}
	d.fenced.to = off + 1
	if entry {
		d.stats.Fenced++
		d.reads.metrics.fenced.WithLabelValues(d.topic).Inc()
	}
}

// flushMetrics adds the pass's per-record counts to the metrics.
func (d *decoder) flushMetrics() {
	d.reads.metrics.skipped.WithLabelValues(d.topic, "other_region").Add(float64(d.otherRegion))
	d.reads.metrics.skipped.WithLabelValues(d.topic, "before_start").Add(float64(d.beforeStart))
	if d.fenced.to > 0 {
		d.reads.log.Warn("kwal: read skipped entries an older owner wrote after a newer owner's claim (fenced)", "topic", d.topic,
			"entries", d.stats.Fenced, "first_offset", d.fenced.from, "last_offset", d.fenced.to-1)
	}
}
