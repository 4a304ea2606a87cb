package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kwal/kwal/logstore/kafka"
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
// Their ranges bound what one run may hold in memory; the commands check
// the products of the sizes (validate).
func (w *workloadFlags) register(a *app, f *pflag.FlagSet, def workloadFlags) {
	f.IntVar(&w.regions, "regions", def.regions, "regions (IDs 1..regions)")
	f.IntVar(&w.topics, "topics", def.topics, "namespaces (topics) the regions share; region r lives in namespace (r-1) mod topics")
	f.IntVar(&w.writers, "writers", def.writers, "concurrent writers; writer w owns regions w, w+writers, ...")
	f.IntVar(&w.entrySize, "entry-size", def.entrySize, "bytes of each entry's data")
	f.IntVar(&w.perCall, "entries-per-call", def.perCall, "entries per AppendBatch call (one region per call)")
	f.IntVar(&w.replayRuns, "replay-runs", def.replayRuns, "timed runs of each one-region replay (median reported)")
	f.Uint64Var(&w.seed, "seed", def.seed, "seed of the entry data")
	f.BoolVarP(&w.quiet, "quiet", "q", false, "no progress output on stderr")
	f.StringVar(&w.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics during the run (e.g. :9090)")
	a.bound(f, "regions", 1, maxRegions, "every region's acknowledged calls are kept in memory to check or time its replay")
	a.bound(f, "topics", 1, maxTopics, "each namespace is a Kafka topic with a producer and an index of its own")
	a.bound(f, "writers", 1, maxWriters, "one goroutine each, with its calls in flight")
	a.bound(f, "entry-size", 1, maxEntrySize, "kwal refuses entries larger than its Config.MaxEntryBytes (ErrEntryTooLarge)")
	a.bound(f, "entries-per-call", 1, maxPerCall, "a call's entries are held in memory until acknowledged")
	a.bound(f, "replay-runs", 1, 100, "each run replays the region again")
	a.bound(f, "seed", anyValue.min, anyValue.max, "")
}

// Upper bounds of the workload flags, and of the memory the data of one
// run's calls in flight (demo) or planned (bench) may take.
const (
	maxRegions     = 100_000
	maxTopics      = 1_000
	maxWriters     = 10_000
	maxPerCall     = 10_000
	maxWorkloadRAM = 1 * giB
)

// maxEntrySize is the largest entry kwal accepts (Config.MaxEntryBytes):
// a larger one would fail its call with ErrEntryTooLarge.
var maxEntrySize = uint64(kafka.DefaultConfig().MaxEntryBytes)

// checkMemory rejects a workload whose data would take more than
// maxWorkloadRAM: held is how many entries of entrySize are held at once,
// described by what, for the message.
func checkMemory(held, entrySize int64, what string) error {
	if held > maxWorkloadRAM/max(entrySize, 1) {
		return fmt.Errorf("%s × --entry-size is %s, more than the %s a run may hold in memory: lower one of them",
			what, humanBytes(held*entrySize), humanBytes(maxWorkloadRAM))
	}
	return nil
}
