package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

// demoPrefix begins the namespaces of demo runs.
const demoPrefix = "kwal-demo-"

type demoOpts struct {
	regions, topics, writers int
	duration                 time.Duration
	entries                  int64
	entrySize, perCall       int
	replayRuns               int
	quiet                    bool
	keepPrevious             bool
	metricsAddr              string
	seed                     uint64
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
	f.IntVar(&o.regions, "regions", 64, "regions (IDs 1..regions)")
	f.IntVar(&o.topics, "topics", 4, "namespaces (topics) the regions share")
	f.IntVar(&o.writers, "writers", 64, "concurrent writers (at most one per region)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to append (ignored with --entries)")
	f.Int64Var(&o.entries, "entries", 0, "append exactly this many entries instead of running for --duration")
	f.IntVar(&o.entrySize, "entry-size", 1024, "bytes of each entry's data")
	f.IntVar(&o.perCall, "entries-per-call", 10, "entries per AppendBatch call (one region per call)")
	f.IntVar(&o.replayRuns, "replay-runs", 1, "timed runs of the one-region replays (median reported)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar")
	f.BoolVar(&o.keepPrevious, "keep-previous", false, "keep the namespaces of earlier demo runs (embedded broker)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics during the run (e.g. :9090)")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the entry data (0: from the clock)")
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
func (a *app) demoAppend(ctx context.Context, st logstore.LogStore, o demoOpts, exp *expectation, res *demoResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		entries, nbytes atomic.Int64
		remaining       atomic.Int64
		mu              sync.Mutex
		errs            []error
		wg              sync.WaitGroup
	)
	remaining.Store(o.entries)
	start := time.Now()
	deadline := start.Add(o.duration)
	lats := make([][]time.Duration, o.writers)
	for w := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var owned []logstore.RegionID
			for r := w + 1; r <= o.regions; r += o.writers {
				owned = append(owned, logstore.RegionID(r))
			}
			for i := 0; ctx.Err() == nil; i++ {
				n := o.perCall
				if o.entries > 0 {
					if n = reserve(&remaining, n); n == 0 {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				rl := exp.regions[owned[i%len(owned)]]
				batch := make([]logstore.Entry, n)
				for j := range batch {
					batch[j] = logstore.Entry{Namespace: rl.namespace, Region: rl.region, Data: exp.data(rl.region, rl.entries+uint64(j))}
				}
				t := time.Now()
				ar, err := st.AppendBatch(ctx, batch)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("append to region %d of %s: %w", rl.region, rl.namespace, err))
					mu.Unlock()
					cancel()
					return
				}
				lats[w] = append(lats[w], time.Since(t))
				id, ok := ar.LastEntryIDs[rl.region]
				if !ok {
					mu.Lock()
					errs = append(errs, fmt.Errorf("append to region %d of %s: the result names no ID for the region", rl.region, rl.namespace))
					mu.Unlock()
					cancel()
					return
				}
				rl.calls = append(rl.calls, ackedCall{n: n, lastID: id})
				rl.entries += uint64(n)
				entries.Add(int64(n))
				nbytes.Add(int64(n * o.entrySize))
			}
		}()
	}

	done := make(chan struct{})
	var progressWG sync.WaitGroup
	if !o.quiet && a.interactive() {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			a.demoProgress(done, o, start, &entries, &nbytes)
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	close(done)
	progressWG.Wait()

	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("demo interrupted: %w", err)
	}
	res.entries, res.bytes = entries.Load(), nbytes.Load()
	for _, l := range lats {
		res.latencies = append(res.latencies, l...)
	}
	slices.Sort(res.latencies)
	return nil
}

// reserve takes up to n from the budget and returns how many it took.
func reserve(budget *atomic.Int64, n int) int {
	for {
		left := budget.Load()
		if left <= 0 {
			return 0
		}
		take := min(int64(n), left)
		if budget.CompareAndSwap(left, left-take) {
			return int(take)
		}
	}
}

// demoProgress draws the progress bar until done is closed.
func (a *app) demoProgress(done <-chan struct{}, o demoOpts, start time.Time, entries, nbytes *atomic.Int64) {
	total := int64(o.duration / time.Millisecond)
	if o.entries > 0 {
		total = o.entries
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription("appending"),
		progressbar.OptionSetPredictTime(false),
	)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			_ = bar.Finish()
			return
		case <-tick.C:
			el := time.Since(start).Seconds()
			n, b := entries.Load(), nbytes.Load()
			bar.Describe(fmt.Sprintf("appending %9d entries %8.0f entries/s %7.1f MB/s", n, float64(n)/el, mb(b)/el))
			if o.entries > 0 {
				_ = bar.Set64(n)
			} else {
				_ = bar.Set64(min(total, int64(time.Since(start)/time.Millisecond)))
			}
		}
	}
}

// demoReplay replays every region with the index, checks it, and times one
// region's indexed and full-scan replays.
func (a *app) demoReplay(ctx context.Context, st *kafka.LogStore, o demoOpts, topics []string, exp *expectation, res *demoResult) (*problemList, error) {
	problems := &problemList{max: 20, regions: map[logstore.RegionID]bool{}}
	t0 := time.Now()
	for _, ns := range topics {
		from := map[logstore.RegionID]logstore.EntryID{}
		checks := map[logstore.RegionID]*regionCheck{}
		for id, rl := range exp.regions {
			if rl.namespace == ns {
				from[id] = 0
				checks[id] = exp.check(id, problems)
			}
		}
		var stats kafka.ReadStats
		for e, err := range st.ReadWith(ctx, ns, from, kafka.ReadOptions{Stats: &stats}) {
			if err != nil {
				return nil, fmt.Errorf("replaying %s: %w", ns, err)
			}
			c := checks[e.Region]
			if c == nil {
				problems.add(ns, e.Region, e.ID, "entry of a region that was not asked for")
				continue
			}
			c.add(e)
		}
		for _, c := range checks {
			c.finish()
		}
		addStats(&res.replayAllStats, stats)
	}
	res.replayAll = time.Since(t0)

	// One region, indexed vs full scan: the first run of each is checked
	// too.
	res.oneRegion, res.oneNamespace = 1, topics[0]
	var err error
	res.indexed, res.indexedStats, err = timeReplay(ctx, st, res.oneNamespace, res.oneRegion, false, o.replayRuns, exp, problems)
	if err != nil {
		return nil, err
	}
	res.scanned, res.scannedStats, err = timeReplay(ctx, st, res.oneNamespace, res.oneRegion, true, o.replayRuns, exp, problems)
	if err != nil {
		return nil, err
	}
	return problems, nil
}

// timeReplay replays one region runs times and returns the median time and
// the first run's stats; the first run is checked against exp when set.
func timeReplay(ctx context.Context, st *kafka.LogStore, ns string, region logstore.RegionID, noIndex bool, runs int, exp *expectation, problems *problemList) (time.Duration, kafka.ReadStats, error) {
	var (
		times []time.Duration
		first kafka.ReadStats
	)
	for i := range runs {
		var stats kafka.ReadStats
		var c *regionCheck
		if i == 0 && exp != nil {
			c = exp.check(region, problems)
		}
		t0 := time.Now()
		for e, err := range st.ReadWith(ctx, ns, map[logstore.RegionID]logstore.EntryID{region: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &stats}) {
			if err != nil {
				return 0, first, fmt.Errorf("replaying region %d of %s: %w", region, ns, err)
			}
			if c != nil {
				c.add(e)
			}
		}
		times = append(times, time.Since(t0))
		if c != nil {
			c.finish()
		}
		if i == 0 {
			first = stats
		}
	}
	slices.Sort(times)
	return times[len(times)/2], first, nil
}

func addStats(dst *kafka.ReadStats, s kafka.ReadStats) {
	dst.Fetches += s.Fetches
	dst.FetchedBytes += s.FetchedBytes
	dst.Records += s.Records
	dst.Entries += s.Entries
	dst.EntryBytes += s.EntryBytes
	dst.ScanRanges += s.ScanRanges
	dst.IndexRanges += s.IndexRanges
	dst.Missing += s.Missing
}

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

// ---- the expected log and its check -------------------------------------

// ackedCall is one acknowledged append call of a region.
type ackedCall struct {
	n      int              // entries
	lastID logstore.EntryID // the ID AppendBatch returned for its last entry
}

// regionLog is what was acknowledged for one region, in order. Entry seq
// (0, 1, ...) is the region's seq-th entry; its data is expectation.data.
type regionLog struct {
	namespace string
	region    logstore.RegionID
	calls     []ackedCall
	entries   uint64
}

// expectation holds every region's acknowledged calls; entry data is
// rebuilt from the seed instead of being kept in memory.
type expectation struct {
	seed    uint64
	size    int
	regions map[logstore.RegionID]*regionLog
}

func newExpectation(seed uint64, size int) *expectation {
	return &expectation{seed: seed, size: size, regions: map[logstore.RegionID]*regionLog{}}
}

func (x *expectation) addRegion(ns string, r logstore.RegionID) *regionLog {
	rl := &regionLog{namespace: ns, region: r}
	x.regions[r] = rl
	return rl
}

// data returns the data of the region's entry seq: a readable header
// "r<region>#<seq>;" followed by pseudo-random bytes.
func (x *expectation) data(r logstore.RegionID, seq uint64) []byte {
	d := make([]byte, x.size)
	rng := rand.New(rand.NewPCG(x.seed^(uint64(r)*0x9e3779b97f4a7c15), seq))
	i := 0
	for ; i+8 <= len(d); i += 8 {
		binary.LittleEndian.PutUint64(d[i:], rng.Uint64())
	}
	for ; i < len(d); i++ {
		d[i] = byte(rng.Uint32())
	}
	copy(d, fmt.Sprintf("r%d#%d;", r, seq))
	return d
}

// parseHeader reads the region and seq from an entry's header.
func parseHeader(d []byte) (logstore.RegionID, uint64, bool) {
	rest, ok := bytes.CutPrefix(d, []byte("r"))
	if !ok {
		return 0, 0, false
	}
	rs, rest, ok := bytes.Cut(rest, []byte("#"))
	if !ok {
		return 0, 0, false
	}
	ss, _, ok := bytes.Cut(rest, []byte(";"))
	if !ok || len(ss) > 20 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseUint(string(rs), 10, 64)
	s, err2 := strconv.ParseUint(string(ss), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return logstore.RegionID(r), s, true
}

// problem is one difference between the replay and what was acknowledged.
type problem struct {
	namespace string
	region    logstore.RegionID
	id        logstore.EntryID
	what      string
}

type problemList struct {
	max     int
	total   int
	list    []problem
	regions map[logstore.RegionID]bool
}

func (p *problemList) add(ns string, r logstore.RegionID, id logstore.EntryID, format string, args ...any) {
	p.total++
	p.regions[r] = true
	if len(p.list) < p.max {
		p.list = append(p.list, problem{namespace: ns, region: r, id: id, what: fmt.Sprintf(format, args...)})
	}
}

func (p *problemList) print(w io.Writer) {
	for _, q := range p.list {
		id := "-"
		if q.id > 0 {
			id = strconv.FormatUint(uint64(q.id), 10)
		}
		fmt.Fprintf(w, "MISMATCH namespace %s region %d ID %s: %s\n", q.namespace, q.region, id, q.what)
	}
	if p.total > len(p.list) {
		fmt.Fprintf(w, "... and %d more\n", p.total-len(p.list))
	}
}

// regionCheck compares one region's replay with its acknowledged calls,
// entry by entry.
type regionCheck struct {
	x        *expectation
	rl       *regionLog
	problems *problemList
	call     int              // index of the call the next entry belongs to
	inCall   int              // index of the next entry within it
	seq      uint64           // seq of the next expected entry
	lastID   logstore.EntryID // ID of the last entry seen
}

func (x *expectation) check(r logstore.RegionID, problems *problemList) *regionCheck {
	rl := x.regions[r]
	if rl == nil {
		rl = &regionLog{region: r}
	}
	return &regionCheck{x: x, rl: rl, problems: problems}
}

func (c *regionCheck) fail(id logstore.EntryID, format string, args ...any) {
	c.problems.add(c.rl.namespace, c.rl.region, id, format, args...)
}

// advance moves the cursor to the entry after the current one.
func (c *regionCheck) advance() {
	c.seq++
	c.inCall++
	if c.call < len(c.rl.calls) && c.inCall >= c.rl.calls[c.call].n {
		c.call++
		c.inCall = 0
	}
}

// add checks the next replayed entry.
func (c *regionCheck) add(e logstore.Entry) {
	if e.Region != c.rl.region {
		c.fail(e.ID, "entry of region %d in this region's replay", e.Region)
		return
	}
	if e.ID <= c.lastID {
		c.fail(e.ID, "out of order: ID %d after ID %d", e.ID, c.lastID)
	}
	if c.seq >= c.rl.entries {
		c.fail(e.ID, "unexpected entry after the last acknowledged one (%d bytes, %s)", len(e.Data), preview(e.Data, 16))
		c.lastID = max(c.lastID, e.ID)
		return
	}
	// An entry's header names its seq: when it is ahead of the cursor,
	// entries are missing; when behind, it came back twice or out of order.
	if r, seq, ok := parseHeader(e.Data); ok && r == c.rl.region && seq != c.seq {
		if seq < c.seq {
			c.fail(e.ID, "entry #%d of the region came back again (or out of order) after entry #%d", seq, c.seq-1)
			c.lastID = max(c.lastID, e.ID)
			return
		}
		if seq < c.rl.entries {
			firstMissing := c.seq
			for c.seq < seq {
				c.advance()
			}
			c.fail(e.ID, "%d acknowledged entries missing before it (entries #%d..#%d of the region)", seq-firstMissing, firstMissing, seq-1)
		}
	}
	call := c.rl.calls[c.call]
	last := c.inCall == call.n-1
	want := c.x.data(c.rl.region, c.seq)
	if d := diff(e.Data, want); d != "" {
		c.fail(e.ID, "entry #%d of the region: data differs: %s", c.seq, d)
	}
	switch {
	case last && e.ID != call.lastID:
		c.fail(e.ID, "entry #%d ends an append call acknowledged with ID %d, but came back with ID %d", c.seq, call.lastID, e.ID)
	case !last && e.ID >= call.lastID:
		c.fail(e.ID, "entry #%d came back with ID %d, not below its call's acknowledged last ID %d", c.seq, e.ID, call.lastID)
	}
	c.lastID = max(c.lastID, e.ID)
	c.advance()
}

// finish reports acknowledged entries the replay did not return.
func (c *regionCheck) finish() {
	if c.seq < c.rl.entries {
		lastID := c.rl.calls[len(c.rl.calls)-1].lastID
		c.fail(0, "%d acknowledged entries missing at the end (entries #%d..#%d of the region, the last acknowledged with ID %d)",
			c.rl.entries-c.seq, c.seq, c.rl.entries-1, lastID)
	}
}

// diff describes how got differs from want, or returns "".
func diff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	if i == n {
		return fmt.Sprintf("%d bytes, %d expected (equal up to byte %d)", len(got), len(want), n)
	}
	sizes := fmt.Sprintf("%d bytes", len(got))
	if len(got) != len(want) {
		sizes = fmt.Sprintf("%d bytes, %d expected", len(got), len(want))
	}
	return fmt.Sprintf("first difference at byte %d: 0x%02x, expected 0x%02x (%s)", i, got[i], want[i], sizes)
}
