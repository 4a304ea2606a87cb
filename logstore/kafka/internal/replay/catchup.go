package replay

import (
	"github.com/kwal/kwal/logstore/kafka/index"
)

// The index's catch-up after a restart.
//
// A node that restarts loads its index as of its last checkpoint: it
// accounts for [C, W), and the log may go on past W (appends acknowledged
// after that checkpoint, or another store's records). The index's span
// grows only through known offsets, so the runs of new appends, all above
// the gap [W, end), stay pending: W does not move, and a checkpoint has
// nothing new to write. Before this catch-up, only a read that scanned the
// gap moved W again; a node that restarted and only appended (no replay)
// persisted none of its index progress, and a second crash lost it.
//
// So when a producer opens a topic whose index lies below the log end, the
// store scans [W, end) in the background, as a read would, and the index
// takes it in through ObserveScan: W moves up through the gap and the
// pending runs, and checkpoints go on from there. The scan is bounded by
// the end known when the producer opened (the producer's own records above
// it are observed as they are acknowledged; other stores' records there
// are left to reads and Prune, see index/doc.go point 8). At most
// one catch-up runs at a time in a store (a pass each: ReadMemoryBound),
// one per topic; each is counted with the reads' goroutines, ends when
// Close cancels the reads, and updates the index only through the gate
// (DeleteNamespace and Close stop it). A catch-up that fails (a corrupt
// record, the broker gone) keeps what it scanned before the failure, and
// is logged: the next read's scan or Prune's catch-up meets the rest.

// catchUpSlots bounds the catch-ups running at once.
const catchUpSlots = 1

// catchUps tracks the running catch-ups.
type catchUps struct {
	slots   chan struct{}
	running map[string]chan struct{} // per topic: closed when its catch-up ended
}

// CatchUp scans [w, end) of topic into the index in the background when
// the index's watermark w lies below end (a producer opened the topic, and
// end is the log end it saw).
func (r *Reads) CatchUp(topic string, end int64) {
	if r.o.Index == nil {
		return
	}
	w, covered := r.o.Index.Watermark(topic)
	if !covered || w >= end {
		return
	}
	gen := r.gate.generation(topic)
	r.mu.Lock()
	if _, busy := r.catchUps.running[topic]; busy || r.done {
		r.mu.Unlock()
		return
	}
	done := make(chan struct{})
	r.catchUps.running[topic] = done
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.catchUps.running, topic)
			r.mu.Unlock()
			close(done)
		}()
		ctx := r.ctx
		select {
		case r.catchUps.slots <- struct{}{}:
			defer func() { <-r.catchUps.slots }()
		case <-ctx.Done():
			return
		}
		// A read's scan may have closed the gap meanwhile.
		if w, covered = r.o.Index.Watermark(topic); !covered || w >= end {
			return
		}
		r.log.Debug("kwal: the index lies below the log's end; catching it up in the background",
			"topic", topic, "index_watermark", w, "log_end", end)
		err := r.ScanIntoIndex(ctx, topic, gen, []index.Range{{Start: w, End: end, Scan: true}}, end)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("kwal: catching the index up failed; a read or Prune will scan what it lacks",
				"topic", topic, "from_offset", w, "to_offset", end, "err", err)
		}
	}()
}

// WaitCatchUp waits until no background catch-up of the topic's index runs.
func (r *Reads) WaitCatchUp(topic string) {
	r.mu.Lock()
	done := r.catchUps.running[topic]
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}
