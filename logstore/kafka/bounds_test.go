package kafka_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// restartedTopics writes entries of region 1 to n new topics (k each),
// closes the store and opens another on the same index directory, as a
// datanode restarts. It returns the topics and each one's entry IDs.
func restartedTopics(t *testing.T, brokers []string, n, k int) (*kafka.LogStore, []string, map[string][]logstore.EntryID) {
	t.Helper()
	dir := t.TempDir()
	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	topics := make([]string, n)
	want := map[string][]logstore.EntryID{}
	for i := range topics {
		topics[i] = newTopic(t)
		for j := range k {
			res, err := w.AppendBatch(context.Background(), []logstore.Entry{{Namespace: topics[i], Region: 1, Data: []byte{byte(i), byte(j)}}})
			require.NoError(t, err)
			want[topics[i]] = append(want[topics[i]], res.LastEntryIDs[1])
		}
	}
	require.NoError(t, w.Close())
	return openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir }), topics, want
}

// readAll replays region 1 of every topic at once, each with its own Read,
// and returns each topic's entry IDs and read error.
func readAll(ctx context.Context, s *kafka.LogStore, topics []string) (map[string][]logstore.EntryID, map[string]error) {
	var mu sync.Mutex
	got, errs := map[string][]logstore.EntryID{}, map[string]error{}
	var wg sync.WaitGroup
	for _, topic := range topics {
		wg.Go(func() {
			var ids []logstore.EntryID
			var rerr error
			for e, err := range s.Read(ctx, topic, 1, 0) {
				if err != nil {
					rerr = err
					break
				}
				ids = append(ids, e.ID)
			}
			mu.Lock()
			got[topic], errs[topic] = ids, rerr
			mu.Unlock()
		})
	}
	wg.Wait()
	return got, errs
}

// TestReadBoundsOfManyTopicsAtOnce: a datanode's restart replays all its
// topics at once; each read's bounds are one pair of ListOffsets requests
// at the cached leader (its start and its end, no metadata round trip and
// no fallback), and every replay returns its own entries. (kfake only: it
// counts requests.)
func TestReadBoundsOfManyTopicsAtOnce(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("counts requests in kfake")
	}
	c := testutil.NewCluster(t)
	const n = 12
	s, topics, want := restartedTopics(t, c.ListenAddrs(), n, 3)
	var lists atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lists.Add(int32(dataTopics(req.(*kmsg.ListOffsetsRequest))))
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, errs := readAll(ctx, s, topics)
	for _, topic := range topics {
		require.NoError(t, errs[topic], topic)
		require.Equal(t, want[topic], got[topic], topic)
	}
	require.EqualValues(t, 2*n, lists.Load(), "each topic's start and end asked once")
}
