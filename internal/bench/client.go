package bench

// Helpers for `kwal bench`: a timed variant of Run, and variants of
// RawClient and MeasureLayout that take franz-go client options (seeds,
// TLS, SASL, timeouts), so that they work against any cluster.

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore/kafka/record"
)

// RunFor is Run for a duration: each writer plays its calls in order,
// starting over after the last, until d has passed; calls in flight then
// finish. Elapsed runs until the last call returns.
func RunFor(ctx context.Context, plan [][]Call, app Appender, d time.Duration, progress func(entries, bytes int)) (AppendResult, error) {
	deadline := time.Now().Add(d)
	return play(ctx, plan, app, progress, func(int, int) bool { return time.Now().Before(deadline) })
}

// RawClientWith is RawClient with the connection options given (seed
// brokers, TLS, SASL, timeouts) instead of a broker list.
func RawClientWith(o RawOptions, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(slices.Clone(opts),
		kgo.ProducerBatchMaxBytes(int32(o.MaxBatchBytes)),
		kgo.ProducerBatchCompression(o.Compression),
		kgo.ProducerLinger(o.Linger),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)...)
}

// MeasureLayoutWith is MeasureLayout with the connection options given
// (seed brokers, TLS, SASL, timeouts) instead of a broker list.
func MeasureLayoutWith(ctx context.Context, topic string, opts ...kgo.Opt) (Layout, error) {
	return MeasureLayoutOf(ctx, topic, KwalRecordRegion, opts...)
}

// RecordRegion tells the region of a record and its entry data bytes from
// its key and value; ok is false for a record of no region (a mark).
type RecordRegion func(key, value []byte) (region uint64, dataBytes int, ok bool)

// KwalRecordRegion decodes kwal's records.
func KwalRecordRegion(key, value []byte) (uint64, int, bool) {
	p, err := record.Decode(key, value)
	if err != nil || p.Kind == record.KindMark {
		return 0, 0, false
	}
	return p.Region, len(p.Data), true
}

// GreptimeRecordRegion decodes the GreptimeDB-style producer's records.
func GreptimeRecordRegion(key, value []byte) (uint64, int, bool) {
	r, ok := GreptimeRegion(key)
	return r, len(value), ok
}

// MeasureLayoutOf is MeasureLayoutWith for records that regionOf decodes.
func MeasureLayoutOf(ctx context.Context, topic string, regionOf RecordRegion, opts ...kgo.Opt) (Layout, error) {
	cl, err := kgo.NewClient(opts...)
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
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return Layout{}, err
	}
	so, _ := starts.Lookup(topic, 0)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return Layout{}, err
	}
	tp, ok := td[topic].Partitions[0]
	if !ok {
		return Layout{}, fmt.Errorf("bench: %s has no partition 0", topic)
	}
	leader := tp.Leader
	l := Layout{PerRegion: map[uint64]RegionLayout{}}
	var regionsSum int64
	for off := max(so.Offset, 0); off < eo.Offset; {
		rp, err := fetchAt(ctx, cl, leader, topic, td[topic].ID, off, 16<<20)
		if err != nil {
			return l, err
		}
		raw := rp.RecordBatches
		progressed := false
		for len(raw) >= 12 {
			base := int64(binary.BigEndian.Uint64(raw[0:8]))
			n := int(binary.BigEndian.Uint32(raw[8:12])) + 12
			if n > len(raw) {
				break // a partial batch at the end of the response
			}
			one := *rp
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
			span := BatchSpan{Base: base, End: next, Bytes: int64(n), Last: map[uint64]int64{}}
			for _, r := range fp.Records {
				l.Records++
				region, n, ok := regionOf(r.Key, r.Value)
				if !ok {
					continue
				}
				rl := l.PerRegion[region]
				rl.OwnBytes += int64(n)
				l.PerRegion[region] = rl
				regions[region] = struct{}{}
				span.Last[region] = r.Offset
			}
			l.Spans = append(l.Spans, span)
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

// fetchAt sends one fetch request for topic's partition 0 at off, up to
// maxBytes, to leader, and returns the partition's part of the response
// (an error for a malformed response or a partition error).
func fetchAt(ctx context.Context, cl *kgo.Client, leader int32, topic string, id [16]byte, off int64, maxBytes int32) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, maxBytes, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, id
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset, p.PartitionMaxBytes, p.LogStartOffset, p.CurrentLeaderEpoch = off, maxBytes, -1, -1
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{t}
	kr, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("bench: fetch %s at %d: %w", topic, off, err)
	}
	resp := kr.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("bench: fetch %s at %d: malformed response (error %v)", topic, off, kerr.ErrorForCode(resp.ErrorCode))
	}
	rp := &resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return nil, fmt.Errorf("bench: fetch %s at %d: %w", topic, off, err)
	}
	return rp, nil
}

// endOffset is the log end of topic's partition 0, asked of its leader in
// one ListOffsets request.
func endOffset(ctx context.Context, cl *kgo.Client, leader int32, topic string) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Timestamp, p.CurrentLeaderEpoch = -1, -1
	t.Partitions = []kmsg.ListOffsetsRequestTopicPartition{p}
	req.Topics = []kmsg.ListOffsetsRequestTopic{t}
	kr, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("bench: list offsets of %s: %w", topic, err)
	}
	resp := kr.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("bench: list offsets of %s: malformed response", topic)
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, fmt.Errorf("bench: list offsets of %s: %w", topic, err)
	}
	return rp.Offset, nil
}
