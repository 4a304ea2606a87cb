// Package kafka is kwal's log store on Apache Kafka: the one package that
// wires the record codec (record), the producers and lanes (worker) and the
// region index (index) into a logstore.LogStore. A namespace is a
// single-partition topic that many regions share.
//
// # The append path
//
//	AppendBatch (append.go)
//	  -> the namespace's worker.Producer (topics.go: created on first use)
//	  -> the store's dispatcher (worker.Lanes): region-pure groups, one per
//	     topic, packed into a dispatch for a free lane
//	  -> a lane: a franz-go client (acks=all, idempotent, manual flush) that
//	     buffers the dispatch's records and flushes them as one request
//	  -> acknowledged offsets resolve each call with its entry IDs, and the
//	     index records which region holds which offsets before the call
//	     returns.
//
// ProduceTimeout bounds a call as a whole (queue room, queueing behind its
// region, the produce). A call's data is copied before franz-go sees it, so a
// caller may reuse its buffers once the call returns.
//
// # The replay path
//
//	Read / ReadRegions / ReadWith (read.go)
//	  -> the log's bounds (bounds.go; batched for reads starting together)
//	  -> below the log start: the index and the prune marks decide between
//	     ErrPruned and reading on (pruned.go, marks.go); so they do when
//	     the log start overtakes a fetch of the running read
//	  -> join or start a pass (pass.go): one fetch pipeline and one decoding
//	     loop shared by the reads of a namespace that start together
//	  -> the index's plan of the reads' regions, cut by the cost model
//	     (cost.go) into stretches: dense runs of ranges read whole, sparse
//	     ranges fetched alone; never priced above a scan of the span
//	  -> the fetcher (fetch.go): chunks fetched concurrently over the store's
//	     connections with raw fetch requests (wire.go: retries, leader moves,
//	     Kafka's errors)
//	  -> the decoding loop (read.go): record and entry checksums, split
//	     entries reassembled, missing offsets detected (gaps.go), held
//	     entries bounded by ReadHoldBytes
//	  -> each read's own iterator, in entry ID order.
//
// Reads send raw Fetch requests (kmsg) rather than running a franz-go
// consumer: a consumer reads on from one position and buffers ahead on its
// own, while a plan jumps between ranges (skipping other regions' runs),
// fetches several of them at once over several connections, and must keep
// what it holds within FetchMaxBytes windows. README's replay tables
// compare full scans with a plain franz-go consumer.
//
// # Files
//
//	store.go       the LogStore, Open, Close and its order
//	config.go      Config, its defaults and Validate
//	clients.go     franz-go client options (TLS, SASL, dialer, logger)
//	kprom.go       the clients' own metrics (kprom), one set per role
//	unreachable.go Ping and Open's errors when no broker answers
//	retry.go       the one retry loop of whole calls (leader, offsets, fetch)
//	topics.go      topics: creation, producers, offsets, partition metadata
//	append.go      AppendBatch, LatestEntryID
//	namespaces.go  Obsolete, CreateNamespace, DeleteNamespace, ListNamespaces
//	pool.go        TopicPool: a pool of namespaces and a region's place in it
//	marks.go       Obsolete and prune marks written to and found in the log
//	prune.go       Prune and PruneWith; the optional pruner goroutine
//	pruned.go      the proof that a read below the log start, or one the
//	               log start overtook, lost nothing
//	read.go        the read iterator and the decoding loop
//	pass.go        passes shared by reads of one namespace
//	bounds.go      batched log-bounds lookups of starting reads, sent to
//	               the cached leader in one round trip
//	fetch.go       the fetch pipeline
//	wire.go        one fetch request and Kafka's errors
//	batches.go     the walk of a fetch response's record batch headers
//	cost.go        the cost model of fetching, and the cut into stretches
//	warm.go        Open warms the indexed topics' fetch connections and
//	               seeds the cost model (a round trip, one batch's size)
//	gaps.go        offsets missing from the log
//	gate.go        reads' index updates against DeleteNamespace and Close
//	catchup.go     the index's background catch-up after a restart
//	metrics.go     the store's Prometheus metrics
//
// # Goroutines and their owners
//
//   - The dispatcher (worker.Lanes), one per store, stopped by Close after
//     every producer sent what it had queued.
//   - One goroutine per dispatch on a lane; it ends when its flush returns.
//     Close closes the lane clients after the producers, which ends a flush
//     still stuck.
//   - Per pass: a fetcher goroutine with its fetch goroutines (at most one
//     per connection) and a decoding goroutine. A pass ends when its plan is
//     done, when it fails, or when its last read leaves (that read waits for
//     it); Close ends and waits for every pass.
//   - One goroutine per topic for the batched bounds lookups of starting
//     reads.
//   - Short-lived goroutines that their caller waits for: Prune's catch-up
//     scan runs a fetcher of its own (prune.go), offsets asks the log
//     start and end concurrently (topics.go, an errgroup), and each
//     collection of a client role's metrics (kprom.go).
//   - The pruner when Config.PruneInterval > 0, stopped by Close before the
//     index closes; each round's Prune is cancelled when the pruner stops.
//   - The index's catch-up after a restart (catchup.go): at most one per
//     topic, one running at a time, started when a producer opens a topic
//     whose index lies below the log's end; counted with the passes, it
//     ends when Close cancels the reads.
//   - The index's checkpoint goroutine, stopped by the index's Close.
//   - franz-go's own goroutines, ended by closing the clients.
package kafka
