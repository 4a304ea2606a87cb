// Package index is kwal's region index: per topic, which Kafka offsets hold
// which region's records, so that replaying one region fetches only its own
// records.
//
// THIS FILE FIXES THE TYPES THE STORE CODES AGAINST. The implementation
// (collector, persistence, read planning) lives in the other files of the
// package.
//
// Offsets are Kafka offsets (int64 >= 0). Regions are uint64. The package
// knows nothing of Kafka clients or of the record codec.
package index

import "context"

// Run is a run of consecutive Kafka offsets [Start, Start+Count) of one
// topic whose records all belong to one region (whole entries or entry
// parts), or, when Foreign is set, hold no kwal entry at all (records written
// by another program, undecodable records).
type Run struct {
	Start   int64
	Count   int64
	Region  uint64 // ignored when Foreign
	Foreign bool
}

// Range is one piece of a read plan: the offsets [Start, End).
type Range struct {
	Start, End int64
	// Scan is true where the index does not account for the offsets: every
	// record in the range must be fetched and decoded (and the reader then
	// reports what it decoded through Observe). Where Scan is false the
	// range holds records of the asked regions, possibly with short runs of
	// other regions' records merged in to save round trips.
	Scan bool
}

// Plan is the list of offset ranges a read must fetch, ascending and
// non-overlapping, all within [from, end) of the request.
type Plan struct {
	Ranges []Range
}

// Collector is the index of every topic the store writes or reads. All
// methods are safe for concurrent use.
type Collector interface {
	// Start tells the collector that the topic's log currently ends at
	// offset end (the high watermark) and begins at logStart. A topic the
	// collector has no coverage for starts its accounted span at end (the
	// history before it is unaccounted, so reads scan it). A watermark
	// above end means the topic was recreated or truncated: the coverage is
	// discarded. So end must not be older than any run already observed:
	// the store calls Start when it opens the topic's producer (before any
	// acknowledgement), and from reads only while the topic has no producer.
	Start(topic string, logStart, end int64)

	// Observe records runs learned from acknowledged appends or from records
	// decoded while reading. Runs may arrive out of order and may repeat;
	// the accounted span [C, W) only grows through offsets that are known,
	// never past a gap.
	Observe(topic string, runs []Run)

	// ObserveScan records what a reader decoded while scanning [start, end):
	// runs cover every offset there, ascending. Unlike Observe it may extend
	// the accounted span downwards (a complete scan reaching C from below
	// lowers C), and it starts coverage for a topic that has none.
	ObserveScan(topic string, start, end int64, runs []Run)

	// Obsolete records that region no longer needs its records at offsets
	// < before; the index may drop them.
	Obsolete(topic string, region uint64, before int64)

	// Plan returns the ranges to fetch to replay the given regions, each
	// from its own start offset, up to end (exclusive).
	Plan(topic string, from map[uint64]int64, end int64) Plan

	// Drop forgets the topic (it was deleted) in memory and in the store.
	Drop(ctx context.Context, topic string) error

	// Checkpoint persists every topic changed since its last checkpoint.
	Checkpoint(ctx context.Context) error

	// Close persists a final checkpoint and stops any background goroutine.
	Close(ctx context.Context) error
}

// AppendRun adds run to runs, extending the last run when run continues it
// (same region, or both foreign, and adjacent offsets). Writers and readers
// build the runs they Observe with it.
func AppendRun(runs []Run, run Run) []Run {
	if n := len(runs); n > 0 {
		l := &runs[n-1]
		if l.Start+l.Count == run.Start && l.Foreign == run.Foreign && (l.Foreign || l.Region == run.Region) {
			l.Count += run.Count
			return runs
		}
	}
	return append(runs, run)
}
