package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/kwal/kwal/internal/bench"
)

// matrixOpts are the flags of `kwal bench --matrix`.
type matrixOpts struct {
	on        bool
	warmup    time.Duration
	duration  time.Duration
	latency   time.Duration
	layouts   []string
	profDir   string
	bandwidth int // MB/s
}

func (m *matrixOpts) register(a *app, f *pflag.FlagSet) {
	f.BoolVar(&m.on, "matrix", false, "run the layout matrix instead (64 regions over 1, 16 and 64 topics, 256 over 16, 1024 over 64 with 128 writers), "+
		"directly and with --matrix-latency added each way; --entry-size, --entries-per-call and the producer flags apply")
	f.DurationVar(&m.warmup, "matrix-warmup", 3*time.Second, "appending before each measurement (per producer and layout)")
	f.DurationVar(&m.duration, "matrix-duration", 3*time.Second, "measured appending per producer and layout")
	f.DurationVar(&m.latency, "matrix-latency", time.Millisecond, "network latency added each way by an in-process TCP proxy for the second matrix; 0 skips it")
	a.boundDuration(f, "matrix-warmup", 0, time.Hour, "every layout warms up each producer this long")
	a.boundDuration(f, "matrix-duration", time.Millisecond, time.Hour, "every layout measures each producer this long")
	a.boundDuration(f, "matrix-latency", 0, time.Second, "a latency proxy holds every byte in flight for this long")
	f.StringVar(&m.profDir, "matrix-cpuprofile", "", "keep each measured window's CPU profile in this directory (pprof, samples labeled kwal_bench=kwal|raw|broker|net)")
	f.IntVar(&m.bandwidth, "matrix-bandwidth", 0, "MB/s each way between the clients and the brokers in the second matrix (with --matrix-latency), "+
		"as a network interface would carry; 0: unlimited")
	a.bound(f, "matrix-bandwidth", 0, 100_000, "a link faster than this is unlimited here")
	f.StringSliceVar(&m.layouts, "matrix-layouts", nil, "layouts to run instead of all, as REGIONS/TOPICS/WRITERS (e.g. 64/64/64,256/16/64)")
}

// layoutsOf parses --matrix-layouts; none means every layout.
func layoutsOf(specs []string) ([]bench.MatrixLayout, error) {
	if len(specs) == 0 {
		return bench.MatrixLayouts, nil
	}
	var out []bench.MatrixLayout
	for _, s := range specs {
		var l bench.MatrixLayout
		if n, err := fmt.Sscanf(s, "%d/%d/%d", &l.Regions, &l.Topics, &l.Writers); err != nil || n != 3 ||
			l.Regions < 1 || l.Topics < 1 || l.Writers < 1 || l.Topics > l.Regions || l.Regions > 100_000 || l.Writers > 10_000 {
			return nil, fmt.Errorf("--matrix-layouts: %q is not REGIONS/TOPICS/WRITERS with 1 <= TOPICS <= REGIONS <= 100000 and 1 <= WRITERS <= 10000", s)
		}
		out = append(out, l)
	}
	return out, nil
}

// matrixJSON is the --matrix --json output (keys of their own; the plain
// bench's keys are not used).
type matrixJSON struct {
	Broker        string              `json:"broker"`
	Matrix        bench.MatrixReport  `json:"matrix"`
	MatrixLatency *bench.MatrixReport `json:"matrix_latency,omitempty"`
}

func (a *app) runBenchMatrix(ctx context.Context, o benchOpts, m matrixOpts) error {
	codec, err := codecOf(o.compression)
	if err != nil {
		return err
	}
	payload := o.payloadOr(bench.PayloadDatanode)
	if err := bench.ValidPayload(payload); err != nil {
		return fmt.Errorf("--payload: %w", err)
	}
	layouts, err := layoutsOf(m.layouts)
	if err != nil {
		return err
	}
	// The embedded broker starts under its own label, so that the matrix
	// can tell its CPU from the clients'.
	var s *session
	bench.WithLabel(ctx, bench.LabelBroker, func(context.Context) { s, err = a.startSession() })
	if err != nil {
		return err
	}
	defer s.Close()
	cfg := s.cfg
	(&benchRun{o: o}).storeConfig(&cfg)
	mo := bench.MatrixOptions{
		Config: cfg, Raw: bench.RawOptions{MaxBatchBytes: o.batchBytes, Compression: codec, Linger: o.linger},
		Prefix: benchPrefix + runStamp() + "-m", EntrySize: o.entrySize, EntriesPerCall: o.perCall, Payload: payload,
		Warmup: m.warmup, Duration: m.duration, Layouts: layouts, Seed: o.seed, ProfileDir: m.profDir,
		Peers: o.peers, ReplayRuns: o.replayRuns,
	}
	if !o.quiet {
		mo.Progress = func(format string, args ...any) { fmt.Fprintf(a.stderr, "bench: "+format+"\n", args...) }
	}
	out := matrixJSON{Broker: s.brokerKind()}
	// RunMatrix deletes each layout's namespaces whatever ends it, and its
	// error says so.
	run := func() (bench.MatrixReport, error) {
		r, err := bench.RunMatrix(ctx, mo, s.embedded)
		if err != nil && ctx.Err() != nil {
			err = interruptedError("bench --matrix interrupted: %w", err)
		}
		return r, err
	}
	if out.Matrix, err = run(); err != nil {
		return err
	}
	if m.latency > 0 {
		mo.Latency, mo.Bandwidth = m.latency, float64(m.bandwidth)*1e6
		r, err := run()
		if err != nil {
			return err
		}
		out.MatrixLatency = &r
	}
	if o.json {
		return json.NewEncoder(a.stdout).Encode(out)
	}
	fmt.Fprintf(a.stdout, "kwal bench --matrix: broker %s; calls of %d entries of %d B (%s payload), compression %s; %d produce lanes; warm-up %v, measured %v per producer and layout\n",
		s.describeBroker(), o.perCall, o.entrySize, payload, o.compression, o.lanes, m.warmup, m.duration)
	a.printMatrix(out.Matrix)
	if out.MatrixLatency != nil {
		a.printMatrix(*out.MatrixLatency)
	}
	return nil
}

func (a *app) printMatrix(r bench.MatrixReport) {
	w := a.stdout
	bw := ""
	if r.BandwidthMBps > 0 {
		bw = fmt.Sprintf(", bandwidth %.0f MB/s each way", r.BandwidthMBps)
	}
	fmt.Fprintf(w, "\nadded latency each way: %.1f ms%s%s\n", r.LatencyMSEachWay, bw,
		map[bool]string{true: " (process CPU includes the embedded broker; client CPU is the side's own goroutines, by pprof label)", false: " (client CPU: the side's own goroutines, by pprof label)"}[r.CPUIncludesBroker])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "layout\tkwal÷raw\tkwal MB/s\traw MB/s\tsel kwal\tsel raw\tp50/p99 kwal ms\tp50/p99 raw ms\tCPU ms/MB kwal\traw\tclient CPU ms/MB kwal\traw\treq/MB kwal\traw\twire B/MB kwal\traw\twarm-up s kwal\traw\t\n")
	for _, row := range r.Rows {
		k, rw := row.Kwal, row.Raw
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f/%.1f\t%.1f/%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t%.2f\t\n",
			layoutName(row.Layout), row.AppendVsRaw, k.MBps, rw.MBps, k.Selectivity, rw.Selectivity,
			k.P50ms, k.P99ms, rw.P50ms, rw.P99ms, k.CPUmsPerMB, rw.CPUmsPerMB, k.ClientCPUmsPerMB, rw.ClientCPUmsPerMB, k.ProduceRequestsPerMB, rw.ProduceRequestsPerMB,
			k.ProduceBytesPerMB/1e3, rw.ProduceBytesPerMB/1e3, k.WarmupS, rw.WarmupS)
	}
	_ = tw.Flush()
	if len(r.Rows) == 0 || r.Rows[0].Peers == nil {
		return
	}
	fmt.Fprintf(w, "\nagainst the peers (same workload, broker and network; wire kB per MB appended):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "layout\tproducer\tMB/s\tkwal÷\tp50/p99 ms\tclient CPU ms/MB\treq/MB\twire kB/MB\tsel\t\n")
	for _, row := range r.Rows {
		p := row.Peers
		side := func(name string, s bench.MatrixSide, vs float64) {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.1f/%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t\n", layoutName(row.Layout), name, s.MBps, vs,
				s.P50ms, s.P99ms, s.ClientCPUmsPerMB, s.ProduceRequestsPerMB, s.ProduceBytesPerMB/1e3, s.Selectivity)
		}
		side("kwal", row.Kwal, 1)
		side("raw franz-go", row.Raw, row.AppendVsRaw)
		side("GreptimeDB-style", p.Greptime, p.AppendVsGreptime)
		side("Mimir-style", p.Mimir, p.AppendVsMimir)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nreplay of region 1 (median ms; fetched ÷ the region's own bytes):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "layout\tkwal indexed\tsel\tkwal full scan\tsel\tGreptimeDB-style windows\tsel\tGreptimeDB-style÷kwal\t\n")
	for _, row := range r.Rows {
		rp := row.Peers.Replay
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.1f\t%.2f\t%.1f\t%.2f\t%.1f\t\n", layoutName(row.Layout), rp.Kwal.MedianMS, rp.Kwal.Selectivity,
			rp.FullScan.MedianMS, rp.FullScan.Selectivity, rp.Greptime.MedianMS, rp.Greptime.Selectivity, rp.KwalVsGreptime)
	}
	_ = tw.Flush()
}

func layoutName(l bench.MatrixLayout) string {
	return fmt.Sprintf("%dr/%dt/%dw", l.Regions, l.Topics, l.Writers)
}
