package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

const benchPrefix = "kwal-bench-"

type benchOpts struct {
	w           bench.Workload
	duration    time.Duration
	batchBytes  int
	compression string
	linger      time.Duration
	lanes       int
	maxRegions  int
	replayRuns  int
	recovery    int
	rounds      int
	json        bool
	keep        bool
	quiet       bool
	metricsAddr string
}

const benchLong = `bench measures kwal against a raw franz-go producer in one run, on the same
broker, with the same records (encoded as kwal encodes them), the same batch
settings and the same concurrency:

  kwal       --writers goroutines, each appending --calls calls (or for
             --duration) of --entries-per-call entries of one of its regions
             with AppendBatch, waiting for each acknowledgement;
  raw        the same calls through one plain franz-go client (ProduceSync,
             acks=all, idempotent), same --batch-bytes, --compression, --linger;
  raw-async  every call's records produced from one goroutine without waiting
             (the ceiling of a single client);
  layout     how the kwal and raw topics' records fall into record batches:
             regions per batch, and selectivity (bytes of the batches holding a
             region's records ÷ that region's own bytes; 1 is ideal);
  replay     region 1 replayed with the index and by a full scan, each
             --replay-runs times (median), with fetches and fetched bytes;
  index      the checkpointed index of the kwal topic after the store is
             closed: bytes on disk ÷ entries it indexes.

Both producers are warmed up first (one call per writer, not measured), then
the three appends run --rounds times on fresh topics, alternating whether kwal
or raw goes first; throughput and latency add up all rounds (runs of the
default workload last a fraction of a second, so single runs are noisy).
Layout, replay and index are measured on the first round's topics.

Each run writes fresh namespaces (kwal-bench-<timestamp>-...), deleted at the
end unless --keep. The defaults are the "Batch layout" workload: 64 regions
in 1 topic, 64 writers, 30 calls of 10 entries of 2 KiB (about 39 MB per
producer and round), 1 MiB batches.

--json prints one JSON object: append_vs_raw (kwal MB/s ÷ raw MB/s),
append_vs_raw_async, replay_speedup (full-scan time ÷ indexed time),
index_bytes_per_entry, and the figures behind them.`

func (a *app) benchCmd() *cobra.Command {
	o := benchOpts{w: bench.Workload{Seed: 1}}
	def := kafka.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure kwal's appends, batch layout, replay and index against a raw franz-go producer",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runBench(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.w.EntrySize, "entry-size", 2048, "bytes of each entry's data")
	f.IntVar(&o.w.Regions, "regions", 64, "regions")
	f.IntVar(&o.w.Topics, "topics", 1, "namespaces (topics) per producer; region r lives in topic r mod topics")
	f.IntVar(&o.w.Writers, "writers", 64, "concurrent writers")
	f.IntVar(&o.w.EntriesPerCall, "entries-per-call", 10, "entries per append call")
	f.IntVar(&o.w.Calls, "calls", 30, "calls per writer (with --duration: the calls each writer cycles through)")
	f.DurationVar(&o.duration, "duration", 0, "append for this long instead of --calls calls per writer (kwal and raw; raw-async plays --calls once)")
	f.IntVar(&o.batchBytes, "batch-bytes", def.MaxBatchBytes, "largest record batch (kwal MaxBatchBytes, franz-go ProducerBatchMaxBytes)")
	f.StringVar(&o.compression, "compression", def.Compression, "compression: none, gzip, snappy, lz4, zstd")
	f.DurationVar(&o.linger, "linger", def.Linger, "producer linger (kwal Linger, franz-go ProducerLinger)")
	f.IntVar(&o.lanes, "produce-lanes", def.ProduceLanes, "kwal produce lanes (franz-go clients carrying batches at once)")
	f.IntVar(&o.maxRegions, "max-regions-per-batch", def.MaxRegionsPerBatch, "kwal MaxRegionsPerBatch: regions a produce may carry when a backlog builds up (1 = region-pure batches)")
	f.IntVar(&o.replayRuns, "replay-runs", 5, "timed runs of each replay (median reported)")
	f.IntVar(&o.recovery, "recovery-runs", 3, "timed runs of the recovery benchmark's one-region replays (0 skips the recovery benchmark)")
	f.IntVar(&o.rounds, "rounds", 3, "rounds of the append comparison (each on fresh topics, alternating which producer goes first; figures add up all rounds)")
	f.Uint64Var(&o.w.Seed, "seed", 1, "seed of the entry data")
	f.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&o.keep, "keep", false, "keep the benchmark's namespaces")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics during the run (e.g. :9090)")
	return cmd
}

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
	Rounds     int                 `json:"rounds"`
	Namespaces map[string][]string `json:"namespaces"`
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

func (a *app) runBench(ctx context.Context, o benchOpts) (err error) {
	if err := o.w.Validate(); err != nil {
		return err
	}
	if o.replayRuns < 1 {
		return fmt.Errorf("--replay-runs must be >= 1")
	}
	if o.rounds < 1 {
		return fmt.Errorf("--rounds must be >= 1")
	}
	if o.duration < 0 {
		return fmt.Errorf("--duration must not be negative")
	}
	codec, err := codecOf(o.compression)
	if err != nil {
		return err
	}
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.serveMetrics(o.metricsAddr); err != nil {
		return err
	}
	phase := func(format string, args ...any) {
		if !o.quiet {
			fmt.Fprintf(a.stderr, "bench: "+format+"\n", args...)
		}
	}
	mutate := func(c *kafka.Config) {
		c.MaxBatchBytes = o.batchBytes
		c.Compression = o.compression
		c.Linger = o.linger
		c.ProduceLanes = o.lanes
		c.MaxRegionsPerBatch = o.maxRegions
		c.FetchMaxBytes = max(c.FetchMaxBytes, int32(o.batchBytes))
		c.MaxQueuedBytes = max(c.MaxQueuedBytes, int64(o.batchBytes))
	}
	st, err := s.openStore(ctx, mutate)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()

	stamp := runStamp()
	names := func(tag string) []string {
		out := make([]string, o.w.Topics)
		for i := range out {
			out[i] = fmt.Sprintf("%s%s-%s-%d", benchPrefix, stamp, tag, i)
		}
		return out
	}
	type round struct{ kt, rt, at []string }
	rounds := make([]round, o.rounds)
	var all []string
	for i := range rounds {
		sfx := ""
		if i > 0 {
			sfx = fmt.Sprintf("-r%d", i+1)
		}
		rounds[i] = round{names("kwal" + sfx), names("raw" + sfx), names("async" + sfx)}
		all = append(all, rounds[i].kt...)
		all = append(all, rounds[i].rt...)
		all = append(all, rounds[i].at...)
	}
	warmK, warmR := names("warmup-kwal"), names("warmup-raw")
	all = append(all, warmK...)
	all = append(all, warmR...)
	for _, t := range all {
		if err := st.CreateNamespace(ctx, t); err != nil {
			return err
		}
	}
	if !o.keep {
		defer func() {
			if cerr := a.deleteNamespaces(s, mutate, all); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	kt, rt := rounds[0].kt, rounds[0].rt

	runPlan := func(plan [][]bench.Call, app bench.Appender) (bench.AppendResult, error) {
		if o.duration > 0 {
			return bench.RunFor(ctx, plan, app, o.duration, nil)
		}
		return bench.Run(ctx, plan, app, nil)
	}
	rep := benchReport{
		Broker: s.brokerKind(),
		Workload: benchWorkload{Topics: o.w.Topics, Regions: o.w.Regions, Writers: o.w.Writers, EntrySize: o.w.EntrySize,
			EntriesPerCall: o.w.EntriesPerCall, CallsPerWriter: o.w.Calls, DurationS: o.duration.Seconds(), Seed: o.w.Seed},
		Config:     benchConfig{BatchBytes: o.batchBytes, Compression: o.compression, LingerMS: ms(o.linger), ProduceLanes: o.lanes, MaxRegions: o.maxRegions},
		Rounds:     o.rounds,
		Namespaces: map[string][]string{"kwal": kt, "raw": rt, "raw_async": rounds[0].at},
	}

	copts, err := s.clientOpts()
	if err != nil {
		return err
	}
	cl, err := bench.RawClientWith(bench.RawOptions{MaxBatchBytes: o.batchBytes, Compression: codec, Linger: o.linger}, copts...)
	if err != nil {
		return fmt.Errorf("raw client: %w", err)
	}
	defer cl.Close()

	// Warm up: connections, producer IDs and metadata of both producers,
	// so that neither pays them in the measured runs.
	phase("warm-up…")
	warm := o.w
	warm.Calls = 1
	if _, err := bench.Run(ctx, warm.Plan(warmK), bench.KwalAppender(st), nil); err != nil {
		return fmt.Errorf("kwal warm-up: %w", err)
	}
	if _, err := bench.Run(ctx, warm.Plan(warmR), bench.RawAppender(cl, o.batchBytes), nil); err != nil {
		return fmt.Errorf("raw warm-up: %w", err)
	}

	// Rounds alternate which producer goes first; the figures add up
	// every round's entries, bytes, time and latencies.
	var kr, rr, ar bench.AppendResult
	var firstEntries int64 // kwal entries of round 1, whose topic's index is measured
	for i, rd := range rounds {
		runKwal := func() error {
			phase("round %d/%d: kwal, %d writers appending %d-entry calls of %d B to %d regions in %d topic(s)…",
				i+1, o.rounds, o.w.Writers, o.w.EntriesPerCall, o.w.EntrySize, o.w.Regions, o.w.Topics)
			r, err := runPlan(o.w.Plan(rd.kt), bench.KwalAppender(st))
			if err != nil {
				return fmt.Errorf("kwal appends: %w", err)
			}
			addResult(&kr, r)
			if i == 0 {
				firstEntries = r.Entries
			}
			return nil
		}
		runRaw := func() error {
			phase("round %d/%d: raw franz-go, same concurrency…", i+1, o.rounds)
			r, err := runPlan(o.w.Plan(rd.rt), bench.RawAppender(cl, o.batchBytes))
			if err != nil {
				return fmt.Errorf("raw appends: %w", err)
			}
			addResult(&rr, r)
			return nil
		}
		first, second := runKwal, runRaw
		if i%2 == 1 {
			first, second = runRaw, runKwal
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		phase("round %d/%d: raw franz-go, asynchronous from one goroutine…", i+1, o.rounds)
		r, err := bench.RawAsync(ctx, cl, o.w.Plan(rd.at), o.batchBytes)
		if err != nil {
			return fmt.Errorf("raw async appends: %w", err)
		}
		addResult(&ar, r)
	}
	slices.Sort(kr.Latencies)
	slices.Sort(rr.Latencies)
	rep.Kwal = figures(kr, true)
	rep.Raw = figures(rr, true)
	rep.RawAsync = figures(ar, false)
	cl.Close()

	phase("batch layout…")
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	kl, err := bench.MeasureLayoutWith(lctx, kt[0], copts...)
	if err != nil {
		return fmt.Errorf("layout of %s: %w", kt[0], err)
	}
	rl, err := bench.MeasureLayoutWith(lctx, rt[0], copts...)
	if err != nil {
		return fmt.Errorf("layout of %s: %w", rt[0], err)
	}
	rep.Layout = layoutPair{Kwal: layoutOf(kl), Raw: layoutOf(rl)}

	region := logstore.RegionID(1)
	ns := kt[0] // region 1 is workload region 0: topic 0
	phase("replay of region %d, indexed and full scan, %d runs each…", region, o.replayRuns)
	idxT, idxS, err := timeReplay(ctx, st, ns, region, false, o.replayRuns, nil, nil)
	if err != nil {
		return err
	}
	scanT, scanS, err := timeReplay(ctx, st, ns, region, true, o.replayRuns, nil, nil)
	if err != nil {
		return err
	}
	rep.Replay = replayFigures{Namespace: ns, Region: uint64(region), Runs: o.replayRuns, Indexed: replayOf(idxT, idxS), FullScan: replayOf(scanT, scanS)}

	if err := st.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	ib, nf, err := indexBytes(s.cfg.IndexDir, kt, a.log)
	if err != nil {
		return err
	}
	rep.Index = indexFigures{Bytes: ib, Files: nf, AppendedEntries: firstEntries}
	regions := map[string][]uint64{}
	for r := range o.w.Regions {
		regions[kt[r%len(kt)]] = append(regions[kt[r%len(kt)]], uint64(r+1))
	}
	if infos, err := inspectIndex(s.cfg.IndexDir, kt, regions, a.log); err == nil {
		for _, ti := range infos {
			for _, ri := range ti.Regions {
				rep.Index.Entries += ri.Records
			}
		}
	} else {
		a.log.Warn("bench: inspecting the index", "err", err)
	}
	entries := rep.Index.Entries
	if entries == 0 {
		entries = firstEntries
	}

	if o.recovery > 0 {
		phase("recovery: every phase on a store reopened with its index dir…")
		rec, err := bench.MeasureRecovery(ctx, bench.RecoveryConfig{
			Open:   func(ctx context.Context) (*kafka.LogStore, error) { return s.openStore(ctx, mutate) },
			Topics: kt, Regions: o.w.RegionsOf(kt), Runs: o.recovery, Seed: o.w.Seed,
			Layout: func(ctx context.Context, t string) (bench.Layout, error) {
				return bench.MeasureLayoutWith(ctx, t, copts...)
			},
			RawScan: func(ctx context.Context, t string) (bench.ConsumeResult, error) {
				return bench.RawConsumeWith(ctx, t, 16<<20, copts...)
			},
		})
		if err != nil {
			return err
		}
		rep.Recovery = &rec
	}

	rep.AppendVsRaw = ratio(kr.MBps(), rr.MBps())
	rep.AppendVsRawAsync = ratio(kr.MBps(), ar.MBps())
	rep.ReplaySpeedup = ratio(float64(scanT), float64(idxT))
	rep.IndexBytesPerEntry = ratio(float64(ib), float64(entries))

	if o.json {
		enc := json.NewEncoder(a.stdout)
		return enc.Encode(rep)
	}
	a.printBench(o, s, &rep)
	if rep.Recovery != nil {
		fmt.Fprintln(a.stdout)
		rep.Recovery.Print(a.stdout)
	}
	return nil
}

func codecOf(name string) (kgo.CompressionCodec, error) {
	c, err := kafka.CompressionCodec(name)
	if err != nil {
		return c, fmt.Errorf("--compression: %w", err)
	}
	return c, nil
}

// deleteNamespaces deletes namespaces (and their index) with a store of
// its own.
func (a *app) deleteNamespaces(s *session, mutate func(*kafka.Config), names []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := s.openStore(ctx, mutate)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	for _, n := range names {
		if err := st.DeleteNamespace(ctx, n); err != nil {
			return fmt.Errorf("cleaning up: %w", err)
		}
	}
	return st.Close()
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
	fmt.Fprintf(w, "broker: %s; batches %s, compression %s, linger %v, %d produce lanes, at most %d region(s) per batch\n\n",
		s.describeBroker(), humanBytes(int64(o.batchBytes)), o.compression, o.linger, o.lanes, o.maxRegions)
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
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "append_vs_raw\t%.2f\t(kwal MB/s ÷ raw MB/s, same concurrency)\n", r.AppendVsRaw)
	fmt.Fprintf(tw, "append_vs_raw_async\t%.2f\t(kwal MB/s ÷ one-goroutine async MB/s)\n", r.AppendVsRawAsync)
	rp := r.Replay
	fmt.Fprintf(tw, "replay region %d, indexed\t%.2fms\t(%d entries, %d fetches, %s fetched)\n", rp.Region, rp.Indexed.MedianMS, rp.Indexed.Entries, rp.Indexed.Fetches, humanBytes(rp.Indexed.FetchedBytes))
	fmt.Fprintf(tw, "replay region %d, full scan\t%.2fms\t(%d entries, %d fetches, %s fetched)\n", rp.Region, rp.FullScan.MedianMS, rp.FullScan.Entries, rp.FullScan.Fetches, humanBytes(rp.FullScan.FetchedBytes))
	fmt.Fprintf(tw, "replay_speedup\t%.2f\t(full scan ÷ indexed, median of %d)\n", r.ReplaySpeedup, rp.Runs)
	fmt.Fprintf(tw, "index_bytes_per_entry\t%.3f\t(%s in %d file(s) ÷ %d entries indexed)\n", r.IndexBytesPerEntry, humanBytes(r.Index.Bytes), r.Index.Files, r.Index.Entries)
	_ = tw.Flush()
	if !o.keep {
		fmt.Fprintf(w, "\nnamespaces %s* deleted (--keep keeps them)\n", strings.TrimSuffix(r.Replay.Namespace, "kwal-0"))
	}
}
