// Package index is kwal's region index: per topic, which Kafka offsets hold
// which region's records, so that replaying one region fetches only its own
// records.
//
// Offsets are Kafka offsets (int64 >= 0). Regions are uint64. The package
// knows nothing of Kafka clients or of the record codec.
package index

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
