package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

func (a *app) printDemo(o demoOpts, s *session, topics []string, r *demoResult, problems *problemList) {
	w := a.stdout
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	sec := r.elapsed.Seconds()
	fmt.Fprintf(tw, "entries appended\t%d (%s) in %v\n", r.entries, humanBytes(r.bytes), roundDur(r.elapsed))
	fmt.Fprintf(tw, "append throughput\t%.0f entries/s, %.1f MB/s\n", float64(r.entries)/sec, mb(r.bytes)/sec)
	fmt.Fprintf(tw, "append latency\tp50 %v, p99 %v (per call of %s, %s)\n",
		roundDur(quantile(r.latencies, 0.5)), roundDur(quantile(r.latencies, 0.99)), plural(o.perCall, "entry", "entries"), plural(len(r.latencies), "call", "calls"))
	fmt.Fprintf(tw, "restart\tclose %v, reopen %v\n", roundDur(r.closeTime), roundDur(r.reopenTime))
	fmt.Fprintf(tw, "replay, every region\t%s (%s) in %v with the index: %s, %s fetched\n",
		plural(r.replayAllStats.Entries, "entry", "entries"), humanBytes(r.replayAllStats.EntryBytes), roundDur(r.replayAll),
		plural(r.replayAllStats.Fetches, "fetch", "fetches"), humanBytes(r.replayAllStats.FetchedBytes))
	for _, one := range []struct {
		how   string
		took  time.Duration
		stats kafka.ReadStats
	}{{"indexed", r.indexed, r.indexedStats}, {"full scan", r.scanned, r.scannedStats}} {
		fmt.Fprintf(tw, "replay, region %d, %s\t%v: %s, %s, %s fetched\n", r.oneRegion, one.how, roundDur(one.took),
			plural(one.stats.Entries, "entry", "entries"), plural(one.stats.Fetches, "fetch", "fetches"), humanBytes(one.stats.FetchedBytes))
	}
	speedup := 0.0
	why := speedupWhyNot(r)
	if why != "" {
		fmt.Fprintf(tw, "replay speedup\tnot measured: %s\n", why)
	} else {
		speedup = float64(r.scanned) / float64(r.indexed)
		runs := "one run each"
		if o.replayRuns > 1 {
			runs = fmt.Sprintf("median of %d runs each", o.replayRuns)
		}
		fmt.Fprintf(tw, "replay speedup\t%.1fx (full-scan time ÷ indexed time, %s)\n", speedup, runs)
	}
	if why == "" {
		fmt.Fprintf(tw, "bytes fetched\t%.1fx fewer with the index (full scan %s ÷ indexed %s)\n",
			float64(r.scannedStats.FetchedBytes)/float64(r.indexedStats.FetchedBytes), humanBytes(r.scannedStats.FetchedBytes), humanBytes(r.indexedStats.FetchedBytes))
	}
	perEntry := 0.0
	if r.entries > 0 {
		perEntry = float64(r.indexBytes) / float64(r.entries)
	}
	fmt.Fprintf(tw, "index on disk\t%s in %s, %.2f B/entry\n", humanBytes(r.indexBytes), plural(r.indexFiles, "file", "files"), perEntry)
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
	if why == "" {
		explainSpeedup(w, s, r, speedup)
		fmt.Fprintln(w)
	}
	a.suggestNext(w, r.oneNamespace, r.oneRegion)
}

// minSkipped is the least the index must save region 1's replay, in
// bytes fetched, for the replays' times and bytes to be compared: below
// it, what a replay costs anyway (planning, a fetch's round trip,
// scheduling; milliseconds on a loaded machine) varies more than the time
// the saved bytes take, and both figures would describe batch framing and
// noise, not the index.
const minSkipped = 1 << 20

// speedupWhyNot says in a few words why region 1's two replays give no
// speedup (nor bytes ratio) worth printing, or "" when they do. The
// replays differ only by what the index lets the indexed one skip.
func speedupWhyNot(r *demoResult) string {
	saved := r.scannedStats.FetchedBytes - r.indexedStats.FetchedBytes
	switch {
	case r.sharing <= 1:
		return fmt.Sprintf("region %d has its namespace to itself, so both replays read the same records", r.oneRegion)
	case r.indexedStats.Entries == 0:
		return fmt.Sprintf("region %d got no entry to replay (too few were appended)", r.oneRegion)
	case saved <= 0:
		return fmt.Sprintf("the log is too small for the index to skip any of it (the full scan fetched %s, the indexed replay %s)",
			humanBytes(r.scannedStats.FetchedBytes), humanBytes(r.indexedStats.FetchedBytes))
	case saved < minSkipped:
		return fmt.Sprintf("the index skipped only %s of the full scan's %s, too little to time",
			humanBytes(saved), humanBytes(r.scannedStats.FetchedBytes))
	case r.indexed <= 0 || r.scanned <= 0:
		return "a replay took no measurable time"
	}
	return ""
}

// explainSpeedup says what the replay speedup measured, and why the figure
// depends on the broker.
func explainSpeedup(w io.Writer, s *session, r *demoResult, speedup float64) {
	fmt.Fprintf(w, "What the replay speedup measures: region %d shares namespace %s with %s.\n", r.oneRegion, r.oneNamespace, plural(r.sharing-1, "other region", "other regions"))
	is := r.indexedStats
	fmt.Fprintf(w, "Its own data is %s. The indexed replay planned from the index (%s; the read chose %q, reading\n", humanBytes(is.EntryBytes), plural(is.IndexRanges+is.ScanRanges, "range", "ranges"), is.Plan)
	fmt.Fprintf(w, "through %s between them where another fetch would cost more) and fetched %s in %s;\n", plural(is.MergedGaps, "gap", "gaps"), humanBytes(is.FetchedBytes), plural(is.Fetches, "fetch", "fetches"))
	fmt.Fprintf(w, "the full scan read the whole namespace: %s in %s.\n", humanBytes(r.scannedStats.FetchedBytes), plural(r.scannedStats.Fetches, "fetch", "fetches"))
	fmt.Fprintf(w, "The bytes saved are the index's doing and hold on any broker; the time saved depends on what a fetch costs there.\n")
	if s.embedded {
		fmt.Fprintf(w, "On this embedded broker a fetch is an in-process copy, so the time follows the bytes copied and decoded.\n")
	} else {
		fmt.Fprintf(w, "On a real Kafka each fetch is a network round trip (and a disk read when the data is not in the page cache),\n")
		fmt.Fprintf(w, "so a few large sequential fetches of a small or cached log can beat many small ones.\n")
	}
	if speedup > 0 && speedup < 1 {
		fmt.Fprintf(w, "Here the indexed replay was slower: its %s cost more round trips than the %s it did not read saved;\n",
			plural(r.indexedStats.Fetches, "fetch", "fetches"), humanBytes(r.scannedStats.FetchedBytes-r.indexedStats.FetchedBytes))
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
