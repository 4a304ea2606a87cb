package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

func (a *app) printDemo(o demoOpts, s *session, topics []string, r *demoResult, problems *problemList) {
	w := a.stdout
	fmt.Fprintf(w, "\nkwal demo: %d regions over %d namespaces (%s…), %d writers, %d entries of %d B per call\n",
		o.regions, o.topics, strings.TrimSuffix(topics[0], "0"), o.writers, o.perCall, o.entrySize)
	fmt.Fprintf(w, "broker: %s; index: %s\n\n", s.describeBroker(), s.cfg.IndexDir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	sec := r.elapsed.Seconds()
	fmt.Fprintf(tw, "entries appended\t%d (%.1f MB) in %v\n", r.entries, mb(r.bytes), roundDur(r.elapsed))
	fmt.Fprintf(tw, "append throughput\t%.0f entries/s, %.1f MB/s\n", float64(r.entries)/sec, mb(r.bytes)/sec)
	fmt.Fprintf(tw, "append latency\tp50 %v, p99 %v (per call of %d entries, %d calls)\n",
		roundDur(quantile(r.latencies, 0.5)), roundDur(quantile(r.latencies, 0.99)), o.perCall, len(r.latencies))
	fmt.Fprintf(tw, "restart\tclose %v, reopen %v\n", roundDur(r.closeTime), roundDur(r.reopenTime))
	fmt.Fprintf(tw, "replay, every region\t%d entries (%.1f MB) in %v with the index: %d fetches, %.1f MB fetched\n",
		r.replayAllStats.Entries, mb(r.replayAllStats.EntryBytes), roundDur(r.replayAll), r.replayAllStats.Fetches, mb(r.replayAllStats.FetchedBytes))
	fmt.Fprintf(tw, "replay, region %d, indexed\t%v: %d entries, %d fetches, %.1f MB fetched\n",
		r.oneRegion, roundDur(r.indexed), r.indexedStats.Entries, r.indexedStats.Fetches, mb(r.indexedStats.FetchedBytes))
	fmt.Fprintf(tw, "replay, region %d, full scan\t%v: %d entries, %d fetches, %.1f MB fetched\n",
		r.oneRegion, roundDur(r.scanned), r.scannedStats.Entries, r.scannedStats.Fetches, mb(r.scannedStats.FetchedBytes))
	speedup := 0.0
	if r.indexed > 0 {
		speedup = float64(r.scanned) / float64(r.indexed)
	}
	runs := "one run each"
	if o.replayRuns > 1 {
		runs = fmt.Sprintf("median of %d runs each", o.replayRuns)
	}
	fmt.Fprintf(tw, "replay speedup\t%.1fx (full-scan time ÷ indexed time, %s)\n", speedup, runs)
	perEntry := 0.0
	if r.entries > 0 {
		perEntry = float64(r.indexBytes) / float64(r.entries)
	}
	fmt.Fprintf(tw, "index on disk\t%s in %d file(s), %.2f B/entry\n", humanBytes(r.indexBytes), r.indexFiles, perEntry)
	if problems.total == 0 {
		fmt.Fprintf(tw, "check\tOK: every acknowledged entry came back byte-identical, in order, once\n")
	} else {
		fmt.Fprintf(tw, "check\tFAILED: %d problem(s) in %d region(s)\n", problems.total, len(problems.regions))
	}
	_ = tw.Flush()
	if problems.total > 0 {
		fmt.Fprintln(w)
		problems.print(w)
	}
}
