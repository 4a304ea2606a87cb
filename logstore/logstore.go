// Package logstore is kwal's provider-neutral write-ahead-log contract.
//
// A datanode hosts many regions (shards of tables). Every write to a region is
// appended to the WAL through a LogStore before it is applied, and after a crash
// or a move the region replays its WAL with Read or ReadRegions. Many regions
// share one namespace (for the Kafka store: one single-partition topic).
//
// # Entry IDs
//
// Every entry gets an EntryID when it is appended. IDs are >= 1; within a
// namespace they strictly increase in log order; 0 means "none" (for example,
// LatestEntryID of an empty namespace, or "read from the beginning").
//
// # Durability and errors
//
// AppendBatch returns nil only once every entry in the call is durable. When it
// returns an error, any subset of the call's entries may be in the log, but an
// entry that was only partly written is never returned by a read. An entry
// whose append failed may still be replayed later if it did reach the log; a
// database that must tell "failed" from "maybe written" apart keeps its own
// sequence numbers in Data.
//
// # Concurrency
//
// Every method of a LogStore is safe for concurrent use. Concurrent
// AppendBatch calls are merged into shared produce requests (group commit).
//
// This package imports nothing of kwal: implementations depend on it, never
// the other way round.
package logstore

import (
	"context"
	"errors"
	"iter"
)

// RegionID names a region: one shard of one table.
type RegionID uint64

// EntryID is an entry's position in its namespace's log. IDs are >= 1 and
// strictly increase in log order within a namespace; 0 means "none".
type EntryID uint64

// Entry is one WAL record of one region. Data belongs to the caller: an
// append reads it during the call only (see AppendBatch), and an entry
// yielded by a read holds a Data of its own that the caller may keep.
type Entry struct {
	Namespace string // where the region's log lives; for the Kafka store, a topic
	Region    RegionID
	// ID is set by reads. AppendBatch ignores it and leaves it as it is:
	// the IDs it assigned are in its AppendResult (LastEntryIDs, the last
	// ID of each region in the call).
	ID   EntryID
	Data []byte
}

// AppendResult is what a successful AppendBatch reports.
type AppendResult struct {
	// LastEntryIDs holds, for every region in the batch, the ID of the last
	// of its entries that the call appended.
	LastEntryIDs map[RegionID]EntryID
}

// LogStore is a write-ahead log shared by many regions.
type LogStore interface {
	// AppendBatch appends entries and returns once all of them are durable.
	// One call may hold entries of many regions and namespaces; within a
	// namespace the log keeps the slice order of the call. Entries of
	// different calls to one region are kept in the order the calls were
	// queued. Safe for concurrent use; a cancelled ctx returns promptly with
	// ctx's error, though entries already handed to the broker may still be
	// written.
	//
	// The store does not keep the entries' Data past the call: once
	// AppendBatch returned, whatever it returned (an early return on ctx or
	// a timeout included), the caller may reuse or change the buffers, and
	// what is written is what Data held when the call began. (An
	// implementation that sends asynchronously copies Data first.)
	AppendBatch(ctx context.Context, entries []Entry) (AppendResult, error)

	// Read yields the region's entries with ID >= from, in log order, each
	// exactly once, and stops at the log's end as it was when Read started.
	// from = 0 reads from the beginning. When entries of the region with ID
	// >= from were deleted by pruning or retention, the read yields an error
	// matching ErrPruned (other regions' deleted entries do not count; a
	// store that cannot tell what was deleted says ErrPruned rather than
	// start later); undecodable records yield an error matching ErrCorrupt,
	// and so do records the log lost otherwise (a gap inside the range read,
	// or records the store knew of past the log's end; see MissingError),
	// after the entries before them. The iteration stops after the first
	// error. Breaking out of the loop releases everything the read holds.
	Read(ctx context.Context, namespace string, region RegionID, from EntryID) iter.Seq2[Entry, error]

	// ReadRegions replays several regions of one namespace in one pass over
	// the log, each from its own start, in log order.
	ReadRegions(ctx context.Context, namespace string, from map[RegionID]EntryID) iter.Seq2[Entry, error]

	// LatestEntryID returns an ID >= the ID of every entry in the namespace
	// (0 when the namespace is empty). An entry appended later gets a
	// greater ID.
	LatestEntryID(ctx context.Context, namespace string) (EntryID, error)

	// Obsolete records that the region no longer needs its entries with ID
	// <= upTo (they were flushed). It drives index truncation and pruning.
	Obsolete(ctx context.Context, namespace string, region RegionID, upTo EntryID) error

	// CreateNamespace creates the namespace; creating an existing one is not
	// an error.
	CreateNamespace(ctx context.Context, namespace string) error
	// DeleteNamespace deletes the namespace and every entry in it.
	DeleteNamespace(ctx context.Context, namespace string) error
	// ListNamespaces lists the namespaces this store can read, sorted.
	ListNamespaces(ctx context.Context) ([]string, error)

	// Close finishes or fails every pending append, persists what must
	// persist, and returns. Any call after Close returns an error matching
	// ErrClosed; a read in progress yields no entry once Close began, only
	// an error matching ErrClosed. Close does not wait for a read's loop
	// body (it may call Close itself). Close is idempotent.
	Close() error
}

var (
	// ErrCorrupt is matched by errors for a record of the log that could not
	// be decoded or failed its checksum. The error names the record's offset.
	ErrCorrupt = errors.New("kwal: corrupt record")
	// ErrPruned is matched by errors for reads of entries that were deleted
	// by pruning or retention. The error names the first ID still available
	// (see PrunedError).
	ErrPruned = errors.New("kwal: entries pruned")
	// ErrClosed is matched by errors from calls on a closed store.
	ErrClosed = errors.New("kwal: closed")
)
