package index

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMergeGap is the MergeGap used when Options.MergeGap is 0: two of a
// read's ranges at most 8 offsets apart are fetched as one. Measured on a
// replay of one region of 16 (and of 64) sharing a topic, written
// concurrently in region-pure batches of 10 records of 1 KiB: gaps of -1, 8
// and 32 fetched 1.04-1.07x the region's bytes in about the same time,
// while 128 fetched 4.7x and took 1.8x as long, and 512 fetched 15x and
// took 6x as long. The store's reader already overlaps the round trips of
// many ranges, so fetching other regions' batches to save one rarely pays.
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
		return o, fmt.Errorf("index: Options.CheckpointInterval %v is negative", o.CheckpointInterval)
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
