package kafka_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// seenBatch is one partition's part of a produce request, as the broker
// received it.
type seenBatch struct {
	topic   string   // name, or ID (produce v13 names topics by ID)
	batches int      // record batches in the partition's bytes
	regions []uint64 // region of each record
	data    []string // entry data of each record (every entry fits one record)
}

// batchesOf decodes a produce request's partitions.
func batchesOf(req *kmsg.ProduceRequest) []seenBatch {
	var out []seenBatch
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sb := seenBatch{topic: t.Topic}
			if sb.topic == "" {
				sb.topic = fmt.Sprintf("%x", t.TopicID)
			}
			for b := p.Records; len(b) >= 12; {
				n := 12 + int(binary.BigEndian.Uint32(b[8:12]))
				if n > len(b) {
					break
				}
				sb.batches++
				b = b[n:]
			}
			rp := kmsg.FetchResponseTopicPartition{RecordBatches: p.Records}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{}, &rp, kgo.DefaultDecompressor(), nil)
			for _, r := range fp.Records {
				if pt, err := record.Decode(r.Key, r.Value); err == nil {
					sb.regions = append(sb.regions, pt.Region)
					sb.data = append(sb.data, string(pt.Data))
				}
			}
			out = append(out, sb)
		}
	}
	return out
}

// TestProduceRequestComposition checks, from the broker's side, what the
// dispatcher promises under load (8 topics, 32 writers, 4 lanes): every
// partition of a produce request holds one record batch, every batch holds
// one region (MaxRegionsPerBatch 1), one request carries several topics'
// batches, and one call's entries are one run of consecutive records in
// one batch (one group = one batch, with concurrent lanes).
func TestProduceRequestComposition(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	var mu sync.Mutex
	var requests [][]seenBatch
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		bs := batchesOf(kreq.(*kmsg.ProduceRequest))
		mu.Lock()
		requests = append(requests, bs)
		mu.Unlock()
		return nil, nil, false
	})
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceLanes = 4 })
	ctx := context.Background()
	base := newTopic(t)
	const topics, writers, calls, perCall = 8, 32, 15, 3
	for i := range topics {
		require.NoError(t, s.CreateNamespace(ctx, fmt.Sprintf("%s-%d", base, i)))
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := fmt.Sprintf("%s-%d", base, w%topics)
			for i := range calls {
				var es []logstore.Entry
				for j := range perCall {
					es = append(es, logstore.Entry{Namespace: ns, Region: logstore.RegionID(w + 1), Data: fmt.Appendf(nil, "%d/%d/%d", w, i, j)})
				}
				_, err := s.AppendBatch(ctx, es)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	multiTopic, records := 0, 0
	where := map[string][2]int{} // entry data -> (batch number, index in batch)
	batch := 0
	for _, req := range requests {
		seen := map[string]bool{}
		for _, b := range req {
			require.Equal(t, 1, b.batches, "one batch per partition per request")
			require.False(t, seen[b.topic], "one partition of a topic per request")
			seen[b.topic] = true
			for i, r := range b.regions {
				require.Equal(t, b.regions[0], r, "a batch holds one region")
				where[b.data[i]] = [2]int{batch, i}
			}
			records += len(b.regions)
			batch++
		}
		if len(seen) > 1 {
			multiTopic++
		}
	}
	require.Equal(t, writers*calls*perCall, records, "every record was produced once")
	for w := range writers {
		for i := range calls {
			first := where[fmt.Sprintf("%d/%d/0", w, i)]
			for j := 1; j < perCall; j++ {
				require.Equal(t, [2]int{first[0], first[1] + j}, where[fmt.Sprintf("%d/%d/%d", w, i, j)],
					"call %d of writer %d is one run of records in one batch", i, w)
			}
		}
	}
	require.Positive(t, multiTopic, "under load, produce requests carry several topics' batches")
	t.Logf("%d calls in %d produce requests, %d of them with several topics", writers*calls, len(requests), multiTopic)
}

// TestPartitionErrorInMultiTopicRequest protects error fan-out inside a
// packed request: when the broker rejects one topic's partition of a
// request that carries several topics, exactly the calls whose records
// were in that partition's batch fail, every other call (the other topics'
// batches in the same request included) succeeds, and the store keeps
// serving.
func TestPartitionErrorInMultiTopicRequest(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceLanes = 2 })
	ctx := context.Background()
	bad, good := newTopic(t)+"-bad", newTopic(t)+"-good"
	require.NoError(t, s.CreateNamespace(ctx, bad))
	require.NoError(t, s.CreateNamespace(ctx, good))

	var mu sync.Mutex
	var rejected, sharedWith []string // data of the rejected batch; data of good's batch in that request
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: bad, Err: kerr.InvalidRecord, Count: 1,
		When: func(kreq kmsg.Request) bool {
			bs := batchesOf(kreq.(*kmsg.ProduceRequest))
			topics := map[string][]string{} // by the namespace each record's data names
			for _, b := range bs {
				for _, d := range b.data {
					ns := d[:strings.LastIndex(d[:strings.LastIndex(d, "/")], "/")]
					topics[ns] = append(topics[ns], d)
				}
			}
			if len(topics[bad]) == 0 || len(topics[good]) == 0 {
				return false // only a request that carries both topics
			}
			mu.Lock()
			rejected, sharedWith = topics[bad], topics[good]
			mu.Unlock()
			return true
		}})

	type result struct {
		data string
		err  error
	}
	var rmu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := good
			if w%2 == 0 {
				ns = bad
			}
			for i := range 20 {
				data := fmt.Sprintf("%s/%d/%d", ns, w, i)
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: logstore.RegionID(w + 1), Data: []byte(data)}})
				rmu.Lock()
				results = append(results, result{data, err})
				rmu.Unlock()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, rejected, "a request carrying both topics was faulted")
	require.NotEmpty(t, sharedWith)
	inRejected := map[string]bool{}
	for _, d := range rejected {
		inRejected[d] = true
	}
	failed := 0
	for _, r := range results {
		if inRejected[r.data] {
			require.ErrorIs(t, r.err, kerr.InvalidRecord, "call %s was in the rejected batch", r.data)
			failed++
		} else {
			require.NoError(t, r.err, "call %s was not in the rejected batch", r.data)
		}
	}
	require.Equal(t, len(rejected), failed)
	t.Logf("rejected batch of %d calls; %d calls of the other topic shared its request and succeeded", len(rejected), len(sharedWith))
}

// TestProduceTimeoutBoundsTheWholeCall protects ProduceTimeout as a bound
// on the whole AppendBatch call (a call queued behind its
// region's timed-out produce took 23.8 s with a 15 s timeout). The broker
// never answers: the first call fails with ErrTimeout (its entries may
// still be written); a second call of the same region, queued behind it,
// fails with ErrTimeout while the broker is still holding the first
// produce, that is without waiting for the lane, and it was withdrawn: it
// is never written, so it cannot overtake the first call's records.
func TestProduceTimeoutBoundsTheWholeCall(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	const timeout = time.Second
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceTimeout = timeout })
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	release, first := appendHeldByBroker(t, c, s, topic)
	// The broker holds the first produce until release is closed below, so a
	// call that waited for the lane would end only at this guard, with the
	// guard's error instead of ErrTimeout.
	guard, cancel := context.WithTimeout(ctx, 30*timeout)
	defer cancel()
	start := time.Now()
	_, err := s.AppendBatch(guard, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("second")}})
	elapsed := time.Since(start)
	require.ErrorIs(t, err, kafka.ErrTimeout)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the call waited for the guard, not its ProduceTimeout")
	require.Contains(t, err.Error(), "withdrawn before it was sent")
	err = <-first
	require.ErrorIs(t, err, kafka.ErrTimeout)
	require.Contains(t, err.Error(), "may still be written")
	t.Logf("the queued call returned after %v (ProduceTimeout %v)", elapsed, timeout)

	close(release)
	require.Eventually(t, func() bool {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("third")}})
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	for _, e := range collect(t, s.Read(ctx, topic, 1, 0)) {
		require.NotEqual(t, "second", string(e.Data), "the withdrawn call was never written")
	}
}
