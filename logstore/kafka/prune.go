package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// ErrCannotPrune is matched by Prune's error when it cannot work out what
// is safe to delete at all: the index is off, or the log lost records the
// index had accounted for. When the index works but every record is still
// needed by some region, Prune deletes nothing and returns nil (PruneWith
// reports the prune point, the holders and the Reason).
var ErrCannotPrune = errors.New("kwal: nothing can be proven safe to prune")

// Prune deletes the namespace's records that no region needs any more
// (an extension of the logstore contract), and returns the first entry ID
// still available (unchanged when nothing could go). A record goes only
// when the index accounts for every offset from the log's start up to it
// and no region still holds an entry there: every region with records
// there has declared them obsolete (Obsolete, by this store or by any
// other writing the topic: the marks are in the log) below that point. So
// a region that never called Obsolete keeps everything from its first
// record on. Prune first brings the index up to the log's end (scanning
// what it does not account for: other stores' records, or a lost or stale
// index), then writes a prune mark stating what it is about to delete,
// then deletes with Kafka's DeleteRecords. A cluster that refuses
// DeleteRecords fails it with a *DeleteRefusedError (the mark stays
// valid); under Config.PruneMode PruneMarkOnly it writes the mark only,
// leaves the deletion to the topic's retention and returns the log's
// start, unchanged. On a topic with a finite retention it also checks how
// close the retention comes to the oldest record still needed
// (PruneStatus.RetentionHeadroom; logged as a warning within
// Config.RetentionWarnMargin). Each step is bounded on its own
// (RequestTimeout per request, ProduceTimeout for the mark); ctx bounds
// the whole.
//
// Afterwards, a read of a region from an ID at or above its Obsolete point
// + 1 returns everything it asks for, whatever was deleted (the prune mark
// proves the region lost none of it). A read from an ID at or below the
// region's Obsolete point, below the new start, fails with ErrPruned
// naming the first ID still available, even when the region had no record
// there: the mark keeps points, not records (index/doc.go, "Pruning").
func (s *LogStore) Prune(ctx context.Context, namespace string) (logstore.EntryID, error) {
	res, err := s.prune(ctx, namespace, false)
	if err != nil {
		s.metrics.noteRefused(err)
		return 0, err
	}
	return res.FirstID, nil
}

// PruneResult is what PruneWith did, or, for a dry run, would do.
type PruneResult struct {
	PruneStatus
	// Deleted is set when records were deleted: those with IDs in
	// [Before, FirstID).
	Deleted bool
	// Marked is set when a prune mark in the log vouches for every record
	// below PrunePoint (> FirstID): this call wrote it, or, under
	// PruneMarkOnly, an earlier one with a point at least as high. Under
	// PruneMarkOnly nothing is deleted (Deleted is false and FirstID stays
	// the log's start): the topic's retention deletes those records, and
	// the mark tells every store and replay that no region needs them.
	Marked bool
	// Before is the log's first ID before the call.
	Before logstore.EntryID
}

// PruneStatus reports what holds pruning back in a namespace: the prune
// point, and the regions that keep the log from shrinking beyond it with
// the bytes each one pins (an extension of the logstore contract).
type PruneStatus struct {
	Namespace string
	// FirstID is the first ID the log holds (after a prune: its new start);
	// LatestID is LatestEntryID.
	FirstID, LatestID logstore.EntryID
	// PrunePoint is the lowest ID Prune must keep: no region needs any
	// record below it. It equals FirstID when nothing can go.
	PrunePoint logstore.EntryID
	// LogBytes is the partition's size on the broker (0 when the broker
	// does not report it); PrunableBytes estimates the bytes below
	// PrunePoint (after a prune: the bytes it deleted). Estimates spread
	// LogBytes evenly over the log's offsets.
	LogBytes, PrunableBytes int64
	// Holders are the regions that still need records, ordered by their
	// first needed record: the first holds PrunePoint back.
	Holders []PruneHolder
	// Reason says why nothing can be pruned when PrunePoint == FirstID.
	Reason string

	// Retention is the topic's retention as this call described it (zero
	// when RetentionErr is set). On a finite one, the fields below say how
	// close it comes to the oldest record a region still needs, the one at
	// PrunePoint (retentionrisk.go explains the estimates).
	Retention Retention
	// OldestNeededAt is the timestamp the broker keeps for that record;
	// zero when the retention is infinite or no record is needed.
	OldestNeededAt time.Time
	// RetentionHeadroom is how long that record has before the retention
	// may delete it (negative: it may be gone any moment), by the limit
	// RetentionLimit names ("retention.ms" or "retention.bytes", whichever
	// comes first). RetentionLimit is "" when no headroom applies: an
	// infinite retention, or no record needed.
	RetentionHeadroom time.Duration
	RetentionLimit    string
	// RetentionAtRisk is set when RetentionHeadroom is less than
	// Config.RetentionWarnMargin (the call then logged a warning).
	RetentionAtRisk bool
	// RetentionErr is set when the check could not be made (the configs
	// could not be described, or the record's timestamp not fetched); the
	// rest of the status stands.
	RetentionErr error
}

// PruneHolder is a region that keeps records from being pruned.
type PruneHolder struct {
	Region logstore.RegionID
	// FirstNeeded is the ID of the region's first record still needed.
	FirstNeeded logstore.EntryID
	// ObsoleteUpTo is the region's Obsolete point (0 when it never
	// declared one).
	ObsoleteUpTo logstore.EntryID
	// PinnedBytes estimates the bytes between this region's first needed
	// record and the next holder's: what Prune could delete once this
	// region (and every holder before it) declared them obsolete.
	PinnedBytes int64
	// Owner and Epoch are the region's owner and epoch as of its last
	// committed claim ("" and 0: never claimed; LogStore.Claim).
	Owner string
	Epoch uint64
}

// PruneOptions tune PruneWith.
type PruneOptions struct {
	// DryRun reports what Prune would do without writing or deleting.
	DryRun bool
}

// PruneWith is Prune with options, reporting what was (or would be)
// deleted and what holds the rest back.
func (s *LogStore) PruneWith(ctx context.Context, namespace string, opts PruneOptions) (PruneResult, error) {
	res, err := s.prune(ctx, namespace, opts.DryRun)
	s.metrics.noteRefused(err)
	return res, err
}

func (s *LogStore) prune(ctx context.Context, namespace string, dryRun bool) (res PruneResult, err error) {
	if err := s.begin("prune"); err != nil {
		return PruneResult{}, err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return PruneResult{}, err
	}
	defer func() { s.metrics.prune.observe(namespace, dryRun, res, err) }()
	g := s.index
	if g == nil {
		return PruneResult{}, kwalerr.Errorf("prune %q: the index is off: %w", namespace, ErrCannotPrune)
	}
	// Each step is bounded on its own (a request by RequestTimeout, the mark
	// by ProduceTimeout, the catch-up scan fetch by fetch), not the whole
	// walk: the catch-up of a lost index scans the whole topic.
	gen := s.reads.Gate().Generation(namespace)
	start, end, err := s.offsetsWithin(ctx, namespace)
	if err != nil {
		return PruneResult{}, kwalerr.Errorf("prune %q: %w", namespace, err)
	}
	if err := s.catchUpIndex(ctx, namespace, gen, start, end); err != nil {
		return PruneResult{}, kwalerr.Errorf("prune %q: bringing the index up to the log's end: %w", namespace, err)
	}
	// The prune mark states each region's epochs as of this look, and
	// Obsolete points that waited for a pending claim count from here if
	// it committed (writePruneMark).
	if err := s.reads.SyncMarks(ctx, namespace); err != nil {
		return PruneResult{}, kwalerr.Errorf("prune %q: looking at the claims topic: %w", namespace, err)
	}
	st, point, need, err := s.pruneStatus(ctx, g, namespace, start, end)
	if err != nil {
		return PruneResult{}, kwalerr.Errorf("prune %q: %w", namespace, err)
	}
	s.retentionRisk(ctx, &st, need, end)
	s.warnRetention(st)
	res = PruneResult{PruneStatus: st, Before: logstore.EntryID(start + 1)}
	var pinned int64
	if len(st.Holders) > 0 {
		pinned = st.Holders[0].PinnedBytes
	}
	s.metrics.prunePinned.WithLabelValues(namespace).Set(float64(pinned))
	if point <= start || dryRun {
		return res, nil
	}
	markOnly := s.cfg.PruneMode == PruneMarkOnly
	if known, ok := s.reads.KnownPrunePoint(namespace, end); markOnly && ok && known >= point {
		// The log start does not move under PruneMarkOnly, so the point
		// comes back every round: the mark already in the log vouches for
		// everything below it, and the retention deletes by it.
		res.Marked = true
		return res, nil
	}
	if err := s.writePruneMark(ctx, namespace, gen, g, start, end, point); err != nil {
		return PruneResult{}, kwalerr.Errorf("prune %q below offset %d: %w", namespace, point, err)
	}
	res.Marked = true
	if markOnly {
		s.log.Debug("kwal: marked obsolete; the topic's retention deletes", "topic", namespace, "before_offset", point)
		return res, nil
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: namespace, Partition: partition, At: point})
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.adm.DeleteRecords(dctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if s.deleteRefused(ctx, err) {
			return PruneResult{}, &DeleteRefusedError{Namespace: namespace, Below: point, Err: err}
		}
		return PruneResult{}, kwalerr.Errorf("prune %q below offset %d: %w", namespace, point, err)
	}
	// Routine (the background pruner runs every PruneInterval); the deleted
	// span is in the result and the metrics.
	s.log.Debug("kwal: pruned", "topic", namespace, "before_offset", point, "first_id", point+1)
	res.Deleted = true
	res.FirstID = logstore.EntryID(point + 1)
	return res, nil
}

// pruneStatus computes the prune point (an offset) and describes what holds
// it back. need is the offset of the oldest record a region still needs
// (the log's start when the index cannot tell), -1 when none is.
func (s *LogStore) pruneStatus(ctx context.Context, g *index.Collector, topic string, start, end int64) (st PruneStatus, point, need int64, err error) {
	st = PruneStatus{Namespace: topic, FirstID: logstore.EntryID(start + 1), LatestID: logstore.EntryID(end), PrunePoint: logstore.EntryID(start + 1)}
	st.LogBytes = s.logBytes(ctx, topic)
	if end <= start {
		st.Reason = "the log is empty"
		return st, start, -1, nil
	}
	ts, ok := g.Stats(topic, true)
	if !ok || !ts.Covered || ts.C > start {
		st.Reason = fmt.Sprintf("the index does not account for the log from its start (offset %d)", start)
		return st, start, start, nil
	}
	point = ts.W
	for _, r := range ts.Regions {
		if r.Entries > 0 {
			point = min(point, r.First)
			st.Holders = append(st.Holders, PruneHolder{Region: logstore.RegionID(r.Region), FirstNeeded: logstore.EntryID(r.First + 1), ObsoleteUpTo: logstore.EntryID(r.ObsoleteBelow)})
		}
	}
	point = max(point, start)
	s.ownersInto(ctx, topic, st.Holders)
	slices.SortFunc(st.Holders, func(a, b PruneHolder) int {
		return cmp.Or(cmp.Compare(a.FirstNeeded, b.FirstNeeded), cmp.Compare(a.Region, b.Region))
	})
	perOffset := 0.0
	if end > start {
		perOffset = float64(st.LogBytes) / float64(end-start)
	}
	for i := range st.Holders {
		next := ts.W
		if i+1 < len(st.Holders) {
			next = int64(st.Holders[i+1].FirstNeeded) - 1
		}
		st.Holders[i].PinnedBytes = int64(float64(next-int64(st.Holders[i].FirstNeeded)+1) * perOffset)
	}
	st.PrunePoint = logstore.EntryID(point + 1)
	st.PrunableBytes = int64(float64(point-start) * perOffset)
	if point <= start {
		if len(st.Holders) > 0 {
			h := st.Holders[0]
			st.Reason = fmt.Sprintf("region %d still needs its entries from ID %d (its Obsolete point is %d)", h.Region, h.FirstNeeded, h.ObsoleteUpTo)
		} else {
			st.Reason = "no record below the index's watermark is obsolete"
		}
	}
	need = -1
	if len(st.Holders) > 0 {
		need = point
	}
	return st, point, need, nil
}

// logBytes returns the partition's size as its leader reports it, and
// exports it as kwal_log_bytes; 0 when the broker does not say (the figures
// are then left at 0, and the metric as it was).
func (s *LogStore) logBytes(ctx context.Context, topic string) int64 {
	var set kadm.TopicsSet
	set.Add(topic, partition)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	dirs, err := s.adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		s.log.Debug("kwal: describing log dirs", "topic", topic, "err", err)
	}
	var size int64
	found := false
	dirs.Each(func(d kadm.DescribedLogDir) {
		if p, ok := d.Topics.Lookup(topic, partition); ok {
			size, found = max(size, p.Size), true
		}
	})
	if found {
		s.metrics.prune.logBytes.WithLabelValues(topic).Set(float64(size))
	}
	return size
}

// catchUpIndex scans what the index does not account for between the log's
// start and end (another store's records, or a lost or stale index), so
// that it accounts for the whole log and has taken in every mark in it.
func (s *LogStore) catchUpIndex(ctx context.Context, topic string, gen uint64, start, end int64) error {
	g := s.index
	if g == nil || end <= start {
		return nil
	}
	if w, lost := s.startIndexForRead(topic, gen, start, end); lost {
		// Records the index accounted for are gone from the log: what the
		// index says past end no longer describes it, and reads of the
		// regions concerned fail until a producer starts over.
		return kwalerr.Errorf("prune %q: the log ends at offset %d, below offsets the index accounted for (up to %d): records were lost: %w", topic, end, w, ErrCannotPrune)
	}
	// With a producer open, Start was skipped: records deleted below start
	// (by retention) must not keep holding the prune point.
	g.LogStarts(topic, start)
	ts, _ := g.Stats(topic, false)
	var ranges []index.Range
	if !ts.Covered || ts.C > start {
		ranges = append(ranges, index.Range{Start: start, End: end, Scan: true})
	} else if ts.W < end {
		ranges = append(ranges, index.Range{Start: ts.W, End: end, Scan: true})
	}
	if len(ranges) == 0 {
		return nil
	}
	// Records that are not kwal's hold no entry: they may go. A corrupt
	// kwal record may be any region's entry: it fails the catch-up, and so
	// Prune, which then deletes nothing.
	return s.reads.ScanIntoIndex(ctx, topic, gen, ranges, end)
}

// writePruneMark writes the mark that vouches for deleting below point:
// every region the index knows an Obsolete point of, merged with the table
// of the prune mark that vouched for the current log start (whose regions'
// records below it are gone from the index). When no mark vouches for the
// start (retention moved it, or nothing was ever pruned and start is 0),
// the new mark speaks for [start, point) only, or [0, point) when start is
// 0.
//
// Each region's statement carries the region's highest epoch in this
// store's view of the claims topic, pending claims included (0: never
// claimed), as of the look Prune took before. Why that one: the index took
// in only statements that no claim in a view caught up after them fenced,
// and held out those a pending claim might fence (internal/replay,
// fencedmarks.go), so a claim can fence a mark the prune relied on only if
// this view missed it (or the store fences "off" and took its own late mark
// in); with this epoch the rule ignores the statement exactly when a claim
// the view missed committed below this mark, and reads of the region from
// below the start then fail with ErrPruned instead of being told nothing
// went. The last committed epoch would have that happen for every claim
// pending during a prune (a lease long, under lease fencing), and epoch 0
// for every claimed region. It still happens, needlessly, to a claim whose
// record lands between the look and this mark's write.
//
// A statement of the vouching mark that is fenced in this store's view
// goes into the new table as it was, with its own epoch: the rule fences
// it at the new mark's offset too (claims rise with offsets), whereas
// merging this store's points into it would vouch for records that
// statement no longer speaks for.
func (s *LogStore) writePruneMark(ctx context.Context, topic string, gen uint64, g *index.Collector, start, end, point int64) error {
	m := record.Mark{Prune: true, From: start, Point: point}
	epochOf, err := s.highestEpochs(ctx, topic)
	if err != nil {
		return err
	}
	table := map[uint64]record.RegionPoint{}
	fenced := map[uint64]bool{}
	if start > 0 {
		if pm, at, ok := s.reads.VouchingMark(ctx, topic, gen, start, end); ok {
			m.From = pm.From
			for _, rp := range pm.Obsolete {
				if (readHost{s}).Fenced(topic, rp.Region, at, rp.Epoch) {
					table[rp.Region], fenced[rp.Region] = rp, true
					continue
				}
				table[rp.Region] = record.RegionPoint{Region: rp.Region, Before: rp.Before, Epoch: epochOf(rp.Region)}
			}
		}
	} else {
		m.From = 0
	}
	ts, _ := g.Stats(topic, true)
	for _, r := range ts.Regions {
		if r.ObsoleteBelow > 0 && !fenced[r.Region] {
			table[r.Region] = record.RegionPoint{Region: r.Region, Before: max(table[r.Region].Before, r.ObsoleteBelow), Epoch: epochOf(r.Region)}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(table)) {
		m.Obsolete = append(m.Obsolete, table[id])
	}
	off, err := s.writeMark(ctx, topic, m)
	if err != nil {
		return err
	}
	s.reads.NoteMark(topic, gen, off, m)
	return nil
}

// highestEpochs returns each region's highest epoch, pending or committed,
// in the store's view of the claims topic (0: never claimed).
func (s *LogStore) highestEpochs(ctx context.Context, ns string) (func(region uint64) uint64, error) {
	v := s.owning.follower.view.Load()
	if !v.has(ns) {
		return func(uint64) uint64 { return 0 }, nil
	}
	tid, err := s.topicID(ctx, ns)
	if err != nil {
		return nil, err
	}
	return func(region uint64) uint64 {
		return v.region(claim.ID{Namespace: ns, TopicID: tid, Region: region}).MaxEpoch()
	}, nil
}

// pruneLoop runs Prune on every namespace the index knows, every interval,
// until stop is closed. Close stops it before the index closes.
func (s *LogStore) pruneLoop(g *index.Collector, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, ns := range g.Topics() {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			_, err := s.Prune(ctx, ns)
			cancel()
			switch {
			case err == nil, errors.Is(err, ErrCannotPrune), errors.Is(err, ErrUnknownNamespace):
			case errors.Is(err, logstore.ErrClosed):
				return
			default:
				s.log.Warn("kwal: background prune failed", "topic", ns, "err", err)
			}
		}
	}
}
