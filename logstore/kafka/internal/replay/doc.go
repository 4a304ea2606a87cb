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
// planned offsets (gapShare). Until a pass knows what an offset weighs, each
// indexed range starts with a one-batch fetch (a blind fetch would read
// through other regions' records). A chunk asks for the bytes that
// decompress to about ChunkBytes, at the expansion the pass measured
// (rate.go): a sizing rule only, which the memory bound does not rest on.
// docs/benchmarks.md records what these rules were measured to save.
//
// # Memory
//
// What a store's reads hold, whatever their number:
//
//   - Fetched bytes (Pool): a fetch is charged from its start what its
//     byte limit is expected to take once decoded (the limit times the
//     expansion measured, at most FetchMaxBytes), and what its response
//     takes beyond that (a batch returned whole, batches decoded early),
//     until the decoder has decoded its response and every read has taken
//     the entries that point into it. Its fetch goroutine decodes the
//     response's batches ahead of the decoder within that charge, and
//     beyond it while the fetch's budget has room, charging each; it never
//     waits (decodeEarly), so it passes the budget by at most one batch.
//   - Decompressed batches: the rest the decoder decompresses one at a
//     time, copying out what it keeps (parts into the assembler, whole
//     entries into the hold budget), so it holds at most one batch's
//     records beyond them: a batch its writer sized (MaxBatchBytes counts
//     a batch's uncompressed bytes).
//   - Held entry data (HoldBytes): open entries, entries waiting behind an
//     open entry of their read, and copied entries handed to reads and not
//     yet taken. Over the budget, the pass spills the largest open or
//     waiting entry (its data dropped, its checks kept) and reads it back
//     from the log when its turn comes, one entry at a time store-wide.
//
// Config.ReadMemoryBound adds these up.
//
// # Liveness
//
// Every wait of the read path, who ends it, and why that party never waits
// for the waiter. Network calls (fetches, ListOffsets, the claims
// catch-up) end within RequestTimeout or their context; every other wait
// below also ends with the read's context or Close.
//
//   - A read waits for its next batch of entries (sub.out). The pass's
//     decoder sends it, or the pass's end closes it. The decoder waits for
//     this read only to hand it a batch while it has one not yet taken
//     (flush), and the read takes it without waiting for the pass.
//   - The decoder waits for the fetcher's next response. The fetcher sends
//     it once the head chunk landed; the fetcher waits for the decoder only
//     in that send, and keeps landing and starting chunks meanwhile.
//   - The decoder waits for a read to take a batch (flush). The read's
//     caller takes it; a read that leaves (break, cancel) is dropped. This
//     is the only wait on a caller, and it holds at most two batches per
//     read: the one taken and the one waiting.
//   - The fetcher waits for its head chunk to land: the fetch goroutine
//     lands it (network).
//   - The fetcher waits for the Pool to start its head chunk. Heads have a
//     budget of their own (Pool), and one head starts whenever no head is
//     charged, so a head waits only for other heads, which their decoders
//     take without waiting for it, and for entries reads were handed from
//     them, which their callers take: never for a chunk behind a head.
//     A read started in the loop body of another starts its heads while
//     the outer read's pinned entries leave room for one. A response
//     larger than its fetch asked for is charged its excess when it lands,
//     and batches decoded early as they are decompressed, without waiting
//     (they are here), which delays only later fetches of that budget.
//   - The fetcher of a cohort's pass waits for its cohort reads to be
//     placed: each read places itself when it joins a pass or returns,
//     and looks its bounds up before, never waiting for this pass.
//   - A starting read waits at most joinWait for a running pass to answer
//     its join, then starts a pass of its own.
//   - Chunks behind a head start while their budget allows; the fetcher
//     never waits for one (it waits for its head alone), and their bytes
//     are freed as their pass's heads are decoded.
//   - Read-backs take turns store-wide (readBackTurn). A turn's holder
//     waits only for fetches, charged to the heads' budget without waiting
//     for the Pool (the decoder reading back holds what the others wait
//     for), and freed when the entry is read back: heads may wait for it,
//     and it never waits for them.
//   - Nothing waits for the hold budget: over it, a pass spills instead.
//
// The largest units a read can meet, and where each fits:
//
//   - a response: at most FetchMaxBytes, or one batch larger than asked
//     for, which Kafka returns whole: charged when it lands;
//   - a batch's decompressed records: charged as its fetch goroutine
//     decodes it, or decoded alone by the decoder and not charged beyond
//     what is copied out of it;
//   - an entry of MaxEntryBytes: HoldBytes is at least MaxEntryBytes
//     (Config.Validate), and an open entry beyond the budget is spilled,
//     not waited for;
//   - a log written with larger limits by another store: an entry longer
//     than MaxEntryBytes fails the read with ErrHoldExceeded, naming its
//     offset; larger batches are charged as they land.
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
