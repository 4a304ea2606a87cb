package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestPruneDeletesOnlyWhatNoRegionNeeds protects pruning: nothing goes
// while a region still holds entries; once every region declared its
// early entries obsolete, records below the lowest entry still needed are
// deleted (a region's reads from below its own deleted entries fail with
// ErrPruned, later entries are intact); another store's entry, which the
// index learns only by Prune's scan, is kept while a record that is not
// kwal's is not; and without the index nothing can be pruned.
func TestPruneDeletesOnlyWhatNoRegionNeeds(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := newTopic(t)
	ids := map[logstore.RegionID][]logstore.EntryID{}
	appendN := func(n int) {
		for i := range n {
			var batch []logstore.Entry
			for r := logstore.RegionID(1); r <= 2; r++ {
				batch = append(batch, logstore.Entry{Namespace: topic, Region: r, Data: fmt.Appendf(nil, "r%d-%d", r, i)})
			}
			res, err := s.AppendBatch(ctx, batch)
			require.NoError(t, err)
			for r, id := range res.LastEntryIDs {
				ids[r] = append(ids[r], id)
			}
		}
	}
	appendN(10)

	first, err := s.Prune(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, logstore.EntryID(1), first, "no region declared anything obsolete")

	require.NoError(t, s.Obsolete(ctx, topic, 1, ids[1][9])) // region 1 needs nothing
	first, err = s.Prune(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, ids[2][0], first, "region 2 still needs all of its entries")

	require.NoError(t, s.Obsolete(ctx, topic, 2, ids[2][3])) // region 2 needs its 5th entry on
	first, err = s.Prune(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, ids[2][4], first)
	_, err = readErr(s.Read(ctx, topic, 2, 0))
	require.ErrorIs(t, err, logstore.ErrPruned)
	got := collect(t, s.Read(ctx, topic, 2, ids[2][4]))
	require.Len(t, got, 6)
	require.Equal(t, "r2-4", string(got[0].Data))

	// Another store's entry, unseen by this store's index until Prune
	// scans for it, stops pruning there; a record that is not kwal's holds
	// no entry and does not.
	rawProduce(t, brokers, &kgo.Record{Topic: topic, Value: []byte("foreign")})
	other := openStore(t, brokers, nil)
	res, err := other.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 3, Data: []byte("r3")}})
	require.NoError(t, err)
	appendN(2)
	require.NoError(t, s.Obsolete(ctx, topic, 1, ids[1][11]))
	require.NoError(t, s.Obsolete(ctx, topic, 2, ids[2][11]))
	first, err = s.Prune(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, res.LastEntryIDs[3], first, "region 3's entry is kept, the foreign record before it is not")
	require.Len(t, collect(t, s.Read(ctx, topic, 3, 0)), 1)
	require.Len(t, collect(t, other.Read(ctx, topic, 3, 0)), 1)

	off := openStore(t, brokers, func(c *kafka.Config) { c.DisableIndex = true })
	_, err = off.Prune(ctx, topic)
	require.ErrorIs(t, err, kafka.ErrCannotPrune)
}

// TestBackgroundPrune protects PruneInterval: with it set, Obsolete alone
// leads to the deletion of records no region needs, and Close stops the
// pruner (goleak checks it is gone).
func TestBackgroundPrune(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.PruneInterval = 20 * time.Millisecond })
	ctx := context.Background()
	topic := newTopic(t)
	var last logstore.EntryID
	for i := range 10 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: fmt.Appendf(nil, "%d", i)}})
		require.NoError(t, err)
		last = res.LastEntryIDs[1]
	}
	require.NoError(t, s.Obsolete(ctx, topic, 1, last-1))
	require.Eventually(t, func() bool {
		_, err := readErr(s.Read(ctx, topic, 1, 0))
		return errors.Is(err, logstore.ErrPruned)
	}, 20*time.Second, 20*time.Millisecond)
	got := collect(t, s.Read(ctx, topic, 1, last))
	require.Len(t, got, 1, "the entry still needed is kept")
	require.NoError(t, s.Close())
}

// TestPruneReportsARefusal protects services that refuse DeleteRecords
// (GreptimeDB #8259): Prune returns the broker's error and deletes nothing.
func TestPruneReportsARefusal(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	topic := newTopic(t)
	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("a")}, {Namespace: topic, Region: 1, Data: []byte("b")}})
	require.NoError(t, err)
	require.NoError(t, s.Obsolete(ctx, topic, 1, res.LastEntryIDs[1]-1))
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DeleteRecords}, Err: kerr.PolicyViolation, Count: -1})
	_, err = s.Prune(ctx, topic)
	require.ErrorIs(t, err, kerr.PolicyViolation)
	require.Len(t, collect(t, s.Read(ctx, topic, 1, 0)), 2, "nothing was deleted")
}

// TestPruneKeepsOtherRegionsReplayable is pruning's simplest case: region
// 1 never flushed (replays from ID 1), region 2 flushed its first entry at
// offset 0, Prune deletes offset 0; region 1's replay from ID 1 must return
// all of its entries, and so must a restarted store's, with and without its
// index directory. Region 2 replays from its flushed ID + 1, and a read of
// region 2 from ID 1 (whose entry was deleted) fails with ErrPruned.
func TestPruneKeepsOtherRegionsReplayable(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	ctx := context.Background()
	topic := newTopic(t)
	var first2 logstore.EntryID
	for i, r := range []logstore.RegionID{2, 1, 2, 1} {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: fmt.Appendf(nil, "r%d-%d", r, i)}})
		require.NoError(t, err)
		if i == 0 {
			first2 = res.LastEntryIDs[2]
		}
	}
	require.Equal(t, logstore.EntryID(1), first2)
	require.NoError(t, s.Obsolete(ctx, topic, 2, first2))
	got, err := s.Prune(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, logstore.EntryID(2), got, "offset 0 was deleted")

	check := func(s *kafka.LogStore, when string) {
		r1 := collect(t, s.Read(ctx, topic, 1, 1))
		require.Len(t, r1, 2, when)
		require.Equal(t, "r1-1", string(r1[0].Data), when)
		r2 := collect(t, s.Read(ctx, topic, 2, first2+1))
		require.Len(t, r2, 1, when)
		both := collect(t, s.ReadRegions(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0, 2: first2 + 1}))
		require.Len(t, both, 3, when)
		_, err := readErr(s.Read(ctx, topic, 2, 1))
		var pe *logstore.PrunedError
		require.ErrorAs(t, err, &pe, when)
		require.Equal(t, logstore.EntryID(2), pe.FirstAvailable, when)
	}
	check(s, "same store")
	require.NoError(t, s.Close())
	check(openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir }), "restarted")
	check(openStore(t, brokers, nil), "restarted without its index directory")
	check(openStore(t, brokers, func(c *kafka.Config) { c.DisableIndex = true }), "no index")
}

// TestPruneWithReportsWhatHoldsItBack protects the prune report: a dry run
// names the prune point and the regions holding it back, lowest first,
// with the bytes each pins (what flushing it would free) and deletes
// nothing; the metric carries the first holder's bytes; the prune itself
// reports what it deleted, and the next one why nothing could go.
func TestPruneWithReportsWhatHoldsItBack(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := openStore(t, testutil.Brokers(t), func(c *kafka.Config) { c.Registerer = reg })
	ctx := context.Background()
	topic := newTopic(t)
	ids := map[logstore.RegionID][]logstore.EntryID{}
	data := make([]byte, 1024)
	for round := range 10 {
		for _, r := range []logstore.RegionID{1, 2, 3} {
			if r == 3 && round < 5 {
				continue
			}
			res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: data}})
			require.NoError(t, err)
			ids[r] = append(ids[r], res.LastEntryIDs[r])
		}
	}
	require.NoError(t, s.Obsolete(ctx, topic, 1, ids[1][2]))
	require.NoError(t, s.Obsolete(ctx, topic, 2, ids[2][7]))

	dry, err := s.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
	require.NoError(t, err)
	require.False(t, dry.Deleted)
	require.Equal(t, logstore.EntryID(1), dry.FirstID)
	require.Equal(t, ids[1][3], dry.PrunePoint)
	require.Len(t, dry.Holders, 3)
	for i, want := range []kafka.PruneHolder{
		{Region: 1, FirstNeeded: ids[1][3], ObsoleteUpTo: ids[1][2]},
		{Region: 3, FirstNeeded: ids[3][0]},
		{Region: 2, FirstNeeded: ids[2][8], ObsoleteUpTo: ids[2][7]},
	} {
		got := dry.Holders[i]
		require.Equal(t, want.Region, got.Region, "holder %d", i)
		require.Equal(t, want.FirstNeeded, got.FirstNeeded, "holder %d", i)
		require.Equal(t, want.ObsoleteUpTo, got.ObsoleteUpTo, "holder %d", i)
	}
	t.Logf("log bytes %d, holders %+v", dry.LogBytes, dry.Holders)
	if dry.LogBytes > 0 { // the broker reports partition sizes
		h := dry.Holders
		require.Positive(t, h[0].PinnedBytes)
		// Region 1 pins the offsets up to region 3's first entry, at the
		// log's average bytes per offset.
		require.InDelta(t, float64(dry.LogBytes)*float64(h[1].FirstNeeded-h[0].FirstNeeded)/float64(dry.LatestID),
			float64(h[0].PinnedBytes), float64(dry.LogBytes)/float64(dry.LatestID)+1)
		require.LessOrEqual(t, dry.PrunableBytes+h[0].PinnedBytes+h[1].PinnedBytes+h[2].PinnedBytes, dry.LogBytes)
	}
	require.Equal(t, float64(dry.Holders[0].PinnedBytes), gauge(t, reg, "kwal_prune_pinned_bytes", topic))
	require.Len(t, collect(t, s.Read(ctx, topic, 1, 0)), 10, "a dry run deletes nothing")

	res, err := s.PruneWith(ctx, topic, kafka.PruneOptions{})
	require.NoError(t, err)
	require.True(t, res.Deleted)
	require.Equal(t, logstore.EntryID(1), res.Before)
	require.Equal(t, ids[1][3], res.FirstID)

	res, err = s.PruneWith(ctx, topic, kafka.PruneOptions{})
	require.NoError(t, err)
	require.False(t, res.Deleted)
	require.Equal(t, ids[1][3], res.FirstID)
	require.Contains(t, res.Reason, fmt.Sprintf("region 1 still needs its entries from ID %d", ids[1][3]))
}

// gauge returns the value of the gauge name{namespace=ns} in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, ns string) float64 {
	t.Helper()
	v, ok := metricSum(t, reg, name, "namespace", ns)
	if !ok {
		t.Fatalf("no %s{namespace=%q}", name, ns)
	}
	return v
}

// TestRetentionPastEveryPrune states how a read from below a log start
// that retention moved past every prune point is answered: no prune mark
// speaks for what retention deleted, so the index is the only witness.
// Where it accounted for the deleted offsets (it wrote them, or loaded a
// checkpoint that covers them) and the region had no record there above
// its Obsolete point, the read succeeds, also after the index's accounted
// span rose with the log start; where it cannot prove it (a region that
// lost an entry, a read from below the region's own Obsolete point, an
// index that never covered the offsets), the read fails with ErrPruned.
// A prune after the retention speaks for the records from its start on.
func TestRetentionPastEveryPrune(t *testing.T) {
	t.Parallel()
	brokers, dir, topic, ids := retainedPastThePrunes(t)
	ctx := context.Background()
	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	for range 2 { // the second time, the index's span has risen with the log start
		got := collect(t, s.Read(ctx, topic, 2, ids[2][1]+1))
		require.Len(t, got, 4, "the checkpointed index proves region 2 lost nothing")
		require.Equal(t, ids[2][2], got[0].ID)
	}
	_, err := readErr(s.Read(ctx, topic, 2, ids[2][1]))
	require.ErrorIs(t, err, logstore.ErrPruned, "region 2's second entry is gone")
	_, err = readErr(s.Read(ctx, topic, 1, ids[1][1]))
	require.ErrorIs(t, err, logstore.ErrPruned, "below region 1's Obsolete point the index keeps no runs: not proven")

	// A store whose index never covered the deleted offsets cannot prove
	// anything.
	blind := openStore(t, brokers, nil)
	_, err = readErr(blind.Read(ctx, topic, 2, ids[2][1]+1))
	require.ErrorIs(t, err, logstore.ErrPruned, "nothing vouches for what retention deleted")
	require.Len(t, collect(t, blind.Read(ctx, topic, 2, ids[2][2])), 4, "from the log start no proof is needed")

	// Region 2 flushes two more; a prune deletes them and speaks for the
	// records from the retention's start on.
	require.NoError(t, blind.Obsolete(ctx, topic, 2, ids[2][3]))
	first, err := blind.Prune(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, ids[2][4], first)
	require.Len(t, collect(t, blind.Read(ctx, topic, 2, ids[2][3]+1)), 2)
	_, err = readErr(blind.Read(ctx, topic, 2, ids[2][1]+1))
	require.ErrorIs(t, err, logstore.ErrPruned, "still nothing vouches for the records below the retention's start")
	require.Len(t, collect(t, s.Read(ctx, topic, 2, ids[2][3]+1)), 2, "the first store learns the prune mark")
}

// TestRetentionProofSurvivesRestart protects the index's proof about what
// retention deleted across restarts: the span it accounted for when its C
// rose with the log start is checkpointed with it. Here the proof is held
// only by that span: after the start rose, enough appends make the next
// checkpoint a new base (which holds no runs below C) and delete the
// files that covered the deleted offsets. A restarted store still answers
// the read of region 2, which lost nothing it needs, and still refuses the
// one from its lost entry. (The span used to live in memory only, and the
// first read answered ErrPruned.)
func TestRetentionProofSurvivesRestart(t *testing.T) {
	t.Parallel()
	brokers, dir, topic, ids := retainedPastThePrunes(t)
	ctx := context.Background()
	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	require.Len(t, collect(t, s.Read(ctx, topic, 2, ids[2][1]+1)), 4, "the checkpoint covers the deleted offsets")
	// The read raised C to the log start. 100 other regions append 50
	// times: the next checkpoint's delta outgrows the base, so it writes a
	// new base and deletes the older files.
	for i := range 50 {
		var batch []logstore.Entry
		for r := range logstore.RegionID(100) {
			batch = append(batch, logstore.Entry{Namespace: topic, Region: 10 + r, Data: fmt.Appendf(nil, "%d", i)})
		}
		_, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		if strings.HasPrefix(f.Name(), "idx-") { // the index's files, not the lock or other blobs
			names = append(names, f.Name())
		}
	}
	require.Len(t, names, 1, "one file left: the new base")
	require.True(t, strings.HasSuffix(names[0], ".base") && !strings.HasSuffix(names[0], ".0000000000000001.base"), "%v", names)

	s = openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	got := collect(t, s.Read(ctx, topic, 2, ids[2][1]+1))
	require.Len(t, got, 4, "after a restart the index still proves region 2 lost nothing")
	require.Equal(t, ids[2][2], got[0].ID)
	_, err = readErr(s.Read(ctx, topic, 2, ids[2][1]))
	require.ErrorIs(t, err, logstore.ErrPruned, "region 2's second entry is gone")
}

// retainedPastThePrunes writes six entries each of regions 1 and 2 in a new
// topic through a store with an index directory; region 1 flushes all of
// them, region 2 its first two; the store closes (its checkpoint covers the
// whole log), and retention (no Prune) deletes below region 2's third
// entry: region 2 lost nothing it needs (from ids[2][1]+1 only region 1's
// third entry went).
func retainedPastThePrunes(t *testing.T) (brokers []string, dir, topic string, ids map[logstore.RegionID][]logstore.EntryID) {
	t.Helper()
	brokers = testutil.Brokers(t)
	dir = t.TempDir()
	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	ctx := context.Background()
	topic = newTopic(t)
	ids = map[logstore.RegionID][]logstore.EntryID{}
	for i := range 6 {
		for _, r := range []logstore.RegionID{1, 2} {
			res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: fmt.Appendf(nil, "r%d-%d", r, i)}})
			require.NoError(t, err)
			ids[r] = append(ids[r], res.LastEntryIDs[r])
		}
	}
	require.NoError(t, s.Obsolete(ctx, topic, 1, ids[1][5]))
	require.NoError(t, s.Obsolete(ctx, topic, 2, ids[2][1]))
	require.NoError(t, s.Close())
	deleteRecords(t, brokers, topic, int64(ids[2][2])-1)
	return brokers, dir, topic, ids
}

// deleteRecords deletes the topic's records below offset at, as retention
// would.
func deleteRecords(t *testing.T, brokers []string, topic string, at int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
	resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), os)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
}
