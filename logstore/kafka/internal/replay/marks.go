package replay

import (
	"sync"

	"github.com/kwal/kwal/logstore/kafka/record"
)

// Marks are records that hold no entry but a statement about the log
// (record.KindMark): an Obsolete mark says a region needs none of its
// records below a point; a prune mark, written by Prune before it deletes,
// says what every record in [From, Point) was (index/doc.go, "Pruning",
// gives the argument). Every node reads them like any record, so every node
// learns the same Obsolete points and the same proofs from the log itself.
//
// Each region's statement carries the epoch it was made under, and counts
// only where the fencing rule would not fence a record of that epoch at
// the mark's offset (fencedmarks.go).

// marks is what the store learned from the marks it wrote or read: per
// topic, the prune mark with the highest Point, and how far the log was
// searched for one (so that a topic whose start retention moved, with no
// mark to vouch for it, is searched once, not by every read).
type marks struct {
	mu       sync.Mutex
	prune    map[string]pruneMark
	searched map[string]int64 // every mark below it was noted
	// undecided holds, per topic, the statements the index has not taken
	// in because no claim decided them yet (fencedmarks.go).
	undecided map[string]map[statementAt]undecidedStatement
}

func (k *marks) init() {
	k.prune, k.searched = make(map[string]pruneMark), make(map[string]int64)
	k.undecided = make(map[string]map[statementAt]undecidedStatement)
}

// pruneMark is a prune mark and the offset it was read from or written at.
type pruneMark struct {
	offset int64
	m      record.Mark
}

// NoteMark takes in a mark read or written at offset: its Obsolete points
// that count go to the index (takeStatements), and a prune mark with a
// higher Point than any known becomes the topic's proof (its regions'
// statements are judged where it is used: proveNothingPruned). gen is the
// topic's generation when the caller began (Gate): a mark of a topic
// deleted since sets nothing.
func (r *Reads) NoteMark(topic string, gen uint64, offset int64, m record.Mark) {
	r.gate.update(topic, gen, func() {
		if r.opts.Index != nil {
			r.takeStatements(topic, gen, offset, m)
		}
		if !m.Prune {
			return
		}
		r.marks.mu.Lock()
		defer r.marks.mu.Unlock()
		if cur, ok := r.marks.prune[topic]; !ok || m.Point > cur.m.Point || (m.Point == cur.m.Point && m.From < cur.m.From) {
			r.marks.prune[topic] = pruneMark{offset: offset, m: m}
		}
	})
}

// noteMarkPart hands a decoded mark record to NoteMark.
func (r *Reads) noteMarkPart(topic string, gen uint64, offset int64, p record.Part) {
	m, err := record.DecodeMark(p.Data)
	if err != nil { // Decode checked the payload already
		r.log.Warn("kwal: ignoring an undecodable mark", "topic", topic, "offset", offset, "err", err)
		return
	}
	r.NoteMark(topic, gen, offset, m)
}

// knownPruneMark returns the topic's prune mark with the highest Point known
// to this store, if any.
func (k *marks) known(topic string) (pruneMark, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pm, ok := k.prune[topic]
	return pm, ok
}

// vouches reports whether pm speaks for a log that starts at start and ends
// at end: its Point is at or above start, and it lies below end (a mark at
// or above the end belongs to a topic since deleted and recreated).
func (pm pruneMark) vouches(start, end int64) bool {
	return pm.m.Point >= start && pm.offset < end
}

// forget drops what the store knew of a deleted topic's marks.
func (k *marks) forget(topic string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.prune, topic)
	delete(k.searched, topic)
	delete(k.undecided, topic)
}

// searchedTo returns the offset below which every mark of the topic was
// noted by an earlier search.
func (k *marks) searchedTo(topic string) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.searched[topic]
}

// setSearchedTo records that every mark below end was noted, unless the
// topic was deleted since generation gen.
func (r *Reads) setSearchedTo(topic string, gen uint64, end int64) {
	r.gate.update(topic, gen, func() {
		r.marks.mu.Lock()
		defer r.marks.mu.Unlock()
		r.marks.searched[topic] = max(r.marks.searched[topic], end)
	})
}
