package kafka

import (
	"context"
	"math"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Retention danger. A topic with a finite retention deletes records by
// age or size whatever the regions still need; Prune (and PruneWith, dry
// runs too) says how close it is to the oldest record a region needs: the
// record at the prune point, the first one Prune must keep.
//
//   - By age (retention.ms): the broker deletes a segment once its newest
//     record is older than retention.ms, so the needed record lasts at
//     least retention.ms from its own timestamp. Headroom = retention.ms −
//     its age. The timestamp is the broker's (the producer's CreateTime or
//     the LogAppendTime), compared with this host's clock: a skew between
//     the two shifts the headroom by as much.
//   - By size (retention.bytes): the broker deletes the oldest segments
//     while the partition is larger than retention.bytes, so the needed
//     record goes once the bytes from it on (LogBytes − PrunableBytes)
//     reach it. As a time: at the rate the log grew since the needed
//     record was written (needed bytes over its age), headroom = age ×
//     (retention.bytes − needed) / needed. Only when the broker reports
//     the partition's size.
//
// The smaller of the two is the headroom, and RetentionLimit names its
// limit. It costs one DescribeConfigs per call, and on a finite retention
// with a record still needed one fetch of a single batch (Reads.RecordTime).

// retentionRisk fills st's retention fields; need is the offset of the
// oldest record a region still needs (-1: none), end the log's end.
func (s *LogStore) retentionRisk(ctx context.Context, st *PruneStatus, need, end int64) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	r, err := s.describeRetention(rctx, st.Namespace)
	cancel()
	if err != nil {
		st.RetentionErr = err
		return
	}
	st.Retention = r
	// The gauges follow a retention an operator changes after first use.
	s.metrics.retentionSeconds.WithLabelValues(st.Namespace).Set(retentionSeconds(r.Ms))
	s.metrics.retentionBytes.WithLabelValues(st.Namespace).Set(float64(r.Bytes))
	if !r.Finite() || need < 0 || need >= end {
		return
	}
	ts, _, err := s.reads.RecordTime(ctx, st.Namespace, need)
	if err != nil {
		st.RetentionErr = kwalerr.Errorf("namespace %q: the timestamp of the oldest record still needed (offset %d): %w", st.Namespace, need, err)
		return
	}
	st.OldestNeededAt = ts
	age := time.Since(ts)
	set := func(h time.Duration, limit string) {
		if st.RetentionLimit == "" || h < st.RetentionHeadroom {
			st.RetentionHeadroom, st.RetentionLimit = h, limit
		}
	}
	if r.Ms >= 0 {
		set(time.Duration(r.Ms)*time.Millisecond-age, "retention.ms")
	}
	if needed := st.LogBytes - st.PrunableBytes; r.Bytes >= 0 && st.LogBytes > 0 && needed > 0 {
		if h, ok := sizeHeadroom(age, needed, r.Bytes); ok {
			set(h, "retention.bytes")
		}
	}
	st.RetentionAtRisk = st.RetentionLimit != "" && st.RetentionHeadroom < s.cfg.RetentionWarnMargin
}

// sizeHeadroom is the time until needed bytes grow to limit at the rate
// they grew over age (see above). Without a rate (a record stamped in this
// host's future), it is 0 once needed reached limit, and unknown before.
func sizeHeadroom(age time.Duration, needed, limit int64) (time.Duration, bool) {
	if age <= 0 {
		return 0, needed >= limit
	}
	h := float64(age) * (float64(limit) - float64(needed)) / float64(needed)
	return time.Duration(max(min(h, math.MaxInt64/2), math.MinInt64/2)), true
}

// warnRetention logs, once per Prune or PruneWith call, that the topic's
// retention comes within RetentionWarnMargin of a record a region needs.
func (s *LogStore) warnRetention(st PruneStatus) {
	if !st.RetentionAtRisk {
		return
	}
	args := []any{"namespace", st.Namespace, "headroom", st.RetentionHeadroom.Round(time.Second), "margin", s.cfg.RetentionWarnMargin,
		"limit", st.RetentionLimit, "retention", st.Retention.String(), "oldest_needed_at", st.OldestNeededAt, "first_needed_id", st.PrunePoint}
	if len(st.Holders) > 0 {
		args = append(args, "region", st.Holders[0].Region)
	}
	s.log.Warn("kwal: the topic's retention will soon delete entries a region still needs: flush the region holding the prune point back (Obsolete), or raise the topic's "+st.RetentionLimit, args...)
}
