package index

import (
	"math"
	"slices"
)

// TopicStats describes one topic's index, for inspection (`kwal index
// show`) and figures (bytes per entry).
type TopicStats struct {
	Topic   string
	Covered bool  // false until the topic has an accounted span
	C, W    int64 // the accounted span [C, W)
	// PendingRuns are runs observed above W, waiting for the gap below them.
	PendingRuns int
	Entries     int64 // offsets indexed, over all regions
	Runs        int   // runs of consecutive offsets, over all regions
	// Files, Deltas, LastSeq and StoredBytes describe the topic's
	// checkpoint chain on the Store as of its last load or checkpoint.
	// StoredBytes counts the files the chain uses; FileNames names every
	// file of the topic on the Store, used or not.
	Files       int
	Deltas      int
	LastSeq     uint64
	StoredBytes int64
	FileNames   []string
	// LoadFailures are the topic's files that New could not use (the
	// index then holds the last consistent state before them, or none).
	LoadFailures []LoadFailure
	Regions      []RegionStats // sorted by region; only when asked for
}

// LoadFailure is a checkpoint file that New could not use.
type LoadFailure struct {
	File string // its name on the Store
	// Reason is missing, truncated, corrupt, version or io: the reason
	// label of kwal_index_load_failures_total.
	Reason string
	Err    error
}

// RegionStats describes one region's part of a topic index.
type RegionStats struct {
	Region      uint64
	Entries     int64 // offsets indexed
	Runs        int
	First, Last int64 // first and last offset indexed; -1 when none
	// ObsoleteBelow is the region's Obsolete point (0 when none): its
	// offsets below it were dropped.
	ObsoleteBelow int64
}

// Topics returns the topics the index knows, sorted: every topic found in
// the Store at New, and every one seen since.
func (g *Collector) Topics() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.topics))
	for name := range g.topics {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Stats describes the topic's index; with regions set it also describes
// each region. It reports false for a topic the index does not know.
func (g *Collector) Stats(topic string, regions bool) (TopicStats, bool) {
	t := g.topic(topic, false)
	if t == nil {
		return TopicStats{}, false
	}
	ts := t.describe(regions)
	g.mu.Lock()
	ts.LoadFailures = slices.Clone(g.failures[topic])
	g.mu.Unlock()
	return ts, true
}

// describe is Stats for this topic.
func (t *topic) describe(regions bool) TopicStats {
	t.persistMu.Lock()
	ts := TopicStats{
		Topic:       t.name,
		Files:       len(t.persist.files),
		Deltas:      t.persist.deltas,
		LastSeq:     t.persist.lastSeq,
		StoredBytes: t.persist.baseBytes + t.persist.deltaBytes,
	}
	for _, f := range t.persist.files {
		ts.FileNames = append(ts.FileNames, f.name)
	}
	t.persistMu.Unlock()
	t.mu.RLock()
	defer t.mu.RUnlock()
	ts.Covered, ts.C, ts.W, ts.PendingRuns = t.covered, t.c, t.w, len(t.pending)
	for id, r := range t.regions {
		ts.Entries += r.runs.entries
		ts.Runs += r.runs.runs
		if !regions {
			continue
		}
		rs := RegionStats{Region: id, Entries: r.runs.entries, Runs: r.runs.runs, First: -1, Last: r.runs.lastEnd() - 1, ObsoleteBelow: r.dropped}
		if r.runs.empty() {
			rs.Last = -1
		}
		r.runs.each(0, math.MaxInt64, func(s, _ int64) bool {
			rs.First = s
			return false
		})
		ts.Regions = append(ts.Regions, rs)
	}
	slices.SortFunc(ts.Regions, func(a, b RegionStats) int {
		switch {
		case a.Region < b.Region:
			return -1
		case a.Region > b.Region:
			return 1
		}
		return 0
	})
	return ts
}
