// Package replay is the read path of kwal's Kafka store: it turns a read of
// some regions of a namespace (a single-partition topic) into fetches of the
// offsets that hold their entries, decodes and checks what comes back, and
// yields each region's entries in ID order. The store (package kafka) owns
// a Reads and reaches it through Reads' methods only; what the read path
// needs from the store is the small Host interface (fetch clients, the
// admin client, the log's bounds, the index's start of a read) and the
// Options it is built with.
//
// # A read, from start to end
//
//	Reads.Read (reads.go)
//	  -> the log's bounds (bounds.go: lookups of reads that start together
//	     share one ListOffsets pair at the leader, listoffsets.go); a read
//	     from above the log's end fails (ErrFutureID)
//	  -> below the log start: the index and the prune marks decide between
//	     ErrPruned and reading on (pruned.go, marks.go); so they do when the
//	     log start overtakes a fetch of a running pass
//	  -> join a running pass of the topic or start one (pass.go)
//	  -> the index's plan: the ranges that hold the reads' regions, and
//	     scan ranges where the index does not know
//	  -> the fetcher (fetch.go): the plan cut into chunks, fetched
//	     concurrently within the store's Pool (pool.go), with raw fetch
//	     requests (wire.go: retries, leader moves, Kafka's errors)
//	  -> the decoder (decode.go): record and entry checksums, entries split
//	     over several records reassembled, offsets missing from the log
//	     detected, what it decodes fed to the index
//	  -> the router (route.go): each complete entry to the reads of its
//	     region, in order, within the store's hold budget
//	  -> each read's iterator.
//
// Reads send raw Fetch requests (kmsg) rather than running a franz-go
// consumer: a consumer reads on from one position and buffers ahead on its
// own, while a plan jumps between ranges (skipping other regions' runs),
// fetches several at once over several connections, and must keep what it
// holds within the store's budget.
//
// # Passes
//
// A pass is one walk over a topic's log that the reads starting together
// share: a datanode that opens its regions after a restart replays all of
// them at once, and one walk over the log serves them all. A read joins a
// running pass of its topic while the pass has not yet fetched past the
// read's first offset, and only a pass with its own log end and NoIndex
// setting, so that what it yields is exactly what it would yield alone.
// Reads whose bounds came from one lookup form a cohort: the pass they
// start plans their ranges together (one merged plan) instead of taking
// the later ones as joins. A read waits at most joinWait for a busy pass to
// answer its join, and only for passes of its own topic: a slow topic
// never delays the reads of another.
//
// # Fetch planning
//
// The plan's ranges are cut into chunks of about Options.ChunkBytes. A gap
// of other regions' records between two ranges is read through in the same
// fetch when its bytes stream in less time than a fetch's round trip, with
// the latency and the streaming rate measured from the pass's own fetches
// (rate.go; priors until they are measured), within half the pass's
// planned offsets (gapShare). Until a pass knows what an offset weighs, each indexed range
// starts with a one-batch fetch. docs/benchmarks.md records what each of
// these rules was measured to save, and the mechanisms removed because they
// saved nothing.
//
// # Memory
//
// Two budgets hold for the whole store, whatever the number of reads:
//
//   - Fetched bytes (Pool): each fetch is charged its byte limit when it
//     starts (its response's size once landed, when that is more) until its
//     response is decoded and every read took the entries it got from it.
//     A fetch starts within FetchMaxBytes; the head of a pass's queue,
//     which everything else of the pass waits for, may go to twice that.
//     One connection carries one fetch at a time, store-wide.
//   - Held entry data (HoldBytes): open entries, and entries waiting for an
//     open entry of their read. Over the budget (which each pass may pass
//     by the one entry whose arrival made it over), the pass spills the
//     largest entry it holds and reads it back from the log when its turn
//     comes, so an entry no longer than MaxEntryBytes is always returned.
//
// A spilled entry is read back one at a time store-wide, charged without
// waiting (the decoder reading it back holds what the others wait for). So
// a store's reads hold at most about 3×FetchMaxBytes + HoldBytes +
// MaxEntryBytes, and a batch per connection by which responses may pass
// the byte limits they asked for (Config.ReadMemoryBound).
//
// # Invariants
//
//   - A read yields each entry of its regions at or above its from point
//     exactly once, in ID order per region (log order for ReadRegions), or
//     fails; it never skips an offset it cannot prove holds none of its
//     entries (missing offsets fail with an error naming them).
//   - Index updates from reads go through the Gate: a read that ran across
//     DeleteNamespace or Close changes nothing.
//   - A pass ends when its plan is done, when it fails, or when its last
//     read leaves; Reads.Close ends and waits for every pass and catch-up.
//
// # Goroutines
//
// Per pass, a fetcher goroutine with its fetch goroutines (one per busy
// connection) and a decoder goroutine, which runs the router; each read
// takes its entries in its caller's goroutine. Per topic at most one index catch-up (catchup.go) and
// one bounds lookup at a time. All are owned by Reads and stopped by Close.
package replay
