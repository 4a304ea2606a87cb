package index

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwal/kwal/internal/kwalerr"
)

// DefaultMergeGap is the MergeGap used when Options.MergeGap is 0: two of a
// read's ranges at most 8 offsets apart are fetched as one. A wider gap
// fetches other regions' batches to save a fetch, and the store's reader
// already overlaps the round trips of many ranges and reads dense
// stretches through by itself, so that rarely pays: wider gaps saved no
// time where measured and can fetch several times the region's bytes
// (BenchmarkMergeGap; docs/benchmarks.md, "Tried and dropped").
const DefaultMergeGap = 8

// Options configures a Collector. The zero value is valid: memory only, the
// default merge gap, no background checkpoint, no logs, no metrics.
type Options struct {
	// Store persists checkpoints. Nil keeps the index in memory only; then
	// Checkpoint does nothing and a restart starts with no coverage.
	Store Store

	// MergeGap is the largest number of offsets between two ranges of a
	// plan that are fetched as one range. 0 means DefaultMergeGap; a
	// negative value merges only ranges that touch.
	MergeGap int64

	// CheckpointInterval is the period of the background checkpoint. 0 (the
	// default) starts no goroutine: the owner calls Checkpoint. The goroutine
	// is owned by the Collector and stopped by Close. Must not be negative.
	// Ignored without a Store or with ReadOnly.
	CheckpointInterval time.Duration

	// ReadOnly loads the Store but never writes to it: Checkpoint and Close
	// write nothing and Drop forgets the topic only in memory. For reading
	// another node's index (for example during a region move).
	ReadOnly bool

	// Logger receives load failures, discarded coverage and background
	// checkpoint errors. Nil discards logs.
	Logger *slog.Logger

	// Registerer registers the kwal_index_* metrics. Nil registers none.
	// Collectors on the same Registerer share the metrics; the last of them
	// to close unregisters them.
	Registerer prometheus.Registerer
}

// withDefaults returns the options with defaults filled in, or an error
// naming the first invalid field.
func (o Options) withDefaults() (Options, error) {
	if o.CheckpointInterval < 0 {
		return o, kwalerr.Errorf("index: Options.CheckpointInterval %v is negative", o.CheckpointInterval)
	}
	switch {
	case o.MergeGap == 0:
		o.MergeGap = DefaultMergeGap
	case o.MergeGap < 0:
		o.MergeGap = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
