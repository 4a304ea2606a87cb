package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/schollz/progressbar/v3"
)

// demoReplay replays every region with the index, checks it, and times one
// region's indexed and full-scan replays.
func (a *app) demoReplay(ctx context.Context, st *kafka.LogStore, o demoOpts, topics []string, exp *expectation, res *demoResult) (*problemList, error) {
	problems := &problemList{max: 20, regions: map[logstore.RegionID]bool{}}
	var total uint64
	for _, rl := range exp.regions {
		total += rl.entries
	}
	a.demoPhase(o, "replaying every region with the index and checking it: %s in %d namespace(s)…", plural(total, "entry", "entries"), len(topics))
	var bar *progressbar.ProgressBar
	if !o.quiet && a.interactive() {
		bar = a.progressBar(int64(total), "replaying")
	}
	var replayed int64
	t0 := time.Now()
	for _, ns := range topics {
		from := map[logstore.RegionID]logstore.EntryID{}
		checks := map[logstore.RegionID]*regionCheck{}
		for id, rl := range exp.regions {
			if rl.namespace == ns {
				from[id] = 0
				checks[id] = exp.check(id, problems)
			}
		}
		var stats kafka.ReadStats
		for e, err := range st.ReadWith(ctx, ns, from, kafka.ReadOptions{Stats: &stats}) {
			if err != nil {
				return nil, fmt.Errorf("replaying %s: %w", ns, err)
			}
			if replayed++; bar != nil && replayed%1024 == 0 {
				_ = bar.Set64(replayed)
			}
			c := checks[e.Region]
			if c == nil {
				problems.add(ns, e.Region, e.ID, "entry of a region that was not asked for")
				continue
			}
			c.add(e)
		}
		for _, c := range checks {
			c.finish()
		}
		addStats(&res.replayAllStats, stats)
	}
	res.replayAll = time.Since(t0)
	if bar != nil {
		_ = bar.Finish()
	}
	a.demoPhase(o, "timing region 1's replay, with the index and by a full scan (%d run(s) each)…", o.replayRuns)

	// One region, indexed vs full scan: the first run of each is checked
	// too.
	res.oneRegion, res.oneNamespace = 1, topics[0]
	for _, rl := range exp.regions {
		if rl.namespace == res.oneNamespace {
			res.sharing++
		}
	}
	var err error
	res.indexed, res.indexedStats, err = timeReplay(ctx, st, res.oneNamespace, res.oneRegion, false, o.replayRuns, exp, problems)
	if err != nil {
		return nil, err
	}
	res.scanned, res.scannedStats, err = timeReplay(ctx, st, res.oneNamespace, res.oneRegion, true, o.replayRuns, exp, problems)
	if err != nil {
		return nil, err
	}
	return problems, nil
}

// timeReplay replays one region runs times and returns the median time and
// the first run's stats; the first run is checked against exp when set.
func timeReplay(ctx context.Context, st *kafka.LogStore, ns string, region logstore.RegionID, noIndex bool, runs int, exp *expectation, problems *problemList) (time.Duration, kafka.ReadStats, error) {
	var (
		times []time.Duration
		first kafka.ReadStats
	)
	for i := range runs {
		var stats kafka.ReadStats
		var c *regionCheck
		if i == 0 && exp != nil {
			c = exp.check(region, problems)
		}
		t0 := time.Now()
		for e, err := range st.ReadWith(ctx, ns, map[logstore.RegionID]logstore.EntryID{region: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &stats}) {
			if err != nil {
				return 0, first, fmt.Errorf("replaying region %d of %s: %w", region, ns, err)
			}
			if c != nil {
				c.add(e)
			}
		}
		times = append(times, time.Since(t0))
		if c != nil {
			c.finish()
		}
		if i == 0 {
			first = stats
		}
	}
	slices.Sort(times)
	return times[len(times)/2], first, nil
}

func addStats(dst *kafka.ReadStats, s kafka.ReadStats) {
	dst.Fetches += s.Fetches
	dst.FetchedBytes += s.FetchedBytes
	dst.Records += s.Records
	dst.Entries += s.Entries
	dst.EntryBytes += s.EntryBytes
	dst.ScanRanges += s.ScanRanges
	dst.IndexRanges += s.IndexRanges
	dst.Missing += s.Missing
}
