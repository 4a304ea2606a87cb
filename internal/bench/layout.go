package bench

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore/kafka/record"
)

// Layout describes how a topic's records are laid out in record batches,
// which is what a replay of one region must fetch at the least: Kafka
// serves whole batches.
type Layout struct {
	Batches         int
	BatchBytes      int64   // bytes of all record batches
	Records         int64
	RegionsPerBatch float64 // mean distinct regions per batch
	// Selectivity is, averaged over regions, the bytes of the batches that
	// hold a region's records divided by that region's own entry data
	// bytes: 1 is ideal, about the number of regions is a fully mixed log.
	Selectivity    float64
	MaxSelectivity float64
	// PerRegion holds each region's own data bytes and the bytes of the
	// batches that hold its records.
	PerRegion map[uint64]RegionLayout
}

// RegionLayout is one region's share of a Layout.
type RegionLayout struct {
	OwnBytes   int64
	BatchBytes int64
}

// MeasureLayout reads the whole topic batch by batch with raw fetch
// requests and reports its layout.
func MeasureLayout(ctx context.Context, brokers []string, topic string) (Layout, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return Layout{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return Layout{}, err
	}
	eo, ok := ends.Lookup(topic, 0)
	if !ok || eo.Err != nil {
		return Layout{}, fmt.Errorf("bench: end offset of %s: %v", topic, eo.Err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return Layout{}, err
	}
	leader := td[topic].Partitions[0].Leader
	l := Layout{PerRegion: map[uint64]RegionLayout{}}
	var regionsSum int64
	for off := int64(0); off < eo.Offset; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, 16<<20, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, td[topic].ID
		p := kmsg.NewFetchRequestTopicPartition()
		p.FetchOffset, p.PartitionMaxBytes, p.LogStartOffset, p.CurrentLeaderEpoch = off, 16<<20, -1, -1
		t.Partitions = []kmsg.FetchRequestTopicPartition{p}
		req.Topics = []kmsg.FetchRequestTopic{t}
		kr, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return l, err
		}
		rp := kr.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			return l, fmt.Errorf("bench: fetch %s at %d: %w", topic, off, err)
		}
		raw := rp.RecordBatches
		progressed := false
		for len(raw) >= 12 {
			n := int(binary.BigEndian.Uint32(raw[8:12])) + 12
			if n > len(raw) {
				break // a partial batch at the end of the response
			}
			one := rp
			one.RecordBatches = raw[:n]
			raw = raw[n:]
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: topic}, &one, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return l, fmt.Errorf("bench: batch at %d: %w", off, fp.Err)
			}
			if next <= off {
				continue
			}
			off, progressed = next, true
			l.Batches++
			l.BatchBytes += int64(n)
			regions := map[uint64]struct{}{}
			for _, r := range fp.Records {
				l.Records++
				p, err := record.Decode(r.Key, r.Value)
				if err != nil {
					continue
				}
				rl := l.PerRegion[p.Region]
				rl.OwnBytes += int64(len(p.Data))
				l.PerRegion[p.Region] = rl
				regions[p.Region] = struct{}{}
			}
			for reg := range regions {
				rl := l.PerRegion[reg]
				rl.BatchBytes += int64(n)
				l.PerRegion[reg] = rl
			}
			regionsSum += int64(len(regions))
		}
		if !progressed {
			return l, fmt.Errorf("bench: fetch of %s at %d made no progress", topic, off)
		}
	}
	if l.Batches > 0 {
		l.RegionsPerBatch = float64(regionsSum) / float64(l.Batches)
	}
	for _, rl := range l.PerRegion {
		if rl.OwnBytes == 0 {
			continue
		}
		s := float64(rl.BatchBytes) / float64(rl.OwnBytes)
		l.Selectivity += s / float64(len(l.PerRegion))
		l.MaxSelectivity = max(l.MaxSelectivity, s)
	}
	return l, nil
}
