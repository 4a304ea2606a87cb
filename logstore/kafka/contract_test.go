package kafka_test

import (
	"bytes"
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/testutil"
)

// TestBufferReuseAfterEarlyReturn protects Entry.Data ownership: an append
// whose context ends while franz-go still holds its records returns at
// once, and the caller may then reuse its buffer (as a pooled buffer
// would be) without changing what is written. The record is sent again
// after the overwrite, and still reads back byte-identical to what was
// appended.
func TestBufferReuseAfterEarlyReturn(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	release := make(chan struct{})
	var held atomic.Int32
	// The first produce is held, then fails with a retriable error:
	// franz-go encodes the batch again from its records for the retry,
	// after the caller has reused its buffer.
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		held.Add(1)
		c.SleepControl(func() { <-release })
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(req.GetVersion())
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	buf := bytes.Repeat([]byte("original"), 1024)
	want := bytes.Clone(buf)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.AppendBatch(actx, []logstore.Entry{{Namespace: topic, Region: 1, Data: buf}})
		done <- err
	}()
	require.Eventually(t, func() bool { return held.Load() > 0 }, 10*time.Second, time.Millisecond)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "may still be written")

	copy(buf, bytes.Repeat([]byte("REUSED!!"), 1024)) // the caller's pool hands the buffer on
	close(release)
	// The region's next append is sent only once the abandoned produce
	// returned, so when it is acknowledged the first record has landed.
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("next")}})
	require.NoError(t, err)

	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 2)
	require.Equal(t, want, got[0].Data)
	require.Equal(t, "next", string(got[1].Data))
}

// slowStore is an index store whose Get blocks until its context ends, as
// an object store that stopped answering would; entered is closed on the
// first Get.
type slowStore struct {
	index.Store
	entered chan struct{}
	once    sync.Once
}

func (s *slowStore) Get(ctx context.Context, name string) ([]byte, error) {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestOpenBoundsIndexLoadWithContext protects Open(ctx): loading the index
// from a store that hangs ends when ctx ends, with ctx's error, and leaves
// no goroutine behind.
func TestOpenBoundsIndexLoadWithContext(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, brokers, func(cfg *kafka.Config) { cfg.IndexDir = dir })
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("a")}})
	require.NoError(t, err)
	require.NoError(t, s.Close()) // writes a checkpoint

	ds, err := index.NewDirStore(dir)
	require.NoError(t, err)
	slow := &slowStore{Store: ds, entered: make(chan struct{})}
	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers
	cfg.IndexStore = slow
	octx, cancel := context.WithCancel(ctx)
	go func() {
		<-slow.entered
		cancel()
	}()
	s2, err := kafka.Open(octx, cfg)
	cancel()
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, s2)
	require.Contains(t, err.Error(), "index")
}

// TestReadRacingDeleteNamespace protects DeleteNamespace from reads in
// progress: a read that scans a topic (its store has no coverage yet),
// many small fetches long, and goes on decoding after the topic was
// deleted must not re-create the dropped topic's index, in memory or in
// IndexDir.
func TestReadRacingDeleteNamespace(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	w := openStore(t, brokers, nil)
	for i := range 60 { // a batch each
		_, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(i%2 + 1), Data: bytes.Repeat([]byte{byte(i)}, 1000)}})
		require.NoError(t, err)
	}

	dir := t.TempDir()
	s := openStore(t, brokers, func(cfg *kafka.Config) {
		cfg.IndexDir = dir
		cfg.MaxBatchBytes = 4096
		cfg.FetchMaxBytes = 4096 // a few batches per response
		cfg.ReadHoldBytes = 4096
		cfg.MaxEntryBytes = cfg.ReadHoldBytes
	})
	n := 0
	for _, err := range s.Read(ctx, topic, 1, 0) {
		if err != nil {
			break // the rest of the topic is gone
		}
		if n++; n == 1 {
			require.NoError(t, s.DeleteNamespace(ctx, topic))
		}
	}
	require.Positive(t, n)
	require.NoError(t, s.Close())
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, f := range files {
		require.NotContains(t, f.Name(), topic, "a checkpoint of the dropped topic was written")
	}
}

// TestCloseEndsReadInProgress protects Close against reads in progress:
// Close called from a read's loop body (the worst case: the read cannot
// finish before Close returns) returns, the read yields no further entry
// but an error matching ErrClosed, and its fetch goroutine is gone (the
// package's goleak check).
func TestCloseEndsReadInProgress(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, brokers, func(cfg *kafka.Config) { cfg.IndexDir = t.TempDir() })
	var entries []logstore.Entry
	for i := range 50 {
		entries = append(entries, logstore.Entry{Namespace: topic, Region: 1, Data: []byte{byte(i)}})
	}
	_, err := s.AppendBatch(ctx, entries)
	require.NoError(t, err)

	n := 0
	var readErr error
	for _, err := range s.Read(ctx, topic, 1, 0) {
		if err != nil {
			readErr = err
			break
		}
		if n++; n == 1 {
			require.NoError(t, s.Close())
		}
	}
	require.Equal(t, 1, n, "an entry was yielded after Close")
	require.ErrorIs(t, readErr, logstore.ErrClosed)
}
