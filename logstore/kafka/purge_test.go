package kafka_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestDeletedNamespaceLeavesTheLanes protects that a deleted namespace's
// topic is purged from the produce lanes: a franz-go client keeps every
// topic it produced to in its metadata requests, and once the topic is gone
// it refreshes again and again for it. After DeleteNamespace, every
// metadata request that names the namespace still in use must leave the
// deleted one out (kfake: the requests are seen on the broker's side).
// Without the purge the lane that produced to both names both.
func TestDeletedNamespaceLeavesTheLanes(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceLanes = 2 })
	ctx := context.Background()
	gone, kept := newTopic(t), newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, gone))
	require.NoError(t, s.CreateNamespace(ctx, kept))
	// A call of both namespaces goes out on one lane: a lane that knows
	// the kept topic knew the deleted one too.
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: gone, Region: 1, Data: []byte("a")}, {Namespace: kept, Region: 2, Data: []byte("b")}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteNamespace(ctx, gone))

	seen := make(chan []string, 64)
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		var topics []string
		for _, rt := range kreq.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil {
				topics = append(topics, *rt.Topic)
			}
		}
		if slices.Contains(topics, kept) {
			select {
			case seen <- topics:
			default:
			}
		}
		return nil, nil, false
	})
	for _, cl := range kafka.LaneClients(s) {
		cl.ForceMetadataRefresh()
	}
	topics := <-seen
	require.NotContains(t, topics, gone, "a lane still asks for the deleted namespace's topic")
}
