package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestPruneRacingARead protects reads that the log start overtakes while
// they run: a read fails with ErrPruned only when something it needed is
// gone. The read of regions 3 and 2 scans (NoIndex) a log of region 3's
// first entry, many records of region 1 and then region 2's entries; its
// loop body, at region 3's first entry, moves the log start up to region
// 2's first entry while the pass has most of region 1's records still to
// fetch (a pass reads at most about four fetch limits ahead). The fetch
// of the deleted offsets then finds them out of range, and the read must
// go on from the new start:
//   - after a Prune, vouched for by its prune mark;
//   - after retention, vouched for by the index, which accounted for the
//     deleted offsets and holds no run of regions 3 or 2 there.
//
// When region 3 had an entry among the deleted offsets (needed by the
// read), the read fails with ErrPruned naming it.
func TestPruneRacingARead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		obsolete  bool // regions 1 and 3 flushed: Prune may delete
		prune     bool // Prune, else retention (DeleteRecords)
		lostEntry bool // region 3 has a second entry among the deleted
	}{
		{name: "prune", obsolete: true, prune: true},
		{name: "retention", obsolete: false},
		{name: "retention deletes a needed entry", lostEntry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokers := testutil.Brokers(t)
			s := openStore(t, brokers, func(c *kafka.Config) {
				c.MaxBatchBytes = 16 << 10
				c.FetchMaxBytes = 32 << 10
			})
			ctx := context.Background()
			topic := newTopic(t)
			appendN := func(region logstore.RegionID, n, size int) logstore.EntryID {
				batch := make([]logstore.Entry, n)
				for i := range batch {
					batch[i] = logstore.Entry{Namespace: topic, Region: region, Data: fmt.Appendf(make([]byte, 0, size), "%d-%d-%0*d", region, i, size, 0)}
				}
				res, err := s.AppendBatch(ctx, batch)
				require.NoError(t, err)
				return res.LastEntryIDs[region]
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
}
