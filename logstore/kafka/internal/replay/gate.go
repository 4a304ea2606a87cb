package replay

import "sync"

// Gate orders the index updates that reads make (Start from a read,
// ObserveScan) with DeleteNamespace and Close, which a read may race:
// without it, a read that started before its topic was deleted could
// re-create the dropped topic's index from what it decoded, and a read
// still running when Close returned could change an index already closed
// (and persist nothing, or half).
//
// A read takes the topic's generation when it starts and makes each index
// update through update, which runs it only while the generation is
// unchanged and the store is open. DeleteNamespace drops the topic
// (Reads.Drop) before Collector.Drop, and Close closes the gate before
// Collector.Close; both take the write lock, so an update already running
// finishes before they go on and none runs after. Marks a call learns (its
// Obsolete points, prune proofs) go through the gate too: a read that ran
// across DeleteNamespace must not give a topic of the same name created
// later the old log's points.
type Gate struct {
	mu     sync.RWMutex
	closed bool
	gen    map[string]uint64 // per topic: how many times DeleteNamespace dropped it

	closedHook func() // tests: called when close has closed the gate
}

// generation returns the topic's current generation, for a read starting.
func (g *Gate) generation(topic string) uint64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.gen[topic]
}

// Generation returns the topic's current generation, for a call that
// begins and may update the index later.
func (g *Gate) Generation(topic string) uint64 { return g.generation(topic) }

// Update runs f unless the topic was dropped since generation gen was
// taken, or the store closed; it reports whether f ran.
func (g *Gate) Update(topic string, gen uint64, f func()) bool { return g.update(topic, gen, f) }

// update runs f unless the topic was dropped since generation gen was
// taken, or the store closed; it reports whether f ran.
func (g *Gate) update(topic string, gen uint64, f func()) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed || g.gen[topic] != gen {
		return false
	}
	f()
	return true
}

// drop ends every read's updates of the topic.
func (g *Gate) drop(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen == nil {
		g.gen = make(map[string]uint64)
	}
	g.gen[topic]++
}

// close ends every read's updates.
func (g *Gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	if g.closedHook != nil {
		g.closedHook()
	}
}
