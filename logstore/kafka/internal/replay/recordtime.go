package replay

import (
	"context"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
)

// RecordTime returns the timestamp of topic's first record at or above
// offset off, and that record's offset: the time the broker's retention.ms
// counts from (the producer's CreateTime, or the broker's LogAppendTime on
// a topic that uses it; kgo reports whichever the batch carries). It is one
// fetch that asks for a single byte, which the broker answers with the one
// record batch holding off (a batch is returned whole), within
// RequestTimeout.
func (r *Reads) RecordTime(ctx context.Context, topic string, off int64) (time.Time, int64, error) {
	var ld leader
	res, err := r.fetchAt(ctx, topic, &ld, off, 1, "scan")
	if err != nil {
		return time.Time{}, 0, err
	}
	for b, err := range r.batches(topic, &res) {
		if err != nil {
			return time.Time{}, 0, err
		}
		for _, rec := range b.records {
			if rec.Offset >= off {
				return rec.Timestamp, rec.Offset, nil
			}
		}
	}
	return time.Time{}, 0, kwalerr.Errorf("read %q: the fetch at offset %d returned no record at or above it (%d bytes)", topic, off, res.bytes)
}

// KnownPrunePoint returns the Point of the topic's prune mark with the
// highest Point this store wrote or read, when that mark lies below end (a
// mark at or above the end belongs to a topic since deleted and
// recreated).
func (r *Reads) KnownPrunePoint(topic string, end int64) (int64, bool) {
	pm, ok := r.marks.known(topic)
	if !ok || pm.offset >= end {
		return 0, false
	}
	return pm.m.Point, true
}
