package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestPruneRacingARead protects reads that the log start overtakes while
// they run: a read fails with ErrPruned only when something it needed is
// gone. The read of regions 3 and 2 scans (NoIndex) a log of region 3's
// first entry, many records of region 1 and then region 2's entries; its
// loop body, at region 3's first entry, moves the log start up to region
// 2's first entry. The pass's fetch of the deleted offsets then finds them
// out of range, and the read must go on from the new start:
//   - after a Prune, vouched for by its prune mark;
//   - after retention, vouched for by the index, which accounted for the
//     deleted offsets and holds no run of regions 3 or 2 there.
//
// When region 3 had an entry among the deleted offsets (needed by the
// read), the read fails with ErrPruned naming the new start.
//
// On kfake every fetch above offset 0 waits until the loop body moved the
// start, so the pass certainly fetches the deleted offsets after it. On a
// real broker the pass may have fetched them already (the read then simply
// succeeds), so the case that must fail runs on kfake only.
func TestPruneRacingARead(t *testing.T) {
	t.Parallel()
	type testCase struct {
		name      string
		obsolete  bool // regions 1 and 3 flushed: Prune may delete
		prune     bool // Prune, else retention (DeleteRecords)
		lostEntry bool // region 3 has a second entry among the deleted
	}
	cases := []testCase{
		{name: "prune", obsolete: true, prune: true},
		{name: "retention", obsolete: false},
	}
	if testutil.RealBrokers() == nil {
		cases = append(cases, testCase{name: "retention deletes a needed entry", lostEntry: true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokers, release := racingBrokers(t)
			s := openStore(t, brokers, func(c *kafka.Config) {
				c.MaxBatchBytes = 16 << 10
				c.FetchMaxBytes = 32 << 10
				// The log must outgrow one fetch: entries as large on the
				// broker as they are.
				c.Compression = "none"
			})
			ctx := context.Background()
			topic := newTopic(t)
			appendN := func(region logstore.RegionID, n, size int) logstore.EntryID {
				return appendEntries(t, s, topic, region, n, size)
			}
			e0 := appendN(3, 1, 100)
			r1 := appendN(1, 150, 2000)
			var lost logstore.EntryID
			if tc.lostEntry {
				lost = appendN(3, 1, 100)
				r1 = appendN(1, 150, 2000)
			}
			var r2 []logstore.EntryID
			for range 5 {
				r2 = append(r2, appendN(2, 1, 100))
			}
			if tc.obsolete {
				require.NoError(t, s.Obsolete(ctx, topic, 1, r1))
				require.NoError(t, s.Obsolete(ctx, topic, 3, e0))
			}

			var got []logstore.EntryID
			var readErr error
			for e, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{3: 1, 2: 1}, kafka.ReadOptions{NoIndex: true}) {
				if err != nil {
					readErr = err
					break
				}
				got = append(got, e.ID)
				if e.ID != e0 {
					continue
				}
				if tc.prune {
					first, err := s.Prune(ctx, topic)
					require.NoError(t, err)
					require.Equal(t, r2[0], first, "Prune deletes every record below region 2's first")
				} else {
					deleteRecords(t, brokers, topic, int64(r2[0])-1)
				}
				close(release)
			}
			if tc.lostEntry {
				require.ErrorIs(t, readErr, logstore.ErrPruned, "region 3's entry %d was deleted under the read", lost)
				var pe *logstore.PrunedError
				require.ErrorAs(t, readErr, &pe)
				require.Equal(t, r2[0], pe.FirstAvailable)
				require.Equal(t, []logstore.EntryID{e0}, got)
				return
			}
			require.NoError(t, readErr, "the read needed nothing that was deleted")
			require.Equal(t, append([]logstore.EntryID{e0}, r2...), got)
		})
	}
}

// TestPruneRacingASharedPass protects the reads that joined a pass: when
// the log start overtakes the pass, the proof covers every read still in
// it, not only the read that started it. Read X (region 3, whose entry is
// at offset 0) starts the pass and read Y (region 4, whose entry lies among
// region 1's records) joins it; X's loop body deletes below region 2's
// entries, Y's entry included.
//   - Y still reading: both reads must fail with ErrPruned (going on from
//     the new start would end Y with nothing and no error).
//   - Y left the pass first (its context ended): nothing X needs went, and
//     X completes.
//
// (kfake: its fetches are held until Y joined, and above offset 0 until
// the deletion.)
func TestPruneRacingASharedPass(t *testing.T) {
	t.Parallel()
	for _, yLeaves := range []bool{false, true} {
		t.Run(fmt.Sprintf("joined read leaves %v", yLeaves), func(t *testing.T) {
			t.Parallel()
			c := testutil.NewCluster(t)
			brokers := c.ListenAddrs()
			fetching := make(chan struct{}, 1) // a fetch arrived
			joinedCh := make(chan struct{})    // closed when Y joined
			release := make(chan struct{})     // closed when the start moved
			c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				select {
				case fetching <- struct{}{}:
				default:
				}
				c.SleepControl(func() {
					<-joinedCh
					if fetchesAbove(req, 0) {
						<-release
					}
				})
				return nil, nil, false
			})
			s := openStore(t, brokers, func(c *kafka.Config) {
				c.MaxBatchBytes = 16 << 10
				c.FetchMaxBytes = 32 << 10
				// The log must outgrow one fetch: entries as large on the
				// broker as they are.
				c.Compression = "none"
			})
			ctx := context.Background()
			topic := newTopic(t)
			e0 := appendEntries(t, s, topic, 3, 1, 100)
			appendEntries(t, s, topic, 1, 150, 2000)
			e4 := appendEntries(t, s, topic, 4, 1, 100)
			appendEntries(t, s, topic, 1, 150, 2000)
			r2 := appendEntries(t, s, topic, 2, 1, 100)

			var joinOnce, releaseOnce sync.Once
			// A read that starts a pass of its own releases the held
			// fetches too (and fails the test below), so that a broken join
			// shows as a failure naming it, not as fetches held forever.
			var ownPasses atomic.Int32
			kafka.SetJoinHook(s, func() { joinOnce.Do(func() { close(joinedCh) }) }, func() {
				if ownPasses.Add(1) > 1 { // the first is X's
					joinOnce.Do(func() { close(joinedCh) })
				}
			})
			type outcome struct {
				got []logstore.EntryID
				err error
			}
			read := func(ctx context.Context, region logstore.RegionID, onEntry func()) outcome {
				var o outcome
				for e, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{region: 1}, kafka.ReadOptions{NoIndex: true}) {
					if err != nil {
						o.err = err
						break
					}
					o.got = append(o.got, e.ID)
					onEntry()
				}
				return o
			}
			yGone := make(chan struct{}) // closed when Y's read returned, if it leaves
			if !yLeaves {
				close(yGone)
			}
			deleted := make(chan error, 1)
			xDone := make(chan outcome, 1)
			go func() {
				xDone <- read(ctx, 3, func() {
					releaseOnce.Do(func() { // at e0: retention deletes below region 2's entry
						defer close(release)
						<-yGone
						cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
						if err != nil {
							deleted <- err
							return
						}
						defer cl.Close()
						var os kadm.Offsets
						os.Add(kadm.Offset{Topic: topic, Partition: 0, At: int64(r2) - 1})
						resp, err := kadm.NewClient(cl).DeleteRecords(ctx, os)
						if err == nil {
							err = resp.Error()
						}
						deleted <- err
					})
				})
			}()
			<-fetching // X's pass fetches (held until Y joins)
			yctx, ycancel := context.WithCancel(ctx)
			defer ycancel()
			yDone := make(chan outcome, 1)
			go func() { yDone <- read(yctx, 4, func() {}) }()
			var y outcome
			if yLeaves {
				<-joinedCh
				ycancel()
				y = <-yDone
				close(yGone)
			}
			x := <-xDone
			require.EqualValues(t, 1, ownPasses.Load(), "Y started a pass of its own instead of joining X's")
			require.NoError(t, <-deleted)
			if yLeaves {
				require.ErrorIs(t, y.err, context.Canceled)
				require.NoError(t, x.err, "nothing X asked for went")
				require.Equal(t, []logstore.EntryID{e0}, x.got)
				return
			}
			y = <-yDone
			require.ErrorIs(t, y.err, logstore.ErrPruned, "Y's entry %d was deleted under the shared pass", e4)
			require.Empty(t, y.got)
			require.ErrorIs(t, x.err, logstore.ErrPruned, "the pass fails for all its reads")
			require.Equal(t, []logstore.EntryID{e0}, x.got)
		})
	}
}

// racingBrokers returns the brokers for a test racing a read, and a channel
// to close once the race's deletion is done: on kfake, every fetch above
// offset 0 waits for it (see TestPruneRacingARead); on a real broker
// nothing waits.
func racingBrokers(t *testing.T) ([]string, chan struct{}) {
	release := make(chan struct{})
	if real := testutil.RealBrokers(); real != nil {
		return real, release
	}
	c := testutil.NewCluster(t)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if fetchesAbove(req, 0) {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return c.ListenAddrs(), release
}

// fetchesAbove reports whether a fetch request asks for an offset above off.
func fetchesAbove(req kmsg.Request, off int64) bool {
	fr, ok := req.(*kmsg.FetchRequest)
	if !ok {
		return false
	}
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			if p.FetchOffset > off {
				return true
			}
		}
	}
	return false
}

// appendEntries appends n entries of about size bytes to the region in one
// call and returns the last one's ID.
func appendEntries(t *testing.T, s *kafka.LogStore, topic string, region logstore.RegionID, n, size int) logstore.EntryID {
	t.Helper()
	batch := make([]logstore.Entry, n)
	for i := range batch {
		batch[i] = logstore.Entry{Namespace: topic, Region: region, Data: fmt.Appendf(make([]byte, 0, size), "%d-%d-%0*d", region, i, size, 0)}
	}
	res, err := s.AppendBatch(context.Background(), batch)
	require.NoError(t, err)
	return res.LastEntryIDs[region]
}

// TestCorruptRecordStopsEveryPrune protects a kwal record that fails its
// checksum (it may be any region's entry) from becoming "no entry" in the
// index: Prune's catch-up scan fails on it, and so does every later Prune
// and every read that reaches it, rather than only the first (a failing
// scan used to report the record to the index as holding no entry).
func TestCorruptRecordStopsEveryPrune(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := newTopic(t)
	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("one")}})
	require.NoError(t, err)
	recs := partRecords(t, topic, 2, []byte("two"), 1<<20)
	recs[0].Value = []byte("TWO") // fails its checksum
	bad := rawProduce(t, brokers, recs...)[0]
	last, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("three")}})
	require.NoError(t, err)
	require.NoError(t, s.Obsolete(ctx, topic, 1, last.LastEntryIDs[1]))
	for i := range 3 {
		_, err := s.Prune(ctx, topic)
		var ce *logstore.CorruptError
		require.ErrorAs(t, err, &ce, "prune %d", i)
		require.Equal(t, bad, ce.Offset, "prune %d", i)
	}
	for i := range 2 {
		_, err := readErr(s.Read(ctx, topic, 1, res.LastEntryIDs[1]))
		var ce *logstore.CorruptError
		require.ErrorAs(t, err, &ce, "read %d", i)
	}
	// A store that skips corrupt records in reads does not skip them in
	// Prune's catch-up: its Prune fails on the record too (it used to count
	// it as holding no entry and delete past it).
	skip := openStore(t, brokers, func(c *kafka.Config) { c.SkipCorrupt = true })
	_, err = skip.Prune(ctx, topic)
	var ce *logstore.CorruptError
	require.ErrorAs(t, err, &ce, "prune with SkipCorrupt")
	require.Equal(t, bad, ce.Offset)
	_, err = readErr(s.Read(ctx, topic, 1, res.LastEntryIDs[1]))
	require.ErrorAs(t, err, &ce, "the corrupt record is still in the log")
	require.Equal(t, bad, ce.Offset)
}
