package index

// What the index knew of offsets that left the log.
//
// When the log start rises (retention, Prune), C rises with it and the runs
// below go (raiseCLocked). Before they go, the index keeps what they said,
// in the form of a prune mark (record.Mark, index/doc.go "Pruning"): over
// [from, point) every record of region r lay below last[r], the end of r's
// last run there or r's Obsolete point, whichever is higher (a region
// absent from last had no record there). That is a few bytes per region
// that had records there, however many offsets went.
//
// It lets a read from below the log start that no prune mark vouches for
// (retention past every prune point, or a prune racing the read) still be
// answered exactly when the index had accounted for the deleted offsets:
// see HadNone. Checkpoints carry it (format.go, the deleted section), so it
// survives a restart: a base holds the topic's span, a delta the span when
// it changed since the previous file. That is safe because the span is a
// fact about the log's past, not about its present: once true (the
// coverage invariant held over [from, point) when C rose past it) it stays
// true for that log, so any file's span, old or new, paired with any later
// state, proves only true things; a state loaded from a prefix of the
// chain has the span of the same checkpoint or an older one. What ends
// the log's identity (Start finding the log ended below W: the topic was
// truncated or recreated) discards the span with the coverage
// (resetLocked), and the base written next carries none.

// deletedSpan is what the index knew of the offsets [from, point) when they
// left the accounted span.
type deletedSpan struct {
	from, point int64
	last        map[uint64]int64
}

// noteDeletedLocked records what the index accounts for in [t.c, x) before
// raiseCLocked drops it. Offsets above W were never accounted for: the span
// kept stops at W (a read needing more cannot be proven). A span that
// touches or overlaps the one kept already is merged into it (the union
// is accounted for throughout); otherwise the new one replaces it.
func (t *topic) noteDeletedLocked(x int64) {
	if !t.covered {
		return
	}
	from, point := t.c, min(x, t.w)
	if point <= from {
		return
	}
	last := make(map[uint64]int64)
	for id, r := range t.regions {
		l := r.dropped
		r.runs.each(from, point, func(_, e int64) bool {
			l = max(l, e)
			return true
		})
		if l > from {
			last[id] = l
		}
	}
	t.deletedDirty = true
	if d := t.deleted; d != nil && from <= d.point && point >= d.from {
		d.from, d.point = min(d.from, from), max(d.point, point)
		for id, l := range last {
			d.last[id] = max(d.last[id], l)
		}
		return
	}
	t.deleted = &deletedSpan{from: from, point: point, last: last}
}

// HadNone reports whether the index can prove that the region had no
// record in [from, to) that a read from from would need, including offsets
// already deleted from the log (see deletedSpan). False means it cannot
// prove it, not that records were there.
func (g *Collector) HadNone(topic string, region uint64, from, to int64) bool {
	if from >= to {
		return true
	}
	t := g.topic(topic, false)
	if t == nil {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.hadNoneLocked(region, from, to)
}

// hadNoneLocked is HadNone for one topic. The proof has two parts, each a
// statement of the coverage invariant (doc.go, "What it knows"):
//
//   - [from, d.point), from what the index knew of deleted offsets: every
//     record of the region there lay below last[region]; with from at or
//     above it, none lay at or after from.
//   - the rest, [lo, to), must lie in the accounted span [C, W) with no run
//     of the region there and the region's Obsolete point at or below lo:
//     every record of the region in [C, W) above its Obsolete point is in
//     its runs, so none was there. Below the Obsolete point the runs were
//     dropped and the index no longer knows: not proven.
func (t *topic) hadNoneLocked(region uint64, from, to int64) bool {
	if !t.covered {
		return false
	}
	lo := from
	if d := t.deleted; d != nil && from >= d.from && from < d.point && d.point >= t.c {
		if from < d.last[region] {
			return false
		}
		lo = d.point
	}
	if lo >= to {
		return true
	}
	if lo < t.c || to > t.w {
		return false
	}
	r := t.regions[region]
	if r == nil {
		return true
	}
	if r.dropped > lo {
		return false
	}
	found := false
	r.runs.each(lo, to, func(_, _ int64) bool {
		found = true
		return false
	})
	return !found
}
