package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GreptimeWindow is GreptimeDB's minimum batch window (MIN_BATCH_WINDOW_SIZE):
// index offsets whose estimated byte positions lie within it of the
// window's first are read by one fetch.
const GreptimeWindow = 4 << 20

// ReplayResult is what one replay of a region fetched and found.
type ReplayResult struct {
	Elapsed      time.Duration
	Fetches      int
	FetchedBytes int64 // record batch bytes fetched
	Records      int64 // the region's records read
	OwnBytes     int64 // their value bytes
}

// GreptimeReplay reads region's records of topic as GreptimeDB's consumer
// does with its region index (index/iterator.rs, util/range.rs): offsets
// holds the region's record offsets; each offset is placed at its distance
// from the window's first offset times avgRecordBytes, the offsets within
// window bytes of the first are merged into one window, and the window is
// fetched from its first offset with a byte limit of its estimated size
// (Kafka returns whole batches, at least one). The records of the response
// that are in the index are the region's; reading goes on from the next
// index offset not yet read. The topic's leader is looked up before the
// clock starts, as GreptimeDB's partition client already knows it; the
// log's end is looked up after (one ListOffsets to the leader), as
// KafkaLogStore::read does before it builds the index iterator, and bounds
// the read (offsets at or past it are not read).
func GreptimeReplay(ctx context.Context, cl *kgo.Client, topic string, offsets []int64, avgRecordBytes, window int) (ReplayResult, error) {
	var res ReplayResult
	if avgRecordBytes < 1 {
		avgRecordBytes = 1
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return res, err
	}
	tp, ok := td[topic].Partitions[0]
	if !ok {
		return res, fmt.Errorf("bench: %s has no partition 0", topic)
	}
	start := time.Now()
	end, err := endOffset(ctx, cl, tp.Leader, topic)
	if err != nil {
		return res, err
	}
	if n, _ := slices.BinarySearch(offsets, end); n < len(offsets) {
		offsets = offsets[:n]
	}
	for i := 0; i < len(offsets); {
		base := offsets[i]
		j := i + 1
		for j < len(offsets) && (offsets[j]-base)*int64(avgRecordBytes) <= int64(window) {
			j++
		}
		maxBytes := (offsets[j-1] - base + 1) * int64(avgRecordBytes)
		rp, err := fetchAt(ctx, cl, tp.Leader, topic, td[topic].ID, base, int32(min(maxBytes, 1<<30)))
		if err != nil {
			return res, err
		}
		res.Fetches++
		res.FetchedBytes += int64(len(rp.RecordBatches))
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: base, Topic: topic}, rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return res, fmt.Errorf("bench: fetch of %s at %d: %w", topic, base, fp.Err)
		}
		progressed := false
		for _, r := range fp.Records {
			for i < len(offsets) && offsets[i] < r.Offset {
				i++ // an index offset the log no longer holds
			}
			if i < len(offsets) && offsets[i] == r.Offset {
				res.Records++
				res.OwnBytes += int64(len(r.Value))
				i++
				progressed = true
			}
		}
		if !progressed {
			return res, fmt.Errorf("bench: fetch of %s at %d returned none of the region's records", topic, base)
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}
