package replay

import "time"

// Stats count what one read fetched and yielded. Reads of one namespace
// that run at the same time share fetches: the fetch and record counters
// are then those of the shared pass, the same for every read with the same
// Pass, and the entry counters the read's own.
type Stats struct {
	Fetches      int   // fetch requests
	FetchedBytes int64 // record batch bytes fetched
	Records      int64 // records decoded
	Entries      int64 // entries yielded
	EntryBytes   int64 // data bytes of the entries yielded
	ScanRanges   int   // planned ranges read by scanning
	IndexRanges  int   // planned ranges read through the index
	Missing      int64 // offsets found missing from the log (skipped with SkipCorrupt)

	// Plan says how the pass read its plan: "indexed", "scan", or "mixed
	// (gaps read through)" when it read some gaps of other regions'
	// records between planned ranges rather than start another fetch.
	Plan string
	// Stretches counts the runs of planned ranges read as one fetch,
	// MergedGaps the gaps between them, StretchExtra the offsets read
	// beyond the planned ranges.
	Stretches    int
	MergedGaps   int
	StretchExtra int64
	// Pass identifies the pass that served the read; Reads is how many
	// reads it served.
	Pass  uint64
	Reads int
	// FetchLatency and StreamBytesPerSec are what the pass measured of a
	// fetch's latency and streaming rate (the gap rule's inputs).
	FetchLatency      time.Duration
	StreamBytesPerSec float64
	// Spilled counts entries whose data the pass dropped for the hold
	// budget, ReadBack those it read back from the log to hand over.
	Spilled  int
	ReadBack int
	// Fenced counts entries of the pass's regions that a newer owner's
	// claim fenced (never yielded).
	Fenced int64
}
