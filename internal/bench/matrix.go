package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

// MatrixLayout is one layout of regions over topics that datanodes deploy.
type MatrixLayout struct {
	Regions int `json:"regions"`
	Topics  int `json:"topics"`
	Writers int `json:"writers"`
}

func (l MatrixLayout) String() string {
	return fmt.Sprintf("%d regions / %d topic(s), %d writers", l.Regions, l.Topics, l.Writers)
}

// MatrixLayouts are the layouts of issue 13: GreptimeDB's one topic, its
// default pool of 64 topics, and pools with more regions than topics.
var MatrixLayouts = []MatrixLayout{
	{Regions: 64, Topics: 1, Writers: 64},
	{Regions: 64, Topics: 16, Writers: 64},
	{Regions: 64, Topics: 64, Writers: 64},
	{Regions: 256, Topics: 16, Writers: 64},
	{Regions: 1024, Topics: 64, Writers: 128},
}

// MatrixOptions configure RunMatrix.
type MatrixOptions struct {
	// Config is the store's configuration (brokers, TLS, SASL, batch
	// settings); its Dialer is replaced by the matrix's network.
	Config         kafka.Config
	Raw            RawOptions
	Prefix         string // namespace prefix; each layout's namespaces are deleted after it, whatever ends it
	EntrySize      int
	EntriesPerCall int
	Payload        string        // PayloadRandom or PayloadDatanode
	Warmup         time.Duration // appending before the measurement, per producer and layout
	Duration       time.Duration // measured appending, per producer and layout
	Latency        time.Duration // added each way between clients and brokers; 0: none
	Bandwidth      float64       // bytes a second each way between clients and brokers; 0: unlimited
	Layouts        []MatrixLayout
	Seed           uint64
	Progress       func(format string, args ...any) // nil: silent
	// ProfileDir keeps each measured window's CPU profile there (pprof
	// format, samples labeled by side, see LabelKey); "" keeps none.
	ProfileDir string
	// Peers adds the GreptimeDB-style and Mimir-style producers to every
	// layout, and the replay of region 1 (kwal indexed, kwal full scan,
	// GreptimeDB-style windows), ReplayRuns times each (median).
	Peers      bool
	ReplayRuns int
	// ReplayBytes is about the entry data the replay's plan appends over
	// all of a layout's topics, through kwal and the GreptimeDB-style
	// producer each (at most maxReplayCalls calls per writer); 0: 64 MiB.
	ReplayBytes int
}

// MatrixSide is what one producer did in one layout's measured window.
type MatrixSide struct {
	MBps            float64 `json:"mb_per_s"`
	P50ms           float64 `json:"p50_ms"`
	P99ms           float64 `json:"p99_ms"`
	Selectivity     float64 `json:"selectivity"`
	RegionsPerBatch float64 `json:"regions_per_batch"`
	CPUmsPerMB      float64 `json:"cpu_ms_per_mb"` // process CPU (client; with an embedded broker, the broker too) per MB appended
	// ClientCPUmsPerMB is the CPU of the side's own goroutines (pprof label
	// LabelKey) per MB appended: the client alone, without the embedded
	// broker, the latency proxy, or the runtime's background work (GC
	// marking), which RuntimeCPUmsPerMB holds; -1 when no profile could be
	// taken (another CPU profile was running).
	ClientCPUmsPerMB     float64 `json:"client_cpu_ms_per_mb"`
	BrokerCPUmsPerMB     float64 `json:"broker_cpu_ms_per_mb"`  // goroutines labeled as the embedded broker's
	RuntimeCPUmsPerMB    float64 `json:"runtime_cpu_ms_per_mb"` // unlabeled: background GC, scheduler
	ProduceRequestsPerMB float64 `json:"produce_requests_per_mb"`
	// ProduceBytesPerMB is the bytes of the produce requests sent per MB
	// of entry data appended: compressed batches, record framing and keys,
	// about what the broker stores (and replicates) of them.
	ProduceBytesPerMB float64 `json:"produce_bytes_per_mb"`
	WarmupS           float64 `json:"warmup_s"` // time until a 250 ms window first reached 90% of the measured rate; -1: never within the warm-up
}

// MatrixRow is one layout's comparison.
type MatrixRow struct {
	Layout      MatrixLayout `json:"layout"`
	AppendVsRaw float64      `json:"append_vs_raw"`
	Kwal        MatrixSide   `json:"kwal"`
	Raw         MatrixSide   `json:"raw"`
	Peers       *MatrixPeers `json:"peers,omitempty"`
}

// MatrixPeers is one layout's peer producers and replays.
type MatrixPeers struct {
	Greptime         MatrixSide   `json:"greptime"`
	Mimir            MatrixSide   `json:"mimir"`
	AppendVsGreptime float64      `json:"append_vs_greptime"` // kwal MB/s ÷ GreptimeDB-style MB/s
	AppendVsMimir    float64      `json:"append_vs_mimir"`
	Replay           MatrixReplay `json:"replay"`
}

// MatrixReplay is region 1's replay (from its first entry): kwal's indexed
// read and full scan (the store that wrote it), and the GreptimeDB-style
// window replay of the GreptimeDB-style producer's topic.
type MatrixReplay struct {
	Region   uint64       `json:"region"`
	Runs     int          `json:"runs"`
	Kwal     ReplayFigure `json:"kwal"`
	FullScan ReplayFigure `json:"full_scan"`
	Greptime ReplayFigure `json:"greptime"`
	// KwalVsGreptime is the GreptimeDB-style replay's median time ÷ kwal's.
	KwalVsGreptime float64 `json:"kwal_vs_greptime"`
}

// ReplayFigure is one replay's median time and what it fetched.
type ReplayFigure struct {
	MedianMS     float64 `json:"median_ms"`
	Fetches      int     `json:"fetches"`
	FetchedBytes int64   `json:"fetched_bytes"`
	OwnBytes     int64   `json:"own_bytes"`   // the region's entry (value) bytes read
	Selectivity  float64 `json:"selectivity"` // fetched ÷ own bytes
}

// MatrixReport is one matrix: every layout at one added latency.
type MatrixReport struct {
	LatencyMSEachWay  float64     `json:"latency_ms_each_way"`
	BandwidthMBps     float64     `json:"bandwidth_mb_per_s,omitempty"`
	WarmupS           float64     `json:"warmup_s"`
	DurationS         float64     `json:"duration_s"`
	EntrySize         int         `json:"entry_size"`
	EntriesPerCall    int         `json:"entries_per_call"`
	Payload           string      `json:"payload"`
	Compression       string      `json:"compression"`
	ProduceLanes      int         `json:"produce_lanes"`
	CPUIncludesBroker bool        `json:"cpu_includes_broker"`
	Rows              []MatrixRow `json:"rows"`
}

// matrix is one RunMatrix: its clients and networks.
type matrix struct {
	o        MatrixOptions
	rep      *MatrixReport
	progress func(format string, args ...any)
	st       *kafka.LogStore
	raw      *kgo.Client
	mimir    *kgo.Client // nil without peers
	gopts    []kgo.Opt   // the GreptimeDB-style clients' options (its network)
	replayCl *kgo.Client // the GreptimeDB-style replay's client, on its network
	lopts    []kgo.Opt   // direct connection, for layouts
	nets     map[string]*Net
}

// RunMatrix runs every layout: kwal (a store with the configuration given)
// and a raw franz-go client (and with Peers the GreptimeDB-style and
// Mimir-style producers) append the same workload, each warmed up and then
// measured for Duration, the order rotating from layout to layout, each
// with its own network of o.Latency and o.Bandwidth to the brokers. A
// layout's namespaces are deleted after it whatever ends it (an error, ctx),
// and an error says whether they were.
func RunMatrix(ctx context.Context, o MatrixOptions, embeddedBroker bool) (MatrixReport, error) {
	rep := MatrixReport{LatencyMSEachWay: float64(o.Latency) / 1e6, BandwidthMBps: o.Bandwidth / 1e6, WarmupS: o.Warmup.Seconds(), DurationS: o.Duration.Seconds(),
		EntrySize: o.EntrySize, EntriesPerCall: o.EntriesPerCall, Payload: cmp.Or(o.Payload, PayloadRandom), Compression: o.Config.Compression,
		ProduceLanes: o.Config.ProduceLanes, CPUIncludesBroker: embeddedBroker}
	m := &matrix{o: o, rep: &rep, progress: o.Progress, nets: map[string]*Net{}}
	if m.progress == nil {
		m.progress = func(string, ...any) {}
	}
	for _, side := range []string{LabelKwal, LabelRaw, LabelGreptime, LabelMimir} {
		n := NewNetWith(o.Latency, o.Bandwidth)
		defer n.Close()
		m.nets[side] = n
	}
	kcfg := o.Config
	kcfg.Dialer = m.nets[LabelKwal].Dial
	if o.Peers {
		// The Mimir-style producer's batches may reach MimirBatchBytes;
		// kwal's stay within MaxBatchBytes whatever the topic allows.
		kcfg.TopicConfigs = WithMimirTopicConfigs(kcfg.TopicConfigs, kcfg.MaxBatchBytes)
	}
	// Each side's clients start under its label, so their goroutines carry it.
	var err error
	WithLabel(ctx, LabelKwal, func(ctx context.Context) { m.st, err = kafka.Open(ctx, kcfg) })
	if err != nil {
		return rep, err
	}
	defer func() { _ = m.st.Close() }()
	// The other clients' options: the store's connection settings (TLS
	// over the side's network included).
	withNet := func(side string) ([]kgo.Opt, error) {
		c := o.Config
		c.Dialer = m.nets[side].Dial
		return kafka.ClientOptions(c)
	}
	ropts, err := withNet(LabelRaw)
	if err != nil {
		return rep, err
	}
	WithLabel(ctx, LabelRaw, func(context.Context) { m.raw, err = RawClientWith(o.Raw, ropts...) })
	if err != nil {
		return rep, err
	}
	defer m.raw.Close()
	if o.Peers {
		mopts, err := withNet(LabelMimir)
		if err != nil {
			return rep, err
		}
		WithLabel(ctx, LabelMimir, func(context.Context) {
			m.mimir, err = MimirClient(MimirOptions{Compression: o.Raw.Compression}, mopts...)
		})
		if err != nil {
			return rep, err
		}
		defer m.mimir.Close()
		if m.gopts, err = withNet(LabelGreptime); err != nil {
			return rep, err
		}
		if m.replayCl, err = kgo.NewClient(m.gopts...); err != nil {
			return rep, err
		}
		defer m.replayCl.Close()
	}
	// Layouts are measured through a direct connection (no latency).
	if m.lopts, err = kafka.ClientOptions(o.Config); err != nil {
		return rep, err
	}
	for li, l := range o.Layouts {
		row, err := m.layout(ctx, li, l)
		if err != nil {
			return rep, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// matrixSide is one producer of a layout.
type matrixSide struct {
	name     string
	topics   []string
	app      Appender
	out      *MatrixSide
	regionOf RecordRegion
}

// layout runs one layout; its namespaces are deleted when it returns.
func (m *matrix) layout(ctx context.Context, li int, l MatrixLayout) (row MatrixRow, err error) {
	o := m.o
	names := func(tag string) []string {
		out := make([]string, l.Topics)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%dr%dt-%s-%d", o.Prefix, l.Regions, l.Topics, tag, i)
		}
		return out
	}
	row = MatrixRow{Layout: l}
	sides := []*matrixSide{
		{name: LabelKwal, topics: names("kwal"), app: KwalAppender(m.st), out: &row.Kwal, regionOf: KwalRecordRegion},
		{name: LabelRaw, topics: names("raw"), app: RawAppender(m.raw, o.Raw.MaxBatchBytes), out: &row.Raw, regionOf: KwalRecordRegion},
	}
	if o.Peers {
		row.Peers = &MatrixPeers{}
		sides = append(sides,
			&matrixSide{name: LabelGreptime, topics: names("greptime"), out: &row.Peers.Greptime, regionOf: GreptimeRecordRegion},
			&matrixSide{name: LabelMimir, topics: names("mimir"), app: RawAppender(m.mimir, o.Raw.MaxBatchBytes), out: &row.Peers.Mimir, regionOf: KwalRecordRegion})
	}
	var replayK, replayG []string // the replay's topics, written by one equal plan each
	if o.Peers {
		replayK, replayG = names("kwal-replay"), names("greptime-replay")
	}
	var created []string
	defer func() {
		// The run's context may have ended (Ctrl-C): the deletion gets its own.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		var derr error
		deleted := 0
		for _, t := range created {
			if e := m.st.DeleteNamespace(dctx, t); e != nil {
				derr = cmp.Or(derr, fmt.Errorf("deleting namespace %s: %w", t, e))
				continue
			}
			deleted++
		}
		switch {
		case err != nil && derr != nil:
			err = fmt.Errorf("%w; %d of the layout's %d namespaces (%s-%dr%dt-*) deleted, then: %v", err, deleted, len(created), o.Prefix, l.Regions, l.Topics, derr)
		case err != nil:
			err = fmt.Errorf("%w; the layout's %d namespaces were deleted", err, deleted)
		case derr != nil:
			err = derr
		}
	}()
	all := slices.Concat(replayK, replayG)
	for _, sd := range sides {
		all = append(all, sd.topics...)
	}
	for _, t := range all {
		created = append(created, t) // before: a create cut short may still have made it
		if err := m.st.CreateNamespace(ctx, t); err != nil {
			return row, err
		}
	}
	var gt *Greptime
	if o.Peers {
		WithLabel(ctx, LabelGreptime, func(context.Context) {
			gt, err = NewGreptime(slices.Concat(sides[2].topics, replayG), GreptimeOptions{Compression: kgo.Lz4Compression()}, m.gopts...)
		})
		if err != nil {
			return row, err
		}
		defer gt.Close()
		sides[2].app = gt.Appender()
	}
	w := Workload{Topics: l.Topics, Regions: l.Regions, Writers: l.Writers, EntrySize: o.EntrySize,
		EntriesPerCall: o.EntriesPerCall, Calls: 8, Seed: o.Seed, Payload: o.Payload}
	for k := range sides {
		sd := sides[(k+li)%len(sides)]
		if err := m.measure(ctx, l, w, sd); err != nil {
			return row, err
		}
	}
	row.AppendVsRaw = ratioOf(row.Kwal.MBps, row.Raw.MBps)
	m.progress("matrix %v: batch layout…", l)
	for _, sd := range sides {
		sel, rpb, err := topicsLayout(ctx, sd.topics, sd.regionOf, m.lopts)
		if err != nil {
			return row, err
		}
		sd.out.Selectivity, sd.out.RegionsPerBatch = sel, rpb
	}
	if o.Peers {
		row.Peers.AppendVsGreptime = ratioOf(row.Kwal.MBps, row.Peers.Greptime.MBps)
		row.Peers.AppendVsMimir = ratioOf(row.Kwal.MBps, row.Peers.Mimir.MBps)
		m.progress("matrix %v: replay of region 1, kwal indexed and full scan, GreptimeDB-style windows…", l)
		if row.Peers.Replay, err = m.replay(ctx, w, replayK, gt, replayG); err != nil {
			return row, err
		}
	}
	return row, nil
}

// measure warms one producer up, then measures it.
func (m *matrix) measure(ctx context.Context, l MatrixLayout, w Workload, sd *matrixSide) error {
	o := m.o
	net := m.nets[sd.name]
	plan, err := w.PlanContext(ctx, sd.topics)
	if err != nil {
		return err
	}
	m.progress("matrix %v: %s warm-up %v…", l, sd.name, o.Warmup)
	var windows []float64
	WithLabel(ctx, sd.name, func(ctx context.Context) { windows, err = sampled(ctx, plan, sd.app, o.Warmup) })
	if err != nil {
		return fmt.Errorf("%s warm-up, %v: %w", sd.name, l, err)
	}
	m.progress("matrix %v: %s measured %v…", l, sd.name, o.Duration)
	save := ""
	if o.ProfileDir != "" {
		save = filepath.Join(o.ProfileDir, fmt.Sprintf("lat%gms-%dr%dt%dw-%s.pprof", m.rep.LatencyMSEachWay, l.Regions, l.Topics, l.Writers, sd.name))
	}
	prof, perr := startCPUProfile(save)
	req0, bytes0 := net.ProduceRequests(), net.ProduceBytes()
	cpu0, cpuOK := ProcessCPU()
	var res AppendResult
	WithLabel(ctx, sd.name, func(ctx context.Context) { res, err = RunFor(ctx, plan, sd.app, o.Duration, nil) })
	cpu1, _ := ProcessCPU()
	var byLabel cpuByLabel
	if perr == nil {
		byLabel, perr = prof.stop()
	}
	if err != nil {
		return fmt.Errorf("%s appends, %v: %w", sd.name, l, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	mb := float64(res.Bytes) / 1e6
	out := sd.out
	out.MBps = res.MBps()
	out.P50ms = float64(res.Quantile(0.5)) / 1e6
	out.P99ms = float64(res.Quantile(0.99)) / 1e6
	if cpuOK && mb > 0 {
		out.CPUmsPerMB = float64(cpu1-cpu0) / 1e6 / mb
	}
	out.ClientCPUmsPerMB = -1
	if perr != nil {
		m.progress("matrix %v: %s: no CPU profile, client CPU not separated: %v", l, sd.name, perr)
	} else if mb > 0 {
		perMB := func(d time.Duration) float64 { return float64(d) / 1e6 / mb }
		out.ClientCPUmsPerMB = perMB(byLabel[sd.name])
		out.BrokerCPUmsPerMB = perMB(byLabel[LabelBroker])
		out.RuntimeCPUmsPerMB = perMB(byLabel[""])
	}
	if mb > 0 {
		out.ProduceRequestsPerMB = float64(net.ProduceRequests()-req0) / mb
		out.ProduceBytesPerMB = float64(net.ProduceBytes()-bytes0) / mb
	}
	out.WarmupS = warmupTime(windows, res.MBps())
	return nil
}

// replay writes one plan of the workload (every writer's calls once, about
// ReplayBytes) through kwal to kwalTopics and through the GreptimeDB-style
// producer to gtTopics, so that both logs hold the same entries, then
// times region 1's replays of the first topic: kwal's indexed read and full
// scan, and the GreptimeDB-style window replay (the topic's layout gives
// the mean record size that GreptimeDB's consumer estimates positions
// with). Each replay runs once unmeasured, to warm connections and
// metadata, then ReplayRuns times.
func (m *matrix) replay(ctx context.Context, w Workload, kwalTopics []string, gt *Greptime, gtTopics []string) (MatrixReplay, error) {
	const region = 1
	runs := max(m.o.ReplayRuns, 1)
	out := MatrixReplay{Region: region, Runs: runs}
	w.Calls = min(max(1, cmp.Or(m.o.ReplayBytes, 64<<20)/max(1, w.Writers*w.EntriesPerCall*w.EntrySize)), maxReplayCalls)
	for _, p := range []struct {
		topics []string
		app    Appender
	}{{kwalTopics, KwalAppender(m.st)}, {gtTopics, gt.Appender()}} {
		plan, err := w.PlanContext(ctx, p.topics)
		if err != nil {
			return out, err
		}
		if _, err := Run(ctx, plan, p.app, nil); err != nil {
			return out, fmt.Errorf("writing the replay's log: %w", err)
		}
	}
	kwalTopic, gtTopic := kwalTopics[0], gtTopics[0]
	gtLayout, err := MeasureLayoutOf(ctx, gtTopic, GreptimeRecordRegion, m.lopts...)
	if err != nil {
		return out, fmt.Errorf("layout of %s: %w", gtTopic, err)
	}
	kwal := func(noIndex bool) (ReplayFigure, error) {
		var times []time.Duration
		var f ReplayFigure
		for i := range runs + 1 {
			var stats kafka.ReadStats
			t0 := time.Now()
			for _, err := range m.st.ReadWith(ctx, kwalTopic, map[logstore.RegionID]logstore.EntryID{region: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &stats}) {
				if err != nil {
					return f, fmt.Errorf("replaying region %d of %s: %w", region, kwalTopic, err)
				}
			}
			if i > 0 {
				times = append(times, time.Since(t0))
			}
			f = ReplayFigure{Fetches: stats.Fetches, FetchedBytes: stats.FetchedBytes, OwnBytes: stats.EntryBytes}
		}
		f.MedianMS = medianMS(times)
		f.Selectivity = ratioOf(float64(f.FetchedBytes), float64(f.OwnBytes))
		return f, nil
	}
	if out.Kwal, err = kwal(false); err != nil {
		return out, err
	}
	if out.FullScan, err = kwal(true); err != nil {
		return out, err
	}
	offsets := gt.RegionOffsets(gtTopic, region)
	avg := 1
	if gtLayout.Records > 0 {
		avg = int(gtLayout.BatchBytes / gtLayout.Records)
	}
	var times []time.Duration
	for i := range runs + 1 {
		r, err := GreptimeReplay(ctx, m.replayCl, gtTopic, offsets, avg, GreptimeWindow)
		if err != nil {
			return out, err
		}
		if i > 0 {
			times = append(times, r.Elapsed)
		}
		out.Greptime = ReplayFigure{Fetches: r.Fetches, FetchedBytes: r.FetchedBytes, OwnBytes: r.OwnBytes}
	}
	out.Greptime.MedianMS = medianMS(times)
	out.Greptime.Selectivity = ratioOf(float64(out.Greptime.FetchedBytes), float64(out.Greptime.OwnBytes))
	out.KwalVsGreptime = ratioOf(out.Greptime.MedianMS, out.Kwal.MedianMS)
	return out, nil
}

// maxReplayCalls bounds the replay plan's calls per writer, so that small
// entries do not make writing it take minutes.
const maxReplayCalls = 64

func medianMS(ts []time.Duration) float64 {
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return float64(ts[len(ts)/2]) / 1e6
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// topicsLayout is the mean selectivity and regions per batch over up to 4
// of the topics (evenly spaced).
func topicsLayout(ctx context.Context, topics []string, regionOf RecordRegion, opts []kgo.Opt) (sel, rpb float64, err error) {
	n := min(4, len(topics))
	for i := range n {
		t := topics[i*len(topics)/n]
		l, err := MeasureLayoutOf(ctx, t, regionOf, opts...)
		if err != nil {
			return 0, 0, fmt.Errorf("layout of %s: %w", t, err)
		}
		sel += l.Selectivity
		rpb += l.RegionsPerBatch
	}
	return sel / float64(n), rpb / float64(n), nil
}

// window is the bytes appended in one 250 ms window of a warm-up.
const window = 250 * time.Millisecond

// sampled runs plan for d and returns the MB/s of each 250 ms window.
func sampled(ctx context.Context, plan [][]Call, app Appender, d time.Duration) ([]float64, error) {
	var bytes atomic.Int64
	stop := make(chan struct{})
	var rates []float64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(window)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b := bytes.Load()
				rates = append(rates, float64(b-last)/1e6/window.Seconds())
				last = b
			}
		}
	}()
	_, err := RunFor(ctx, plan, app, d, func(_, b int) { bytes.Add(int64(b)) })
	close(stop)
	wg.Wait()
	return rates, err
}

// warmupTime is when the first window reached 90% of the steady rate, in
// seconds; -1 when none did.
func warmupTime(rates []float64, steady float64) float64 {
	for i, r := range rates {
		if r >= 0.9*steady {
			return float64(i+1) * window.Seconds()
		}
	}
	return -1
}
