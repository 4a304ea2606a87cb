package kafka_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestSlowTopicStallsNoOtherRead protects reads from a stall elsewhere in
// the store: while every fetch of one topic fails and is retried (a
// leader moving), a read of another topic starts, fetches
// and ends; and a second read of the slow topic, which would join the
// busy pass, waits for it only a bounded time and then fetches on its
// own. Before, a read's start held a store-wide lock while it waited for a
// pass's fetcher to answer its join, so one topic's stuck fetch held up
// every read of every topic. (kfake only: the broker holds the fetches.)
func TestSlowTopicStallsNoOtherRead(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	slow, fast := newTopic(t), newTopic(t)
	for _, ns := range []string{slow, fast} {
		for i := range 4 {
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte{byte(i)}}})
			require.NoError(t, err)
		}
	}
	// Fetch requests name topics by ID (Fetch v13 and later).
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	td, err := adm.ListTopics(ctx, slow)
	adm.Close()
	require.NoError(t, err)
	slowID := td[slow].ID
	// Until released, every fetch of the slow topic fails with a retriable
	// error: the pass's fetcher retries it, busy, answering no join.
	var released atomic.Bool
	var slowFetches atomic.Int32
	retrying := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if released.Load() || len(req.Topics) == 0 || (req.Topics[0].Topic != slow && req.Topics[0].TopicID != slowID) {
			return nil, nil, false
		}
		if slowFetches.Add(1) == 2 {
			once.Do(func() { close(retrying) })
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(req.GetVersion())
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	type result struct {
		st  kafka.ReadStats
		err error
	}
	readSlow := func(out chan<- result) {
		var st kafka.ReadStats
		_, err := readErr(s.ReadWith(ctx, slow, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &st}))
		out <- result{st, err}
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go readSlow(first)
	<-retrying // the first read's pass is retrying its fetch
	go readSlow(second)
	got := collect(t, s.Read(ctx, fast, 1, 0))
	require.Len(t, got, 4, "the fast topic's read ended while the slow topic's fetches failed")
	select {
	case r := <-first:
		t.Fatalf("a read of the slow topic ended while its fetches failed: %v", r.err)
	default:
	}
	released.Store(true)
	r1, r2 := <-first, <-second
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.NotEqual(t, r1.st.Pass, r2.st.Pass, "the second read waited for the busy pass only a bounded time, then fetched on its own")
}
