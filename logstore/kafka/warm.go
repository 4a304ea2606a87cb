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
	lister, ok := s.index.(topicLister)
	if !ok {
		return
	}
	topics := lister.Topics()
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
	if wm, ok := s.index.(watermarker); ok {
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
				s.rateSample(ctx, far, meta, farW)
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

// rateSample measures how fast the broker streams a fetch, as the seed of
// the rate of cost models no read measured yet (modelStore.sampledRate):
// a round trip with no data, then a fetch of up to a scan chunk's bytes
// from the start of what the index covers of topic (below w), each timed
// on the admin connection sizeSample opened. Without it the first reads
// after Open price a scan at the rate prior (a broker streaming from its
// page cache, about 1 GB/s); on kfake, which streams slower, 1,000
// regions over 64 topics fetched 1.25–1.42x the bytes they needed once
// plans were priced before the first fetch (1.00–1.18x before), likely
// for that reason. The sample is one fetch alone, not a share of the
// broker's time as a pass's fetches are priced (cost.go): on a broker
// that streams several fetches at once faster than one, it is low until
// the pass measures its own. Best effort: a failure, or a sample too small
// to time the streaming (smallFetch), records nothing.
func (s *LogStore) rateSample(ctx context.Context, topic string, m topicMeta, w int64) {
	g, ok := s.index.(pruneIndex)
	if !ok {
		return
	}
	ts, ok := g.Stats(topic, false)
	if !ok || !ts.Covered || ts.C >= w {
		return
	}
	br := s.admin.Broker(int(m.leader))
	began := time.Now()
	if _, err := br.Request(ctx, newFetchRequest(0, 0, 1)); err != nil {
		return
	}
	rtt := time.Since(began)
	maxBytes := int32(max(int64(s.cfg.FetchMaxBytes)/int64(len(s.laneClients)+1), int64(s.cfg.MaxBatchBytes)))
	began = time.Now()
	kresp, err := br.Request(ctx, withPartition(newFetchRequest(0, 0, maxBytes), topic, m.id, ts.C, maxBytes))
	took := time.Since(began)
	if err != nil {
		s.log.Debug("kwal: open: sampling the streaming rate", "topic", topic, "err", err)
		return
	}
	resp := kresp.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return
	}
	n := len(resp.Topics[0].Partitions[0].RecordBatches)
	if n <= smallFetch {
		return
	}
	// As in costModel.learn: the streaming time is what the fetch took
	// beyond a round trip, and never less than half the fetch.
	d := took.Seconds()
	s.models.sampledRate(float64(n) / max(d-rtt.Seconds(), d/2))
}
