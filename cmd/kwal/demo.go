package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	size         byteSize
	keepPrevious bool

	// Set by validate: how many entries the writers may append in all (0:
	// no budget) and whether they also stop at --duration.
	budget      int64
	useDeadline bool
}

const demoLong = `demo plays a datanode against kwal, restarts it, and checks its replay.

1. Appends: --writers goroutines append calls of --entries-per-call entries to
   --regions regions spread over --topics namespaces (region r lives in
   namespace (r-1) mod topics; each writer owns its own regions) until
   --size bytes of entry data were acknowledged or --duration passed,
   whichever comes first (or exactly --entries entries). By default that
   is at most 256 MB, kept by the broker: with the embedded one, on disk in
   <data-dir>/kafka (./kwal-data/kafka). A progress bar (entries/s, MB/s) is
   drawn on stderr when it is a terminal and --quiet is not set. Entry data
   is deterministic (a header "r<region>#<seq>;" and pseudo-random bytes),
   so the check can rebuild it.
2. Restart: the store is closed (the index is checkpointed) and reopened on
   the same brokers and index dir.
3. Replay: every region is replayed with the index, one ReadRegions pass per
   namespace, and every acknowledged entry must come back byte-identical, in
   order, exactly once, and the last entry of every append call must carry
   the ID the call acknowledged. One region is also replayed by a full scan
   (no index) and both are timed (median of --replay-runs).
4. Summary: entries and MB appended, throughput, p50/p99 append latency,
   replay times indexed vs full scan and the speedup (with what it measured;
   on a log too small for it to mean anything, a line saying why there is
   none), the index on disk, and commands to look further.

Any difference is reported (namespace, region, ID, what differs) and the
command exits with status 2. Ctrl-C stops it within a second or two with one
line saying what was done (exit status 130).

Every run writes fresh namespaces named kwal-demo-<timestamp>-<n>, which it
keeps for inspection (kwal dump / replay / index show). With the embedded
broker, namespaces left by earlier demo runs (kwal-demo-*) are deleted at
the start so the data dir does not grow without bound; --keep-previous
keeps them. With --brokers nothing but this run's namespaces is touched.`

func (a *app) demoCmd() *cobra.Command {
	o := demoOpts{size: 256e6}
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
	o.register(a, f, workloadFlags{regions: 64, topics: 4, writers: 64, entrySize: 1024, perCall: 10, replayRuns: 1})
	// kwal refuses a larger entry (ErrEntryTooLarge): the demo would fail
	// at its first append.
	f.Lookup("entry-size").Usage += " (at most kwal's MaxEntryBytes)"
	a.bound(f, "entry-size", minDemoEntry, uint64(kafka.DefaultConfig().MaxEntryBytes), "kwal refuses entries larger than its Config.MaxEntryBytes (ErrEntryTooLarge)")
	f.Lookup("seed").Usage += " (0: from the clock)"
	f.Lookup("writers").Usage += " (at most --regions run)"
	f.DurationVar(&o.duration, "duration", 10*time.Second, "append for at most this long (ignored with --entries)")
	a.boundDuration(f, "duration", 0, 24*time.Hour, "a longer run is a soak test: run your own load against kwal for that")
	f.Var(&o.size, "size", "append at most this much entry data, e.g. 64MB or 1GiB; 0: until --duration (ignored with --entries)")
	a.bound(f, "size", 0, 1<<40, "the demo is a demonstration, not a fill test")
	f.Int64Var(&o.entries, "entries", 0, "append exactly this many entries instead (no --size or --duration)")
	a.bound(f, "entries", 0, 1e9, "the demo keeps every append call's acknowledged ID to check the replay")
	f.BoolVar(&o.keepPrevious, "keep-previous", false, "keep the namespaces of earlier demo runs (embedded broker)")
	return cmd
}

// minDemoEntry leaves room in every entry for its "r<region>#<seq>;"
// header, which the check reads.
const minDemoEntry = 32

// validate checks what the flags' ranges alone cannot, before anything
// connects or is deleted.
func (o *demoOpts) validate() error {
	if o.topics > o.regions {
		return fmt.Errorf("--topics %d is more than --regions %d: every namespace needs a region", o.topics, o.regions)
	}
	o.writers = min(o.writers, o.regions)
	if err := checkMemory(int64(o.writers)*int64(o.perCall), int64(o.entrySize), "--writers × --entries-per-call"); err != nil {
		return err
	}
	switch {
	case o.entries > 0:
		o.budget = o.entries
	case o.size > 0:
		o.budget = max(1, int64(o.size)/int64(o.entrySize))
		o.useDeadline = o.duration > 0
	case o.duration > 0:
		o.useDeadline = true
	default:
		return fmt.Errorf("--duration and --size are both 0: set one of them (or --entries)")
	}
	return nil
}

// plannedBytes is the most entry data the run appends, or 0 when only
// --duration bounds it.
func (o *demoOpts) plannedBytes() int64 { return o.budget * int64(o.entrySize) }

// checkDisk rejects a run that would not fit on the embedded broker's
// disk: Kafka keeps the entry data plus about 10% of framing.
func checkDisk(dir string, planned int64) error {
	if planned == 0 {
		return nil
	}
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return nil
		}
		probe = parent
	}
	free, ok := diskFree(probe)
	need := uint64(planned) + uint64(planned)/10
	if ok && need > free {
		return fmt.Errorf("the run appends up to %s, which needs about %s in %s, but only %s is free: lower --size (or --entries)",
			humanBytes(planned), humanBytes(int64(need)), dir, humanBytes(int64(free)))
	}
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
	sharing          int // regions in oneNamespace
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
	if s.embedded {
		if err := checkDisk(a.embeddedDir(), o.plannedBytes()); err != nil {
			return err
		}
	}
	if err := s.serveMetrics(o.metricsAddr); err != nil {
		return err
	}

	st, err := s.openStore(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // a no-op once closed below

	if s.embedded && !o.keepPrevious {
		n, err := deletePrevious(ctx, st)
		if err != nil {
			return a.demoStopped(ctx, err, "deleting earlier demo runs' namespaces", fmt.Sprintf("%d deleted", n))
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
			return a.demoStopped(ctx, err, "creating its namespaces", fmt.Sprintf("%d of %d created", i, o.topics))
		}
	}
	exp := newExpectation(o.seed, o.entrySize)
	for r := 1; r <= o.regions; r++ {
		exp.addRegion(topics[(r-1)%o.topics], logstore.RegionID(r))
	}
	a.demoPlan(o, s, topics)

	var res demoResult
	if err := a.demoAppend(ctx, st, o, exp, &res); err != nil {
		return a.demoStopped(ctx, err, "appending", fmt.Sprintf("%s (%s) acknowledged in %v to %s; nothing was checked",
			plural(res.entries, "entry", "entries"), humanBytes(res.bytes), roundDur(res.elapsed), namespaceList(topics)))
	}
	appended := fmt.Sprintf("%s (%s) appended to %s", plural(res.entries, "entry", "entries"), humanBytes(res.bytes), namespaceList(topics))

	// Restart.
	a.demoPhase(o, "restarting the store (closing checkpoints the index)…")
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
		return a.demoStopped(ctx, fmt.Errorf("reopening the store: %w", err), "restarting", appended+"; nothing was checked")
	}
	defer func() { _ = st2.Close() }()
	res.reopenTime = time.Since(t0)

	problems, err := a.demoReplay(ctx, st2, o, topics, exp, &res)
	if err != nil {
		return a.demoStopped(ctx, err, "replaying", appended+"; the check did not finish")
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

// demoStopped returns the one line that says what the demo was doing when
// err stopped it, or when ctx ended (Ctrl-C) that it was interrupted, and
// what it had done.
func (a *app) demoStopped(ctx context.Context, err error, doing, done string) error {
	if ctx.Err() == nil {
		return fmt.Errorf("demo failed while %s: %w; %s", doing, err, done)
	}
	return interruptedError("demo interrupted while %s: %s", doing, done)
}

// demoPhase prints a step of the demo on stderr unless --quiet.
func (a *app) demoPhase(o demoOpts, format string, args ...any) {
	if !o.quiet {
		fmt.Fprintf(a.stderr, "demo: "+format+"\n", args...)
	}
}

// demoPlan says, before the appends start, what the demo writes and where.
func (a *app) demoPlan(o demoOpts, s *session, topics []string) {
	var until string
	switch {
	case o.entries > 0:
		verb := "are"
		if o.entries == 1 {
			verb = "is"
		}
		until = fmt.Sprintf("%s (%s) %s written", plural(o.entries, "entry", "entries"), humanBytes(o.plannedBytes()), verb)
	case o.budget > 0 && o.useDeadline:
		until = fmt.Sprintf("%s are written or %v passed, whichever comes first (--size, --duration)", humanBytes(o.plannedBytes()), o.duration)
	case o.budget > 0:
		until = fmt.Sprintf("%s are written (--size)", humanBytes(o.plannedBytes()))
	default:
		until = fmt.Sprintf("%v passed (--duration)", o.duration)
	}
	fmt.Fprintf(a.stdout, "kwal demo: %s %d-entry calls of %d-B entries to %s until %s\n",
		plural(o.writers, "writer appends", "writers append"), o.perCall, o.entrySize, plural(o.regions, "region", "regions"), until)
	fmt.Fprintf(a.stdout, "%s\n", namespaceList(topics))
	fmt.Fprintf(a.stdout, "broker: %s\nindex: %s\n", s.describeBroker(), s.cfg.IndexDir)
}

// namespaceList names the run's namespaces in full, so that each can be
// pasted into another command.
func namespaceList(topics []string) string {
	if len(topics) == 1 {
		return "namespace " + topics[0]
	}
	if len(topics) <= 4 {
		return "namespaces " + strings.Join(topics, ", ")
	}
	return fmt.Sprintf("namespaces %s ... %s", topics[0], topics[len(topics)-1])
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
