// Package worker is kwal's write path below the store: one ordered batch
// producer per topic in front of one store-wide dispatcher that packs every
// topic's region-pure groups into the produce requests of a pool of lanes.
//
// # Shape
//
//	AppendBatch ──Submit──▶ Producer (topic A) ──┐
//	AppendBatch ──Submit──▶ Producer (topic B) ──┼─inbox─▶ dispatcher goroutine ──dispatch──▶ lane 1 ──▶ Kafka
//	AppendBatch ──Submit──▶ Producer (topic C) ──┘  (kick)  (plans groups per topic,  └─dispatch──▶ lane 2 ──▶ Kafka
//	                                                        packs ≤1 group per topic)
//
// Submit encodes a call's entries for the topic into kwal records (package
// record) over one copy of their data (franz-go may hold, and on a retry
// re-encode, a record after its caller gave up waiting, so the records must
// not share the caller's buffers; the copy and the record structs come from
// a pool and go back to it once the lane that carried them is back, or the
// request left the queue unsent), takes room for their bytes from the
// topic's byte-bounded queue and then from the store's (blocking, with the caller's context, while
// either is full: memory stays bounded when Kafka is slow) and puts one
// request in the dispatcher's inbox, which wakes the dispatcher only if it
// may have to act on the request at once (see below). The dispatcher
// groups each topic's pending requests by region, packs the next ready group of as many topics as fit MaxRequestBytes into
// one dispatch, and hands it to a free lane. The lane buffers the records
// on its franz-go client (created with ManualFlushing) and flushes them:
// each topic's group becomes one record batch, and the batches of all
// topics led by one broker travel in one produce request. When the flush
// returns, the dispatcher resolves each request with the offset of each
// entry's first record and hands the acknowledged (region, offset) runs to
// the index collector.
//
// # Why one dispatcher, not a worker per topic
//
// Kafka's produce request holds one batch per partition for any number of
// partitions, and a plain franz-go producer fills it with whatever is
// buffered. A worker goroutine per topic, borrowing a lane for one group at
// a time, would send one produce request per group: over a pool of topics,
// many times the requests of a plain producer, and that many round trips
// (docs/benchmarks.md, "Tried and dropped"). Packing needs one place that
// sees every topic's ready groups; a store-wide goroutine is that place, and
// it also owns the lanes, so there is no second hand-off. Its cost is
// planning all topics on one goroutine; planning is incremental (only topics
// whose state changed are replanned, and a topic that only received new
// requests, or had groups taken by dispatches, continues its last plan's
// scan with the new requests; see worker.plan).
//
// # Why an inbox, not a channel of requests
//
// The dispatcher handles a request faster than many callers submit them, so
// with a channel of requests it would be parked on the channel most of the
// time and wake, select over its channels and walk every topic's state for
// about every request: a large part of its CPU. Most of those wake-ups would
// change nothing, since with MinInFlight dispatches on lanes the dispatcher
// holds the ready groups until one returns. So callers append to an inbox (a
// list under a mutex, taken whole by the dispatcher after every wake-up) and
// signal a one-slot wake-up channel only when the dispatcher is not holding,
// or the arrival could end the hold: its topic has a ready group or another
// request in the inbox, the inbox outgrows the held dispatch's room, or its
// deadline falls before the hold ends. A hold always ends by itself (a
// dispatch is in flight and the wake timer is armed), and then the
// dispatcher takes whatever arrived meanwhile, in one loop turn for many
// requests. See inbox.
//
// # Why lanes, and why region-pure groups
//
// Kafka stores and serves whole record batches. A batch that mixes 64
// regions must be fetched whole to replay any one of them, so the region
// index saves nothing on it. Plain producing through one franz-go client
// mixes every concurrent caller's records of a topic: several regions per
// batch, so one region's replay fetches many times its own bytes
// (docs/benchmarks.md: regions per batch and replay selectivity, kwal
// against raw). The dispatcher therefore keeps each group to one region (all
// of its pending requests, up to GroupBatches batches) and puts at most one
// group per topic in a dispatch, so each batch is one group. MaxRegions
// trades that purity for fewer, larger requests when a topic has a backlog
// (more groups planned than lanes free).
//
// Lane policy (adaptive): up to two dispatches go at once (a plain franz-go
// producer also keeps several requests in flight per broker). Beyond that,
// another lane is used only when the ready groups cannot share
// one request (a topic has two ready groups, or they exceed
// MaxRequestBytes) or when they have waited about one produce round trip
// (a moving average, clamped to [0.1, 10] ms). Otherwise they wait for a
// dispatch to return and leave together: requests are filled before more
// lanes are used. With few topics and many regions (64 regions in one
// topic) every dispatch carries one group, so all lanes are used.
//
// One group is one batch: nothing leaves a lane's client before its Flush,
// so a group's records are buffered whole and drained into one batch of
// one request, which no other lane's records can enter. A group over
// MaxBatchBytes is several batches, and since Kafka takes one batch per
// partition per request they leave in successive requests: another lane's
// batch of the topic may land between them (the tests' fake client does
// this), and a later one may fail after an earlier one was written. Each
// batch is still one group's, in order. (A producer linger would give the
// same guarantee and add its wait to every request.)
//
// # Ordering
//
// A request is sent only when none of its regions has a group in flight and
// no earlier pending request of those regions is held back; a request always
// travels whole in one group; a lane produces a group's records in order on
// one idempotent producer. Hence a region's requests reach the log in the
// order they were queued, and a call's entries keep their slice order.
// Requests of different regions may overtake one another. A group larger
// than one batch is several batches; readers handle any interleaving
// (package record's Assembler, and the store's reader, which yields in ID
// order).
//
// # Failure
//
// A request succeeds only if every one of its records was acknowledged
// (acks=all, idempotent producer). A failed record fails exactly the
// requests that carried it: when the broker rejects one partition of a
// request that carries several topics, only that topic's group fails. The
// dispatcher keeps serving. A dispatch that is not answered within
// ProduceTimeout fails with ErrTimeout even if the broker never answers
// (GreptimeDB #9017); its regions stay busy until the lane returns, so no
// later request of theirs can overtake records that may still land. A
// caller whose context ends while its request is still queued withdraws it
// (nothing is written); once handed to a lane it may still be written. The
// store submits every call with a Deadline at ProduceTimeout from the
// call's start (SubmitBy), so a call queued behind its region's stuck group
// is withdrawn at its own deadline instead of waiting for the lane, and one
// on a lane is abandoned then. The dispatcher enforces these deadlines from
// one heap of the unresolved requests that have one, earliest first, with
// its wake timer armed for the earliest: a call costs a heap push and a
// removal, not a context and runtime timer of its own (only a Submit that
// must wait for queue room derives a context with the deadline). The
// heap's order is the deadlines', not the queue's: a call that waited long
// for queue room can be queued behind younger calls and still expire first.
//
// # Goroutines
//
// Lanes owns the dispatcher goroutine, stopped by Lanes.Close after every
// producer is closed. Producer.Close sends a marker behind the topic's
// requests and waits until the dispatcher resolved them all. Each dispatch
// runs on a goroutine tracked by Lanes, which ends when the lane's flush
// returns; the store closes the lane clients before Lanes.Close, which ends
// any flush still stuck.
package worker
