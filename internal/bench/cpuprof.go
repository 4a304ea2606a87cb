package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/google/pprof/profile"
)

// The matrix separates the process's CPU by pprof label: every goroutine
// of one side carries LabelKey set to its side, and goroutines inherit the
// labels of the goroutine that started them. So the clients' goroutines
// (writers, kwal's dispatcher and lanes, franz-go's sinks and connection
// readers, the raw client's) carry their side's label, the embedded
// broker's carry LabelBroker (set around its start by the caller), and the
// latency proxy's LabelNet. What carries none is the runtime's own work
// (background GC marking, the scheduler) shared by everything in the
// process.
const (
	LabelKey  = "kwal_bench"
	LabelKwal = "kwal"
	LabelRaw  = "raw"
	// The peers (see peers.go).
	LabelGreptime = "greptime"
	LabelMimir    = "mimir"
	LabelBroker   = "broker"
	LabelNet      = "net"
)

// WithLabel runs f with the goroutine labeled LabelKey=side; goroutines f
// starts carry the label for their whole life.
func WithLabel(ctx context.Context, side string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(LabelKey, side), f)
}

// cpuByLabel is the CPU time of a profiled window per LabelKey value ("" for
// unlabeled samples).
type cpuByLabel map[string]time.Duration

func (c cpuByLabel) total() time.Duration {
	var t time.Duration
	for _, d := range c {
		t += d
	}
	return t
}

// cpuProfiler profiles one measured window. start fails (and the matrix
// falls back to process CPU) when another CPU profile is running.
type cpuProfiler struct {
	buf  bytes.Buffer
	save string // file to keep the profile in; "" keeps none
}

func startCPUProfile(save string) (*cpuProfiler, error) {
	p := &cpuProfiler{save: save}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, err
	}
	return p, nil
}

// stop ends the profile and sums its samples by label.
func (p *cpuProfiler) stop() (cpuByLabel, error) {
	pprof.StopCPUProfile()
	if p.save != "" {
		if err := os.MkdirAll(filepath.Dir(p.save), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.save, p.buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	prof, err := profile.Parse(&p.buf)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	idx := -1
	for i, st := range prof.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("cpu profile: no cpu/nanoseconds sample type in %v", prof.SampleType)
	}
	out := cpuByLabel{}
	for _, s := range prof.Sample {
		side := ""
		if v := s.Label[LabelKey]; len(v) > 0 {
			side = v[0]
		}
		out[side] += time.Duration(s.Value[idx])
	}
	return out, nil
}
