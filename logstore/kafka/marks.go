package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// writeMark appends a mark (record.KindMark: an Obsolete or a prune mark)
// to the topic (acks=all, idempotent, like every append) and returns its
// offset; the index learns the offset as one that holds no entry. The
// caller hands the mark to the read path (Reads.NoteMark) once it may
// count: the index takes its points in for good, and an Obsolete mark
// counts only once the check after its write passed.
func (s *LogStore) writeMark(ctx context.Context, topic string, m record.Mark) (int64, error) {
	// The producer's creation checks that the topic exists and starts the
	// index's accounting of it, as for an append.
	if _, err := s.producer(ctx, topic, false); err != nil {
		return 0, err
	}
	p := record.MarkPart(m)
	rec := &kgo.Record{Topic: topic, Partition: partition, Key: p.Key(), Value: p.Data}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
	defer cancel()
	if err := s.markClient.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, kwalerr.Errorf("write a mark: %w", err)
	}
	if s.index != nil {
		s.index.Observe(topic, []index.Run{{Start: rec.Offset, Count: 1, Foreign: true}})
	}
	return rec.Offset, nil
}
