package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka/internal/replay"
)

// SetJoinHook makes the store call fn whenever a read joins a running
// pass, so that tests can start a shared pass's fetching once every read
// has joined (and start, when set, whenever a read starts a pass of its
// own). A starting read then waits as long as it takes for a running
// pass to answer its join (not the read path's 100 ms), so that whether it
// joins does not depend on the machine's load. Set it before any read
// starts.
func SetJoinHook(s *LogStore, fn, start func()) {
	s.reads.SetHooksForTesting(replay.Hooks{Join: fn, Start: start, JoinWait: time.Minute}, nil)
}

// SetProducerWaitHook makes the store call fn as a call finds another call
// creating its topic's producer and waits for it. Set it before appending.
func SetProducerWaitHook(s *LogStore, fn func(topic string)) { s.producerWaitForTesting = fn }

// WarmFetchClients counts the store's fetch connections that are open
// already (warmed at Open, or used by a read).
func WarmFetchClients(s *LogStore) (warm, all int) { return s.reads.WarmConns() }

// KnowsTopicMeta reports whether the reads' metadata cache holds topic.
func KnowsTopicMeta(s *LogStore, topic string) bool { return s.reads.KnowsMeta(topic) }

// WaitCatchUp waits until no background catch-up of the topic's index runs.
func WaitCatchUp(s *LogStore, topic string) { s.reads.WaitCatchUp(topic) }

// ForgetClientMetadata drops topic from the admin client's own metadata
// cache (franz-go keeps it for MetadataMinAge, 100 ms), as if that long
// had passed since the client last asked; kwal's cache of the reads'
// leaders stays.
func ForgetClientMetadata(s *LogStore, topic string) { s.admin.PurgeTopicsFromClient(topic) }

// SetScanReportHook makes every read call fn before it hands what it
// scanned to the index, and Close call closed once it has closed the
// index gate, so that tests can race them deterministically. Set it before
// any read starts.
func SetScanReportHook(s *LogStore, fn func(topic string), closed func()) {
	s.reads.SetHooksForTesting(replay.Hooks{ScanReport: fn}, closed)
}

// IndexSpan returns the index's accounted span [C, W) of topic; ok is false
// when the index does not cover it.
func IndexSpan(s *LogStore, topic string) (c, w int64, ok bool) {
	ts, found := s.index.Stats(topic, false)
	return ts.C, ts.W, found && ts.Covered
}

// LaneClients are the store's produce lane clients.
func LaneClients(s *LogStore) []*kgo.Client { return s.laneClients }

// ReadPoolUsed is the bytes the store's reads hold in their fetch budget.
func ReadPoolUsed(s *LogStore) int64 { return s.reads.PoolUsed() }

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

// PinReadCosts makes the store's reads take a fetch's latency and
// streaming rate as given, and never learn them, so that tests can make a
// read choose which gaps to read through.
func PinReadCosts(s *LogStore, latency time.Duration, bytesPerSec float64) {
	s.reads.SetHooksForTesting(replay.Hooks{PinnedLatency: latency, PinnedRate: bytesPerSec}, nil)
}

// ReadPoolPeak and ReadHoldPeak are the most the store's reads have held
// at once in their fetch budget and in their hold budget.
func ReadPoolPeak(s *LogStore) int64 { return s.reads.PoolPeak() }
func ReadHoldPeak(s *LogStore) int64 { return s.reads.HoldPeak() }

// ReadHoldUsed is the entry data the store's reads hold now.
func ReadHoldUsed(s *LogStore) int64 { return s.reads.HoldUsed() }

// SetReleaseWaitHook makes the store call fn as a Release begins to wait
// for the appends in flight that carry its region. Set it before the
// Release starts.
func SetReleaseWaitHook(s *LogStore, fn func(namespace string, region uint64)) {
	s.owning.appends.waitingForTesting = fn
}
