package index

import "math"

// ObserveScan records what a reader decoded while scanning [start, end)
// of the topic: runs must cover every offset of [start, end), ascending
// (foreign runs for offsets holding no kwal entry). Because the reader saw
// everything there, the index may account for it even below C: a scan that
// reaches C from below lowers C to start, so that the next read of any
// region from start on is fully indexed. A topic with no coverage yet starts
// its accounted span at start. The part at or above C goes through Observe.
//
// This is how an index that was not persisted (or is older than the log)
// is rebuilt by the first replay instead of every replay scanning again
// (GreptimeDB #6594).
func (g *Collector) ObserveScan(topic string, start, end int64, runs []Run) {
	if start >= end {
		return
	}
	g.topic(topic, true).observeScan(start, end, runs)
}

func (t *topic) observeScan(start, end int64, runs []Run) {
	t.mu.Lock()
	switch {
	case !t.covered:
		t.covered = true
		t.c, t.w = start, start
		t.needBase = true
		for id, r := range t.regions {
			if r.runs.empty() && r.dropped <= start {
				delete(t.regions, id)
				delete(t.dirty, id)
			}
		}
	case start < t.c && end >= t.c:
		t.lowerCLocked(start, runs)
	}
	t.mu.Unlock()
	t.observe(runs)
}

// lowerCLocked accounts for [start, C) from a complete scan's runs and
// moves C down to start. Region lists only grow at the end, so each
// touched region's list is rebuilt: the scanned runs below C, then what it
// had. The next checkpoint writes a base, since deltas only describe growth
// above the previous W.
func (t *topic) lowerCLocked(start int64, runs []Run) {
	c := t.c
	below := make(map[uint64][]span)
	for _, r := range runs {
		if r.Foreign || r.Count <= 0 {
			continue
		}
		s, e := max(r.Start, start), min(r.Start+r.Count, c)
		if s < e {
			below[r.Region] = append(below[r.Region], span{s, e})
		}
	}
	var indexed int64
	for id, spans := range below {
		reg := t.regions[id]
		if reg == nil {
			reg = &region{}
			t.regions[id] = reg
		}
		var nl runList
		for _, sp := range spans {
			if s := max(sp.start, reg.dropped); s < sp.end {
				nl.appendRun(s, sp.end)
				indexed += sp.end - s
			}
		}
		reg.runs.each(c, math.MaxInt64, func(s, e int64) bool {
			nl.appendRun(s, e)
			return true
		})
		reg.runs = nl
		t.dirty[id] = struct{}{}
	}
	t.c = start
	t.needBase = true
	if indexed > 0 {
		t.m.entries.Add(float64(indexed))
	}
}
