package replay

import (
	"context"
	"sync/atomic"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// ScanIntoIndex scans ranges of the topic (ascending, below end) in a pass
// of its own (no read joins it), whose decoding loop reports the scanned
// records to the index and notes the marks, judged by a view of the claims
// topic caught up after the caller learned end. Records that are not kwal's
// count as carrying no entry; a kwal record that fails to decode, or a gap,
// fails the scan, even with SkipCorrupt. Index updates go through the gate
// with generation gen. Each fetch is bounded by RequestTimeout; ctx bounds
// the whole.
func (r *Reads) ScanIntoIndex(ctx context.Context, topic string, gen uint64, ranges []index.Range, end int64) error {
	if len(ranges) == 0 {
		return nil
	}
	f := &fetcher{reads: r, topic: topic, gen: gen, charged: new(atomic.Int64), est: r.startEstimate(topic),
		pending: ranges, frontier: ranges[0].Start, sent: ranges[0].Start}
	f.stats.scan = true
	d := newDecoder(r, topic, gen, end, newRouter(r, nil))
	d.indexOnly = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan fetched)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		f.run(ctx, ch, nil, func() bool { return false })
	}()
	err := r.syncClaims(ctx, topic) // the fetches go on meanwhile
	if err == nil {
		err = d.consume(ctx, ch)
	}
	cancel()
	for m := range ch { // let the fetcher finish a send in progress
		m.charge.done()
	}
	<-done
	d.reads.hold.add(-d.asm.OpenBytes())
	d.flushMetrics()
	r.sizes.finished(f.est)
	return err
}
