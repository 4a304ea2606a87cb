// Package worker is kwal's write path below the store: one ordered batch
// producer per topic, each with a background worker goroutine, sharing a
// pool of produce lanes.
//
// # Shape
//
//	AppendBatch ──Submit──▶ Producer (topic A) ──queue──▶ worker goroutine ──group──▶ Lanes ──▶ Kafka
//	AppendBatch ──Submit──▶ Producer (topic B) ──queue──▶ worker goroutine ──group──┘
//
// Submit encodes a call's entries for the topic into kwal records (package
// record) over one copy of their data (franz-go may hold, and on a retry
// re-encode, a record after its caller gave up waiting, so the records must
// not share the caller's buffers), takes room for their bytes from the topic's byte-bounded queue
// (blocking, with the caller's context, while the queue is full: memory
// stays bounded when Kafka is slow) and queues one request. The worker
// drains the queue, groups pending requests, and hands each group to a free
// lane; when the lane's produce returns it resolves the group's requests
// with the offset of each entry's first record, and hands the acknowledged
// (region, offset) runs to the index collector.
//
// # Why lanes, and why region-pure groups
//
// Kafka stores and serves whole record batches, one per partition per
// produce request. A batch that mixes 64 regions must be fetched whole to
// replay any one of them, so the region index saves nothing on it. Plain
// producing through one franz-go client mixes every concurrent caller's
// records (measured: 3 to 11 regions per batch, replay selectivity 13 to
// 34 for 64 concurrent regions). The worker therefore keeps each group to
// one region (all of its pending requests, up to GroupBatches batches) and
// sends each group through a lane: a franz-go client of its own, so that
// the group becomes its own batch, and up to len(lanes) groups are in
// flight at once to hide produce latency. Measured with 64 regions written
// concurrently, the batches hold 1.00 regions each and a one-region replay
// fetches 1.02 times its own bytes. MaxRegions trades that purity for
// fewer, larger requests when a backlog builds up (more regions ready than
// lanes free); the README has the measurements behind the default.
//
// # Ordering
//
// A request is sent only when none of its regions has a group in flight and
// no earlier pending request of those regions is held back; a request always
// travels whole in one group; a lane produces a group's records in order on
// one idempotent producer. Hence a region's requests reach the log in the
// order they were queued, and a call's entries keep their slice order.
// Requests of different regions may overtake one another. A group larger
// than one batch is several produce requests; another lane's batch may land
// between them, which readers handle (package record's Assembler, and the
// store's reader, which yields in ID order).
//
// # Failure
//
// A request succeeds only if every one of its records was acknowledged
// (acks=all, idempotent producer). A failed record fails exactly the
// requests that carried it; the worker keeps serving. A group that is not
// answered within ProduceTimeout fails with ErrTimeout even if the broker
// never answers (GreptimeDB #9017); its regions stay busy until the lane
// returns, so no later request of theirs can overtake records that may still
// land. A caller whose context ends while its request is still queued
// withdraws it (nothing is written); once handed to a lane it may still be
// written.
//
// # Goroutines
//
// Each Producer owns one worker goroutine, stopped by Close (which first
// sends everything queued). Each in-flight group runs on a goroutine
// tracked by Lanes, which ends when the lane's produce returns; the store
// closes the lane clients after the producers, which ends any produce still
// stuck.
package worker
