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
// Read, ReadRegions and ReadWith (read.go) check their arguments and hand
// the read to package internal/replay, which plans it from the index,
// fetches and decodes it, and yields each region's entries in order (its
// package comment draws the path). The store gives it its fetch clients,
// the log's bounds and the index through replay.Host (store.go, readHost);
// everything else of the read path lives there, behind that one door.
//
// # Errors
//
// Every error reads as one line that starts with "kwal: " once, as os's do:
// sentinels and typed errors carry the prefix, errors built around others
// (internal/kwalerr) show them without theirs, and each call names itself
// and its namespace once: "kwal: prune "x": unknown namespace".
//
// # Files
//
//	store.go       the LogStore, Open, Close and its order; the read path's Host
//	config.go      Config, its defaults and Validate
//	clients.go     franz-go client options (TLS, SASL, dialer, logger)
//	kprom.go       the clients' own metrics (kprom), one set per role
//	unreachable.go Ping and Open's errors when no broker answers
//	topics.go      topics: creation, producers, offsets, partition metadata
//	topicconfig.go the topic configs kwal sets and checks (retention, cleanup)
//	append.go      AppendBatch, LatestEntryID
//	namespaces.go  Obsolete, CreateNamespace, DeleteNamespace, ListNamespaces
//	pool.go        TopicPool: a pool of namespaces and a region's place in it
//	marks.go       Obsolete and prune marks written to the log
//	prune.go       Prune and PruneWith; the optional pruner goroutine
//	prunemode.go   Config.PruneMode's values; DeleteRecords refused
//	retentionrisk.go how close a finite retention is to a needed record
//	read.go        Read, ReadRegions, ReadWith, ReadOptions and ReadStats
//	metrics.go     the store's Prometheus metrics
//
// # Goroutines and their owners
//
//   - The dispatcher (worker.Lanes), one per store, stopped by Close after
//     every producer sent what it had queued.
//   - One goroutine per dispatch on a lane; it ends when its flush returns.
//     Close closes the lane clients after the producers, which ends a flush
//     still stuck.
//   - The read path's passes, bounds lookups and index catch-ups
//     (internal/replay), owned by its Reads; Close closes it, which ends
//     and waits for them all.
//   - Short-lived goroutines that their caller waits for: Prune's catch-up
//     scan (a pass of the read path), offsets asks the log start and end
//     concurrently (topics.go, an errgroup), and each collection of a
//     client role's metrics (kprom.go).
//   - The pruner when Config.PruneInterval > 0, stopped by Close before the
//     index closes; each round's Prune is cancelled when the pruner stops.
//   - The index's catch-up after a restart (replay's catchup.go): at most
//     one per topic, one running at a time, started when a producer opens a
//     topic whose index lies below the log's end; it ends when Close
//     cancels the reads.
//   - The index's checkpoint goroutine, stopped by the index's Close.
//   - franz-go's own goroutines, ended by closing the clients.
package kafka
