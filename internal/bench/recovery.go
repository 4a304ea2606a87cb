package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/internal/rawlog"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RecoveryConfig describes a datanode restart to measure: the topics a
// workload wrote, the regions of each, and how to open the store again
// (with its index directory, as after a restart).
type RecoveryConfig struct {
	Open    func(ctx context.Context) (*kafka.LogStore, error)
	Topics  []string
	Regions map[string][]logstore.RegionID // per topic
	// Layout measures a topic's batch layout (MeasureLayoutWith), to count
	// the bytes a replay from the flushed points must fetch at the least;
	// nil skips that count.
	Layout func(ctx context.Context, topic string) (Layout, error)
	Runs   int    // timed runs of each one-region replay (median reported)
	Seed   uint64 // of the flushed points
	// RawScan reads a topic with a plain franz-go consumer (RawConsumeWith),
	// the baseline; nil skips it.
	RawScan func(ctx context.Context, topic string) (ConsumeResult, error)
	// Floor times ranges fetched at once by plain franz-go clients
	// (FetchFloor): the broker's floor of (a), of (b) and of a scan; nil,
	// or no Layout, skips them. FloorChunk is the bytes a floor fetch
	// takes at most where a run of batches is longer (kwal's chunk size).
	Floor      func(ctx context.Context, ranges []OffsetRange) (FloorResult, error)
	FloorChunk int64
}

// floorExtra is the share of the needed bytes that (b)'s floor may fetch
// beyond them: the recovery target's bound (<= 1.2x the needed bytes,
// docs/benchmarks.md, "Recovery after a restart").
const floorExtra = 0.2

// Recovery is what a restart's replays measured. Every phase runs on a
// store opened afresh (the restart), none on a store that already read.
type Recovery struct {
	Topics  int `json:"topics"`
	Regions int `json:"regions"`
	// (a) one region (region 1 of the first topic, from its first entry):
	// indexed and by full scan, median of Runs.
	OneRegion RecoveryOne `json:"one_region"`
	// (b) every region at once, each with its own Read from a random
	// flushed point, as a datanode opening its regions does.
	Concurrent RecoveryPhase `json:"concurrent_reads"`
	// (c) one ReadRegions per topic (topics at once) from the same points.
	ReadRegions RecoveryPhase `json:"read_regions"`
	// (d) every region at once by full scan from the same points (what a
	// WAL without an index does).
	FullScans RecoveryPhase `json:"full_scans"`
	// The references: each topic scanned once from its start (one kwal
	// NoIndex read per topic, topics at once), and with a plain franz-go
	// consumer.
	TopicScan RecoveryPhase `json:"topic_scan"`
	RawScan   RecoveryPhase `json:"raw_scan"`
	// NeededBytes is what (b) must fetch at the least: the bytes of the
	// batches holding records after the flushed points; TopicBytes all
	// batches' bytes.
	NeededBytes int64 `json:"needed_bytes"`
	TopicBytes  int64 `json:"topic_bytes"`
	// Ratios behind the recovery targets (docs/benchmarks.md).
	OneRegionSpeedup    float64 `json:"one_region_speedup"`           // full scan time ÷ indexed time
	OneRegionFetchedOwn float64 `json:"one_region_fetched_own"`       // indexed fetched bytes ÷ the region's entry bytes
	ConcurrentVsScan    float64 `json:"concurrent_vs_scan"`           // (b) time ÷ topic scan time
	ConcurrentVsNeeded  float64 `json:"concurrent_fetched_vs_needed"` // (b) fetched bytes ÷ needed bytes
	ReadRegionsVsScan   float64 `json:"read_regions_vs_scan"`         // (c) time ÷ topic scan time
	FullScansVsScan     float64 `json:"full_scans_vs_scan"`           // (d) time ÷ topic scan time
	// The best (a) could do on this broker: full scan time ÷ the floor's,
	// and how far the indexed read is above the floor (indexed ÷ floor).
	OneRegionFloorSpeedup float64 `json:"one_region_floor_speedup,omitempty"`
	OneRegionVsFloor      float64 `json:"one_region_vs_floor,omitempty"`
	// The broker's floor of (b) and of a scan, both fetched by plain
	// franz-go clients, nothing decoded: ConcurrentFloor fetches the
	// needed batches with the smallest gaps between them merged up to 1.2x
	// the needed bytes (the fewest fetches within the target's byte bound),
	// ScanFloor every batch, each in chunks of FloorChunk; and (b)'s floor
	// against kwal's topic scan and against the scan floor. Above 1, a plan
	// within the byte bound costs the broker more than scanning.
	ConcurrentFloor            *RecoveryRead `json:"concurrent_floor,omitempty"`
	ScanFloor                  *RecoveryRead `json:"scan_floor,omitempty"`
	ConcurrentFloorVsScan      float64       `json:"concurrent_floor_vs_scan,omitempty"`
	ConcurrentFloorVsScanFloor float64       `json:"concurrent_floor_vs_scan_floor,omitempty"`
}

// RecoveryOne is one region's replay, indexed and by full scan.
type RecoveryOne struct {
	Namespace string       `json:"namespace"`
	Region    uint64       `json:"region"`
	Runs      int          `json:"runs"`
	Indexed   RecoveryRead `json:"indexed"`
	FullScan  RecoveryRead `json:"full_scan"`
	// Floor is the region's batches fetched by plain franz-go clients,
	// nothing decoded (see FetchFloor); nil when not measured.
	Floor *RecoveryRead `json:"floor,omitempty"`
}

// RecoveryRead is a timed replay's figures.
type RecoveryRead struct {
	MedianMS     float64 `json:"median_ms"`
	MinMS        float64 `json:"min_ms"`
	MaxMS        float64 `json:"max_ms"`
	Fetches      int     `json:"fetches"`
	FetchedBytes int64   `json:"fetched_bytes"`
	Entries      int64   `json:"entries"`
	EntryBytes   int64   `json:"entry_bytes"`
	Plan         string  `json:"plan"`
}

// RecoveryPhase is a phase of many reads at once.
type RecoveryPhase struct {
	ElapsedMS    float64        `json:"elapsed_ms"`
	Reads        int            `json:"reads"`
	Passes       int            `json:"passes"` // distinct passes over the log that served the reads
	Fetches      int            `json:"fetches"`
	FetchedBytes int64          `json:"fetched_bytes"`
	Entries      int64          `json:"entries"`
	EntryBytes   int64          `json:"entry_bytes"`
	PeakHeap     uint64         `json:"peak_heap_bytes,omitempty"`
	Plans        map[string]int `json:"plans,omitempty"`
	// Runs is how many times the phase ran; ElapsedMS is the median,
	// MinMS and MaxMS the range, the other figures the last run's.
	Runs  int     `json:"runs"`
	MinMS float64 `json:"min_ms"`
	MaxMS float64 `json:"max_ms"`
	// What the phase's first pass measured as it ended (the inputs of the
	// read path's gap rule): a fetch's latency and the streaming rate, and
	// the gaps it read through.
	LatencyMS  float64 `json:"fetch_latency_ms"`
	StreamMBps float64 `json:"stream_mb_per_s"`
	MergedGaps int     `json:"merged_gaps"`
}

// flushPoint is one region's replay start.
type flushPoint struct {
	topic  string
	region logstore.RegionID
	from   logstore.EntryID
}

// MeasureRecovery runs the recovery phases.
func MeasureRecovery(ctx context.Context, c RecoveryConfig) (Recovery, error) {
	var rec Recovery
	if len(c.Topics) == 0 {
		return rec, errors.New("bench: recovery: no topics")
	}
	rec.Topics = len(c.Topics)
	ends := map[string]int64{}
	{
		st, err := c.Open(ctx)
		if err != nil {
			return rec, err
		}
		for _, t := range c.Topics {
			id, err := st.LatestEntryID(ctx, t)
			if err != nil {
				_ = st.Close()
				return rec, err
			}
			ends[t] = int64(id)
		}
		if err := st.Close(); err != nil {
			return rec, err
		}
	}
	// Random flushed points: each region's replay starts at an offset
	// drawn uniformly from its topic.
	rng := rand.New(rand.NewPCG(c.Seed, 9))
	var points []flushPoint
	perTopic := map[string]map[logstore.RegionID]logstore.EntryID{}
	for _, t := range c.Topics {
		perTopic[t] = map[logstore.RegionID]logstore.EntryID{}
		for _, r := range c.Regions[t] {
			var from logstore.EntryID
			if ends[t] > 0 {
				from = logstore.EntryID(rng.Int64N(ends[t]) + 1)
			}
			points = append(points, flushPoint{t, r, from})
			perTopic[t][r] = from
		}
	}
	rec.Regions = len(points)
	var needRuns, scanRuns []OffsetRange // the floors of (b) and of a scan
	var oneRuns []OffsetRange            // (a)'s
	for _, t := range c.Topics {
		if c.Layout == nil {
			break
		}
		l, err := c.Layout(ctx, t)
		if err != nil {
			return rec, fmt.Errorf("bench: recovery: layout of %s: %w", t, err)
		}
		from := map[uint64]int64{}
		for r, id := range perTopic[t] {
			from[uint64(r)] = max(int64(id)-1, 0)
		}
		rec.NeededBytes += l.NeededBytes(from)
		rec.TopicBytes += l.BatchBytes
		needRuns = append(needRuns, l.NeededRuns(t, from, floorExtra, c.FloorChunk)...)
		scanRuns = append(scanRuns, l.ScanRuns(t, c.FloorChunk)...)
		if t == c.Topics[0] {
			oneRuns = l.RegionRuns(t, uint64(oneRegion(c)))
		}
	}

	// (a) One region, indexed and by full scan.
	t0, region := c.Topics[0], oneRegion(c)
	rec.OneRegion = RecoveryOne{Namespace: t0, Region: uint64(region), Runs: max(c.Runs, 1)}
	var err error
	if rec.OneRegion.Indexed, err = timeOne(ctx, c, t0, region, false); err != nil {
		return rec, err
	}
	if rec.OneRegion.FullScan, err = timeOne(ctx, c, t0, region, true); err != nil {
		return rec, err
	}
	if rec.OneRegion.Indexed.Entries != rec.OneRegion.FullScan.Entries {
		return rec, fmt.Errorf("bench: recovery: region %d of %s: indexed read yielded %d entries, full scan %d",
			region, t0, rec.OneRegion.Indexed.Entries, rec.OneRegion.FullScan.Entries)
	}
	if rec.OneRegion.Floor, err = c.floor(ctx, oneRuns); err != nil {
		return rec, fmt.Errorf("bench: recovery: floor of region %d of %s: %w", region, t0, err)
	}

	// (b), (c), (d): every region from its flushed point. Each region's
	// entry count must agree between them.
	counts := map[string]map[logstore.RegionID]int64{}
	check := func(phase string, got map[string]map[logstore.RegionID]int64) error {
		if len(counts) == 0 {
			counts = got
			return nil
		}
		for _, p := range points {
			if a, b := counts[p.topic][p.region], got[p.topic][p.region]; a != b {
				return fmt.Errorf("bench: recovery: %s: region %d of %s yielded %d entries, concurrent Reads %d", phase, p.region, p.topic, b, a)
			}
		}
		return nil
	}
	var got map[string]map[logstore.RegionID]int64
	var reads []readJob
	for _, p := range points {
		reads = append(reads, readJob{topic: p.topic, from: map[logstore.RegionID]logstore.EntryID{p.region: p.from}})
	}
	if rec.Concurrent, got, err = runPhase(ctx, c, reads, false); err != nil {
		return rec, fmt.Errorf("bench: recovery: concurrent reads: %w", err)
	}
	// Its peak heap in a run of its own: sampling the heap with the
	// collector at GOGC=10 slows the reads down.
	heap, _, err := runPhase(ctx, c, reads, true)
	if err != nil {
		return rec, fmt.Errorf("bench: recovery: concurrent reads (peak heap): %w", err)
	}
	rec.Concurrent.PeakHeap = heap.PeakHeap
	if err := check("concurrent reads", got); err != nil {
		return rec, err
	}
	reads = reads[:0]
	for _, t := range c.Topics {
		if len(perTopic[t]) > 0 {
			reads = append(reads, readJob{topic: t, from: perTopic[t]})
		}
	}
	if rec.ReadRegions, got, err = runPhase(ctx, c, reads, false); err != nil {
		return rec, fmt.Errorf("bench: recovery: ReadRegions: %w", err)
	}
	if err := check("ReadRegions", got); err != nil {
		return rec, err
	}
	reads = reads[:0]
	for _, p := range points {
		reads = append(reads, readJob{topic: p.topic, from: map[logstore.RegionID]logstore.EntryID{p.region: p.from}, noIndex: true})
	}
	if rec.FullScans, got, err = runPhase(ctx, c, reads, false); err != nil {
		return rec, fmt.Errorf("bench: recovery: full scans: %w", err)
	}
	if err := check("full scans", got); err != nil {
		return rec, err
	}

	// The references.
	reads = reads[:0]
	for _, t := range c.Topics {
		reads = append(reads, readJob{topic: t, from: map[logstore.RegionID]logstore.EntryID{region: 0}, noIndex: true})
	}
	if rec.TopicScan, _, err = runPhase(ctx, c, reads, false); err != nil {
		return rec, fmt.Errorf("bench: recovery: topic scan: %w", err)
	}
	if c.RawScan != nil {
		var times []float64
		for range max(c.Runs, 1) {
			if rec.RawScan, err = rawScans(ctx, c); err != nil {
				return rec, fmt.Errorf("bench: recovery: raw scan: %w", err)
			}
			times = append(times, rec.RawScan.ElapsedMS)
		}
		slices.Sort(times)
		rec.RawScan.Runs, rec.RawScan.ElapsedMS, rec.RawScan.MinMS, rec.RawScan.MaxMS = len(times), times[len(times)/2], times[0], times[len(times)-1]
	}

	if rec.ConcurrentFloor, err = c.floor(ctx, needRuns); err != nil {
		return rec, fmt.Errorf("bench: recovery: floor of (b): %w", err)
	}
	if rec.ScanFloor, err = c.floor(ctx, scanRuns); err != nil {
		return rec, fmt.Errorf("bench: recovery: floor of a scan: %w", err)
	}

	one := rec.OneRegion
	if f := one.Floor; f != nil {
		rec.OneRegionFloorSpeedup = ratio(one.FullScan.MedianMS, f.MedianMS)
		rec.OneRegionVsFloor = ratio(one.Indexed.MedianMS, f.MedianMS)
	}
	if f := rec.ConcurrentFloor; f != nil {
		rec.ConcurrentFloorVsScan = ratio(f.MedianMS, rec.TopicScan.ElapsedMS)
		if rec.ScanFloor != nil {
			rec.ConcurrentFloorVsScanFloor = ratio(f.MedianMS, rec.ScanFloor.MedianMS)
		}
	}
	rec.OneRegionSpeedup = ratio(one.FullScan.MedianMS, one.Indexed.MedianMS)
	rec.OneRegionFetchedOwn = ratio(float64(one.Indexed.FetchedBytes), float64(one.Indexed.EntryBytes))
	rec.ConcurrentVsScan = ratio(rec.Concurrent.ElapsedMS, rec.TopicScan.ElapsedMS)
	rec.ConcurrentVsNeeded = ratio(float64(rec.Concurrent.FetchedBytes), float64(rec.NeededBytes))
	rec.ReadRegionsVsScan = ratio(rec.ReadRegions.ElapsedMS, rec.TopicScan.ElapsedMS)
	rec.FullScansVsScan = ratio(rec.FullScans.ElapsedMS, rec.TopicScan.ElapsedMS)
	return rec, nil
}

// oneRegion is (a)'s region: the first topic's lowest.
func oneRegion(c RecoveryConfig) logstore.RegionID {
	if rs := c.Regions[c.Topics[0]]; len(rs) > 0 {
		return slices.Min(rs)
	}
	return 1
}

// floor times ranges fetched by c.Floor, median of c.Runs; nil when there
// is nothing to time.
func (c RecoveryConfig) floor(ctx context.Context, ranges []OffsetRange) (*RecoveryRead, error) {
	if c.Floor == nil || len(ranges) == 0 {
		return nil, nil
	}
	f, err := medianFloor(c.Runs, func() (FloorResult, error) { return c.Floor(ctx, ranges) })
	if err != nil {
		return nil, err
	}
	return &f, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timeOne replays one region from its first entry, each run on a store
// opened afresh, and reports the median run.
func timeOne(ctx context.Context, c RecoveryConfig, topic string, region logstore.RegionID, noIndex bool) (RecoveryRead, error) {
	var times []time.Duration
	var out RecoveryRead
	for range max(c.Runs, 1) {
		st, err := c.Open(ctx)
		if err != nil {
			return out, err
		}
		var stats kafka.ReadStats
		began := time.Now()
		for _, err := range st.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{region: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &stats}) {
			if err != nil {
				_ = st.Close()
				return out, fmt.Errorf("replaying region %d of %s: %w", region, topic, err)
			}
		}
		times = append(times, time.Since(began))
		if err := st.Close(); err != nil {
			return out, err
		}
		out = RecoveryRead{Fetches: stats.Fetches, FetchedBytes: stats.FetchedBytes, Entries: stats.Entries, EntryBytes: stats.EntryBytes, Plan: stats.Plan}
	}
	slices.Sort(times)
	out.MedianMS, out.MinMS, out.MaxMS = ms(times[len(times)/2]), ms(times[0]), ms(times[len(times)-1])
	return out, nil
}

// readJob is one read of a phase.
type readJob struct {
	topic   string
	from    map[logstore.RegionID]logstore.EntryID
	noIndex bool
}

// runPhase runs a phase c.Runs times (each on a store opened afresh) and
// reports the median time.
func runPhase(ctx context.Context, c RecoveryConfig, jobs []readJob, heap bool) (RecoveryPhase, map[string]map[logstore.RegionID]int64, error) {
	runs := max(c.Runs, 1)
	if heap {
		runs = 1
	}
	var times []float64
	var ph RecoveryPhase
	var counts map[string]map[logstore.RegionID]int64
	for range runs {
		var err error
		if ph, counts, err = runPhaseOnce(ctx, c, jobs, heap); err != nil {
			return ph, nil, err
		}
		times = append(times, ph.ElapsedMS)
	}
	slices.Sort(times)
	ph.Runs, ph.ElapsedMS, ph.MinMS, ph.MaxMS = runs, times[len(times)/2], times[0], times[len(times)-1]
	return ph, counts, nil
}

// runPhaseOnce opens a store, starts every read at once and times them to
// the last one's end. It returns each region's entry count.
func runPhaseOnce(ctx context.Context, c RecoveryConfig, jobs []readJob, heap bool) (RecoveryPhase, map[string]map[logstore.RegionID]int64, error) {
	var ph RecoveryPhase
	st, err := c.Open(ctx)
	if err != nil {
		return ph, nil, err
	}
	defer func() { _ = st.Close() }()
	counts := map[string]map[logstore.RegionID]int64{}
	stats := make([]kafka.ReadStats, len(jobs))
	errs := make([]error, len(jobs))
	var mu sync.Mutex
	run := func() {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				local := map[logstore.RegionID]int64{}
				for e, err := range st.ReadWith(ctx, j.topic, j.from, kafka.ReadOptions{NoIndex: j.noIndex, Stats: &stats[i]}) {
					if err != nil {
						errs[i] = err
						return
					}
					local[e.Region]++
				}
				mu.Lock()
				if counts[j.topic] == nil {
					counts[j.topic] = map[logstore.RegionID]int64{}
				}
				for r, n := range local {
					counts[j.topic][r] += n
				}
				mu.Unlock()
			}()
		}
		began := time.Now()
		close(start)
		wg.Wait()
		ph.ElapsedMS = ms(time.Since(began))
	}
	if heap {
		ph.PeakHeap = PeakHeap(run)
	} else {
		run()
	}
	if err := errors.Join(errs...); err != nil {
		return ph, nil, err
	}
	ph.Reads = len(jobs)
	ph.Plans = map[string]int{}
	passes := map[uint64]kafka.ReadStats{}
	for _, s := range stats {
		ph.Entries += s.Entries
		ph.EntryBytes += s.EntryBytes
		if s.Pass == 0 {
			continue // nothing to fetch
		}
		if _, ok := passes[s.Pass]; !ok {
			if len(passes) == 0 {
				ph.LatencyMS, ph.StreamMBps, ph.MergedGaps = ms(s.FetchLatency), s.StreamBytesPerSec/1e6, s.MergedGaps
			}
			passes[s.Pass] = s
			ph.Plans[s.Plan]++
		}
	}
	ph.Passes = len(passes)
	for _, s := range passes {
		ph.Fetches += s.Fetches
		ph.FetchedBytes += s.FetchedBytes
	}
	return ph, counts, nil
}

// rawScans reads every topic with a plain franz-go consumer, topics at once.
func rawScans(ctx context.Context, c RecoveryConfig) (RecoveryPhase, error) {
	var ph RecoveryPhase
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	began := time.Now()
	for _, t := range c.Topics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.RawScan(ctx, t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ph.Reads++
			ph.Entries += r.Records
			ph.FetchedBytes += r.Bytes
		}()
	}
	wg.Wait()
	ph.ElapsedMS = ms(time.Since(began))
	return ph, errors.Join(errs...)
}

// Print writes the recovery figures as a table.
func (r Recovery) Print(w io.Writer) {
	fmt.Fprintf(w, "recovery after a restart (store reopened with its index dir for every phase): %d region(s) in %d topic(s), random flushed points\n", r.Regions, r.Topics)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\ttime\treads\tpasses\tfetches\tfetched\tentries\tplan\t\n")
	one := r.OneRegion
	oneRow := func(name string, x RecoveryRead) {
		fmt.Fprintf(tw, "%s\t%.2fms (%.2f-%.2f)\t1\t1\t%d\t%s\t%d\t%s\t\n", name, x.MedianMS, x.MinMS, x.MaxMS, x.Fetches, mb(x.FetchedBytes), x.Entries, x.Plan)
	}
	oneRow(fmt.Sprintf("(a) region %d, indexed", one.Region), one.Indexed)
	oneRow(fmt.Sprintf("(a) region %d, full scan", one.Region), one.FullScan)
	floorRow := func(name string, x *RecoveryRead) {
		if x != nil {
			fmt.Fprintf(tw, "%s\t%.2fms (%.2f-%.2f)\t-\t-\t%d\t%s\t-\t%s\t\n", name, x.MedianMS, x.MinMS, x.MaxMS, x.Fetches, mb(x.FetchedBytes), "plain franz-go fetches, nothing decoded")
		}
	}
	floorRow(fmt.Sprintf("(a) region %d, broker floor", one.Region), one.Floor)
	row := func(name string, p RecoveryPhase) {
		plans := ""
		for k, v := range p.Plans {
			if plans != "" {
				plans += ", "
			}
			plans += fmt.Sprintf("%s×%d", k, v)
		}
		t := fmt.Sprintf("%.2fms", p.ElapsedMS)
		if p.Runs > 1 {
			t = fmt.Sprintf("%.2fms (%.2f-%.2f)", p.ElapsedMS, p.MinMS, p.MaxMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t\n", name, t, p.Reads, p.Passes, p.Fetches, mb(p.FetchedBytes), p.Entries, plans)
	}
	row("(b) every region, own Read", r.Concurrent)
	row("(c) ReadRegions per topic", r.ReadRegions)
	row("(d) every region, full scan", r.FullScans)
	row("each topic scanned once", r.TopicScan)
	if r.RawScan.Reads > 0 {
		row("raw franz-go scan per topic", r.RawScan)
	}
	floorRow("(b) broker floor, <= 1.2x needed", r.ConcurrentFloor)
	floorRow("each topic scanned, broker floor", r.ScanFloor)
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "one_region_speedup\t%.2f\t(full scan ÷ indexed)\n", r.OneRegionSpeedup)
	if r.OneRegionFloorSpeedup > 0 {
		fmt.Fprintf(tw, "one_region_floor_speedup\t%.2f\t(full scan ÷ the broker's floor: its batches fetched by plain franz-go clients, nothing decoded)\n", r.OneRegionFloorSpeedup)
		fmt.Fprintf(tw, "one_region_vs_floor\t%.2f\t(indexed ÷ the floor)\n", r.OneRegionVsFloor)
	}
	fmt.Fprintf(tw, "one_region_fetched_own\t%.3f\t(indexed fetched bytes ÷ its entry bytes)\n", r.OneRegionFetchedOwn)
	fmt.Fprintf(tw, "concurrent_vs_scan\t%.2f\t((b) time ÷ each topic scanned once)\n", r.ConcurrentVsScan)
	fmt.Fprintf(tw, "concurrent_fetched_vs_needed\t%.3f\t((b) fetched ÷ %s in batches holding records after the flushed points; topics hold %s)\n", r.ConcurrentVsNeeded, mb(r.NeededBytes), mb(r.TopicBytes))
	if r.ConcurrentFloorVsScan > 0 {
		fmt.Fprintf(tw, "concurrent_floor_vs_scan\t%.2f\t((b)'s broker floor within 1.2x the needed bytes ÷ each topic scanned once; %.2f ÷ the scan's floor)\n", r.ConcurrentFloorVsScan, r.ConcurrentFloorVsScanFloor)
	}
	fmt.Fprintf(tw, "read_regions_vs_scan\t%.2f\t((c) time ÷ each topic scanned once)\n", r.ReadRegionsVsScan)
	fmt.Fprintf(tw, "full_scans_vs_scan\t%.2f\t((d) time ÷ each topic scanned once)\n", r.FullScansVsScan)
	fmt.Fprintf(tw, "(b)'s first pass measured\t%.3fms\ta fetch's latency, %.0f MB/s streamed; %d gaps read through (the gap rule: read a gap that streams in less than a fetch's latency)\n", r.Concurrent.LatencyMS, r.Concurrent.StreamMBps, r.Concurrent.MergedGaps)
	if r.Concurrent.PeakHeap > 0 {
		fmt.Fprintf(tw, "peak heap of (b)\t%s\t\n", mb(int64(r.Concurrent.PeakHeap)))
	}
	_ = tw.Flush()
}

func mb(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

// RegionsOf lists the workload's regions per topic: region r+1 lives in
// topics[r % len(topics)] (see Workload.Plan).
func (w Workload) RegionsOf(topics []string) map[string][]logstore.RegionID {
	out := map[string][]logstore.RegionID{}
	for r := range w.Regions {
		t := topics[r%len(topics)]
		out[t] = append(out[t], logstore.RegionID(r+1))
	}
	return out
}

// RawConsumeWith is RawConsume with the connection options given (seed
// brokers, TLS, SASL, timeouts) instead of a broker list.
func RawConsumeWith(ctx context.Context, topic string, fetchMaxBytes int32, opts ...kgo.Opt) (ConsumeResult, error) {
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.FetchMaxBytes(fetchMaxBytes), kgo.FetchMaxPartitionBytes(fetchMaxBytes))...)
	if err != nil {
		return ConsumeResult{}, err
	}
	defer cl.Close()
	var res ConsumeResult
	began := time.Now()
	_, _, err = rawlog.Consume(ctx, cl, topic, 0, 30*time.Second, func(r *kgo.Record) bool {
		res.Records++
		res.Bytes += int64(len(r.Key) + len(r.Value))
		return true
	})
	res.Elapsed = time.Since(began)
	return res, err
}
