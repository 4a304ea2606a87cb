package kafka_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
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

// replayHoldingTheFirstPair replays region 1 of every topic at once while
// the broker holds the first ListOffsets pair (until release closes): it
// waits until every other topic's lookup waits for the next pair, releases
// the first, and checks that each replay returned its topic's entries.
func replayHoldingTheFirstPair(ctx context.Context, t *testing.T, s *kafka.LogStore, topics []string, want map[string][]logstore.EntryID, release chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	var got map[string][]logstore.EntryID
	var errs map[string]error
	go func() {
		defer close(done)
		got, errs = readAll(ctx, s, topics)
	}()
	require.Eventually(t, func() bool { return kafka.GatheringListTopics(s) == len(topics)-1 },
		20*time.Second, time.Millisecond, "every other topic's lookup waits for the next pair")
	close(release)
	<-done
	for _, topic := range topics {
		require.NoError(t, errs[topic], topic)
		require.Equal(t, want[topic], got[topic], topic)
	}
}

// TestReadBoundsOfManyTopicsShareAPair: the replays of many topics that
// start together (a restarted datanode's) look their log bounds up in
// shared ListOffsets pairs, one request naming every topic, instead of a
// pair each queued on the same two connections. The first topic's pair
// goes alone; every topic whose lookup starts while it is on the wire waits
// for the next pair, which carries them all (here the broker holds the
// first pair until the other lookups wait). Each replay returns its own
// entries. (kfake only: it counts and holds requests.)
func TestReadBoundsOfManyTopicsShareAPair(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("counts and holds requests in kfake")
	}
	c := testutil.NewCluster(t)
	const n = 12
	s, topics, want := restartedTopics(t, c.ListenAddrs(), n, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lists, named atomic.Int32
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		named.Add(int32(len(req.(*kmsg.ListOffsetsRequest).Topics)))
		if lists.Add(1) <= 2 { // the first pair
			c.SleepControl(func() {
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		}
		return nil, nil, false
	})
	replayHoldingTheFirstPair(ctx, t, s, topics, want, release)
	require.EqualValues(t, 4, lists.Load(), "two pairs: the first topic's, then the other topics' together")
	require.EqualValues(t, 2*n, named.Load(), "each topic asked for once, its start and its end")
}

// TestReadBoundsPairWithOneTopicFailing: a leader that answers one topic
// of a shared pair with an error (here NOT_LEADER_OR_FOLLOWER), or leaves
// one out of its answer, fails only those topics' lookups, which fall back
// to the full lookup (kadm's, with its retries); the pair's other topics
// take their answers, and every replay returns its entries. (kfake only:
// it holds and answers requests.)
func TestReadBoundsPairWithOneTopicFailing(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("holds and answers requests in kfake")
	}
	c := testutil.NewCluster(t)
	const n, k = 6, 3
	s, topics, want := restartedTopics(t, c.ListenAddrs(), n, k)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lists, shared, alone atomic.Int32
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lr := req.(*kmsg.ListOffsetsRequest)
		if lists.Add(1) <= 2 { // the first pair, one topic: held until the others wait
			c.SleepControl(func() {
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
			return nil, nil, false
		}
		if len(lr.Topics) < 2 {
			alone.Add(1) // a fallback's: answered by kfake
			return nil, nil, false
		}
		shared.Add(1)
		// The shared pair (n-1 topics), answered by hand: the first topic
		// it names in order fails, the second is left out, the others get
		// what kfake would answer (each holds k records from offset 0; a
		// wrong answer would show as missing entries).
		names := make([]string, 0, len(lr.Topics))
		for _, rt := range lr.Topics {
			names = append(names, rt.Topic)
		}
		slices.Sort(names)
		failing, leftOut := names[0], names[1]
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lr.Topics {
			if rt.Topic == leftOut {
				continue
			}
			tr := kmsg.NewListOffsetsResponseTopic()
			tr.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewListOffsetsResponseTopicPartition()
				p.Partition, p.LeaderEpoch = rp.Partition, -1
				switch {
				case rt.Topic == failing:
					p.ErrorCode = kerr.NotLeaderForPartition.Code
				case rp.Timestamp == -1:
					p.Offset = k
				}
				tr.Partitions = append(tr.Partitions, p)
			}
			resp.Topics = append(resp.Topics, tr)
		}
		return resp, nil, true
	})
	replayHoldingTheFirstPair(ctx, t, s, topics, want, release)
	require.EqualValues(t, 2, shared.Load(), "one shared pair")
	require.EqualValues(t, 4, alone.Load(), "only the failed and the left-out topics looked their start and end up again (the full lookup)")
}
