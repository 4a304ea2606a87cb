package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
)

const benchPrefix = "kwal-bench-"

type benchOpts struct {
	workloadFlags
	calls       int
	duration    time.Duration
	batchBytes  int
	compression string
	linger      time.Duration
	lanes       int
	maxRegions  int
	fencing     string
	rounds      int
	recovery    int
	payload     string
	peers       bool
	latency     time.Duration
	json        bool
	keep        bool
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
  peers      (--peers) the same calls through a GreptimeDB-style producer (a
             worker and connection per topic, one produce request per call,
             each awaited; LZ4, JSON record keys) and a Mimir-style one (one
             shared client, idempotence off, 20 requests in flight, 50 ms
             linger, 16 MB batches), and region 1 replayed as GreptimeDB does
             with its index (4 MiB windows); see docs/benchmarks.md;
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
index_bytes_per_entry, and the figures behind them; recovery holds the recovery
benchmark (--recovery-runs, 0 skips it): after a restart of the store with its
index dir, one region indexed vs full scan, every region replayed at once with
its own Read from a random flushed point, one ReadRegions per topic, every
region by full scan, against each topic scanned once; and the broker's floors
(one region's batches, the needed batches within 1.2x their bytes, every
batch) fetched at once by plain franz-go clients on warmed connections,
nothing decoded: what no reader of that layout can beat on this broker.

--latency adds network latency each way between the brokers and every client
of the run (an in-process TCP proxy, as the matrix's --matrix-latency): the
appends, replays and recovery then see a network round trip; --json reports
it under net.`

func (a *app) benchCmd() *cobra.Command {
	var o benchOpts
	var m matrixOpts
	def := kafka.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure kwal's appends, batch layout, replay and index against a raw franz-go producer",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if m.on {
				if o.latency > 0 {
					return fmt.Errorf("--latency applies to the plain bench; the matrix takes --matrix-latency")
				}
				return a.runBenchMatrix(cmd.Context(), o, m)
			}
			return a.runBench(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	m.register(a, f)
	o.register(a, f, workloadFlags{regions: 64, topics: 1, writers: 64, entrySize: 2048, perCall: 10, replayRuns: 5, seed: 1})
	f.Lookup("writers").Usage += " (more writers than regions share them)"
	f.IntVar(&o.calls, "calls", 30, "calls per writer (with --duration: the calls each writer cycles through)")
	f.DurationVar(&o.duration, "duration", 0, "append for this long instead of --calls calls per writer (kwal, raw and the peers; raw-async plays --calls once)")
	f.IntVar(&o.batchBytes, "batch-bytes", def.MaxBatchBytes, "largest record batch (kwal MaxBatchBytes, franz-go ProducerBatchMaxBytes)")
	f.StringVar(&o.compression, "compression", def.Compression, "compression: none, gzip, snappy, lz4, zstd")
	f.DurationVar(&o.linger, "linger", def.Linger, "producer linger (kwal Linger, franz-go ProducerLinger)")
	f.IntVar(&o.lanes, "produce-lanes", def.ProduceLanes, "kwal ProduceLanes: franz-go clients, each carrying one produce request at a time")
	f.IntVar(&o.maxRegions, "max-regions-per-batch", def.MaxRegionsPerBatch, "kwal MaxRegionsPerBatch: regions a produce may carry when a backlog builds up (1 = region-pure batches)")
	f.StringVar(&o.fencing, "fencing", def.Fencing, "kwal Config.Fencing: strict (an append is acknowledged only after a look at the claims topic that began after its produce returned), lease (acknowledged while the last look began less than Config.Lease ago) or off")
	f.IntVar(&o.rounds, "rounds", 3, "rounds of the append comparison (each on fresh topics, alternating which producer goes first; figures add up all rounds)")
	a.bound(f, "entry-size", 0, maxEntrySize, "kwal refuses entries larger than its Config.MaxEntryBytes (ErrEntryTooLarge)")
	a.bound(f, "calls", 1, 1_000_000, "bench builds every call's entries in memory before it starts the clock")
	a.boundDuration(f, "duration", 0, time.Hour, "a longer run is a soak test, not a comparison")
	a.bound(f, "batch-bytes", record.MinBatchBytes, 64*miB, "kwal's MaxBatchBytes and the embedded broker's message.max.bytes")
	a.boundDuration(f, "linger", 0, time.Minute, "every append waits up to this long")
	a.bound(f, "produce-lanes", 1, 256, "kwal's ProduceLanes")
	a.bound(f, "max-regions-per-batch", 1, maxRegions, "there are at most --regions regions")
	a.bound(f, "rounds", 1, 100, "each round appends the whole workload three times")
	f.IntVar(&o.recovery, "recovery-runs", 3, "timed runs of each phase of the recovery measurement, which replays the regions as after a datanode restart (the store reopened on its index dir: one region, every region at once, by full scan; median reported); 0 skips it")
	a.bound(f, "recovery-runs", 0, 100, "each run reopens the store")
	f.StringVar(&o.payload, "payload", "", "what entries hold: random (incompressible bytes; the plain bench's default) or datanode "+
		"(each entry a protobuf batch of rows of its region's metrics table, as a datanode's WAL holds; the matrix's default)")
	f.BoolVar(&o.peers, "peers", true, "also measure the GreptimeDB-style and Mimir-style producers and the GreptimeDB-style window replay (see docs/benchmarks.md); on by default, --peers=false skips them")
	f.DurationVar(&o.latency, "latency", 0, "network latency added each way by an in-process TCP proxy between the brokers and every client of the run "+
		"(the store's, the raw producer's and consumer's, the floors'); 0: direct")
	a.boundDuration(f, "latency", 0, time.Second, "a latency proxy holds every byte in flight for this long")
	f.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&o.keep, "keep", false, "keep the benchmark's namespaces")
	return cmd
}

// workload is the append workload the flags describe.
func (o benchOpts) workload() bench.Workload {
	return bench.Workload{
		Topics: o.topics, Regions: o.regions, Writers: o.writers, EntrySize: o.entrySize,
		EntriesPerCall: o.perCall, Calls: o.calls, Seed: o.seed, Payload: o.payloadOr(bench.PayloadRandom),
	}
}

// payloadOr is --payload, or def when it is not given.
func (o benchOpts) payloadOr(def string) string {
	if o.payload == "" {
		return def
	}
	return o.payload
}

// validate checks what the flags' ranges alone cannot, before anything
// connects.
func (o benchOpts) validate() error {
	if o.topics > o.regions {
		return fmt.Errorf("--topics %d is more than --regions %d: every namespace needs a region", o.topics, o.regions)
	}
	if err := checkMemory(int64(o.writers)*int64(o.calls)*int64(o.perCall), int64(o.entrySize), "--writers × --calls × --entries-per-call"); err != nil {
		return err
	}
	return o.workload().Validate()
}

// runBench checks the flags, connects, and runs the benchmark's phases in
// order (see benchRun); the namespaces are deleted at the end unless --keep.
func (a *app) runBench(ctx context.Context, o benchOpts) (err error) {
	if err := o.validate(); err != nil {
		return err
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
	var proxy *bench.Net
	if o.latency > 0 {
		proxy = addLatency(s, o.latency)
		defer proxy.Close() // after the clean-up, which connects through it
	}
	if err := s.serveMetrics(o.metricsAddr); err != nil {
		return err
	}
	b := &benchRun{a: a, o: o, w: o.workload(), s: s, stamp: runStamp()}
	b.rep = benchReport{
		Broker: s.brokerKind(),
		Workload: benchWorkload{Topics: o.topics, Regions: o.regions, Writers: o.writers, EntrySize: o.entrySize,
			EntriesPerCall: o.perCall, CallsPerWriter: o.calls, DurationS: o.duration.Seconds(), Seed: o.seed},
		Config: benchConfig{BatchBytes: o.batchBytes, Compression: o.compression, LingerMS: ms(o.linger), ProduceLanes: o.lanes, MaxRegions: o.maxRegions, Fencing: o.fencing},
		Rounds: o.rounds,
	}
	if b.st, err = s.openStore(ctx, b.storeConfig); err != nil {
		return err
	}
	defer func() { _ = b.st.Close() }()
	// Registered before the first namespace is created, so that whatever
	// ends the run (an error, Ctrl-C) deletes what it created; Ctrl-C is
	// then reported in one line.
	defer func() {
		var cleaned string
		if !o.keep {
			n, cerr := b.deleteNamespaces()
			cleaned = fmt.Sprintf("%d namespace(s) of the run (%s*) deleted (--keep keeps them)", n, benchPrefix+b.stamp)
			if cerr != nil {
				cleaned = fmt.Sprintf("%s, then: %v", cleaned, cerr)
				if err == nil {
					err = cerr
				}
			}
		} else {
			cleaned = fmt.Sprintf("%d namespace(s) of the run (%s*) kept", len(b.created), benchPrefix+b.stamp)
		}
		switch {
		case ctx.Err() != nil:
			err = interruptedError("bench interrupted while %s; %s", b.doing, cleaned)
		case err == nil && !o.json:
			fmt.Fprintf(a.stdout, "\n%s\n", cleaned) // said once it is done
		}
	}()
	if err := b.createNamespaces(ctx); err != nil {
		return err
	}
	if b.copts, err = s.clientOpts(); err != nil {
		return err
	}
	cl, err := bench.RawClientWith(bench.RawOptions{MaxBatchBytes: o.batchBytes, Compression: codec, Linger: o.linger}, b.copts...)
	if err != nil {
		return fmt.Errorf("raw client: %w", err)
	}
	defer cl.Close()
	defer b.closePeers() // what startPeers made, even if it failed half-way
	if err := b.startPeers(codec); err != nil {
		return err
	}
	if err := b.warmUp(ctx, cl); err != nil {
		return err
	}
	if err := b.appendRounds(ctx, cl); err != nil {
		return err
	}
	cl.Close()
	if err := b.measureLayout(ctx); err != nil {
		return err
	}
	if err := b.measureReplay(ctx); err != nil {
		return err
	}
	if err := b.st.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	if err := b.measureIndex(); err != nil {
		return err
	}
	if err := b.measureRecovery(ctx); err != nil {
		return err
	}
	if proxy != nil {
		b.rep.Net = &benchNet{LatencyMSEachWay: ms(o.latency), ProduceRequests: proxy.ProduceRequests()}
	}
	if o.json {
		return json.NewEncoder(a.stdout).Encode(b.rep)
	}
	a.printBench(o, s, &b.rep)
	if b.rep.Recovery != nil {
		fmt.Fprintln(a.stdout)
		b.rep.Recovery.Print(a.stdout)
	}
	return nil
}

// addLatency routes every connection the session opens from now on through
// a proxy that adds d each way: the session's stores (the run's, the
// recovery's reopened ones, the clean-up's) and the raw clients built from
// its options (producer, consumer, layout walks, floors) alike. Close the
// network once nothing uses it.
func addLatency(s *session, d time.Duration) *bench.Net {
	n := bench.NewNet(d)
	s.cfg.Dialer = n.Dial
	return n
}

func codecOf(name string) (kgo.CompressionCodec, error) {
	c, err := kafka.CompressionCodec(name)
	if err != nil {
		return c, fmt.Errorf("--compression: %w", err)
	}
	return c, nil
}
