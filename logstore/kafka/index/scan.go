package index

import "math"

// ObserveScan records what a reader decoded while scanning [start, end)
// of the topic: runs must cover every offset of [start, end), ascending
// (foreign runs for offsets holding no kwal entry). Because the reader saw
// everything there, the index may account for it even below C. A topic with
// no coverage yet starts its accounted span at start. The part at or above
// C goes through Observe.
//
// A scan below C reports in pieces as it goes (a reader hands its runs over
// every so often, so that it holds a bounded number): consecutive pieces
// below C are kept, in the index's compact form, until one reaches C; then
// C drops to where the first piece began and the next read of any region
// from there on is fully indexed. So an index that was not persisted, or is
// older than the log, is rebuilt by the first replay, whatever the topic's
// size, instead of every replay scanning again (GreptimeDB #6594). A piece
// that does not continue the kept ones starts them over.
func (g *Collector) ObserveScan(topic string, start, end int64, runs []Run) {
	if start >= end {
		return
	}
	g.topic(topic, true).observeScan(start, end, runs)
}

// lowering is a scan in progress below C: it accounted for [from, to)
// (to <= C), each region's runs there in a runList.
type lowering struct {
	from, to int64
	regions  map[uint64]*runList
}

// add takes in the runs of a scanned piece [start, end) that continues the
// lowering (start <= l.to), below limit.
func (l *lowering) add(end, limit int64, runs []Run) {
	for _, r := range runs {
		if r.Foreign || r.Count <= 0 {
			continue
		}
		s, e := max(r.Start, l.to), min(r.Start+r.Count, limit)
		if s >= e {
			continue
		}
		rl := l.regions[r.Region]
		if rl == nil {
			rl = &runList{}
			l.regions[r.Region] = rl
		}
		rl.appendRun(s, e)
	}
	l.to = max(l.to, min(end, limit))
}

func (t *topic) observeScan(start, end int64, runs []Run) {
	t.mu.Lock()
	switch {
	case !t.covered:
		t.covered = true
		t.c, t.w = start, start
		t.needBase = true
		t.lower = nil
		for id, r := range t.regions {
			if r.runs.empty() && r.dropped <= start {
				delete(t.regions, id)
				delete(t.dirty, id)
			}
		}
	case start < t.c:
		l := t.lower
		if l == nil || start > l.to || start < l.from {
			l = &lowering{from: start, to: start, regions: make(map[uint64]*runList)}
			t.lower = l
		}
		l.add(end, t.c, runs)
		if l.to >= t.c {
			t.lower = nil
			t.lowerCLocked(l)
		}
	}
	t.mu.Unlock()
	t.observe(runs)
}

// lowerCLocked accounts for [l.from, C) from a complete scan's runs and
// moves C down to l.from. Region lists only grow at the end, so each
// touched region's list is rebuilt: the scanned runs below C (above its
// Obsolete point), then what it had. The next checkpoint writes a base,
// since deltas only describe growth above the previous W.
func (t *topic) lowerCLocked(l *lowering) {
	c := t.c
	var indexed int64
	for id, below := range l.regions {
		reg := t.regions[id]
		if reg == nil {
			reg = &region{}
			t.regions[id] = reg
		}
		var nl runList
		below.each(reg.dropped, c, func(s, e int64) bool {
			s = max(s, reg.dropped)
			nl.appendRun(s, e)
			indexed += e - s
			return true
		})
		reg.runs.each(c, math.MaxInt64, func(s, e int64) bool {
			nl.appendRun(s, e)
			return true
		})
		reg.runs = nl
		t.dirty[id] = struct{}{}
	}
	t.c = l.from
	t.needBase = true
	if indexed > 0 {
		t.m.entries.Add(float64(indexed))
	}
}
