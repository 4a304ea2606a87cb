package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

// benchRun is one run of kwal bench: its settings, connections and
// namespaces, and the report its phases fill in. runBench calls the phases
// in order: createNamespaces, warmUp, appendRounds, measureLayout,
// measureReplay, (close the store), measureIndex.
type benchRun struct {
	a     *app
	o     benchOpts
	w     bench.Workload
	s     *session
	st    *kafka.LogStore
	copts []kgo.Opt // the raw clients' options: seeds, timeouts, TLS, SASL
	stamp string    // names this run's namespaces

	rounds       []benchRound
	warmK, warmR []string
	warmG, warmM []string // the peers' warm-up namespaces (with --peers)
	all          []string // every namespace of the run
	created      []string // those created so far, for cleaning up
	doing        string   // the phase under way, for an interruption's report

	kwalSum, rawSum, asyncSum bench.AppendResult // added up over every round
	greptimeSum, mimirSum     bench.AppendResult // the peers', with --peers
	greptime                  *bench.Greptime    // the GreptimeDB-style producer, with --peers
	mimir                     *kgo.Client        // the Mimir-style producer, with --peers
	firstEntries              int64              // kwal entries of round 1, whose topic's index is measured

	rep benchReport
}

// benchRound is the namespaces of one round: kwal's, raw's and raw async's,
// and with --peers the GreptimeDB-style and Mimir-style producers'.
type benchRound struct{ kwal, raw, async, greptime, mimir []string }

// storeConfig applies the bench flags to the store's configuration.
func (b *benchRun) storeConfig(c *kafka.Config) {
	c.MaxBatchBytes = b.o.batchBytes
	c.Compression = b.o.compression
	c.Linger = b.o.linger
	c.ProduceLanes = b.o.lanes
	c.MaxRegionsPerBatch = b.o.maxRegions
	c.Fencing = b.o.fencing
	c.FetchMaxBytes = max(c.FetchMaxBytes, int32(b.o.batchBytes))
	c.MaxQueuedBytes = max(c.MaxQueuedBytes, int64(b.o.batchBytes))
	// The peers' topics are the store's namespaces but hold no kwal
	// records, so a background prune would delete them under the peers'
	// replays; nothing a bench writes is worth pruning before it is deleted.
	c.PruneInterval = 0
	if b.o.peers {
		// The Mimir-style producer's batches may reach its batch limit;
		// kwal's stay within MaxBatchBytes whatever the topic allows.
		c.TopicConfigs = bench.WithMimirTopicConfigs(c.TopicConfigs, c.MaxBatchBytes)
	}
}

// phase prints a progress line unless --quiet.
func (b *benchRun) phase(format string, args ...any) {
	b.doing = strings.TrimSuffix(fmt.Sprintf(format, args...), "…")
	if !b.o.quiet {
		fmt.Fprintf(b.a.stderr, "bench: "+format+"\n", args...)
	}
}

// names returns the run's namespaces of a tag, one per topic.
func (b *benchRun) names(tag string) []string {
	out := make([]string, b.w.Topics)
	for i := range out {
		out[i] = fmt.Sprintf("%s%s-%s-%d", benchPrefix, b.stamp, tag, i)
	}
	return out
}

// createNamespaces names and creates every namespace of the run.
func (b *benchRun) createNamespaces(ctx context.Context) error {
	b.rounds = make([]benchRound, b.o.rounds)
	for i := range b.rounds {
		sfx := ""
		if i > 0 {
			sfx = fmt.Sprintf("-r%d", i+1)
		}
		rd := benchRound{kwal: b.names("kwal" + sfx), raw: b.names("raw" + sfx), async: b.names("async" + sfx)}
		if b.o.peers {
			rd.greptime, rd.mimir = b.names("greptime"+sfx), b.names("mimir"+sfx)
		}
		b.rounds[i] = rd
		b.all = slices.Concat(b.all, rd.kwal, rd.raw, rd.async, rd.greptime, rd.mimir)
	}
	b.warmK, b.warmR = b.names("warmup-kwal"), b.names("warmup-raw")
	b.all = slices.Concat(b.all, b.warmK, b.warmR)
	b.rep.Namespaces = map[string][]string{"kwal": b.rounds[0].kwal, "raw": b.rounds[0].raw, "raw_async": b.rounds[0].async}
	if b.o.peers {
		b.warmG, b.warmM = b.names("warmup-greptime"), b.names("warmup-mimir")
		b.all = slices.Concat(b.all, b.warmG, b.warmM)
		b.rep.Namespaces["greptime"], b.rep.Namespaces["mimir"] = b.rounds[0].greptime, b.rounds[0].mimir
	}
	b.phase("creating %d namespaces…", len(b.all))
	for _, t := range b.all {
		b.created = append(b.created, t) // before: a create cut short may still have made it
		if err := b.st.CreateNamespace(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// deleteNamespaces deletes the namespaces the run created (and their
// index) with a store of its own, since the run's context may have ended
// (Ctrl-C); it is bounded by cleanupTimeout. It returns how many it
// deleted.
func (b *benchRun) deleteNamespaces() (int, error) {
	if len(b.created) == 0 {
		return 0, nil
	}
	// The run's store goes first: its metrics hold the session's registry,
	// which the cleaning store registers in.
	_ = b.st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	st, err := b.s.openStore(ctx, b.storeConfig)
	if err != nil {
		return 0, fmt.Errorf("cleaning up: %w", err)
	}
	defer func() { _ = st.Close() }()
	for i, n := range b.created {
		if err := st.DeleteNamespace(ctx, n); err != nil {
			return i, fmt.Errorf("cleaning up (kwal namespaces delete '%s*' --yes deletes the rest): %w", benchPrefix+b.stamp, err)
		}
	}
	return len(b.created), st.Close()
}

// cleanupTimeout bounds the deletion of the bench's namespaces.
const cleanupTimeout = 30 * time.Second

// runPlan builds the workload's plan for topics (interrupted with ctx:
// large plans take seconds) and plays it through app: --calls calls per
// writer, or for --duration. The run stops its writers at ctx's end
// without an error of its own: runPlan then returns ctx's error.
func (b *benchRun) runPlan(ctx context.Context, topics []string, app bench.Appender) (bench.AppendResult, error) {
	plan, err := b.w.PlanContext(ctx, topics)
	if err != nil {
		return bench.AppendResult{}, err
	}
	var r bench.AppendResult
	if b.o.duration > 0 {
		r, err = bench.RunFor(ctx, plan, app, b.o.duration, nil)
	} else {
		r, err = bench.Run(ctx, plan, app, nil)
	}
	if err == nil {
		err = ctx.Err()
	}
	return r, err
}

// warmUp opens the connections, producer IDs and metadata of both
// producers, so that neither pays for them in the measured runs.
func (b *benchRun) warmUp(ctx context.Context, cl *kgo.Client) error {
	b.phase("warm-up…")
	warm := b.w
	warm.Calls = 1
	plan, err := warm.PlanContext(ctx, b.warmK)
	if err == nil {
		_, err = bench.Run(ctx, plan, bench.KwalAppender(b.st), nil)
	}
	if err != nil {
		return fmt.Errorf("kwal warm-up: %w", err)
	}
	plan, err = warm.PlanContext(ctx, b.warmR)
	if err == nil {
		_, err = bench.Run(ctx, plan, bench.RawAppender(cl, b.o.batchBytes), nil)
	}
	if err != nil {
		return fmt.Errorf("raw warm-up: %w", err)
	}
	if !b.o.peers {
		return nil
	}
	plan, err = warm.PlanContext(ctx, b.warmG)
	if err == nil {
		_, err = bench.Run(ctx, plan, b.greptime.Appender(), nil)
	}
	if err != nil {
		return fmt.Errorf("GreptimeDB-style warm-up: %w", err)
	}
	plan, err = warm.PlanContext(ctx, b.warmM)
	if err == nil {
		_, err = bench.Run(ctx, plan, bench.RawAppender(b.mimir, b.o.batchBytes), nil)
	}
	if err != nil {
		return fmt.Errorf("Mimir-style warm-up: %w", err)
	}
	return nil
}

// startPeers creates the GreptimeDB-style producer (a worker and client
// per topic of its namespaces) and the Mimir-style client; closePeers
// closes them.
func (b *benchRun) startPeers(codec kgo.CompressionCodec) error {
	if !b.o.peers {
		return nil
	}
	topics := b.warmG
	for _, rd := range b.rounds {
		topics = slices.Concat(topics, rd.greptime)
	}
	var err error
	if b.greptime, err = bench.NewGreptime(topics, bench.GreptimeOptions{Compression: kgo.Lz4Compression()}, b.copts...); err != nil {
		return fmt.Errorf("GreptimeDB-style producer: %w", err)
	}
	if b.mimir, err = bench.MimirClient(bench.MimirOptions{Compression: codec}, b.copts...); err != nil {
		return fmt.Errorf("Mimir-style producer: %w", err)
	}
	return nil
}

func (b *benchRun) closePeers() {
	if b.greptime != nil {
		b.greptime.Close()
	}
	if b.mimir != nil {
		b.mimir.Close()
	}
}

// appendRounds runs the append comparison --rounds times. Rounds alternate
// which producer goes first; the figures add up every round's entries,
// bytes, time and latencies.
func (b *benchRun) appendRounds(ctx context.Context, cl *kgo.Client) error {
	o := b.o
	for i, rd := range b.rounds {
		runKwal := func() error {
			b.phase("round %d/%d: kwal, %d writers appending %d-entry calls of %d B to %d regions in %d topic(s)…",
				i+1, o.rounds, o.writers, o.perCall, o.entrySize, o.regions, o.topics)
			r, err := b.runPlan(ctx, rd.kwal, bench.KwalAppender(b.st))
			if err != nil {
				return fmt.Errorf("kwal appends: %w", err)
			}
			addResult(&b.kwalSum, r)
			if i == 0 {
				b.firstEntries = r.Entries
			}
			return nil
		}
		runRaw := func() error {
			b.phase("round %d/%d: raw franz-go, same concurrency…", i+1, o.rounds)
			r, err := b.runPlan(ctx, rd.raw, bench.RawAppender(cl, o.batchBytes))
			if err != nil {
				return fmt.Errorf("raw appends: %w", err)
			}
			addResult(&b.rawSum, r)
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
		b.phase("round %d/%d: raw franz-go, asynchronous from one goroutine…", i+1, o.rounds)
		plan, err := b.w.PlanContext(ctx, rd.async)
		if err != nil {
			return fmt.Errorf("raw async appends: %w", err)
		}
		r, err := bench.RawAsync(ctx, cl, plan, o.batchBytes)
		if err != nil {
			return fmt.Errorf("raw async appends: %w", err)
		}
		addResult(&b.asyncSum, r)
		if !o.peers {
			continue
		}
		b.phase("round %d/%d: GreptimeDB-style producer, same concurrency…", i+1, o.rounds)
		if r, err = b.runPlan(ctx, rd.greptime, b.greptime.Appender()); err != nil {
			return fmt.Errorf("GreptimeDB-style appends: %w", err)
		}
		addResult(&b.greptimeSum, r)
		b.phase("round %d/%d: Mimir-style producer, same concurrency…", i+1, o.rounds)
		if r, err = b.runPlan(ctx, rd.mimir, bench.RawAppender(b.mimir, o.batchBytes)); err != nil {
			return fmt.Errorf("Mimir-style appends: %w", err)
		}
		addResult(&b.mimirSum, r)
	}
	slices.Sort(b.kwalSum.Latencies)
	slices.Sort(b.rawSum.Latencies)
	b.rep.Kwal = figures(b.kwalSum, true)
	b.rep.Raw = figures(b.rawSum, true)
	b.rep.RawAsync = figures(b.asyncSum, false)
	b.rep.AppendVsRaw = ratio(b.kwalSum.MBps(), b.rawSum.MBps())
	b.rep.AppendVsRawAsync = ratio(b.kwalSum.MBps(), b.asyncSum.MBps())
	if o.peers {
		slices.Sort(b.greptimeSum.Latencies)
		slices.Sort(b.mimirSum.Latencies)
		b.rep.Peers = &benchPeers{
			Greptime: figures(b.greptimeSum, true), Mimir: figures(b.mimirSum, true),
			AppendVsGreptime: ratio(b.kwalSum.MBps(), b.greptimeSum.MBps()), AppendVsMimir: ratio(b.kwalSum.MBps(), b.mimirSum.MBps()),
		}
	}
	return nil
}

// measureLayout reads how the first round's kwal and raw topics' records
// fall into record batches.
func (b *benchRun) measureLayout(ctx context.Context) error {
	b.phase("batch layout…")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	kt, rt := b.rounds[0].kwal[0], b.rounds[0].raw[0]
	kl, err := bench.MeasureLayoutWith(ctx, kt, b.copts...)
	if err != nil {
		return fmt.Errorf("layout of %s: %w", kt, err)
	}
	rl, err := bench.MeasureLayoutWith(ctx, rt, b.copts...)
	if err != nil {
		return fmt.Errorf("layout of %s: %w", rt, err)
	}
	b.rep.Layout = layoutPair{Kwal: layoutOf(kl), Raw: layoutOf(rl)}
	return nil
}

// measureReplay times region 1's replay with the index and by a full scan
// on the first round's kwal topic.
func (b *benchRun) measureReplay(ctx context.Context) error {
	region := logstore.RegionID(1)
	ns := b.rounds[0].kwal[0] // region 1 is workload region 0: topic 0
	runs := b.o.replayRuns
	b.phase("replay of region %d, indexed and full scan, %d runs each…", region, runs)
	idxT, idxS, err := timeReplay(ctx, b.st, ns, region, false, runs, nil, nil)
	if err != nil {
		return err
	}
	scanT, scanS, err := timeReplay(ctx, b.st, ns, region, true, runs, nil, nil)
	if err != nil {
		return err
	}
	b.rep.Replay = replayFigures{Namespace: ns, Region: uint64(region), Runs: runs, Indexed: replayOf(idxT, idxS), FullScan: replayOf(scanT, scanS)}
	b.rep.ReplaySpeedup = ratio(float64(scanT), float64(idxT))
	if !b.o.peers {
		return nil
	}
	// The GreptimeDB-style window replay of the same region in round 1's
	// GreptimeDB-style namespace (the same calls when run by --calls).
	gns := b.rounds[0].greptime[0]
	b.phase("replay of region %d, GreptimeDB-style windows, %d runs…", region, runs)
	l, err := bench.MeasureLayoutOf(ctx, gns, bench.GreptimeRecordRegion, b.copts...)
	if err != nil {
		return fmt.Errorf("layout of %s: %w", gns, err)
	}
	cl, err := kgo.NewClient(b.copts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	offsets := b.greptime.RegionOffsets(gns, uint64(region))
	var times []time.Duration
	var g bench.ReplayResult
	for range runs {
		if g, err = bench.GreptimeReplay(ctx, cl, gns, offsets, int(ratio(float64(l.BatchBytes), float64(l.Records))), bench.GreptimeWindow); err != nil {
			return err
		}
		times = append(times, g.Elapsed)
	}
	slices.Sort(times)
	b.rep.Peers.Replay = replayRun{MedianMS: ms(times[len(times)/2]), Fetches: g.Fetches, FetchedBytes: g.FetchedBytes, Records: g.Records, Entries: g.Records, EntryBytes: g.OwnBytes}
	b.rep.Peers.ReplayNamespace = gns
	b.rep.Peers.ReplayVsGreptime = ratio(b.rep.Peers.Replay.MedianMS, b.rep.Replay.Indexed.MedianMS)
	return nil
}

// measureIndex sizes the checkpointed index of the first round's kwal
// topics; call it after the store is closed (Close checkpoints).
func (b *benchRun) measureIndex() error {
	kt := b.rounds[0].kwal
	dir := b.s.cfg.IndexDir
	ib, nf, err := indexBytes(dir, kt, b.a.log)
	if err != nil {
		return err
	}
	b.rep.Index = indexFigures{Bytes: ib, Files: nf, AppendedEntries: b.firstEntries}
	regions := map[string][]uint64{}
	for r := range b.w.Regions {
		regions[kt[r%len(kt)]] = append(regions[kt[r%len(kt)]], uint64(r+1))
	}
	if infos, err := inspectIndex(dir, kt, regions, b.a.log); err == nil {
		for _, ti := range infos {
			for _, ri := range ti.Regions {
				b.rep.Index.Entries += ri.Records
			}
		}
	} else {
		b.a.log.Warn("bench: inspecting the index", "err", err)
	}
	entries := b.rep.Index.Entries
	if entries == 0 {
		entries = b.firstEntries
	}
	b.rep.IndexBytesPerEntry = ratio(float64(ib), float64(entries))
	return nil
}
