package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kwal/kwal/logstore"
)

func (a *app) printDemo(o demoOpts, s *session, topics []string, r *demoResult, problems *problemList) {
	w := a.stdout
	fmt.Fprintln(w)
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
	if r.indexedStats.FetchedBytes > 0 {
		fmt.Fprintf(tw, "bytes fetched\t%.1fx fewer with the index (full scan %s ÷ indexed %s)\n",
			float64(r.scannedStats.FetchedBytes)/float64(r.indexedStats.FetchedBytes), humanBytes(r.scannedStats.FetchedBytes), humanBytes(r.indexedStats.FetchedBytes))
	}
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
	fmt.Fprintln(w)
	explainSpeedup(w, s, r, speedup)
	fmt.Fprintln(w)
	a.suggestNext(w, r.oneNamespace, r.oneRegion)
}

// explainSpeedup says what the replay speedup measured, and why the figure
// depends on the broker.
func explainSpeedup(w io.Writer, s *session, r *demoResult, speedup float64) {
	fmt.Fprintf(w, "What the replay speedup measures: region %d shares namespace %s with %d other region(s).\n", r.oneRegion, r.oneNamespace, r.sharing-1)
	is := r.indexedStats
	fmt.Fprintf(w, "Its own data is %s. The indexed replay planned from the index (%d range(s); the read chose %q, reading\n", humanBytes(is.EntryBytes), is.IndexRanges+is.ScanRanges, is.Plan)
	fmt.Fprintf(w, "through %d gap(s) between them where another fetch would cost more) and fetched %s in %d fetch(es);\n", is.MergedGaps, humanBytes(is.FetchedBytes), is.Fetches)
	fmt.Fprintf(w, "the full scan read the whole namespace: %s in %d fetch(es).\n", humanBytes(r.scannedStats.FetchedBytes), r.scannedStats.Fetches)
	fmt.Fprintf(w, "The bytes saved are the index's doing and hold on any broker; the time saved depends on what a fetch costs there.\n")
	if s.embedded {
		fmt.Fprintf(w, "On this embedded broker a fetch is an in-process copy, so the time follows the bytes copied and decoded.\n")
	} else {
		fmt.Fprintf(w, "On a real Kafka each fetch is a network round trip (and a disk read when the data is not in the page cache),\n")
		fmt.Fprintf(w, "so a few large sequential fetches of a small or cached log can beat many small ones.\n")
	}
	if speedup > 0 && speedup < 1 {
		fmt.Fprintf(w, "Here the indexed replay was slower: its %d fetches cost more round trips than the %s it did not read saved;\n",
			r.indexedStats.Fetches, humanBytes(r.scannedStats.FetchedBytes-r.indexedStats.FetchedBytes))
		fmt.Fprintf(w, "a larger log, more regions per namespace or a cold page cache turn that around.\n")
	}
}

// suggestNext prints commands to look further at what the demo wrote,
// with the flags that reach the same broker and index.
func (a *app) suggestNext(w io.Writer, ns string, region logstore.RegionID) {
	target := a.targetFlags()
	fmt.Fprintln(w, "Next, try:")
	fmt.Fprintf(w, "  kwal replay -n %s -r %d --summary%s   # region %d as a datanode replays it\n", ns, region, target, region)
	fmt.Fprintf(w, "  kwal index show -n %s%s   # what the index knows of each region\n", ns, target)
	fmt.Fprintf(w, "  kwal dump -n %s --limit 10%s   # the records as Kafka holds them\n", ns, target)
}

// targetFlags are the flags, as given to this command, that point another
// command at the same broker, data dir and index.
func (a *app) targetFlags() string {
	var b strings.Builder
	if br := a.brokers(); len(br) > 0 {
		fmt.Fprintf(&b, " --brokers %s", strings.Join(br, ","))
	}
	if a.g.dataDir != defaultDataDir {
		fmt.Fprintf(&b, " --data-dir %s", a.g.dataDir)
	}
	if a.g.indexDir != "" {
		fmt.Fprintf(&b, " --index-dir %s", a.g.indexDir)
	}
	return b.String()
}
