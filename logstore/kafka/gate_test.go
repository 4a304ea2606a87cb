package kafka_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// racedScan writes two regions' entries to a new topic with a store of its
// own, then opens a store s on indexDir whose reads stop just before they
// hand what they scanned to the index (the first time), starts a read of
// region 1 from 0 and waits for it to stop there. It returns s, the topic,
// a function letting the read go on, and the read's outcome; gateClosed is
// closed when s's Close has closed its index gate.
func racedScan(t *testing.T, brokers []string, indexDir string) (s *kafka.LogStore, topic string, proceed func(), done <-chan error, gateClosed <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	topic = newTopic(t)
	w := openStore(t, brokers, nil)
	for i := range 20 {
		_, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(i%2 + 1), Data: fmt.Appendf(nil, "e%d", i)}})
		require.NoError(t, err)
	}
	s = openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = indexDir })
	reached, release, closed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	kafka.SetScanReportHook(s, func(string) {
		once.Do(func() {
			close(reached)
			<-release
		})
	}, func() { close(closed) })
	errc := make(chan error, 1)
	go func() {
		_, err := readErr(s.Read(ctx, topic, 1, 0))
		errc <- err
	}()
	<-reached
	return s, topic, sync.OnceFunc(func() { close(release) }), errc, closed
}

// TestDeleteNamespaceRacingAScanStopsItsIndexUpdate protects DeleteNamespace
// from a read that scanned the topic before it was deleted (gate.go): the
// read's report of what it decoded, arriving after DeleteNamespace dropped
// the topic's index, is not applied, so the dropped topic's index does not
// come back (and a topic recreated under the name is not described by the
// old log's records), neither in memory nor in a checkpoint.
func TestDeleteNamespaceRacingAScanStopsItsIndexUpdate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, topic, proceed, done, _ := racedScan(t, testutil.Brokers(t), dir)
	defer proceed()
	_, _, covered := kafka.IndexSpan(s, topic)
	require.True(t, covered, "the read started the topic's index")
	require.NoError(t, s.DeleteNamespace(context.Background(), topic))
	proceed()
	<-done // the read ends one way or the other; what matters is the index
	_, _, covered = kafka.IndexSpan(s, topic)
	require.False(t, covered, "a read that began before DeleteNamespace brought the dropped topic's index back")
	require.NoError(t, s.Close())
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, f := range files {
		require.NotContains(t, f.Name(), topic, "a checkpoint of the dropped topic was written")
	}
}

// TestCloseRacingAScanStopsItsIndexUpdate protects Close from a read still
// scanning (gate.go): once Close has closed the index gate, the read's
// report of what it scanned is not applied, so Close's final checkpoint
// holds the index as it was (here: the span [end, end) the read's start
// gave the topic), not half of a read that Close cut short. The reopened
// index shows the span the read would have lowered to 0 untouched.
func TestCloseRacingAScanStopsItsIndexUpdate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	brokers := testutil.Brokers(t)
	s, topic, proceed, done, gateClosed := racedScan(t, brokers, dir)
	defer proceed()
	c, w, covered := kafka.IndexSpan(s, topic)
	require.True(t, covered, "the read started the topic's index")
	require.Equal(t, c, w, "nothing accounted for before the read's scan")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-gateClosed
	proceed() // the read reports its scan now, after the gate closed
	// The read may have taken every entry already; if not, it was closed.
	if err := <-done; err != nil {
		require.ErrorIs(t, err, logstore.ErrClosed)
	}
	require.NoError(t, <-closed)

	r := openStore(t, brokers, func(cfg *kafka.Config) { cfg.IndexDir = dir; cfg.IndexReadOnly = true })
	rc, rw, covered := kafka.IndexSpan(r, topic)
	require.True(t, covered, "Close checkpointed the topic")
	require.Equal(t, [2]int64{c, w}, [2]int64{rc, rw}, "a read's scan reached the index after Close closed it")
}
