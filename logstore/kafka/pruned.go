package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

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
//     there).
//
// When neither proves it (retention past every prune with an index that
// never covered the deleted offsets, or a program that wrote no mark), the
// read cannot prove it would return everything, and it fails with
// ErrPruned naming the log start as the first ID still available (reading
// from it needs no proof).
func (s *LogStore) proveNothingPruned(ctx context.Context, topic string, gen uint64, below []regionFrom, start, end int64) error {
	slices.SortFunc(below, func(a, b regionFrom) int { return cmp.Compare(a.region, b.region) })
	var unproven []regionFrom
	for _, b := range below {
		if s.index == nil || !s.index.HadNone(topic, uint64(b.region), fromOffset(b.id), start) {
			unproven = append(unproven, b)
		}
	}
	if len(unproven) == 0 {
		return nil
	}
	pm, ok := s.knownPruneMark(topic)
	if ok = ok && pm.vouches(start, end); !ok {
		var err error
		if pm, ok, err = s.findPruneMark(ctx, topic, gen, start, end); err != nil {
			return err
		}
	}
	for _, b := range unproven {
		off := fromOffset(b.id)
		if ok && off >= pm.m.From && off >= pm.m.Before(uint64(b.region)) {
			continue
		}
		return &logstore.PrunedError{Namespace: topic, Requested: b.id, FirstAvailable: logstore.EntryID(start + 1)}
	}
	return nil
}

// fromOffset is the first offset a read from entry ID id needs.
func fromOffset(id logstore.EntryID) int64 {
	if id == 0 {
		return 0
	}
	return int64(id) - 1
}

// findPruneMark scans the log from start for a prune mark whose Point is at
// or above start, stopping at the first one (Prune writes its mark before it
// deletes, above the point it deletes to, so the mark of the prune that set
// the log start lies a little above it). Every mark passed on the way is
// noted, and what was searched is remembered: a later search starts where
// this one ended. Records that do not decode are left to the read itself.
func (s *LogStore) findPruneMark(ctx context.Context, topic string, gen uint64, start, end int64) (pruneMark, bool, error) {
	f := &fetcher{s: s, topic: topic}
	if err := f.refreshLeader(ctx); err != nil {
		return pruneMark{}, false, err
	}
	off := max(start, s.searchedTo(topic))
	if off > end {
		off = start // searched a longer log: the topic was recreated
	}
	for off < end {
		res, err := f.fetch(ctx, off, s.cfg.FetchMaxBytes, "scan")
		if err != nil {
			return pruneMark{}, false, err
		}
		for _, rec := range res.fp.Records {
			if rec.Offset < off {
				continue
			}
			p, err := record.Decode(rec.Key, rec.Value)
			if err != nil || p.Kind != record.KindMark {
				continue
			}
			s.noteMarkPart(topic, gen, rec.Offset, p)
			if pm, ok := s.knownPruneMark(topic); ok && pm.vouches(start, end) {
				s.setSearchedTo(topic, gen, rec.Offset+1)
				return pm, true, nil
			}
		}
		if res.fp.Err != nil {
			return pruneMark{}, false, &logstore.CorruptError{Namespace: topic, Offset: res.next, Err: res.fp.Err}
		}
		if res.next <= off {
			return pruneMark{}, false, fmt.Errorf("kwal: read %q: looking for a prune mark: fetch at offset %d returned no complete record (%d bytes)", topic, off, res.bytes)
		}
		off = res.next
		s.setSearchedTo(topic, gen, off)
	}
	return pruneMark{}, false, nil
}

// noteMarkPart hands a decoded mark record to noteMark.
func (s *LogStore) noteMarkPart(topic string, gen uint64, offset int64, p record.Part) {
	m, err := record.DecodeMark(p.Data)
	if err != nil { // Decode checked the payload already
		s.log.Warn("kwal: ignoring an undecodable mark", "topic", topic, "offset", offset, "err", err)
		return
	}
	s.noteMark(topic, gen, offset, m)
}

// noteMark hands a mark record the pass decoded to the store.
func (r *reader) noteMark(offset int64, p record.Part) { r.s.noteMarkPart(r.topic, r.gen, offset, p) }

// startMovedError is a fetch's OFFSET_OUT_OF_RANGE below a log start that
// rose during the read (to start; the log then ended at end). It matches
// logstore.ErrPruned, for a fetch whose caller does not check further.
type startMovedError struct {
	pruned     *logstore.PrunedError
	start, end int64
	cause      error
}

func (e *startMovedError) Error() string   { return e.pruned.Error() + ": " + e.cause.Error() }
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
// pass) needed something that went: for each region, the offsets [max(head's
// offset, the region's from), start) are put to the same proof as a read starting below the log
// start (proveNothingPruned: the index or a prune mark; Prune writes its
// mark before it deletes, so the proof of a racing Prune is in the log).
// When nothing needed went, the chunk goes on from the new start: it
// becomes a new range, so that the reader checks for gaps and reports scans
// to the index from there, never claiming the deleted offsets as read. It
// returns nil when the pass goes on, else the error that ends it.
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
		if perr := f.s.proveNothingPruned(ctx, f.topic, f.gen, below, sm.start, sm.end); perr != nil {
			return errors.Join(perr, sm.cause)
		}
		f.provenTo = sm.start
		f.s.log.Info("kwal: the log start rose above a read in progress; the read needed nothing below it and goes on",
			"topic", f.topic, "offset", head.off, "log_start", sm.start)
	}
	if sm.start >= head.rg.End {
		f.popHead()
		return nil
	}
	rg := index.Range{Start: sm.start, End: head.rg.End, Scan: head.rg.Scan}
	f.queue[0] = &slot{rg: rg, off: rg.Start, maxBytes: head.maxBytes}
	return nil
}
