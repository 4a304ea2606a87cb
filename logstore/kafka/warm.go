package kafka

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// warmReads prepares a freshly opened store for the replays a restart
// starts: it looks up the leader and ID of every topic the index knows
// (into the reads' metadata cache) and opens each fetch client's fetch
// connection to those leaders, with an empty fetch request (MinBytes 0:
// the broker answers at once). A cold fetch client otherwise pays, inside
// a read's first fetch, its metadata lookup, the dial, the API version
// exchange (and TLS and SASL); a read keeps up to one fetch per client in
// flight, so after a restart one region's replay paid that on every
// connection (measured 5 ms of a 7–9 ms replay on the local Kafka broker).
//
// Each client then sends a second empty fetch, timed: on an open
// connection it is a fetch's round trip with no data, and the lowest of
// them seeds the cost model's latency (modelStore.sampleLatency), so that
// the first reads price their plans (fetches against a scan of their span)
// instead of fetching every planned range.
//
// It also fetches one record batch of the topic the index covers furthest
// (sizeSample): what an offset weighs there seeds every pass's cost model
// (modelStore.sampled), so that the restart's first reads cut their
// ranges into sized fetches at once. Without a size, a read probes each
// range with a one-batch fetch and continues a longer range only once its
// probe landed: one more round trip in the way of one region's replay.
//
// The two connections a read's log-bounds lookup uses (bounds.go) are
// opened the same way, with a lookup of a topic on each leader.
//
// Warming is best effort and bounded by ctx: a failure leaves a
// connection to be opened by the read that needs it, as before. A store
// whose index knows no topic warms nothing.
func (s *LogStore) warmReads(ctx context.Context) {
	if s.index == nil {
		return
	}
	topics := s.index.Topics()
	if len(topics) == 0 {
		return
	}
	details, err := s.adm.ListTopics(ctx, topics...)
	if err != nil {
		s.log.Debug("kwal: open: warming reads: metadata", "err", err)
		return
	}
	leaders := map[int32]string{} // a topic each leads
	s.metaMu.Lock()
	for _, t := range topics {
		td, ok := details[t]
		if !ok || td.Err != nil {
			continue
		}
		p, ok := td.Partitions[partition]
		if !ok || p.Err != nil || p.Leader < 0 {
			continue
		}
		s.meta[t] = topicMeta{leader: p.Leader, id: td.ID}
		leaders[p.Leader] = t
	}
	s.metaMu.Unlock()

	clients := append(append([]*kgo.Client{}, s.laneClients...), s.admin)
	var wg sync.WaitGroup
	if wm := s.index; wm != nil {
		var (
			far   string
			farW  int64
			meta  topicMeta
			found bool
		)
		s.metaMu.Lock()
		for _, t := range topics {
			m, known := s.meta[t]
			if w, covered := wm.Watermark(t); known && covered && w > farW {
				far, farW, meta, found = t, w, m, true
			}
		}
		s.metaMu.Unlock()
		if found {
			wg.Go(func() {
				s.sizeSample(ctx, far, meta, farW-1)
			})
		}
	}
	// The bounds lookups' two connections to each leader (bounds.go): a
	// lookup of one topic there opens them.
	startCl, endCl := s.boundsClients()
	for _, cl := range []*kgo.Client{startCl, endCl} {
		wg.Go(func() {
			for leader, topic := range leaders {
				if _, err := listOffset(ctx, cl, topic, leader, -1); err != nil {
					s.log.Debug("kwal: open: warming a bounds connection", "broker", leader, "err", err)
				}
			}
		})
	}
	for k, cl := range clients {
		wg.Go(func() {
			all := true
			for leader := range leaders {
				// MinBytes 0: the broker answers at once.
				if _, err := cl.Broker(int(leader)).Request(ctx, newFetchRequest(0, 0, 1)); err != nil {
					s.log.Debug("kwal: open: warming a fetch connection", "broker", leader, "err", err)
					all = false
				}
			}
			// Its first fetch no longer opens a connection: its time
			// prices a fetch (see fetchClient).
			if all {
				s.fetchWarm[k].Store(true)
				for leader := range leaders {
					// Priced as the reads' fetches are: its share of the
					// broker's time with the other clients' samples
					// (see fetcher.run).
					shared := s.fetchesOnWire.Add(1)
					began := time.Now()
					_, err := cl.Broker(int(leader)).Request(ctx, newFetchRequest(0, 0, 1))
					took := time.Since(began)
					end := s.fetchesOnWire.Add(-1) + 1
					if err == nil {
						s.models.sampleLatency(shareOf(took, int(shared), int(end)))
					}
				}
			}
		})
	}
	wg.Wait()
}

// sizeSample fetches the record batch holding offset off of topic (a
// fetch limited to 1 byte returns exactly one batch) and records what an
// offset of it weighs as the seed of topics no read measured yet, its own
// included: one batch is not the topic's average, and a seed is replaced
// by the first response rather than averaged with (measured on the local
// Kafka broker: taken as the topic's own size, it left a full scan's
// chunks a batch short each, 77 fetches instead of 39). Best effort: a failure (the offset left the log, an
// error, a response without a complete batch) records nothing.
func (s *LogStore) sizeSample(ctx context.Context, topic string, m topicMeta, off int64) {
	req := withPartition(newFetchRequest(0, 0, 1), topic, m.id, off, 1)
	kresp, err := s.admin.Broker(int(m.leader)).Request(ctx, req)
	if err != nil {
		s.log.Debug("kwal: open: sampling record sizes", "topic", topic, "err", err)
		return
	}
	resp := kresp.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return
	}
	if perOff, ok := batchesWeight(resp.Topics[0].Partitions[0].RecordBatches); ok {
		s.models.sampled(perOff)
	}
}

// batchesWeight is the bytes per offset of the complete record batches at
// the start of b, and whether there was one.
func batchesWeight(b []byte) (float64, bool) {
	var n, first, next int64
	for f := range batchFrames(b) {
		if !f.v2 || f.next == 0 || f.base > math.MaxInt64/2 {
			break // not a batch of a log (an offset is never negative)
		}
		if n == 0 {
			first = f.base
		}
		next = f.next
		n += f.size
	}
	if n == 0 || next <= first {
		return 0, false
	}
	return float64(n) / float64(next-first), true
}
