package kafka

import (
	"fmt"

	"github.com/kwal/kwal/logstore"
)

// Offsets of a kwal topic are contiguous: kwal's producers are idempotent
// and not transactional, topics are created with cleanup.policy=delete
// (Validate refuses compaction), and the log only loses a prefix (retention,
// Prune). So an offset inside the range a read covers either holds a record
// or belongs to a control batch (a transaction marker another program
// wrote); anything else was deleted from the middle of the log (damage,
// compaction turned on by hand), and the entries there are lost. Likewise
// the log never ends below an offset the store's index accounted for,
// unless the log lost its tail (a truncated or damaged segment, unclean
// leader election) or the topic was recreated. The reader checks both and
// fails with a logstore.MissingError naming the offsets (or, with
// SkipCorrupt, counts and logs them), rather than go on as if the entries
// had never been written.

// span is the offsets [from, to).
type span struct{ from, to int64 }

// controlSpans returns the offsets of the complete control batches in a
// fetch response's record batches.
func controlSpans(raw []byte) []span {
	var out []span
	for b := range batchFrames(raw) {
		if b.control && b.next > 0 {
			out = append(out, span{from: b.base, to: b.next})
		}
	}
	return out
}

// gap checks offsets [from, to) that the response held no record for: they
// must all be control batches' offsets. Otherwise the read fails with a
// MissingError naming the first missing run, or, with SkipCorrupt, counts
// every missing offset, logs each run and returns the runs (which the
// index must not account for: see consume).
func (r *reader) gap(from, to int64, control []span) ([]span, error) {
	var missing []span
	for from < to {
		covered := false
		for _, c := range control {
			if c.from <= from && from < c.to {
				from, covered = min(c.to, to), true
				break
			}
		}
		if covered {
			continue
		}
		// The missing run ends at the next control batch, or at to.
		end := to
		for _, c := range control {
			if c.from > from && c.from < end {
				end = c.from
			}
		}
		if !r.skipCorrupt() {
			return nil, &logstore.MissingError{Namespace: r.topic, From: from, To: end,
				Why: fmt.Sprintf("the fetched records jump from offset %d to %d, and no transaction marker fills the gap (records deleted from the middle of the log)", from, end)}
		}
		r.stats.Missing += end - from
		r.s.skipMissing(r.topic, end-from, from, end, "gap in the log")
		missing = append(missing, span{from, end})
		from = end
	}
	return missing, nil
}

// skipMissing counts and logs n missing offsets within [from, to), skipped
// under SkipCorrupt.
func (s *LogStore) skipMissing(topic string, n, from, to int64, why string) {
	s.metrics.skipped.WithLabelValues("missing").Add(float64(n))
	s.log.Warn("kwal: offsets missing from the log; their entries are lost", "topic", topic, "from", from, "to", to, "why", why)
}

// lostTail is called when the log of topic ends (at end) below the index's
// watermark w: records the index knew of are gone. A read of regions
// (from: first offset wanted, per region) with records in [end, w) fails
// with a MissingError, or, with SkipCorrupt, counts them in st and logs
// them; a read of other regions goes on.
func (s *LogStore) lostTail(topic string, from map[uint64]int64, end, w int64, st *ReadStats) error {
	past := make(map[uint64]int64, len(from))
	for region, off := range from {
		past[region] = max(off, end)
	}
	var lost []span
	var n int64
	for _, rg := range s.index.Plan(topic, past, w).Ranges {
		if !rg.Scan {
			lost = append(lost, span{rg.Start, rg.End})
			n += rg.End - rg.Start
		}
	}
	s.log.Error("kwal: the log ends below offsets the index accounted for: records were lost (a truncated or damaged log, or a recreated topic)",
		"topic", topic, "log_end", end, "index_watermark", w, "read_regions_affected", len(lost) > 0)
	if len(lost) == 0 {
		return nil
	}
	why := fmt.Sprintf("the log ends at offset %d, but the index knows of records of the regions read at offsets [%d, %d) (a truncated or damaged log, lost broker data, or a recreated topic)",
		end, lost[0].from, lost[len(lost)-1].to)
	if !s.cfg.SkipCorrupt {
		return &logstore.MissingError{Namespace: topic, From: end, To: w, Why: why}
	}
	st.Missing += n
	s.skipMissing(topic, n, lost[0].from, lost[len(lost)-1].to, why)
	return nil
}
