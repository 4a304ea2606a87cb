package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// SetJoinHook makes the store call fn whenever a read joins a running
// pass, so that tests can start a shared pass's fetching once every read
// has joined. Set it before any read starts.
func SetJoinHook(s *LogStore, fn func()) { s.joinHook = fn }

// WarmFetchClients counts the store's fetch clients whose fetch connection
// is open already (warmed at Open, or used by a read).
func WarmFetchClients(s *LogStore) (warm, all int) {
	for i := range s.fetchWarm {
		if s.fetchWarm[i].Load() {
			warm++
		}
	}
	return warm, len(s.fetchWarm)
}

// KnowsTopicMeta reports whether the reads' metadata cache holds topic.
func KnowsTopicMeta(s *LogStore, topic string) bool {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	_, ok := s.meta[topic]
	return ok
}

// WaitCatchUp waits until no background catch-up of the topic's index runs
// (catchup.go).
func WaitCatchUp(s *LogStore, topic string) {
	s.mu.Lock()
	done := s.catchUps.running[topic]
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// ForgetClientMetadata drops topic from the admin client's own metadata
// cache (franz-go keeps it for MetadataMinAge, 100 ms), as if that long
// had passed since the client last asked; kwal's cache of the reads'
// leaders stays.
func ForgetClientMetadata(s *LogStore, topic string) { s.admin.PurgeTopicsFromClient(topic) }

// LatencySeed is the store's latency seed for reads' cost models (0: none).
func LatencySeed(s *LogStore) time.Duration {
	s.models.mu.Lock()
	defer s.models.mu.Unlock()
	return time.Duration(s.models.latencySeed * float64(time.Second))
}

// SizeSeed is the bytes per offset last measured on any topic, the seed of
// topics no read measured yet (0: none).
func SizeSeed(s *LogStore) float64 {
	s.models.mu.Lock()
	defer s.models.mu.Unlock()
	return s.models.last
}

// SetScanReportHook makes every read call fn before it hands what it
// scanned to the index, and Close call closed once it has closed the
// index gate (gate.go), so that tests can race them deterministically. Set
// it before any read starts.
func SetScanReportHook(s *LogStore, fn func(topic string), closed func()) {
	s.scanReportHook = fn
	s.gate.closedHook = closed
}

// IndexSpan returns the index's accounted span [C, W) of topic; ok is false
// when the index does not cover it.
func IndexSpan(s *LogStore, topic string) (c, w int64, ok bool) {
	ts, found := s.index.Stats(topic, false)
	return ts.C, ts.W, found && ts.Covered
}

// LaneClients are the store's produce lane clients.
func LaneClients(s *LogStore) []*kgo.Client { return s.laneClients }

// SetCostModel makes the store's next reads start from a cost model that
// measured latency and bytesPerSec (their bytes per offset stay their
// topics' own, or the seed), so that tests can make a read choose a plan.
func SetCostModel(s *LogStore, latency time.Duration, bytesPerSec float64) {
	s.models.mu.Lock()
	defer s.models.mu.Unlock()
	s.models.m = costModel{latency: latency.Seconds(), rate: bytesPerSec, nLatency: 1, nRate: 1}
	s.models.ok = true
}

// GatheringListTopics counts the topics whose bounds lookups wait for the
// next ListOffsets pair of their leader (listbatch.go).
func GatheringListTopics(s *LogStore) int {
	lb := &s.listBatches
	lb.mu.Lock()
	defer lb.mu.Unlock()
	n := 0
	for _, l := range lb.leaders {
		if l.next != nil {
			n += len(l.next.topics)
		}
	}
	return n
}

// IndexObsoletePoint is the region's Obsolete point as the store's index
// knows it (0: none).
func IndexObsoletePoint(s *LogStore, topic string, region uint64) int64 {
	return s.index.ObsoletePoint(topic, region)
}

// IndexKnows reports whether the store's index holds anything of topic.
func IndexKnows(s *LogStore, topic string) bool {
	_, ok := s.index.Stats(topic, false)
	return ok
}
