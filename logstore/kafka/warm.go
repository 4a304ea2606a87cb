package kafka

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
	leaders := map[int32]bool{}
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
		leaders[p.Leader] = true
	}
	s.metaMu.Unlock()

	clients := append(append([]*kgo.Client{}, s.laneClients...), s.admin)
	var wg sync.WaitGroup
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
					began := time.Now()
					if _, err := cl.Broker(int(leader)).Request(ctx, newFetchRequest(0, 0, 1)); err == nil {
						s.models.sampleLatency(time.Since(began))
					}
				}
			}
		})
	}
	wg.Wait()
}
