package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// produceLog records, for every produce request kfake receives, the regions
// of each record in its batch.
type produceLog struct {
	mu       sync.Mutex
	requests [][]uint64
}

func (l *produceLog) attach(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				rp := kmsg.FetchResponseTopicPartition{RecordBatches: p.Records}
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{}, &rp, kgo.DefaultDecompressor(), nil)
				var regions []uint64
				for _, r := range fp.Records {
					if pt, err := record.Decode(r.Key, r.Value); err == nil {
						regions = append(regions, pt.Region)
					}
				}
				l.mu.Lock()
				l.requests = append(l.requests, regions)
				l.mu.Unlock()
			}
		}
		return nil, nil, false
	})
}

func (l *produceLog) snapshot() [][]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]uint64(nil), l.requests...)
}

// TestGroupCommitKeepsBatchesRegionPure protects the batch layout: with
// one produce lane, calls queue up while a produce is in flight; the calls
// of one region that are pending together go out in one produce request,
// and no produce request mixes regions (MaxRegionsPerBatch is 1).
func TestGroupCommitKeepsBatchesRegionPure(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	var log produceLog
	log.attach(c)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceLanes = 1 })
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))

	const writers, regions, calls = 32, 16, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				region := logstore.RegionID(w%regions + 1)
				_, err := s.AppendBatch(ctx, []logstore.Entry{
					{Namespace: topic, Region: region, Data: fmt.Appendf(nil, "w%d-%d-a", w, i)},
					{Namespace: topic, Region: region, Data: fmt.Appendf(nil, "w%d-%d-b", w, i)},
				})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	reqs := log.snapshot()
	require.NotEmpty(t, reqs)
	records := 0
	for i, regs := range reqs {
		records += len(regs)
		for _, r := range regs {
			require.Equal(t, regs[0], r, "produce request %d mixes regions: %v", i, regs)
		}
	}
	require.Equal(t, writers*calls*2, records)
	require.Less(t, len(reqs), writers*calls, "pending calls of a region share produce requests")
	t.Logf("%d calls went out in %d produce requests", writers*calls, len(reqs))
}

// TestMaxRegionsPerBatchMixesABacklog shows the MaxRegionsPerBatch knob:
// with one lane and 32 writers there is a backlog, and groups of different
// regions share produce requests, never more than the limit.
func TestMaxRegionsPerBatchMixesABacklog(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	var log produceLog
	log.attach(c)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceLanes = 1; cfg.MaxRegionsPerBatch = 4 })
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(w + 1), Data: fmt.Appendf(nil, "%d-%d", w, i)}})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	mixed := 0
	for _, regs := range log.snapshot() {
		distinct := map[uint64]bool{}
		for _, r := range regs {
			distinct[r] = true
		}
		require.LessOrEqual(t, len(distinct), 4)
		if len(distinct) > 1 {
			mixed++
		}
	}
	require.Positive(t, mixed, "some produce requests carry several regions")
}

// TestProduceErrorFailsOnlyItsRequests protects error fan-out: a produce
// that Kafka rejects fails the append whose records it carried, the
// producer keeps serving, and other topics are untouched.
func TestProduceErrorFailsOnlyItsRequests(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	bad, good := newTopic(t)+"-bad", newTopic(t)+"-good"
	require.NoError(t, s.CreateNamespace(ctx, bad))
	require.NoError(t, s.CreateNamespace(ctx, good))

	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: bad, Err: kerr.InvalidRecord, Count: 1})
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: bad, Region: 1, Data: []byte("rejected")}})
	require.Error(t, err)
	require.ErrorIs(t, err, kerr.InvalidRecord)

	res, err := s.AppendBatch(ctx, []logstore.Entry{
		{Namespace: bad, Region: 1, Data: []byte("after")},
		{Namespace: good, Region: 2, Data: []byte("other topic")},
	})
	require.NoError(t, err)
	require.Len(t, res.LastEntryIDs, 2)

	got := collect(t, s.Read(ctx, bad, 1, 0))
	require.Len(t, got, 1)
	require.Equal(t, "after", string(got[0].Data))
	require.Equal(t, res.LastEntryIDs[1], got[0].ID)
}

// sleepProduce makes kfake hold every produce request until release is
// closed (or the cluster closes). The tests using it own their cluster, so
// every produce is theirs.
func sleepProduce(c *kfake.Cluster, release <-chan struct{}, held *atomic.Int32) {
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-release:
		default:
			held.Add(1)
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
}

// appendHeldByBroker makes the broker hold every produce until release is
// closed, starts an append of region 1 ("first") to topic, and returns once
// the broker holds its produce; first receives the append's error.
func appendHeldByBroker(t *testing.T, c *kfake.Cluster, s *kafka.LogStore, topic string) (release chan struct{}, first <-chan error) {
	t.Helper()
	release = make(chan struct{})
	var held atomic.Int32
	sleepProduce(c, release, &held)
	done := make(chan error, 1)
	go func() {
		_, err := s.AppendBatch(context.Background(), []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("first")}})
		done <- err
	}()
	require.Eventually(t, func() bool { return held.Load() > 0 }, 10*time.Second, time.Millisecond)
	return release, done
}

// TestBackpressureBoundsQueuedBytes protects bounded memory when Kafka is
// slow: once MaxQueuedBytes are queued or in flight for a topic, further
// appends block until there is room or their context ends, and an append
// that gave up wrote nothing.
func TestBackpressureBoundsQueuedBytes(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	const limit = 256 << 10
	reg := prometheus.NewRegistry()
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) {
		cfg.MaxBatchBytes = 64 << 10
		cfg.MaxQueuedBytes = limit
		cfg.ProduceLanes = 2
		cfg.Registerer = reg
	})
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	release := make(chan struct{})
	var held atomic.Int32
	sleepProduce(c, release, &held)

	data := make([]byte, 60<<10)
	var wg sync.WaitGroup
	var acked atomic.Int32
	for i := range 4 { // 4 x 60 KiB fits under 256 KiB
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(i + 1), Data: data}})
			if assert.NoError(t, err) {
				acked.Add(1)
			}
		}()
	}
	// Wait until all four hold their room (queued or in flight), not just
	// until the first produce is held: otherwise the fifth can take room
	// a slow starter has not taken yet.
	require.Eventually(t, func() bool { return held.Load() > 0 && queued(t, reg, topic) == 4 }, 10*time.Second, time.Millisecond)

	// The queue is full: a fifth append cannot get room.
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := s.AppendBatch(tctx, []logstore.Entry{{Namespace: topic, Region: 9, Data: data}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "nothing was written")

	close(release)
	wg.Wait()
	require.Equal(t, int32(4), acked.Load())
	require.Empty(t, collect(t, s.Read(ctx, topic, 9, 0)), "the append that gave up wrote nothing")
}

// TestProduceTimeoutReturns protects against appends hanging on a broker
// that never answers (GreptimeDB #9017): the append fails with ErrTimeout
// after ProduceTimeout, and a later append works once the broker answers.
func TestProduceTimeoutReturns(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.ProduceTimeout = 500 * time.Millisecond })
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	release := make(chan struct{})
	var held atomic.Int32
	sleepProduce(c, release, &held)

	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("stuck")}})
	require.ErrorIs(t, err, kafka.ErrTimeout)
	require.Contains(t, err.Error(), "may still be written")
	close(release)
	require.Eventually(t, func() bool {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 2, Data: []byte("later")}})
		return err == nil
	}, 20*time.Second, 10*time.Millisecond)
}

// TestCancelQueuedAppendWritesNothing protects the meaning of a cancelled
// append: a call still queued (its region busy with an earlier produce) is
// withdrawn and never written.
func TestCancelQueuedAppendWritesNothing(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	reg := prometheus.NewRegistry()
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.Registerer = reg })
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	release, done := appendHeldByBroker(t, c, s, topic)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := s.AppendBatch(cctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("withdrawn")}})
		second <- err
	}()
	// Cancel once the second call is queued behind the first (region 1 is
	// busy, so it cannot be sent).
	require.Eventually(t, func() bool { return queued(t, reg, topic) == 2 }, 10*time.Second, time.Millisecond)
	cancel()
	err := <-second
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "withdrawn before it was sent")
	close(release)
	require.NoError(t, <-done)
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 1)
	require.Equal(t, "first", string(got[0].Data))
}

// queued reads the kwal_queue_requests gauge of a namespace.
func queued(t *testing.T, reg *prometheus.Registry, topic string) float64 {
	t.Helper()
	v, _ := metricSum(t, reg, "kwal_queue_requests", "namespace", topic)
	return v
}

// TestCloseWithAppendsInFlight protects Close: appends racing with it
// either succeed (and are in the log) or fail, none hangs, calls after
// Close fail with ErrClosed, and Close is idempotent.
func TestCloseWithAppendsInFlight(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers
	s, err := kafka.Open(context.Background(), cfg)
	require.NoError(t, err)
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))

	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[logstore.RegionID][]string{}
	started := make(chan struct{})
	var once sync.Once
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; ; i++ {
				data := fmt.Sprintf("w%d-%d-%x", w, i, rng.Uint64())
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(w + 1), Data: []byte(data)}})
				if err != nil {
					assert.ErrorIs(t, err, logstore.ErrClosed)
					return
				}
				mu.Lock()
				acked[logstore.RegionID(w+1)] = append(acked[logstore.RegionID(w+1)], data)
				mu.Unlock()
				if i == 5 {
					once.Do(func() { close(started) })
				}
			}
		}()
	}
	<-started
	require.NoError(t, s.Close())
	wg.Wait()
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("late")}})
	require.ErrorIs(t, err, logstore.ErrClosed)
	_, err = s.LatestEntryID(ctx, topic)
	require.ErrorIs(t, err, logstore.ErrClosed)
	_, err = readErr(s.Read(ctx, topic, 1, 0))
	require.ErrorIs(t, err, logstore.ErrClosed)

	// Everything acknowledged before Close is in the log, in order.
	s2 := openStore(t, brokers, nil)
	for region, datas := range acked {
		got := collect(t, s2.Read(ctx, topic, region, 0))
		require.GreaterOrEqual(t, len(got), len(datas))
		for i, d := range datas {
			require.Equal(t, d, string(got[i].Data))
		}
	}
}

// TestConfigValidateNamesTheField protects configuration errors: each bad
// setting is reported by its field name, and secrets never print.
func TestConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field  string
		mutate func(*kafka.Config)
	}{
		{"Brokers", func(c *kafka.Config) { c.Brokers = nil }},
		{"Brokers[0]", func(c *kafka.Config) { c.Brokers = []string{"nohostport"} }},
		{"MaxBatchBytes", func(c *kafka.Config) { c.MaxBatchBytes = 10 }},
		{"MaxBatchBytes", func(c *kafka.Config) { c.MaxBatchBytes = 128 << 20 }},
		{"ProduceLanes", func(c *kafka.Config) { c.ProduceLanes = 0 }},
		{"Compression", func(c *kafka.Config) { c.Compression = "brotli" }},
		{"ProduceTimeout", func(c *kafka.Config) { c.ProduceTimeout = 0 }},
		{"RequestTimeout", func(c *kafka.Config) { c.RequestTimeout = -1 }},
		{"DialTimeout", func(c *kafka.Config) { c.DialTimeout = 0 }},
		{"RetryBackoff", func(c *kafka.Config) { c.RetryBackoff = -1 }},
		{"Linger", func(c *kafka.Config) { c.Linger = -1 }},
		{"Fencing", func(c *kafka.Config) { c.Fencing = "loose" }},
		{"Lease", func(c *kafka.Config) { c.Lease = -time.Second }},
		{"Lease", func(c *kafka.Config) { c.Lease = time.Microsecond }},
		{"MaxRegionsPerBatch", func(c *kafka.Config) { c.MaxRegionsPerBatch = 0 }},
		{"MaxQueuedBytes", func(c *kafka.Config) { c.MaxQueuedBytes = 1 }},
		{"FetchMaxBytes", func(c *kafka.Config) { c.FetchMaxBytes = 1 }},
		{"ReplicationFactor", func(c *kafka.Config) { c.ReplicationFactor = 0 }},
		{"IndexCheckpointInterval", func(c *kafka.Config) { c.IndexCheckpointInterval = -1 }},
		{"TLS", func(c *kafka.Config) { c.TLS = &kafka.TLSConfig{CertFile: "c.pem"} }},
		{"SASL.Mechanism", func(c *kafka.Config) { c.SASL = &kafka.SASLConfig{Mechanism: "GSSAPI", Username: "u"} }},
		{"SASL.Username", func(c *kafka.Config) { c.SASL = &kafka.SASLConfig{Mechanism: kafka.SASLPlain} }},
	} {
		cfg := kafka.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		require.Error(t, err, tc.field)
		require.Contains(t, err.Error(), tc.field+":")
		_, err = kafka.Open(context.Background(), cfg)
		require.Error(t, err, "Open validates first")
	}
	require.NoError(t, kafka.DefaultConfig().Validate())

	cfg := kafka.DefaultConfig()
	cfg.SASL = &kafka.SASLConfig{Mechanism: kafka.SASLScramSHA512, Username: "kwal", Password: "hunter2"}
	for _, out := range []string{cfg.String(), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg.SASL)} {
		require.NotContains(t, out, "hunter2")
	}
}

// TestUnreachableBrokerFailsFast protects Open against hanging on a dead
// address: it fails within about RequestTimeout.
func TestUnreachableBrokerFailsFast(t *testing.T) {
	t.Parallel()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.RequestTimeout = 500 * time.Millisecond
	cfg.DialTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err := kafka.Open(context.Background(), cfg)
	require.Error(t, err)
	require.Contains(t, err.Error(), "no broker")
	require.Less(t, time.Since(start), 10*time.Second)
}

var _ = errors.Is
