package kafka

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// regionFrom is a region a read asks for from below the log start.
type regionFrom struct {
	region logstore.RegionID
	id     logstore.EntryID
}

// proveNothingPruned decides whether the regions that ask for entries below
// the log start lost any of them. The deleted records are gone, so only a
// prune mark can tell: one whose Point is at or above start states that
// every record in [From, Point) belonged to a listed region and lay below
// its Obsolete point. A region asking from offset f lost nothing when
// f >= From and f >= its listed point (an absent region had no record
// there). Without such a mark (the log start was moved by retention past
// every prune, or by a program that wrote none) nothing can be proven and
// the read fails with ErrPruned, naming the log start as the first ID
// still available (reading from it needs no proof).
func (s *LogStore) proveNothingPruned(ctx context.Context, topic string, below []regionFrom, start, end int64) error {
	pm, ok := s.knownPruneMark(topic)
	if ok = ok && pm.vouches(start, end); !ok {
		var err error
		if pm, ok, err = s.findPruneMark(ctx, topic, start, end); err != nil {
			return err
		}
	}
	slices.SortFunc(below, func(a, b regionFrom) int { return cmp.Compare(a.region, b.region) })
	for _, b := range below {
		off := int64(0)
		if b.id > 0 {
			off = int64(b.id) - 1
		}
		if ok && off >= pm.m.From && off >= pm.m.Before(uint64(b.region)) {
			continue
		}
		return &logstore.PrunedError{Namespace: topic, Requested: b.id, FirstAvailable: logstore.EntryID(start + 1)}
	}
	return nil
}

// findPruneMark scans the log from start for a prune mark whose Point is at
// or above start, stopping at the first one (Prune writes its mark before it
// deletes, above the point it deletes to, so the mark of the prune that set
// the log start lies a little above it). Every mark passed on the way is
// noted, and what was searched is remembered: a later search starts where
// this one ended. Records that do not decode are left to the read itself.
func (s *LogStore) findPruneMark(ctx context.Context, topic string, start, end int64) (pruneMark, bool, error) {
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
			s.noteMarkPart(topic, rec.Offset, p)
			if pm, ok := s.knownPruneMark(topic); ok && pm.vouches(start, end) {
				s.setSearchedTo(topic, rec.Offset+1)
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
		s.setSearchedTo(topic, off)
	}
	return pruneMark{}, false, nil
}

// noteMarkPart hands a decoded mark record to noteMark.
func (s *LogStore) noteMarkPart(topic string, offset int64, p record.Part) {
	m, err := record.DecodeMark(p.Data)
	if err != nil { // Decode checked the payload already
		s.log.Warn("kwal: ignoring an undecodable mark", "topic", topic, "offset", offset, "err", err)
		return
	}
	s.noteMark(topic, offset, m)
}

// noteMark hands a mark record the pass decoded to the store.
func (r *reader) noteMark(offset int64, p record.Part) { r.s.noteMarkPart(r.topic, offset, p) }
