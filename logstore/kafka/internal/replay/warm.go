package replay

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// warmFlag marks a fetch connection that fetched once already (warmed at
// Open, or used by a read).
type warmFlag struct{ v atomic.Bool }

func (w *warmFlag) set()        { w.v.Store(true) }
func (w *warmFlag) isSet() bool { return w.v.Load() }

// Warm prepares a freshly opened store for the replays a restart starts:
// it looks up the leader and ID of every topic the index knows (into the
// reads' metadata cache) and opens each fetch connection to those leaders
// with an empty fetch request (MinBytes 0: the broker answers at once). A
// cold fetch client otherwise pays, inside a read's first fetch, its
// metadata lookup, the dial, the API version exchange (and TLS and SASL),
// on every connection a read uses: most of a small replay's time. The two
// connections a read's log-bounds lookup uses are opened the same way,
// with a lookup of a topic on each leader.
//
// Warming is best effort and bounded by ctx: a failure leaves a connection
// to be opened by the read that needs it. A store whose index knows no
// topic warms nothing.
func (r *Reads) Warm(ctx context.Context) {
	if r.o.Index == nil {
		return
	}
	topics := r.o.Index.Topics()
	if len(topics) == 0 {
		return
	}
	details, err := r.o.Host.Admin().ListTopics(ctx, topics...)
	if err != nil {
		r.log.Debug("kwal: open: warming reads: metadata", "err", err)
		return
	}
	leaders := map[int32]string{} // a topic each leads
	for _, t := range topics {
		td, ok := details[t]
		if !ok || td.Err != nil {
			continue
		}
		p, ok := td.Partitions[partition]
		if !ok || p.Err != nil || p.Leader < 0 {
			continue
		}
		r.meta.set(t, topicMeta{leader: p.Leader, id: td.ID})
		leaders[p.Leader] = t
	}
	var wg sync.WaitGroup
	startCl, endCl := r.boundsClients()
	for _, cl := range []*kgo.Client{startCl, endCl} {
		wg.Go(func() {
			for leader, topic := range leaders {
				if _, err := listOffset(ctx, cl, topic, leader, -1); err != nil {
					r.log.Debug("kwal: open: warming a bounds connection", "broker", leader, "err", err)
				}
			}
		})
	}
	for k := range r.o.Conns {
		cl := r.o.Host.FetchClient(k)
		wg.Go(func() {
			all := true
			for leader := range leaders {
				if _, err := cl.Broker(int(leader)).Request(ctx, newFetchRequest(0, 0, 1)); err != nil {
					r.log.Debug("kwal: open: warming a fetch connection", "broker", leader, "err", err)
					all = false
				}
			}
			if all {
				r.warm[k].set()
			}
		})
	}
	wg.Wait()
}

// WarmConns counts the fetch connections that fetched once already.
func (r *Reads) WarmConns() (warm, all int) {
	for i := range r.warm {
		if r.warm[i].isSet() {
			warm++
		}
	}
	return warm, len(r.warm)
}

// KnowsMeta reports whether the reads' metadata cache holds topic.
func (r *Reads) KnowsMeta(topic string) bool {
	_, ok := r.meta.get(topic)
	return ok
}
