// Package index is kwal's region index: per topic, which Kafka offsets hold
// which region's records, so that replaying one region fetches only its own
// records. Collector holds it for every topic of a node; a Store
// (NewDirStore, or the blobstore sub-package over gocloud.dev/blob) keeps
// its checkpoints.
//
// # What it knows
//
// Per topic the index keeps an accounted span [C, W) of offsets. The
// coverage invariant: for every offset o in [C, W), o is in the offset set
// of the region whose record it holds, or in no set when it holds no kwal
// entry (a "foreign" record: written by another program, a mark, or an
// offset a transaction marker takes); the one exception is a region's
// offsets below its Obsolete point ("dropped below", d_r), which are
// removed. A kwal record that fails to decode, and an offset missing from
// the log, are never accounted for, as anyone's or as no one's (either may
// have held any region's entry): a scan that skips one under SkipCorrupt
// reports the offsets before it and after it as two scans, so the span
// stops below it (W cannot cross an offset nobody reported, and C does not
// drop past it), and every later read scans it and meets the damage. So
// for region r and any from, the offsets of r at or after from are: those
// in r's set, plus whatever lies in [from, C), [W, end) and [from, d_r),
// which a plan fetches as Scan ranges. That is why an indexed read returns
// exactly what a full scan returns.
//
// The span grows only through offsets that are known. Observe keeps runs
// above W in a sorted pending list (bounded; the highest are dropped when
// it overflows, which only leaves their offsets unaccounted) and advances W
// through runs that touch it, never across a gap: an offset nobody reported
// may hold another writer's record. Readers close gaps: a Scan range's
// records are decoded and reported through ObserveScan, which also extends
// the span downwards when a complete scan reaches C from below (C drops to
// the scan's start), and starts coverage for a topic that has none. So an
// index that was not persisted, or is older than the log, is rebuilt by the
// first replay rather than scanned again by every one.
//
// Obsolete points are kept even below C: a scan that lowers C later must
// not index a region's records below its point (a store rebuilding its
// index learns the points from marks before its scan reaches C).
//
// Start(topic, logStart, end) gives a topic without coverage C = W = end;
// discards coverage whose W lies beyond end (the topic was recreated or
// truncated: nothing known can be trusted; logged and counted); and raises C
// to logStart when retention deleted the log below C.
//
// # Memory
//
// A region's set is a runList: its runs in ascending order, stored as chunks
// of 512 bytes of varint-encoded runs (the checkpoint's run encoding), with
// the last run open so that appends extend it for free. Runs are only
// appended at the top (W only grows) and removed from the bottom (Obsolete,
// C rising), which this layout does cheaply, and in less memory than
// roaring64 bitmaps with run optimisation or a plain slice of spans, both
// for interleaved single records and for runs (BenchmarkRegionSetMemory;
// docs/benchmarks.md, "The write path, the codec, the index, pruning"). Plan seeks a region's first run at or
// after from with a binary search over its chunks, so a plan costs the runs
// it returns, and a region without runs costs one map lookup: opening
// thousands of idle regions is cheap.
//
// # Locking
//
// Collector.mu guards only the map of topics. Each topic has mu (an
// RWMutex: Observe, Start and Obsolete write, Plan reads) and persistMu,
// which serialises its checkpoints and Drop and guards its persistence
// state (persist); persistMu is taken before mu. A checkpoint holds mu only
// while it encodes the file; the store write runs under persistMu alone.
//
// # Goroutines
//
// With Options.CheckpointInterval > 0 (and a Store), New starts one
// goroutine that checkpoints every interval; Close stops it (cancelling a
// checkpoint in flight) and waits for it before writing the final
// checkpoint. New loads up to 8 topics at once, fetching up to 8 files of
// each at once, in goroutines it waits for before returning. There is no
// other goroutine.
//
// # Files
//
// Each topic's checkpoint is a chain of files in the Store, named
// idx-<escaped topic>.<seq>.base|delta: a base holding the whole topic
// index, and deltas numbered base+1, base+2, ... each holding what changed
// since the previous file: the new C and W, and for each region changed,
// its Obsolete point and its runs in [previous W, W). A checkpoint is taken
// as of W (runs above W are pending and not written), costs what changed
// since the last one, and writes nothing for an unchanged topic. When the
// deltas add up to more than the base (and more than 4 KiB), or number
// 128, the next checkpoint writes a new base instead, then deletes the
// older files: a topic takes at most about twice its base on disk, and for
// an index of steady size each byte of delta costs at most one byte of
// base rewriting. The byte layout is drawn in format.go. An entry costs
// 1.0 byte on disk when single records of 64 regions are fully interleaved
// and 0.30 in runs of 10 (TestBytesPerEntry).
//
// A whole node's index is never rewritten at once, and a checkpoint never
// loses a region that was not written since a restart (GreptimeDB #8487):
// every topic found in the Store is loaded in New, before anything can be
// checkpointed, and both bases and deltas are derived from the loaded
// state.
//
// # Crash safety
//
//  1. Store.Put is atomic and durable: the store of NewDirStore writes a
//     temporary file, syncs it, renames it over the name and syncs the
//     directory. A crash
//     leaves either the old blob or the new one, plus perhaps a temporary
//     file, which List never returns and NewDirStore removes.
//  2. Every file carries a CRC-32C over its header and body and its body
//     length, so a torn or damaged file is detected, never half-applied.
//  3. Files of a topic are written one at a time in sequence order, each
//     only after the previous Put returned: the store holds a chain base,
//     base+1, ..., k, and maybe a file k+1 whose Put failed or was cut off.
//  4. Every delta names its base and starts at the W where the previous
//     file ended (its low bound). A loader applies the newest base that
//     decodes, then its deltas while each decodes, has the next sequence
//     number, names that base and starts at the current W. Every prefix of
//     a chain is a state the index really was in at some checkpoint, so
//     stopping early gives a smaller accounted span, never a wrong one:
//     reads scan what is no longer accounted for.
//  5. A new base takes a sequence number above every file on the store and
//     older files are deleted only after it is durable. A crash in between
//     leaves old files that the loader ignores (their numbers are below the
//     base's) and the next base deletes.
//  6. If any file of a topic was unusable, the topic keeps the last
//     consistent state before it (or no coverage when no base decodes), the
//     failure is logged and counted by reason in
//     kwal_index_load_failures_total, and the next checkpoint writes a new
//     base above every existing file, so a broken chain is never extended.
//  7. A failed Put changes nothing in the chain: the changes it carried are
//     handed back to the next checkpoint, which rewrites the same sequence
//     number.
//  8. A checkpoint is only worth what W reached. After a restart the loaded
//     W may lie below the log's end (appends acknowledged after the last
//     checkpoint, or other stores' records), and new appends are observed
//     above that gap: they stay
//     pending and W cannot move through offsets nobody reported. So the
//     store scans [W, end) in the background when it opens the topic's
//     producer (kafka/catchup.go) and reports it through ObserveScan, a
//     complete scan: W moves up through the gap and the pending runs, and
//     checkpoints persist the node's progress again without waiting for a
//     read. Until the scan ends, a checkpoint is the old, still true, state
//     (points 3-4): a crash meanwhile loses progress, never correctness.
//     (Records another store writes while this one runs leave the same kind
//     of gap; reads, Prune's catch-up and the next producer open close it.)
//  9. What the index knew of deleted offsets (deleted.go) travels in the
//     files too: a base carries the topic's span, a delta the span when it
//     changed since the previous file (format.go, version 2). The span is a
//     fact about the log's past, true for as long as the topic is the same
//     log, so a loader that stops early (point 4) holds an older span, or
//     none, never a false one; Start discarding the coverage (the log
//     ended below W) discards the span with it, and the base written next
//     carries none.
//
// # Limitations
//
// The index cannot tell a topic that was deleted and recreated, then
// written past the old W while this node was down, from the old topic:
// Drop the topic when it is deleted. One Collector writes to a Store (or a
// prefix of a bucket); others may only read it (Options.ReadOnly). C moves
// down only through a complete scan that reaches it (ObserveScan).
//
// # Pruning
//
// The store prunes (DeleteRecords) below the lowest offset holding a record
// some region still needs, and must still answer a replay exactly once the
// records are gone: a read of region r from offset f below the log start S
// fails with ErrPruned only when r lost a record at or after f. Deleted
// records cannot be asked, so the log carries statements about them, as
// records of kind mark (record.KindMark, drawn in the record package):
//
//   - an Obsolete mark (r, b), written by Obsolete: r needs none of its
//     records below b (each statement carries its writer's epoch for r,
//     and one the fencing rule fences at the mark's offset is never taken
//     in: internal/replay/marks.go);
//   - a prune mark (From, Point, table), written by Prune just before it
//     deletes below Point: every kwal record in [From, Point) belongs to a
//     region listed in the table and lies below that region's point (a
//     region absent from the table had no record there).
//
// Why a prune mark is true. Prune first scans whatever its index does not
// account for up to the log end (other stores' records, or a lost or stale
// index), so the index holds every record and every mark below W, with
// C <= S. Point is the lowest first run of any region (runs are kept only
// above a region's Obsolete point) and at most W, so each record in
// [S, Point) lies below its region's Obsolete point, and the table lists
// every region the index knows a point of. The records in [From, S) were
// deleted earlier; the prune mark that vouched for S (Point >= S, found in
// the log) said what they were, and the new table takes its points in
// (each region's point only grows). When no mark vouches for S (retention
// moved the start past every prune), the new mark speaks for [S, Point)
// only: From = S.
//
// Why the read's answer is right. A mark is a fact about the log's
// records, whoever wrote it, so any prune mark with Point >= S will do:
// if f >= From and f >= r's point in it, r's records in [f, S) all lie
// below that point, that is below f: there were none, and reading from S
// returns exactly r's entries from f on. Otherwise the read fails with
// ErrPruned naming S+1, from which reading needs no proof. Prune writes
// its mark at an offset above W >= Point before deleting, so the mark of
// the prune that set the start lies at or above it: the log itself holds
// the proof after a restart or with no index. A store that does not know
// one scans from S for the first prune mark with Point >= S (usually a few
// records: the mark sits about W - Point above the start), keeps it per
// topic and remembers how far it searched.
//
// Many stores, one topic. Every store reads the same marks: an index's
// Obsolete points are the highest of those it read from any store's
// Obsolete and prune marks (a prune mark restates the points whose own
// marks it deletes, so a store rebuilding its index from the start learns
// them all again). Prune's catch-up makes every store's index cover the
// same log, so two stores, a restarted one and one that lost its index
// compute the same prune point: the lowest record of any region above its
// point (TestPruneSharedTopic). A region that migrates needs nothing from
// the node it leaves: the new node's Obsolete marks move its point, and it
// replays from its flushed ID + 1 by the same proof.
//
// What it costs: with prune marks the log keeps what the regions need plus
// the marks. An Obsolete mark is 35 bytes of key and value (a record batch
// of its own) and one produce round trip per Obsolete call; a prune mark
// costs a few bytes per region in its table. The other design, a prune
// point that never passes what a rebuilt index could prove without prune
// marks (each region's latest Obsolete mark), keeps a log that grows
// without bound: a region that stops writing (dropped table, moved away)
// pins everything after its last flush. Prune marks it is (the space each
// keeps: BenchmarkPruneSpaceKept; docs/benchmarks.md, "The write path, the codec, the index, pruning").
//
// Retention past every prune point deletes what no mark speaks for. The
// index is then the witness (HadNone, deleted.go): where it accounted for
// the deleted offsets (a checkpoint loaded before the start rose, or what
// it kept of the span that C dropped when it rose, which its checkpoints
// carry across restarts) and holds no run of the region there above its
// Obsolete point, the region had no record there and the read succeeds. A prune racing a read is answered
// by the same proof when the read's fetch finds its offset out of range:
// the read goes on from the new start when none of its regions lost a
// record it wanted, and fails with ErrPruned otherwise.
//
// Limits. Where neither a mark nor the index speaks for deleted offsets
// (retention past every prune point on a node whose index never covered
// them, or whose checkpoints were lost since), a read from below the start
// fails with ErrPruned even for a region that lost nothing (Prune before retention, or let retention lag the prune
// interval; a DeleteRecords the service refuses still leaves the mark, so
// retention up to the last Prune's point is vouched for). A read from
// below the region's own Obsolete point fails once a prune passed it, even
// if the region had no record there (the table keeps points, not records).
// The table keeps every region that ever declared a point.
// Records that are not kwal's hold no entry and go once Prune has seen
// them; a corrupt kwal record stops every Prune, with SkipCorrupt too (it
// may be any region's entry; a scan that fails on it accounts for nothing
// from it on).
//
// # File map
//
//   - index.go: the types the store exchanges with the index (Run, Range,
//     Plan).
//   - collector.go: Collector (topic map, the calls the store makes,
//     background checkpoint, Close).
//   - options.go: Options and their defaults.
//   - topic.go: one topic's accounted span, pending runs, Start, Observe,
//     Obsolete.
//   - runlist.go: the compact per-region offset set and the run encoding.
//   - plan.go: read plans.
//   - scan.go: ObserveScan, extending coverage from readers' scans.
//   - deleted.go: what the index knew of deleted offsets; HadNone.
//   - checkpoint.go: file names, base and delta checkpoints, loading.
//   - format.go: the checkpoint byte layout, encoder and decoder.
//   - store.go, dirstore.go: the Store interface and the directory Store
//     (blobstore adapts gocloud.dev/blob buckets).
//   - metrics.go: the kwal_index_* metrics.
package index
