package kafka_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestLeaderMoves protects appends and reads across partition leadership
// changes (what a broker failure looks like to a client): on a 3-broker
// in-process cluster the topic's leader moves while writers append and
// between reads; every append succeeds or fails cleanly, and reads (whose
// cached leader goes stale) return exactly what was acknowledged. It runs
// on kfake whatever KWAL_KAFKA_BROKERS says: moving a leader on demand
// needs kfake's hook.
func TestLeaderMoves(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t, kfake.NumBrokers(3))
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))

	var mu sync.Mutex
	acked := map[logstore.RegionID][]string{}
	write := func(round int) {
		var wg sync.WaitGroup
		for r := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 10 {
					data := fmt.Sprintf("round%d-r%d-%d", round, r, i)
					_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(r + 1), Data: []byte(data)}})
					if !assertNoErr(t, err) {
						return
					}
					mu.Lock()
					acked[logstore.RegionID(r+1)] = append(acked[logstore.RegionID(r+1)], data)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	check := func(what string) {
		for region, want := range acked {
			got := collect(t, s.Read(ctx, topic, region, 0))
			require.Len(t, got, len(want), "%s: region %d", what, region)
			for i := range want {
				require.Equal(t, want[i], string(got[i].Data), "%s: region %d entry %d", what, region, i)
			}
		}
	}
	leader := c.LeaderFor(topic, 0)
	for round := range 4 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			write(round)
		}()
		leader = (leader + 1) % 3
		require.NoError(t, c.MoveTopicPartition(topic, 0, leader))
		<-done
		check(fmt.Sprintf("after round %d", round))
	}
}

// TestFetchErrorsAreRetriedOrReported protects the read path against a
// flaky broker: retriable fetch errors (a leader change) are retried after
// a metadata lookup and the read completes; an error that persists ends
// the read with that error within RequestTimeout, never a hang.
func TestFetchErrorsAreRetriedOrReported(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.RequestTimeout = 2 * time.Second })
	ctx := context.Background()
	topic := newTopic(t)
	for i := range 20 {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(i%2 + 1), Data: fmt.Appendf(nil, "e%d", i)}})
		require.NoError(t, err)
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: 3})
	got := collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}))
	require.Len(t, got, 10)

	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: -1})
	start := time.Now()
	_, err := readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}))
	require.ErrorIs(t, err, kerr.NotLeaderForPartition)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 15*time.Second)
	h.Remove()
	require.Len(t, collect(t, s.Read(ctx, topic, 2, 0)), 10, "reads work again once the broker does")
}

// TestProduceRetriesDoNotDuplicate protects exactly-once appends through
// produce retries: the broker writes the records but answers
// REQUEST_TIMED_OUT (kfake applies the produce, then fails the answer),
// or answers NOT_LEADER; franz-go retries, the idempotent producer's
// sequence numbers make the broker drop the second copy, and the log holds
// every acknowledged entry once, at the ID the append reported.
func TestProduceRetriesDoNotDuplicate(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	for _, e := range []*kerr.Error{kerr.RequestTimedOut, kerr.NotLeaderForPartition} {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: e, Count: 3})
		var wg sync.WaitGroup
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(r + 1), Data: fmt.Appendf(nil, "%s-r%d-%d", e.Message, r, i)}})
					assertNoErr(t, err)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 3, h.Hits(), "the faults were hit: appends went through retries")
	}
	seen := map[string]int{}
	for _, es := range decodeEntries(t, scanRaw(t, c.ListenAddrs(), topic)) {
		for _, e := range es {
			seen[string(e.Data)]++
		}
	}
	require.Len(t, seen, 2*4*5)
	for d, n := range seen {
		require.Equal(t, 1, n, "entry %q is in the log %d times", d, n)
	}
}

// TestBrokerRestart protects a store across a broker restart (kfake with
// its data on disk, restarted on the same port): appends while the broker
// is down fail within ProduceTimeout, appends after it is back succeed on
// the same store, and reads return every acknowledged entry.
func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.SyncWrites())
		require.NoError(t, err)
		return c
	}
	c := start()
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) {
		cfg.ProduceTimeout = 2 * time.Second
		cfg.RequestTimeout = 2 * time.Second
	})
	ctx := context.Background()
	topic := newTopic(t)
	var acked []string
	appendOne := func(d string) error {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte(d)}})
		if err == nil {
			acked = append(acked, d)
		}
		return err
	}
	for i := range 5 {
		require.NoError(t, appendOne(fmt.Sprintf("before-%d", i)))
	}
	c.Close()
	began := time.Now()
	require.Error(t, appendOne("while-down"))
	require.Less(t, time.Since(began), 15*time.Second)

	c = start()
	defer c.Close()
	require.Eventually(t, func() bool { return appendOne("after") == nil }, 30*time.Second, 100*time.Millisecond)
	for i := range 5 {
		require.NoError(t, appendOne(fmt.Sprintf("after-%d", i)))
	}
	got := collect(t, s.Read(ctx, topic, 1, 0))
	var datas []string
	for _, e := range got {
		datas = append(datas, string(e.Data))
	}
	// Appends that failed may or may not be in the log (the contract allows
	// it); every acknowledged one is, in order.
	k := 0
	for _, d := range datas {
		if k < len(acked) && d == acked[k] {
			k++
		}
	}
	require.Equal(t, len(acked), k, "every acknowledged entry is there, in order: got %v", datas)
	require.NoError(t, s.Close())
}
