package main

import (
	"github.com/spf13/pflag"
)

// workloadFlags are the flags the demo and the bench share: the shape of
// the append workload, the timed replays, progress output and metrics. One
// definition serves both commands; each gives its own defaults.
type workloadFlags struct {
	regions, topics, writers int
	entrySize, perCall       int
	replayRuns               int
	seed                     uint64
	quiet                    bool
	metricsAddr              string
}

// register defines the shared flags on f with the defaults in def.
func (w *workloadFlags) register(f *pflag.FlagSet, def workloadFlags) {
	f.IntVar(&w.regions, "regions", def.regions, "regions (IDs 1..regions)")
	f.IntVar(&w.topics, "topics", def.topics, "namespaces (topics) the regions share; region r lives in namespace (r-1) mod topics")
	f.IntVar(&w.writers, "writers", def.writers, "concurrent writers; writer w owns regions w, w+writers, ...")
	f.IntVar(&w.entrySize, "entry-size", def.entrySize, "bytes of each entry's data")
	f.IntVar(&w.perCall, "entries-per-call", def.perCall, "entries per AppendBatch call (one region per call)")
	f.IntVar(&w.replayRuns, "replay-runs", def.replayRuns, "timed runs of each one-region replay (median reported)")
	f.Uint64Var(&w.seed, "seed", def.seed, "seed of the entry data")
	f.BoolVarP(&w.quiet, "quiet", "q", false, "no progress output on stderr")
	f.StringVar(&w.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics during the run (e.g. :9090)")
}
