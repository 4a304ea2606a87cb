package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// regionFrom is a region a read asks for from below the log start.
type regionFrom struct {
	region logstore.RegionID
	id     logstore.EntryID
}

// proveNothingPruned decides whether the regions that ask for entries below
// the log start lost any of them. The deleted records are gone, so only
// what was written or known about them before they went can tell, and a
// region is let through when either of two witnesses proves it lost
// nothing:
//
//   - The index (index.HadNone): it accounted for [f, start) (from a
//     checkpoint loaded before the start rose, or kept when its C rose with
//     the start) and holds no run of the region there above its Obsolete
//     point: the region had no record there. This is what answers a read
//     after retention moved the start past every prune point.
//   - A prune mark whose Point is at or above start: it states that every
//     record in [From, Point) belonged to a listed region and lay below its
//     Obsolete point. A region asking from offset f lost nothing when
//     f >= From and f >= its listed point (an absent region had no record
//     there), unless the region's statement is fenced (a claim the
//     pruner's view of the claims topic missed committed below the mark:
//     the pruner may have taken in marks that claim fences, so what it
//     says of the region proves nothing, and the read fails).
//
// When neither proves it (retention past every prune with an index that
// never covered the deleted offsets, or a program that wrote no mark), the
// read cannot prove it would return everything, and it fails with
// ErrPruned naming the log start as the first ID still available (reading
// from it needs no proof).
func (r *Reads) proveNothingPruned(ctx context.Context, topic string, gen uint64, below []regionFrom, start, end int64) error {
	slices.SortFunc(below, func(a, b regionFrom) int { return cmp.Compare(a.region, b.region) })
	var unproven []regionFrom
	for _, b := range below {
		if r.opts.Index == nil || !r.opts.Index.HadNone(topic, uint64(b.region), fromOffset(b.id), start) {
			unproven = append(unproven, b)
		}
	}
	if len(unproven) == 0 {
		return nil
	}
	// The statements are judged by claims committed since the mark was
	// written, as a pass's records are.
	if err := r.syncClaims(ctx, topic); err != nil {
		return err
	}
	pm, ok, err := r.vouching(ctx, topic, gen, start, end)
	if err != nil {
		return err
	}
	for _, b := range unproven {
		off := fromOffset(b.id)
		if ok && off >= pm.m.From && pm.covers(r.opts.Host, topic, uint64(b.region), off) {
			continue
		}
		return &logstore.PrunedError{Namespace: topic, Requested: b.id, FirstAvailable: logstore.EntryID(start + 1)}
	}
	return nil
}

// covers reports whether pm's statement of region lets a read from offset
// off through: off is at or above the region's point, and the statement is
// not fenced (absent regions make none, and had no record there).
func (pm pruneMark) covers(h Host, topic string, region uint64, off int64) bool {
	rp, listed := pm.m.Region(region)
	if !listed {
		return true
	}
	return off >= rp.Before && !h.Fenced(topic, region, pm.offset, rp.Epoch)
}

// VouchingMark returns a prune mark whose Point is at or above start (it
// speaks for every record deleted below start) and its offset: the one
// known, or one found by scanning the log from start. A failed search is
// logged and reported as none.
func (r *Reads) VouchingMark(ctx context.Context, topic string, gen uint64, start, end int64) (record.Mark, int64, bool) {
	pm, ok, err := r.vouching(ctx, topic, gen, start, end)
	if err != nil {
		r.log.Warn("kwal: looking for a prune mark", "topic", topic, "err", err)
		return record.Mark{}, 0, false
	}
	return pm.m, pm.offset, ok
}

// vouching is VouchingMark with the search's error.
func (r *Reads) vouching(ctx context.Context, topic string, gen uint64, start, end int64) (pruneMark, bool, error) {
	if pm, ok := r.marks.known(topic); ok && pm.vouches(start, end) {
		return pm, true, nil
	}
	return r.findPruneMark(ctx, topic, gen, start, end)
}

// findPruneMark scans the log from start for a prune mark whose Point is at
// or above start, stopping at the first one (Prune writes its mark before it
// deletes, above the point it deletes to, so the mark of the prune that set
// the log start lies a little above it). Every mark passed on the way is
// noted, and what was searched is remembered: a later search starts where
// this one ended. Records that do not decode are left to the read itself.
func (r *Reads) findPruneMark(ctx context.Context, topic string, gen uint64, start, end int64) (pruneMark, bool, error) {
	var ld leader
	off := max(start, r.marks.searchedTo(topic))
	if off > end {
		off = start // searched a longer log: the topic was recreated
	}
	if off < end {
		// The marks passed go to the index: judged by a view of the
		// claims topic caught up after they were written (below end).
		if err := r.syncClaims(ctx, topic); err != nil {
			return pruneMark{}, false, err
		}
	}
	for off < end {
		res, err := r.fetchAt(ctx, topic, &ld, off, r.opts.FetchMaxBytes, "scan")
		if err != nil {
			return pruneMark{}, false, err
		}
		for b, err := range r.batches(topic, &res) {
			if err != nil {
				return pruneMark{}, false, err
			}
			for _, rec := range b.records {
				p, err := record.Decode(rec.Key, rec.Value)
				if err != nil || p.Kind != record.KindMark {
					continue
				}
				r.noteMarkPart(topic, gen, rec.Offset, p)
				if pm, ok := r.marks.known(topic); ok && pm.vouches(start, end) {
					r.setSearchedTo(topic, gen, rec.Offset+1)
					return pm, true, nil
				}
			}
		}
		if res.next <= off {
			return pruneMark{}, false, kwalerr.Errorf("read %q: looking for a prune mark: fetch at offset %d returned no complete record (%d bytes)", topic, off, res.bytes)
		}
		off = res.next
		r.setSearchedTo(topic, gen, off)
	}
	return pruneMark{}, false, nil
}

// startMovedError is a fetch's OFFSET_OUT_OF_RANGE below a log start that
// rose during the read (to start; the log then ended at end). It matches
// logstore.ErrPruned, for a fetch whose caller does not check further.
type startMovedError struct {
	pruned     *logstore.PrunedError
	start, end int64
	cause      error
}

func (e *startMovedError) Error() string {
	return kwalerr.Prefix + kwalerr.Bare(e.pruned) + ": " + kwalerr.Bare(e.cause)
}

func (e *startMovedError) Unwrap() []error { return []error{e.pruned, e.cause} }

// noteJoined takes in a read whose join marker the fetcher hands over. The
// marker goes before every chunk that may hold the read's records, so when
// a chunk reaches the head of the queue, every read that may want a record
// in it is noted.
func (f *fetcher) noteJoined(sb *sub) {
	f.joined = append(f.joined, sb)
	f.provenTo = 0 // proven for the reads noted before
}

// wants returns the lowest offset each region is wanted from by the pass's
// reads that have not left it (a read that left needs nothing more).
func (f *fetcher) wants() map[uint64]int64 {
	w := make(map[uint64]int64)
	for _, sb := range f.joined {
		select {
		case <-sb.gone:
			continue
		default:
		}
		for region, off := range sb.from {
			if cur, ok := w[region]; !ok || off < cur {
				w[region] = off
			}
		}
	}
	return w
}

// pastPruned handles the head chunk's fetch failing because the log start
// rose above it while the pass ran (a Prune or retention racing the read).
// The pass fails with ErrPruned only when one of its reads (still in the
// pass) needed something that went: for each region, the offsets
// [max(head's offset, the region's from), start) are put to the same proof
// as a read starting below the log start (proveNothingPruned: the index or
// a prune mark; Prune writes its mark before it deletes, so the proof of a
// racing Prune is in the log). When nothing needed went, the chunk goes on
// from the new start: it becomes a new range, so that the reader checks for
// gaps and reports scans to the index from there, never claiming the
// deleted offsets as read. It returns nil when the pass goes on, else the
// error that ends it.
func (f *fetcher) pastPruned(ctx context.Context, err error) error {
	var sm *startMovedError
	if !errors.As(err, &sm) {
		return err
	}
	head := f.queue[0]
	if sm.start > f.provenTo {
		// Chunks behind the head that the start overtook too come here
		// one by one; one proof up to the start serves them all.
		var below []regionFrom
		for region, from := range f.wants() {
			if at := max(from, head.off); at < sm.start {
				below = append(below, regionFrom{region: logstore.RegionID(region), id: logstore.EntryID(at + 1)})
			}
		}
		if perr := f.reads.proveNothingPruned(ctx, f.topic, f.gen, below, sm.start, sm.end); perr != nil {
			if errors.Is(perr, logstore.ErrPruned) {
				// The pruned error says in kwal's words what Kafka's
				// OFFSET_OUT_OF_RANGE does: that stays in the chain only.
				return kwalerr.Cause(perr, sm.cause)
			}
			return kwalerr.Join(perr, sm.cause)
		}
		f.provenTo = sm.start
		// A prune racing a read, proven harmless: nothing to act on.
		f.reads.log.Debug("kwal: the log start rose above a read in progress; the read needed nothing below it and goes on",
			"topic", f.topic, "offset", head.off, "log_start", sm.start)
	}
	if sm.start >= head.rg.End {
		f.popHead()
		return nil
	}
	rg := index.Range{Start: sm.start, End: head.rg.End, Scan: head.rg.Scan}
	f.queue[0] = &chunk{rg: rg, off: rg.Start, maxBytes: head.maxBytes}
	return nil
}

// lostTail is called when the log of topic ends (at end) below the index's
// watermark w: records the index knew of are gone. A read of regions
// (from: first offset wanted, per region) with records in [end, w) fails
// with a MissingError, or, with SkipCorrupt, counts them in st and logs
// them; a read of other regions goes on.
func (r *Reads) lostTail(topic string, from map[uint64]int64, end, w int64, st *Stats) error {
	past := make(map[uint64]int64, len(from))
	for region, off := range from {
		past[region] = max(off, end)
	}
	var lost []offsetSpan
	var n int64
	for _, rg := range r.opts.Index.Plan(topic, past, w).Ranges {
		if !rg.Scan {
			lost = append(lost, offsetSpan{rg.Start, rg.End})
			n += rg.End - rg.Start
		}
	}
	r.log.Error("kwal: the log ends below offsets the index accounted for: records were lost (a truncated or damaged log, or a recreated topic)",
		"topic", topic, "log_end", end, "index_watermark", w, "read_regions_affected", len(lost) > 0)
	if len(lost) == 0 {
		return nil
	}
	why := fmt.Sprintf("the log ends at offset %d, but the index knows of records of the regions read at offsets [%d, %d) (a truncated or damaged log, lost broker data, or a recreated topic)",
		end, lost[0].from, lost[len(lost)-1].to)
	if !r.opts.SkipCorrupt {
		return &logstore.MissingError{Namespace: topic, From: end, To: w, Why: why}
	}
	st.Missing += n
	r.skipMissing(topic, n, lost[0].from, lost[len(lost)-1].to, why)
	return nil
}

// skipMissing counts and logs n missing offsets within [from, to), skipped
// under SkipCorrupt.
func (r *Reads) skipMissing(topic string, n, from, to int64, why string) {
	r.metrics.skipped.WithLabelValues(topic, "missing").Add(float64(n))
	r.log.Warn("kwal: offsets missing from the log; their entries are lost", "topic", topic, "from", from, "to", to, "why", why)
}
