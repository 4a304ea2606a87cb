package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// describeTopic returns the topic's configs as the broker reports them.
func describeTopic(t *testing.T, brokers []string, topic string) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, rc.Err)
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out
}

// createTopicWith creates a topic with configs, as an operator or another
// tool would, outside kwal.
func createTopicWith(t *testing.T, brokers []string, topic string, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, -1, configs, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

func ptr(s string) *string { return &s }

// TestCreatedTopicDeletesNothingByItself protects the promise that only
// Prune deletes a WAL record: a topic kwal creates keeps records whatever
// their age or the log's size (the broker's default retention of 7 days
// would delete the entries of a region idle for a week), unless the
// user's TopicConfigs say otherwise.
func TestCreatedTopicDeletesNothingByItself(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := newTopic(t)
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
	got := describeTopic(t, brokers, topic)
	require.Equal(t, "-1", got["retention.ms"])
	require.Equal(t, "-1", got["retention.bytes"])
	require.Equal(t, "delete", got["cleanup.policy"])
	r, err := s.TopicRetention(ctx, topic)
	require.NoError(t, err)
	require.False(t, r.Finite(), "%v", r)

	// The user's TopicConfigs win over kwal's defaults.
	u := openStore(t, brokers, func(c *kafka.Config) { c.TopicConfigs = map[string]string{"retention.ms": "3600000"} })
	own := newTopic(t)
	require.NoError(t, u.CreateNamespace(ctx, own))
	require.Equal(t, "3600000", describeTopic(t, brokers, own)["retention.ms"])
}

// TestExistingTopicIsCheckedAtFirstUse protects a topic kwal did not
// create: a compacted one is refused before anything is written to it
// (compaction deletes entries from the middle of the log), and a finite
// retention is reported (TopicRetention, the warning, the metric) though
// the topic is used.
func TestExistingTopicIsCheckedAtFirstUse(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	compacted, finite := newTopic(t), newTopic(t)
	createTopicWith(t, brokers, compacted, map[string]*string{"cleanup.policy": ptr("compact")})
	createTopicWith(t, brokers, finite, map[string]*string{"retention.ms": ptr("86400000")})

	var logs strings.Builder
	var mu sync.Mutex
	s := openStore(t, brokers, func(c *kafka.Config) { c.Logger = testLogger(&mu, &logs) })
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: compacted, Region: 1, Data: []byte("x")}})
	require.ErrorIs(t, err, kafka.ErrCompactedTopic)
	require.Contains(t, err.Error(), compacted)
	require.ErrorIs(t, s.Obsolete(ctx, compacted, 1, 1), kafka.ErrCompactedTopic)
	lo, hi := offsetsOf(t, brokers, compacted)
	require.Equal(t, lo, hi, "nothing was written to the compacted topic")

	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: finite, Region: 1, Data: []byte("x")}})
	require.NoError(t, err, "a finite retention is the user's choice: warned about, not refused")
	r, err := s.TopicRetention(ctx, finite)
	require.NoError(t, err)
	require.True(t, r.Finite())
	require.EqualValues(t, 86400000, r.Ms)
	mu.Lock()
	require.Contains(t, logs.String(), "retention.ms=86400000")
	require.Contains(t, logs.String(), finite)
	mu.Unlock()
}

// offsetsOf is the topic's log start and end as a plain client sees them.
func offsetsOf(t *testing.T, brokers []string, topic string) (int64, int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	starts, err := adm.ListStartOffsets(ctx, topic)
	require.NoError(t, err)
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	s, _ := starts.Lookup(topic, 0)
	e, _ := ends.Lookup(topic, 0)
	return s.Offset, e.Offset
}

// TestObsoleteRefusesAnIDTheLogNeverHeld protects a region's later entries
// from an Obsolete point beyond the log (a datanode passing a sequence
// number of its own): refused, naming both IDs, so that Prune cannot
// delete entries acknowledged after it. A point at or below the region's
// current one (a retry) changes nothing and writes no mark.
func TestObsoleteRefusesAnIDTheLogNeverHeld(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := newTopic(t)
	var ids []logstore.EntryID
	for i := range 3 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 5, Data: fmt.Appendf(nil, "e%d", i)}})
		require.NoError(t, err)
		ids = append(ids, res.LastEntryIDs[5])
	}
	for _, bad := range []logstore.EntryID{1 << 40, ids[2] + 1, math.MaxUint64} {
		err := s.Obsolete(ctx, topic, 5, bad)
		require.ErrorIs(t, err, kafka.ErrFutureID, "Obsolete up to %d", bad)
		require.Contains(t, err.Error(), fmt.Sprint(bad))
		require.Contains(t, err.Error(), fmt.Sprintf("latest entry ID is %d", ids[2]))
	}
	require.NoError(t, s.Obsolete(ctx, topic, 5, ids[1]))
	_, end := offsetsOf(t, brokers, topic)
	require.NoError(t, s.Obsolete(ctx, topic, 5, ids[1]), "a retry")
	require.NoError(t, s.Obsolete(ctx, topic, 5, ids[0]), "a point below the current one")
	_, after := offsetsOf(t, brokers, topic)
	require.Equal(t, end, after, "stale Obsolete calls write no mark")

	var later []logstore.EntryID
	for i := range 3 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 5, Data: fmt.Appendf(nil, "later%d", i)}})
		require.NoError(t, err)
		later = append(later, res.LastEntryIDs[5])
	}
	first, err := s.Prune(ctx, topic)
	require.NoError(t, err)
	require.LessOrEqual(t, first, later[0], "Prune kept the entries appended after the refused points")
	got := collect(t, s.Read(ctx, topic, 5, ids[1]+1))
	require.Len(t, got, 4)
}

// TestReadFromAnIDTheLogNeverHeld protects callers from a read that starts
// beyond the log: from the end + 1 is an empty replay; from further, or
// from an ID at the edge of its type, it fails naming the log's latest ID
// (the caller learned that ID somewhere: the log lost entries, or the ID is
// not this log's), never reads the whole history by an overflow.
func TestReadFromAnIDTheLogNeverHeld(t *testing.T) {
	t.Parallel()
	s := openStore(t, testutil.Brokers(t), nil)
	ctx := context.Background()
	topic := newTopic(t)
	var last logstore.EntryID
	for i := range 3 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: fmt.Appendf(nil, "e%d", i)}})
		require.NoError(t, err)
		last = res.LastEntryIDs[1]
	}
	require.Empty(t, collect(t, s.Read(ctx, topic, 1, last+1)), "replaying from after the last entry")
	for _, from := range []logstore.EntryID{last + 2, 1 << 62, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
		got, err := readErr(s.ReadRegions(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: from}))
		require.Empty(t, got, "from %d", from)
		require.ErrorIs(t, err, kafka.ErrFutureID, "from %d", from)
		require.Contains(t, err.Error(), fmt.Sprintf("latest entry ID is %d", last))
	}
}

// TestSecondStoreOnAnIndexDirIsRefused protects the index from two writers:
// an index directory belongs to one store at a time (two stores'
// checkpoints could claim coverage neither scanned, which lets Prune delete
// live records). A second Open fails at once naming the holder; a read-only
// store may inspect it; once the first store closed, the directory is free.
func TestSecondStoreOnAnIndexDirIsRefused(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	first := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.IndexDir = brokers, dir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := kafka.Open(ctx, cfg)
	require.ErrorIs(t, err, kafka.ErrIndexDirInUse)
	require.Contains(t, err.Error(), fmt.Sprintf("process %d", os.Getpid()))

	ro := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir; c.IndexReadOnly = true })
	require.NoError(t, ro.Close())
	require.NoError(t, first.Close())
	again := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	require.NoError(t, again.Close())
}

// TestLateMarkOfADeletedTopicIsNotIndexed protects a namespace name that is
// used again (topic pools do): a read that began before DeleteNamespace
// and decodes an Obsolete mark after it must not put that point into the
// index, where it would let Prune delete the new topic's live entries.
func TestLateMarkOfADeletedTopicIsNotIndexed(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	w := openStore(t, brokers, nil)
	var last logstore.EntryID
	for i := range 40 {
		res, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(i%2 + 1), Data: []byte(strings.Repeat("x", 200))}})
		require.NoError(t, err)
		last = res.LastEntryIDs[logstore.RegionID(i%2+1)]
	}
	require.NoError(t, w.Obsolete(ctx, topic, 7, last)) // the mark lies at the log's end

	// Small batches and fetches: the scan's first chunk, reported before
	// the mark is decoded, is where the read stops.
	s := openStore(t, brokers, func(c *kafka.Config) {
		c.MaxBatchBytes, c.FetchMaxBytes, c.ReadHoldBytes, c.MaxEntryBytes, c.MaxQueuedBytes = 1024, 1024, 1<<20, 1<<20, 1<<20
		c.MaxRequestBytes, c.ProduceLanes = 1024, 1
	})
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	kafka.SetScanReportHook(s, func(string) {
		once.Do(func() {
			close(reached)
			<-release
		})
	}, func() {})
	done := make(chan error, 1)
	go func() {
		_, err := readErr(s.Read(ctx, topic, 1, 0))
		done <- err
	}()
	<-reached
	require.Zero(t, kafka.IndexObsoletePoint(s, topic, 7), "the mark was not decoded yet")
	require.NoError(t, s.DeleteNamespace(ctx, topic))
	close(release)
	<-done
	require.Zero(t, kafka.IndexObsoletePoint(s, topic, 7), "a mark of the deleted topic set region 7's point in the index")
	require.False(t, kafka.IndexKnows(s, topic), "a mark of the deleted topic brought its index back")
}

// TestDeleteNamespaceTurnsAppendsAway protects appends racing
// DeleteNamespace: while it deletes, an append to the namespace fails
// (it would be acknowledged and then deleted with the topic, or recreate
// the topic under the delete); once DeleteNamespace returned, the name
// works again and what is appended then is kept.
func TestDeleteNamespaceTurnsAppendsAway(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	topic := newTopic(t)
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("before")}})
	require.NoError(t, err)

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.DeleteTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		once.Do(func() {
			close(reached)
			c.SleepControl(func() { <-release })
		})
		return nil, nil, false
	})
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteNamespace(ctx, topic) }()
	<-reached
	// Each refusal reads as one line.
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("during")}})
	require.Equal(t, fmt.Sprintf(`kwal: append to %q: the namespace is being deleted`, topic), oneLine(t, "AppendBatch", err))
	require.ErrorIs(t, err, kafka.ErrNamespaceDeleting)
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	err = s.CreateNamespace(ctx, topic)
	require.Equal(t, fmt.Sprintf(`kwal: create namespace %q: the namespace is being deleted`, topic), oneLine(t, "CreateNamespace", err))
	require.ErrorIs(t, err, kafka.ErrNamespaceDeleting)
	err = s.DeleteNamespace(ctx, topic)
	require.Equal(t, fmt.Sprintf(`kwal: delete namespace %q: the namespace is being deleted`, topic), oneLine(t, "DeleteNamespace", err))
	require.ErrorIs(t, err, kafka.ErrNamespaceDeleting)
	close(release)
	require.NoError(t, <-deleted)

	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("after")}})
	require.NoError(t, err)
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 1, "the recreated namespace holds only what was appended after the delete")
	require.Equal(t, "after", string(got[0].Data))
	require.Equal(t, res.LastEntryIDs[1], got[0].ID)
}

// lockedWriter is an io.Writer safe for a logger's concurrent writes.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// testLogger logs every level as text into b, guarded by mu.
func testLogger(mu *sync.Mutex, b *strings.Builder) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, b}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestAnEntryNoReadCanHoldIsRefused protects the promise that whatever is
// acknowledged is readable with the same configuration: an entry larger
// than MaxEntryBytes (at most what a read holds) fails its call before
// anything is written, naming the limit, and a configuration whose reads
// could not hold its largest entry is refused.
func TestAnEntryNoReadCanHoldIsRefused(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.MaxEntryBytes = 1 << 20 })
	ctx := context.Background()
	topic := newTopic(t)
	_, err := s.AppendBatch(ctx, []logstore.Entry{
		{Namespace: topic, Region: 1, Data: []byte("small")},
		{Namespace: topic, Region: 2, Data: make([]byte, 1<<20+1)},
	})
	require.ErrorIs(t, err, kafka.ErrEntryTooLarge)
	require.Contains(t, err.Error(), "entry 1 of region 2")
	require.Contains(t, err.Error(), "MaxEntryBytes 1048576")
	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: make([]byte, 1<<20)}})
	require.NoError(t, err, "an entry of exactly MaxEntryBytes is taken")
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 1, "nothing of the refused call was written")
	require.Equal(t, res.LastEntryIDs[1], got[0].ID)

	cfg := kafka.DefaultConfig()
	cfg.MaxEntryBytes = cfg.ReadHoldBytes + 1
	require.ErrorContains(t, cfg.Validate(), "MaxEntryBytes")
}
