package kafka

import (
	"context"
	"errors"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/internal/replay"
)

// ReadOptions tune one read (an extension of the logstore contract).
type ReadOptions struct {
	// NoIndex scans the whole range instead of fetching only the regions'
	// indexed offsets.
	NoIndex bool
	// Stats, when set, receives the read's counters when it ends.
	Stats *ReadStats
}

// ReadStats counts what one read fetched and yielded. Reads of one
// namespace that run at the same time share fetches (see ReadWith): the
// fetch and record counters are then those of the shared pass, the same
// for every read with the same Pass, and the entry counters the read's own.
type ReadStats struct {
	Fetches      int   // fetch requests
	FetchedBytes int64 // record batch bytes fetched
	Records      int64 // records decoded
	Entries      int64 // entries yielded
	EntryBytes   int64 // data bytes of the entries yielded
	ScanRanges   int   // planned ranges read by scanning
	IndexRanges  int   // planned ranges read through the index
	// Missing counts offsets found missing from the log (skipped with
	// SkipCorrupt; without it the read fails with a MissingError).
	Missing int64

	// Plan says how the pass read its plan: "indexed" (every planned range
	// fetched on its own), "scan", or "mixed (gaps read through)" when it
	// read gaps of other regions' records between planned ranges in the
	// same fetch rather than start another (a gap whose bytes stream in
	// less than a fetch's latency, as the pass measured them).
	Plan string
	// Stretches counts the runs of several planned ranges read as one
	// fetch, MergedGaps the gaps between them, and StretchExtra the offsets
	// they read beyond the planned ranges.
	Stretches    int
	StretchExtra int64
	MergedGaps   int
	// Pass identifies the pass over the log that served the read; Reads
	// is how many reads it served (1: none shared it).
	Pass  uint64
	Reads int
	// FetchLatency and StreamBytesPerSec are what the pass measured of a
	// fetch's latency and streaming rate (the inputs of the gap rule).
	FetchLatency      time.Duration
	StreamBytesPerSec float64
	// Spilled counts entries whose data the read's pass dropped to stay
	// within ReadHoldBytes, and ReadBack those it read back from the log to
	// hand over.
	Spilled  int
	ReadBack int
	// Fenced counts entries of the read's regions that the read's pass
	// skipped because an older owner wrote them above a newer owner's
	// claim (LogStore.Claim); each read logs their offsets once.
	Fenced int64

	// Deprecated: no cost model prices plans any more; always 0.
	EstIndexed, EstScan, EstPlan time.Duration
}

// ErrHoldExceeded is matched by read errors for an entry longer than a
// read of this store may hold (Config.MaxEntryBytes, at most
// ReadHoldBytes): written by a store allowed longer entries. Raise both to
// read it.
var ErrHoldExceeded = replay.ErrHoldExceeded

// Read yields the region's entries with ID >= from, in log order, up to the
// log's end when the read started. See logstore.LogStore.
func (s *LogStore) Read(ctx context.Context, namespace string, region logstore.RegionID, from logstore.EntryID) iter.Seq2[logstore.Entry, error] {
	return s.ReadWith(ctx, namespace, map[logstore.RegionID]logstore.EntryID{region: from}, ReadOptions{})
}

// ReadRegions replays several regions of one namespace in one pass, each
// from its own start, in log order.
func (s *LogStore) ReadRegions(ctx context.Context, namespace string, from map[logstore.RegionID]logstore.EntryID) iter.Seq2[logstore.Entry, error] {
	return s.ReadWith(ctx, namespace, from, ReadOptions{})
}

// ReadWith is ReadRegions with options.
//
// A read from an ID above the namespace's latest entry ID + 1 fails with
// an error matching ErrFutureID (the caller learned that ID somewhere: the
// log lost entries, or the ID is not this log's).
//
// Reads of one namespace that run at the same time (a datanode opening its
// regions) share one pass over the log: a read joins a running pass when
// the pass has not yet handed over any offset the read needs, and every
// fetched batch then feeds all the reads whose regions it holds. Each read
// keeps its own iterator, its own from points, its own order (its entries
// in ID order) and its own cancellation: breaking out of the loop,
// cancelling ctx or closing the store ends it and releases what it holds,
// and the pass goes on for the others. What the pass fetches is shared, and
// so are its failures: a fetch that fails or a record that fails to decode
// ends every read of the pass with that error, as it would end a
// ReadRegions of their regions.
//
// Every entry no longer than Config.MaxEntryBytes is returned, whatever
// else the reads hold: past ReadHoldBytes they spill entries and read them
// back from the log when their turn comes. The store's reads together hold
// at most Config.ReadMemoryBound bytes, apart from the entries their
// callers keep.
func (s *LogStore) ReadWith(ctx context.Context, namespace string, from map[logstore.RegionID]logstore.EntryID, opts ReadOptions) iter.Seq2[logstore.Entry, error] {
	return func(yield func(logstore.Entry, error) bool) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			yield(logstore.Entry{}, kwalerr.Errorf("read %q: %w", namespace, logstore.ErrClosed))
			return
		}
		if err := s.checkNamespace(namespace); err != nil {
			s.metrics.noteRefused(err)
			yield(logstore.Entry{}, err)
			return
		}
		if err := s.undecided(ctx, namespace, from); err != nil {
			yield(logstore.Entry{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.reads.Context(), cancel)()
		var st replay.Stats
		err := s.reads.Read(ctx, replay.Request{Topic: namespace, From: from, NoIndex: opts.NoIndex}, func(e logstore.Entry) bool { return yield(e, nil) }, &st)
		s.metrics.entriesRead.WithLabelValues(namespace).Add(float64(st.Entries))
		s.metrics.bytesRead.WithLabelValues(namespace).Add(float64(st.EntryBytes))
		if opts.Stats != nil {
			*opts.Stats = readStats(st)
		}
		if err == nil {
			// The pass's catch-up may have met an unreadable event of a
			// region read: what it yielded cannot be proven fenced right.
			err = s.undecided(ctx, namespace, from)
		}
		if err != nil {
			if s.reads.Closed() && errors.Is(err, context.Canceled) {
				err = kwalerr.Errorf("read %q: %w", namespace, logstore.ErrClosed)
			}
			s.metrics.noteRefused(err)
			yield(logstore.Entry{}, err)
		}
	}
}

// undecided returns an error naming the first region of from whose
// fencing the claims topic cannot decide (an unreadable event), nil when
// every region's can be.
func (s *LogStore) undecided(ctx context.Context, namespace string, from map[logstore.RegionID]logstore.EntryID) error {
	if len(s.owning.follower.view.Load().unreadable) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	for _, r := range slices.Sorted(maps.Keys(from)) {
		if err := s.decided(ctx, namespace, uint64(r)); err != nil {
			return kwalerr.Errorf("read %q: %w", namespace, err)
		}
	}
	return nil
}

// readStats is the read path's counters as ReadStats.
func readStats(st replay.Stats) ReadStats {
	return ReadStats{
		Fetches: st.Fetches, FetchedBytes: st.FetchedBytes, Records: st.Records, Entries: st.Entries, EntryBytes: st.EntryBytes,
		ScanRanges: st.ScanRanges, IndexRanges: st.IndexRanges, Missing: st.Missing, Plan: st.Plan,
		Stretches: st.Stretches, StretchExtra: st.StretchExtra, MergedGaps: st.MergedGaps, Pass: st.Pass, Reads: st.Reads,
		FetchLatency: st.FetchLatency, StreamBytesPerSec: st.StreamBytesPerSec, Spilled: st.Spilled, ReadBack: st.ReadBack,
		Fenced: st.Fenced,
	}
}

// startIndexForRead lets the index learn the log's bounds (a log start
// raised by retention), unless the topic was dropped since the read began
// (gen: see replay.Gate). Only while the topic has no producer: a
// producer's acknowledgements could be newer than end, and its creation
// made the same check with a fresh end. The store lock keeps a producer
// from being created in between.
//
// When the log ends below the index's watermark w, records the index knew
// of are gone from the log: it returns w and true, and leaves the index as
// it is, so that every read of an affected region fails rather than only
// the first (Start would discard the coverage, and with it the knowledge).
// A producer's Start discards it: new records reuse the lost offsets.
func (s *LogStore) startIndexForRead(topic string, gen uint64, start, end int64) (w int64, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.producers[topic]; ok {
		return 0, false
	}
	if w, covered := s.index.Watermark(topic); covered && w > end {
		return w, true
	}
	s.reads.Gate().Update(topic, gen, func() { s.index.Start(topic, start, end) })
	return 0, false
}
