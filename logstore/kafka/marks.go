package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// Marks are records that hold no entry but a statement about the log
// (record.KindMark): an Obsolete mark says a region needs none of its
// records below a point; a prune mark, written by Prune before it deletes,
// says what every record in [From, Point) was (index/doc.go, "Pruning",
// gives the argument). Every node reads them like any record, so every node
// learns the same Obsolete points and the same proofs from the log itself.

// knownMarks is what a store learned from the marks it wrote or read: per
// topic, the prune mark with the highest Point, and how far the log was
// searched for one (so that a topic whose start retention moved, with no
// mark to vouch for it, is searched once, not by every read).
type knownMarks struct {
	mu       sync.Mutex
	prune    map[string]pruneMark
	searched map[string]int64 // every mark below it was noted
}

// pruneMark is a prune mark and the offset it was read from or written at.
type pruneMark struct {
	offset int64
	m      record.Mark
}

// noteMark takes in a mark read or written at offset: its Obsolete points
// go to the index, and a prune mark with a higher Point than any known
// becomes the topic's proof. gen is the topic's generation when the caller
// began (indexGate): a mark of a topic deleted since must not set points
// in the index or proofs of a topic of the same name created later.
func (s *LogStore) noteMark(topic string, gen uint64, offset int64, m record.Mark) {
	s.gate.update(topic, gen, func() {
		if s.index != nil {
			for _, rp := range m.Obsolete {
				s.index.Obsolete(topic, rp.Region, rp.Before)
			}
		}
		if !m.Prune {
			return
		}
		s.marks.mu.Lock()
		defer s.marks.mu.Unlock()
		if cur, ok := s.marks.prune[topic]; !ok || m.Point > cur.m.Point || (m.Point == cur.m.Point && m.From < cur.m.From) {
			s.marks.prune[topic] = pruneMark{offset: offset, m: m}
		}
	})
}

// knownPruneMark returns the topic's prune mark with the highest Point known
// to this store, if any.
func (s *LogStore) knownPruneMark(topic string) (pruneMark, bool) {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	pm, ok := s.marks.prune[topic]
	return pm, ok
}

// vouches reports whether pm speaks for a log that starts at start and ends
// at end: its Point is at or above start, and it lies below end (a mark at
// or above the end belongs to a topic since deleted and recreated).
func (pm pruneMark) vouches(start, end int64) bool {
	return pm.m.Point >= start && pm.offset < end
}

// forgetMarks drops what the store knew of a deleted topic's marks.
func (s *LogStore) forgetMarks(topic string) {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	delete(s.marks.prune, topic)
	delete(s.marks.searched, topic)
}

// searchedTo returns the offset below which every mark of the topic was
// noted by an earlier search.
func (s *LogStore) searchedTo(topic string) int64 {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	return s.marks.searched[topic]
}

// setSearchedTo records that every mark below end was noted, unless the
// topic was deleted since generation gen.
func (s *LogStore) setSearchedTo(topic string, gen uint64, end int64) {
	s.gate.update(topic, gen, func() {
		s.marks.mu.Lock()
		defer s.marks.mu.Unlock()
		s.marks.searched[topic] = max(s.marks.searched[topic], end)
	})
}

// writeMark appends a mark to the topic (acks=all, idempotent, like every
// append) and returns its offset; the index learns the offset as one that
// holds no entry, and the mark is noted.
func (s *LogStore) writeMark(ctx context.Context, topic string, gen uint64, m record.Mark) (int64, error) {
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
		return 0, fmt.Errorf("kwal: write a mark to %q: %w", topic, err)
	}
	if s.index != nil {
		s.index.Observe(topic, []index.Run{{Start: rec.Offset, Count: 1, Foreign: true}})
	}
	s.noteMark(topic, gen, rec.Offset, m)
	return rec.Offset, nil
}
