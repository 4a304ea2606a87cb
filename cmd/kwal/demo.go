package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/spf13/cobra"
)

// demoPrefix begins the namespaces of demo runs.
const demoPrefix = "kwal-demo-"

type demoOpts struct {
	workloadFlags
	duration     time.Duration
	entries      int64
	keepPrevious bool
}

const demoLong = `demo plays a datanode against kwal, restarts it, and checks its replay.

1. Appends: --writers goroutines append calls of --entries-per-call entries to
   --regions regions spread over --topics namespaces (region r lives in
   namespace (r-1) mod topics; each writer owns its own regions), for
   --duration or until --entries entries were acknowledged. A progress bar
   (entries/s, MB/s) is drawn on stderr when it is a terminal and --quiet is
   not set. Entry data is deterministic (a header "r<region>#<seq>;" and
   pseudo-random bytes), so the check can rebuild it.
2. Restart: the store is closed (the index is checkpointed) and reopened on
   the same brokers and index dir.
3. Replay: every region is replayed with the index, one ReadRegions pass per
   namespace, and every acknowledged entry must come back byte-identical, in
   order, exactly once, and the last entry of every append call must carry
   the ID the call acknowledged. One region is also replayed by a full scan
   (no index) and both are timed (median of --replay-runs).
4. Summary: entries and MB appended, throughput, p50/p99 append latency,
   replay times indexed vs full scan and the speedup, the index on disk.

Any difference is reported (namespace, region, ID, what differs) and the
command exits with status 2.

Every run writes fresh namespaces named kwal-demo-<timestamp>-<n>, which it
keeps for inspection (kwal dump / replay / index show). With the embedded
broker, namespaces left by earlier demo runs (kwal-demo-*) are deleted at
the start so the data dir does not grow without bound; --keep-previous
keeps them. With --brokers nothing but this run's namespaces is touched.`

func (a *app) demoCmd() *cobra.Command {
	var o demoOpts
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a datanode: append, restart, replay with the index and check every entry",
		Long:  demoLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDemo(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	o.register(f, workloadFlags{regions: 64, topics: 4, writers: 64, entrySize: 1024, perCall: 10, replayRuns: 1})
	f.Lookup("seed").Usage += " (0: from the clock)"
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to append (ignored with --entries)")
	f.Int64Var(&o.entries, "entries", 0, "append exactly this many entries instead of running for --duration")
	f.BoolVar(&o.keepPrevious, "keep-previous", false, "keep the namespaces of earlier demo runs (embedded broker)")
	return cmd
}

func (o *demoOpts) validate() error {
	switch {
	case o.regions < 1:
		return fmt.Errorf("--regions must be >= 1")
	case o.topics < 1 || o.topics > o.regions:
		return fmt.Errorf("--topics must be in [1, regions]")
	case o.writers < 1:
		return fmt.Errorf("--writers must be >= 1")
	case o.entrySize < 32:
		return fmt.Errorf("--entry-size must be >= 32 (room for the entry header)")
	case o.perCall < 1:
		return fmt.Errorf("--entries-per-call must be >= 1")
	case o.entries < 0:
		return fmt.Errorf("--entries must not be negative")
	case o.entries == 0 && o.duration <= 0:
		return fmt.Errorf("--duration must be positive (or set --entries)")
	case o.replayRuns < 1:
		return fmt.Errorf("--replay-runs must be >= 1")
	}
	o.writers = min(o.writers, o.regions)
	return nil
}

// demoResult is what the demo measured.
type demoResult struct {
	entries, bytes   int64
	elapsed          time.Duration
	latencies        []time.Duration
	closeTime        time.Duration
	reopenTime       time.Duration
	replayAll        time.Duration
	replayAllStats   kafka.ReadStats
	oneRegion        logstore.RegionID
	oneNamespace     string
	indexed, scanned time.Duration
	indexedStats     kafka.ReadStats
	scannedStats     kafka.ReadStats
	indexBytes       int64
	indexFiles       int
}

func (a *app) runDemo(ctx context.Context, o demoOpts) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.serveMetrics(o.metricsAddr); err != nil {
		return err
	}

	st, err := s.openStore(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // a no-op once closed below

	if s.cluster != nil && !o.keepPrevious {
		n, err := deletePrevious(ctx, st)
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(a.stderr, "demo: deleted %d namespace(s) of earlier demo runs (--keep-previous keeps them)\n", n)
		}
	}
	stamp := runStamp()
	topics := make([]string, o.topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s%s-%d", demoPrefix, stamp, i)
		if err := st.CreateNamespace(ctx, topics[i]); err != nil {
			return err
		}
	}
	exp := newExpectation(o.seed, o.entrySize)
	for r := 1; r <= o.regions; r++ {
		exp.addRegion(topics[(r-1)%o.topics], logstore.RegionID(r))
	}

	var res demoResult
	if err := a.demoAppend(ctx, st, o, exp, &res); err != nil {
		return err
	}

	// Restart.
	t0 := time.Now()
	if err := st.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	res.closeTime = time.Since(t0)
	if res.indexBytes, res.indexFiles, err = indexBytes(s.cfg.IndexDir, topics, a.log); err != nil {
		return err
	}
	t0 = time.Now()
	st2, err := s.openStore(ctx, nil)
	if err != nil {
		return fmt.Errorf("reopening the store: %w", err)
	}
	defer func() { _ = st2.Close() }()
	res.reopenTime = time.Since(t0)

	problems, err := a.demoReplay(ctx, st2, o, topics, exp, &res)
	if err != nil {
		return err
	}
	if err := st2.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	a.printDemo(o, s, topics, &res, problems)
	if problems.total > 0 {
		return mismatchError("replay check failed: %d problem(s) in %d region(s)", problems.total, len(problems.regions))
	}
	return nil
}

// deletePrevious deletes the namespaces of earlier demo runs.
func deletePrevious(ctx context.Context, st logstore.LogStore) (int, error) {
	names, err := st.ListNamespaces(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ns := range names {
		if strings.HasPrefix(ns, demoPrefix) {
			if err := st.DeleteNamespace(ctx, ns); err != nil {
				return n, fmt.Errorf("deleting earlier demo namespace: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// demoAppend runs the writers and records every acknowledged call in exp.
