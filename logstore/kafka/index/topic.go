package index

import (
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// maxPendingRuns bounds the runs a topic keeps above its watermark W while
// waiting for the gap below them to be filled. When more arrive the highest
// are dropped: that only leaves their offsets unaccounted (reads scan them),
// never wrong.
const maxPendingRuns = 1 << 16

// region is one region's part of a topic index.
type region struct {
	runs runList
	// dropped is the region's Obsolete point: its offsets below it were
	// dropped, so plans scan [from, dropped) for it.
	dropped int64
}

// topic is the index of one topic. Lock order: persistMu before mu.
type topic struct {
	name string
	log  *slog.Logger
	m    *metrics
	wm   prometheus.Gauge // the kwal_index_watermark gauge of this topic

	// persistMu serialises checkpoints and Drop of this topic; it guards persist.
	persistMu sync.Mutex
	persist   persistState

	mu sync.RWMutex
	// covered is false until the topic has an accounted span (Start, or a
	// loaded checkpoint).
	covered bool
	// c and w bound the accounted span [c, w): each offset in it is in
	// exactly one region's runs, or in none when it holds no kwal entry;
	// except that a region's offsets below its dropped point are gone.
	c, w int64
	// pending are runs observed above w, sorted by Start, possibly
	// overlapping; absorbed as soon as they touch w.
	pending []Run
	regions map[uint64]*region
	// dirty are the regions whose runs or dropped point changed since the
	// last checkpoint snapshot.
	dirty map[uint64]struct{}
	// needBase forces the next checkpoint to write a base (coverage was
	// discarded, or the files on the store do not form a clean chain).
	needBase bool
	// dropped is set by Drop: the object is no longer in the Collector's map.
	dropped bool
	// deleted is what the index knew of offsets below C that left the log
	// (deleted.go); nil when it knew of none. deletedDirty: it changed
	// since the last checkpoint snapshot.
	deleted      *deletedSpan
	deletedDirty bool
	// lower is a scan in progress below C (scan.go), nil when none.
	lower *lowering
}

func newTopic(name string, log *slog.Logger, m *metrics) *topic {
	return &topic{
		name:    name,
		log:     log.With("topic", name),
		m:       m,
		wm:      m.watermark.WithLabelValues(name),
		regions: make(map[uint64]*region),
		dirty:   make(map[uint64]struct{}),
	}
}

// start implements Collector.Start for this topic.
func (t *topic) start(logStart, end int64) {
	end = max(end, 0)
	logStart = min(max(logStart, 0), end)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.covered:
		t.covered = true
		t.c, t.w = end, end
		t.needBase = true
		for id, r := range t.regions {
			if r.dropped <= end { // only Obsolete points can exist before coverage
				delete(t.regions, id)
				delete(t.dirty, id)
			}
		}
	case t.w > end:
		// The log ends below offsets we know of: the topic was recreated or
		// truncated. Nothing we know can be trusted.
		t.log.Warn("index: log ends below the indexed watermark; discarding the topic's coverage",
			"end", end, "watermark", t.w, "accounted_from", t.c)
		t.m.discarded.WithLabelValues("end_below_watermark").Inc()
		t.resetLocked()
		t.covered = true
		t.c, t.w = end, end
		t.needBase = true
	case logStart > t.c:
		t.raiseCLocked(logStart)
	}
	t.absorbLocked()
	t.wm.Set(float64(t.w))
}

// resetLocked forgets everything.
func (t *topic) resetLocked() {
	t.covered = false
	t.c, t.w = 0, 0
	t.pending = nil
	t.lower = nil
	t.deleted, t.deletedDirty = nil, false
	clear(t.regions)
	clear(t.dirty)
}

// raiseCLocked moves C up to x (and W with it when x is above W), dropping
// every offset below x.
func (t *topic) raiseCLocked(x int64) {
	if x <= t.c {
		return
	}
	t.noteDeletedLocked(x)
	t.lower = nil // what it scanned lies below the log's start now
	t.c = x
	if x > t.w {
		t.w = x
	}
	for id, r := range t.regions {
		r.runs.dropBelow(x)
		if r.runs.empty() && r.dropped <= x {
			// Nothing left and [from, dropped) lies below C, which plans
			// scan anyway: the region costs nothing more.
			delete(t.regions, id)
			delete(t.dirty, id)
		}
	}
}

// observe implements Collector.Observe for this topic.
func (t *topic) observe(runs []Run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var invalid int
	var indexed int64
	for _, r := range runs {
		if r.Count <= 0 || r.Start < 0 || r.Start > math.MaxInt64-r.Count {
			invalid++
			continue
		}
		end := r.Start + r.Count
		switch {
		case t.covered && end <= t.w:
			// Already accounted for, or below C.
		case t.covered && r.Start <= t.w:
			// Touches W: the common case of in-order acknowledgements.
			if !r.Foreign {
				indexed += t.addRegionRunLocked(r.Region, t.w, end)
			}
			t.w = end
			if len(t.pending) > 0 && t.pending[0].Start <= t.w {
				t.absorbLocked()
			}
		default:
			t.insertPendingLocked(r)
		}
	}
	if indexed > 0 {
		t.m.entries.Add(float64(indexed))
	}
	t.m.runs.Add(float64(len(runs) - invalid))
	if invalid > 0 {
		t.m.invalidRuns.Add(float64(invalid))
		t.log.Warn("index: ignoring invalid runs", "count", invalid)
	}
	if t.covered {
		t.absorbLocked()
		t.wm.Set(float64(t.w))
	}
}

func sameOwner(a, b Run) bool {
	return a.Foreign == b.Foreign && (a.Foreign || a.Region == b.Region)
}

// insertPendingLocked adds r to the pending runs, merging it into its
// predecessor when both belong to the same owner and touch.
func (t *topic) insertPendingLocked(r Run) {
	p := t.pending
	i := len(p)
	if i > 0 && p[i-1].Start > r.Start {
		i = sort.Search(len(p), func(i int) bool { return p[i].Start > r.Start })
	}
	if i > 0 {
		prev := &p[i-1]
		if pe := prev.Start + prev.Count; sameOwner(*prev, r) && pe >= r.Start {
			if e := r.Start + r.Count; e > pe {
				prev.Count = e - prev.Start
			}
			return
		}
	}
	if len(p) >= maxPendingRuns {
		if i == len(p) {
			t.m.pendingOverflow.Inc()
			return // r is the highest: drop it
		}
		p = p[:len(p)-1]
		t.m.pendingOverflow.Inc()
	}
	t.pending = slices.Insert(p, i, r)
}

// absorbLocked moves pending runs that touch W into the accounted span,
// advancing W through them.
func (t *topic) absorbLocked() {
	p := t.pending
	k := 0
	var indexed int64
	for ; k < len(p) && p[k].Start <= t.w; k++ {
		r := p[k]
		end := r.Start + r.Count
		if end <= t.w {
			continue
		}
		if !r.Foreign {
			indexed += t.addRegionRunLocked(r.Region, t.w, end)
		}
		t.w = end
	}
	if k > 0 {
		t.pending = slices.Delete(p, 0, k)
		if len(t.pending) == 0 {
			t.pending = nil // let a burst's buffer go
		}
	}
	if indexed > 0 {
		t.m.entries.Add(float64(indexed))
	}
}

// addRegionRunLocked appends [s, e) to the region's runs, minus the part
// below its dropped point, and returns the offsets added.
func (t *topic) addRegionRunLocked(id uint64, s, e int64) int64 {
	r := t.regions[id]
	if r != nil {
		s = max(s, r.dropped)
	}
	if e <= s {
		return 0
	}
	if r == nil {
		r = &region{}
		t.regions[id] = r
	}
	r.runs.appendRun(s, e)
	t.dirty[id] = struct{}{}
	return e - s
}

// obsolete implements Collector.Obsolete for this topic.
func (t *topic) obsolete(id uint64, before int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Kept even when before <= C: a scan may lower C later (ObserveScan
	// reaching C from below, as a rebuilding scan does after it learned the
	// point from a mark in the log), and the runs it adds must start at the
	// region's Obsolete point.
	r := t.regions[id]
	if r != nil && before <= r.dropped {
		return
	}
	if r == nil {
		r = &region{}
		t.regions[id] = r
	}
	r.dropped = before
	r.runs.dropBelow(before)
	t.dirty[id] = struct{}{}
}

// ObsoletePoint returns the region's Obsolete point as the index knows it:
// it needs none of its records below the returned offset (0: none known).
func (g *Collector) ObsoletePoint(topic string, region uint64) int64 {
	t := g.topic(topic, false)
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if r := t.regions[region]; r != nil {
		return r.dropped
	}
	return 0
}
