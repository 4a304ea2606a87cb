package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
	Prefix         string // namespace prefix; each layout's namespaces are deleted after it
	EntrySize      int
	EntriesPerCall int
	Warmup         time.Duration // appending before the measurement, per producer and layout
	Duration       time.Duration // measured appending, per producer and layout
	Latency        time.Duration // added each way between clients and brokers; 0: none
	Layouts        []MatrixLayout
	Seed           uint64
	Progress       func(format string, args ...any) // nil: silent
	// ProfileDir keeps each measured window's CPU profile there (pprof
	// format, samples labeled by side, see LabelKey); "" keeps none.
	ProfileDir string
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
	WarmupS              float64 `json:"warmup_s"` // time until a 250 ms window first reached 90% of the measured rate; -1: never within the warm-up
}

// MatrixRow is one layout's comparison.
type MatrixRow struct {
	Layout      MatrixLayout `json:"layout"`
	AppendVsRaw float64      `json:"append_vs_raw"`
	Kwal        MatrixSide   `json:"kwal"`
	Raw         MatrixSide   `json:"raw"`
}

// MatrixReport is one matrix: every layout at one added latency.
type MatrixReport struct {
	LatencyMSEachWay  float64     `json:"latency_ms_each_way"`
	WarmupS           float64     `json:"warmup_s"`
	DurationS         float64     `json:"duration_s"`
	EntrySize         int         `json:"entry_size"`
	EntriesPerCall    int         `json:"entries_per_call"`
	ProduceLanes      int         `json:"produce_lanes"`
	CPUIncludesBroker bool        `json:"cpu_includes_broker"`
	Rows              []MatrixRow `json:"rows"`
}

// RunMatrix runs every layout: kwal (a store with the configuration given)
// and a raw franz-go client append the same workload, each warmed up and
// then measured for Duration, alternating which goes first, with the
// network of o.Latency between them and the brokers.
func RunMatrix(ctx context.Context, o MatrixOptions, embeddedBroker bool) (MatrixReport, error) {
	rep := MatrixReport{LatencyMSEachWay: float64(o.Latency) / 1e6, WarmupS: o.Warmup.Seconds(), DurationS: o.Duration.Seconds(),
		EntrySize: o.EntrySize, EntriesPerCall: o.EntriesPerCall, ProduceLanes: o.Config.ProduceLanes, CPUIncludesBroker: embeddedBroker}
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	kn, rn := NewNet(o.Latency), NewNet(o.Latency)
	defer kn.Close()
	defer rn.Close()
	kcfg := o.Config
	kcfg.Dialer = kn.Dial
	// Each side's clients start under its label, so their goroutines carry it.
	var st *kafka.LogStore
	var err error
	WithLabel(ctx, LabelKwal, func(ctx context.Context) { st, err = kafka.Open(ctx, kcfg) })
	if err != nil {
		return rep, err
	}
	defer func() { _ = st.Close() }()
	rcfg := o.Config
	rcfg.Dialer = rn.Dial
	copts, err := kafka.ClientOptions(rcfg)
	if err != nil {
		return rep, err
	}
	var cl *kgo.Client
	WithLabel(ctx, LabelRaw, func(context.Context) { cl, err = RawClientWith(o.Raw, copts...) })
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	// Layouts are measured through a direct connection (no latency).
	lopts, err := kafka.ClientOptions(o.Config)
	if err != nil {
		return rep, err
	}

	for li, l := range o.Layouts {
		names := func(tag string) []string {
			out := make([]string, l.Topics)
			for i := range out {
				out[i] = fmt.Sprintf("%s-%dr%dt-%s-%d", o.Prefix, l.Regions, l.Topics, tag, i)
			}
			return out
		}
		kt, rt := names("kwal"), names("raw")
		all := append(slices.Clone(kt), rt...)
		for _, t := range all {
			if err := st.CreateNamespace(ctx, t); err != nil {
				return rep, err
			}
		}
		w := Workload{Topics: l.Topics, Regions: l.Regions, Writers: l.Writers, EntrySize: o.EntrySize,
			EntriesPerCall: o.EntriesPerCall, Calls: 8, Seed: o.Seed}
		row := MatrixRow{Layout: l}
		sides := []struct {
			name   string
			topics []string
			app    Appender
			net    *Net
			out    *MatrixSide
			res    AppendResult
		}{
			{LabelKwal, kt, KwalAppender(st), kn, &row.Kwal, AppendResult{}},
			{LabelRaw, rt, RawAppender(cl, o.Raw.MaxBatchBytes), rn, &row.Raw, AppendResult{}},
		}
		order := []int{0, 1}
		if li%2 == 1 {
			order = []int{1, 0}
		}
		for _, si := range order {
			sd := &sides[si]
			plan := w.Plan(sd.topics)
			progress("matrix %v: %s warm-up %v…", l, sd.name, o.Warmup)
			var windows []float64
			WithLabel(ctx, sd.name, func(ctx context.Context) { windows, err = sampled(ctx, plan, sd.app, o.Warmup) })
			if err != nil {
				return rep, fmt.Errorf("%s warm-up, %v: %w", sd.name, l, err)
			}
			progress("matrix %v: %s measured %v…", l, sd.name, o.Duration)
			save := ""
			if o.ProfileDir != "" {
				save = filepath.Join(o.ProfileDir, fmt.Sprintf("lat%gms-%dr%dt%dw-%s.pprof", rep.LatencyMSEachWay, l.Regions, l.Topics, l.Writers, sd.name))
			}
			prof, perr := startCPUProfile(save)
			req0 := sd.net.ProduceRequests()
			cpu0, cpuOK := ProcessCPU()
			var res AppendResult
			WithLabel(ctx, sd.name, func(ctx context.Context) { res, err = RunFor(ctx, plan, sd.app, o.Duration, nil) })
			cpu1, _ := ProcessCPU()
			var byLabel cpuByLabel
			if perr == nil {
				byLabel, perr = prof.stop()
			}
			if err != nil {
				return rep, fmt.Errorf("%s appends, %v: %w", sd.name, l, err)
			}
			mb := float64(res.Bytes) / 1e6
			sd.res = res
			sd.out.MBps = res.MBps()
			sd.out.P50ms = float64(res.Quantile(0.5)) / 1e6
			sd.out.P99ms = float64(res.Quantile(0.99)) / 1e6
			if cpuOK && mb > 0 {
				sd.out.CPUmsPerMB = float64(cpu1-cpu0) / 1e6 / mb
			}
			sd.out.ClientCPUmsPerMB = -1
			if perr != nil {
				progress("matrix %v: %s: no CPU profile, client CPU not separated: %v", l, sd.name, perr)
			} else if mb > 0 {
				perMB := func(d time.Duration) float64 { return float64(d) / 1e6 / mb }
				sd.out.ClientCPUmsPerMB = perMB(byLabel[sd.name])
				sd.out.BrokerCPUmsPerMB = perMB(byLabel[LabelBroker])
				sd.out.RuntimeCPUmsPerMB = perMB(byLabel[""])
			}
			if mb > 0 {
				sd.out.ProduceRequestsPerMB = float64(sd.net.ProduceRequests()-req0) / mb
			}
			sd.out.WarmupS = warmupTime(windows, res.MBps())
		}
		row.AppendVsRaw = ratioOf(row.Kwal.MBps, row.Raw.MBps)
		progress("matrix %v: batch layout…", l)
		for _, sd := range sides {
			sel, rpb, err := topicsLayout(ctx, sd.topics, lopts)
			if err != nil {
				return rep, err
			}
			sd.out.Selectivity, sd.out.RegionsPerBatch = sel, rpb
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		for _, t := range all {
			if err := st.DeleteNamespace(dctx, t); err != nil {
				cancel()
				return rep, err
			}
		}
		cancel()
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// topicsLayout is the mean selectivity and regions per batch over up to 4
// of the topics (evenly spaced).
func topicsLayout(ctx context.Context, topics []string, opts []kgo.Opt) (sel, rpb float64, err error) {
	n := min(4, len(topics))
	for i := range n {
		t := topics[i*len(topics)/n]
		l, err := MeasureLayoutWith(ctx, t, opts...)
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
