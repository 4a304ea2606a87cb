package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore/kafka"
)

// benchReport is the --json output.
type benchReport struct {
	AppendVsRaw        float64 `json:"append_vs_raw"`
	AppendVsRawAsync   float64 `json:"append_vs_raw_async"`
	ReplaySpeedup      float64 `json:"replay_speedup"`
	IndexBytesPerEntry float64 `json:"index_bytes_per_entry"`

	Broker     string              `json:"broker"`
	Workload   benchWorkload       `json:"workload"`
	Config     benchConfig         `json:"config"`
	Kwal       appendFigures       `json:"kwal"`
	Raw        appendFigures       `json:"raw"`
	RawAsync   appendFigures       `json:"raw_async"`
	Layout     layoutPair          `json:"layout"`
	Replay     replayFigures       `json:"replay"`
	Index      indexFigures        `json:"index"`
	Recovery   *bench.Recovery     `json:"recovery,omitempty"`
	Peers      *benchPeers         `json:"peers,omitempty"`
	Net        *benchNet           `json:"net,omitempty"`
	Rounds     int                 `json:"rounds"`
	Namespaces map[string][]string `json:"namespaces"`
}

// benchPeers is the peer producers' appends (added up over the rounds, as
// kwal's and raw's) and the GreptimeDB-style replay of region 1.
type benchPeers struct {
	Greptime         appendFigures `json:"greptime"`
	Mimir            appendFigures `json:"mimir"`
	AppendVsGreptime float64       `json:"append_vs_greptime"` // kwal MB/s ÷ GreptimeDB-style MB/s
	AppendVsMimir    float64       `json:"append_vs_mimir"`
	ReplayNamespace  string        `json:"replay_namespace"`
	Replay           replayRun     `json:"replay_greptime"`    // entries are the region's records
	ReplayVsGreptime float64       `json:"replay_vs_greptime"` // GreptimeDB-style replay time ÷ kwal's indexed replay time
}

// benchNet is the network --latency put between the run's clients and the
// brokers.
type benchNet struct {
	LatencyMSEachWay float64 `json:"latency_ms_each_way"`
	// ProduceRequests counts the produce requests written through it (kwal's
	// and the raw producer's).
	ProduceRequests int64 `json:"produce_requests"`
}

type benchWorkload struct {
	Topics         int     `json:"topics"`
	Regions        int     `json:"regions"`
	Writers        int     `json:"writers"`
	EntrySize      int     `json:"entry_size"`
	EntriesPerCall int     `json:"entries_per_call"`
	CallsPerWriter int     `json:"calls_per_writer"`
	DurationS      float64 `json:"duration_s,omitempty"`
	Seed           uint64  `json:"seed"`
}

type benchConfig struct {
	BatchBytes   int     `json:"batch_bytes"`
	Compression  string  `json:"compression"`
	LingerMS     float64 `json:"linger_ms"`
	ProduceLanes int     `json:"produce_lanes"`
	MaxRegions   int     `json:"max_regions_per_batch"`
	Fencing      string  `json:"fencing"`
}

type appendFigures struct {
	Entries     int64   `json:"entries"`
	Bytes       int64   `json:"bytes"`
	ElapsedS    float64 `json:"elapsed_s"`
	MBps        float64 `json:"mb_per_s"`
	EntriesPerS float64 `json:"entries_per_s"`
	Calls       int     `json:"calls,omitempty"`
	P50ms       float64 `json:"p50_ms,omitempty"`
	P99ms       float64 `json:"p99_ms,omitempty"`
}

type layoutFigures struct {
	Batches         int     `json:"batches"`
	BatchBytes      int64   `json:"batch_bytes"`
	Records         int64   `json:"records"`
	RegionsPerBatch float64 `json:"regions_per_batch"`
	Selectivity     float64 `json:"selectivity"`
	MaxSelectivity  float64 `json:"max_selectivity"`
}

type layoutPair struct {
	Kwal layoutFigures `json:"kwal"`
	Raw  layoutFigures `json:"raw"`
}

type replayRun struct {
	MedianMS     float64 `json:"median_ms"`
	Fetches      int     `json:"fetches"`
	FetchedBytes int64   `json:"fetched_bytes"`
	Records      int64   `json:"records"`
	Entries      int64   `json:"entries"`
	EntryBytes   int64   `json:"entry_bytes"`
}

type replayFigures struct {
	Namespace string    `json:"namespace"`
	Region    uint64    `json:"region"`
	Runs      int       `json:"runs"`
	Indexed   replayRun `json:"indexed"`
	FullScan  replayRun `json:"full_scan"`
}

type indexFigures struct {
	Bytes           int64 `json:"bytes"`
	Files           int   `json:"files"`
	Entries         int64 `json:"entries"`
	AppendedEntries int64 `json:"appended_entries"`
}

func figures(r bench.AppendResult, latencies bool) appendFigures {
	f := appendFigures{Entries: r.Entries, Bytes: r.Bytes, ElapsedS: r.Elapsed.Seconds(), MBps: r.MBps(), EntriesPerS: r.EntriesPerSec()}
	if latencies {
		f.Calls = len(r.Latencies)
		f.P50ms = ms(r.Quantile(0.5))
		f.P99ms = ms(r.Quantile(0.99))
	}
	return f
}

func layoutOf(l bench.Layout) layoutFigures {
	return layoutFigures{Batches: l.Batches, BatchBytes: l.BatchBytes, Records: l.Records, RegionsPerBatch: l.RegionsPerBatch, Selectivity: l.Selectivity, MaxSelectivity: l.MaxSelectivity}
}

func replayOf(d time.Duration, s kafka.ReadStats) replayRun {
	return replayRun{MedianMS: ms(d), Fetches: s.Fetches, FetchedBytes: s.FetchedBytes, Records: s.Records, Entries: s.Entries, EntryBytes: s.EntryBytes}
}

// addResult adds r's entries, bytes, time and latencies to sum.
func addResult(sum *bench.AppendResult, r bench.AppendResult) {
	sum.Entries += r.Entries
	sum.Bytes += r.Bytes
	sum.Elapsed += r.Elapsed
	sum.Latencies = append(sum.Latencies, r.Latencies...)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (a *app) printBench(o benchOpts, s *session, r *benchReport) {
	w := a.stdout
	wl := r.Workload
	runs := fmt.Sprintf("%d calls per writer", wl.CallsPerWriter)
	if o.duration > 0 {
		runs = fmt.Sprintf("for %v", o.duration)
	}
	fmt.Fprintf(w, "kwal bench: %d regions in %d topic(s), %d writers, %s of %d entries of %d B, %d round(s)\n",
		wl.Regions, wl.Topics, wl.Writers, runs, wl.EntriesPerCall, wl.EntrySize, r.Rounds)
	latency := ""
	if r.Net != nil {
		latency = fmt.Sprintf(" (%.1f ms added each way by a proxy)", r.Net.LatencyMSEachWay)
	}
	fmt.Fprintf(w, "broker: %s%s; batches %s, compression %s, linger %v, %d produce lanes, at most %d region(s) per batch\n\n",
		s.describeBroker(), latency, humanBytes(int64(o.batchBytes)), o.compression, o.linger, o.lanes, o.maxRegions)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "append\tMB/s\tentries/s\tp50\tp99\tentries\tregions/batch\tselectivity\t\n")
	row := func(name string, f appendFigures, l *layoutFigures) {
		p50, p99, rpb, sel := "-", "-", "-", "-"
		if f.Calls > 0 {
			p50 = fmt.Sprintf("%.2fms", f.P50ms)
			p99 = fmt.Sprintf("%.2fms", f.P99ms)
		}
		if l != nil {
			rpb = fmt.Sprintf("%.2f", l.RegionsPerBatch)
			sel = fmt.Sprintf("%.2f", l.Selectivity)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%s\t%s\t%d\t%s\t%s\t\n", name, f.MBps, f.EntriesPerS, p50, p99, f.Entries, rpb, sel)
	}
	row("kwal", r.Kwal, &r.Layout.Kwal)
	row("raw franz-go", r.Raw, &r.Layout.Raw)
	row("raw async (1 goroutine)", r.RawAsync, nil)
	if r.Peers != nil {
		row("GreptimeDB-style", r.Peers.Greptime, nil)
		row("Mimir-style", r.Peers.Mimir, nil)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "append_vs_raw\t%.2f\t(kwal MB/s ÷ raw MB/s, same concurrency)\n", r.AppendVsRaw)
	fmt.Fprintf(tw, "append_vs_raw_async\t%.2f\t(kwal MB/s ÷ one-goroutine async MB/s)\n", r.AppendVsRawAsync)
	rp := r.Replay
	fmt.Fprintf(tw, "replay region %d, indexed\t%.2fms\t(%d entries, %d fetches, %s fetched)\n", rp.Region, rp.Indexed.MedianMS, rp.Indexed.Entries, rp.Indexed.Fetches, humanBytes(rp.Indexed.FetchedBytes))
	fmt.Fprintf(tw, "replay region %d, full scan\t%.2fms\t(%d entries, %d fetches, %s fetched)\n", rp.Region, rp.FullScan.MedianMS, rp.FullScan.Entries, rp.FullScan.Fetches, humanBytes(rp.FullScan.FetchedBytes))
	fmt.Fprintf(tw, "replay_speedup\t%.2f\t(full scan ÷ indexed, median of %d)\n", r.ReplaySpeedup, rp.Runs)
	if p := r.Peers; p != nil {
		fmt.Fprintf(tw, "append_vs_greptime\t%.2f\t(kwal MB/s ÷ GreptimeDB-style MB/s)\n", p.AppendVsGreptime)
		fmt.Fprintf(tw, "append_vs_mimir\t%.2f\t(kwal MB/s ÷ Mimir-style MB/s)\n", p.AppendVsMimir)
		fmt.Fprintf(tw, "replay region %d, GreptimeDB-style\t%.2fms\t(%d records, %d fetches, %s fetched)\n", rp.Region, p.Replay.MedianMS, p.Replay.Records, p.Replay.Fetches, humanBytes(p.Replay.FetchedBytes))
		fmt.Fprintf(tw, "replay_vs_greptime\t%.2f\t(GreptimeDB-style windows ÷ kwal indexed, median of %d)\n", p.ReplayVsGreptime, rp.Runs)
	}
	fmt.Fprintf(tw, "index_bytes_per_entry\t%.3f\t(%s in %d file(s) ÷ %d entries indexed)\n", r.IndexBytesPerEntry, humanBytes(r.Index.Bytes), r.Index.Files, r.Index.Entries)
	_ = tw.Flush()
}
