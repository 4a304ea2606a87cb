package index

import (
	"cmp"
	"slices"
)

// plan implements Collector.Plan for a known topic.
//
// The result covers, within [lo, end) where lo = min(from):
//   - as Scan: what the index does not account for: [lo, C), [W, end), and
//     for each asked region r whose offsets below its Obsolete point were
//     dropped, [max(from_r, C), dropped_r);
//   - as indexed ranges: each asked region's runs in [max(from_r, C), W).
//
// Ranges are then merged in offset order: touching or overlapping ranges
// always (a Scan absorbing an indexed range: a scan covers everything), and
// ranges at most gap offsets apart too (Scan if either is).
func (t *topic) plan(from map[uint64]int64, end, gap int64) Plan {
	lo, ok := minFrom(from)
	if !ok || lo >= end {
		return Plan{}
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.covered {
		return Plan{Ranges: []Range{{Start: lo, End: end, Scan: true}}}
	}
	var rs []Range
	add := func(s, e int64, scan bool) {
		if s < e {
			rs = append(rs, Range{Start: s, End: e, Scan: scan})
		}
	}
	c, w := t.c, t.w
	add(lo, min(c, end), true)
	add(max(w, lo), end, true)
	hi := min(w, end)
	for id, f := range from {
		r := t.regions[id]
		if r == nil {
			continue
		}
		f = max(f, c, 0)
		if f >= hi {
			continue
		}
		if r.dropped > f {
			add(f, min(r.dropped, hi), true)
			f = r.dropped
		}
		// The region's runs ascend: merge them as they come, so that a
		// region of many short runs costs no range each.
		first := len(rs)
		r.runs.each(f, hi, func(s, e int64) bool {
			if n := len(rs); n > first && s-rs[n-1].End <= gap {
				rs[n-1].End = e
			} else {
				rs = append(rs, Range{Start: s, End: e})
			}
			return true
		})
	}
	return Plan{Ranges: mergeRanges(rs, gap)}
}

func minFrom(from map[uint64]int64) (int64, bool) {
	var lo int64
	ok := false
	for _, f := range from {
		if !ok || f < lo {
			lo, ok = f, true
		}
	}
	return max(lo, 0), ok
}

// mergeRanges sorts rs and merges ranges that overlap, touch or lie at
// most gap offsets apart. The result reuses rs.
func mergeRanges(rs []Range, gap int64) []Range {
	if len(rs) <= 1 {
		return rs
	}
	if !slices.IsSortedFunc(rs, cmpRange) {
		slices.SortFunc(rs, cmpRange)
	}
	out := rs[:1]
	for _, r := range rs[1:] {
		cur := &out[len(out)-1]
		if r.Start-cur.End <= gap { // also true when they overlap
			cur.End = max(cur.End, r.End)
			cur.Scan = cur.Scan || r.Scan
			continue
		}
		out = append(out, r)
	}
	return out
}

func cmpRange(a, b Range) int { return cmp.Compare(a.Start, b.Start) }
