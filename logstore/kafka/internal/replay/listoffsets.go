package replay

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
)

// listBounds asks leader for partition 0's log start and end (the high
// watermark, as kadm's ListEndOffsets) of topic, both requests at once and
// on two connections: a broker serves one connection's requests one at a
// time, so on one connection the second would wait for the first. The
// start goes on the first fetch connection, the end on the last
// (boundsClients); Warm opens both.
func (r *Reads) listBounds(ctx context.Context, leader int32, topic string) (start, end int64, err error) {
	startCl, endCl := r.boundsClients()
	var g errgroup.Group
	g.Go(func() (err error) { start, err = listOffset(ctx, startCl, topic, leader, -2); return err }) // earliest: the log start
	g.Go(func() (err error) { end, err = listOffset(ctx, endCl, topic, leader, -1); return err })     // latest: the high watermark
	return start, end, g.Wait()
}

// listOffset asks leader, through cl, for partition 0's offset of topic at
// timestamp ts (-2 the log start, -1 the high watermark).
func listOffset(ctx context.Context, cl *kgo.Client, topic string, leader int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.Timestamp = partition, -1, ts
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return 0, err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.Partition == partition {
				return rp.Offset, kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	}
	return 0, errNoBounds
}
