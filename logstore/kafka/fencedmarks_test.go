package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// TestLateObsoleteOfAFencedOwner protects the new owner's entries from an
// old owner's late Obsolete. A owns region r (epoch 1), appends and
// declares its first entry obsolete; B claims r (epoch 2) and appends;
// then A's Obsolete of r up to B's last entry lands in the log above B's
// claim. Two ways A gets there: under a lease, cut off between its check
// before the write and the write (its Obsolete then fails with ErrFenced,
// from the check after the write); with fencing off, never having looked
// at the claims topic since its claim (its Obsolete succeeds). Either
// way, every store ignores the mark, as it ignores entries A wrote there:
// B's and a fresh store's prune reports do not count it, Prune keeps every
// entry B still needs, and replays return them. The legitimate owners'
// marks still prune: A's (below B's claim) and then B's, whose prune mark
// then proves to B's replay from below the new log start that it lost
// nothing.
func TestLateObsoleteOfAFencedOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fencing string
	}{
		{"lease, cut off before the write", kafka.FencingLease},
		{"fencing off", kafka.FencingOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lateObsolete(t, tc.fencing)
		})
	}
}

func lateObsolete(t *testing.T, fencing string) {
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lease = 1500 * time.Millisecond
	g := newGate()
	t.Cleanup(g.release)
	a := openStore(t, brokers, func(c *kafka.Config) {
		c.Owner, c.ClaimsTopic, c.PruneInterval, c.Fencing = "a", claims, 0, fencing
		if fencing == kafka.FencingLease {
			c.Lease, c.Dialer = lease, g.dial
		}
	})
	b := openStore(t, brokers, func(c *kafka.Config) {
		c.Owner, c.ClaimsTopic, c.PruneInterval = "b", claims, 0
	})
	const r = logstore.RegionID(5)
	appendTo := func(s *kafka.LogStore, data string) logstore.EntryID {
		t.Helper()
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte(data)}})
		require.NoError(t, err)
		return res.LastEntryIDs[r]
	}
	require.NoError(t, a.CreateNamespace(ctx, topic))
	ca, err := a.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.Equal(t, uint64(1), ca.Epoch)
	var aIDs []logstore.EntryID
	for _, d := range []string{"a1", "a2", "a3"} {
		aIDs = append(aIDs, appendTo(a, d))
	}
	require.NoError(t, a.Obsolete(ctx, topic, r, aIDs[0]), "the owner's Obsolete")
	end, err := a.LatestEntryID(ctx, topic)
	require.NoError(t, err)
	// B's claim record comes next, then B's entries, one record each: A's
	// late Obsolete covers every one of them.
	bData := []string{"b1", "b2", "b3"}
	upTo := end + 1 + logstore.EntryID(len(bData))

	late := make(chan error, 1)
	startLate := func() {
		go func() { late <- a.Obsolete(ctx, topic, r, upTo) }()
	}
	if fencing == kafka.FencingLease {
		// A's check before the write passes (its view holds no newer
		// claim); the gate then holds its look at the log's end and its
		// write until B has claimed and appended.
		g.shut()
		startLate()
	}
	cb, err := b.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.Equal(t, uint64(2), cb.Epoch)
	var bIDs []logstore.EntryID
	for _, d := range bData {
		bIDs = append(bIDs, appendTo(b, d))
	}
	require.Equal(t, upTo, bIDs[len(bIDs)-1], "A's late Obsolete covers B's last entry")
	if fencing == kafka.FencingLease {
		g.release()
		err := <-late
		require.ErrorIs(t, err, kafka.ErrFenced, "A's lease ran out while it was cut off: the check after its write finds B's claim")
		var fe *kafka.FencedError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, uint64(2), fe.Newer)
	} else {
		startLate()
		require.NoError(t, <-late, "with fencing off, A's stale view of the claims lets its Obsolete through")
	}

	own, err := b.Ownership(ctx, topic)
	require.NoError(t, err)
	require.Len(t, own, 1)
	var lateAt int64 = -1
	for _, rec := range scanRaw(t, brokers, topic) {
		p, err := record.Decode(rec.Key, rec.Value)
		require.NoError(t, err)
		if p.Kind != record.KindMark {
			continue
		}
		m, err := record.DecodeMark(p.Data)
		require.NoError(t, err)
		if rp, ok := m.Region(uint64(r)); ok && !m.Prune && rp.Before == int64(upTo) {
			require.Equal(t, uint64(1), rp.Epoch, "the mark carries A's epoch")
			lateAt = rec.Offset
		}
	}
	require.Greater(t, lateAt, own[0].ClaimOffset, "A's late mark is in the log above B's claim record")

	// What B needs: A's entries from the one after A's Obsolete point
	// (B's history up to its SealedID), and all of B's.
	require.Equal(t, aIDs[2], cb.SealedID)
	needed := []string{"a2", "a3", "b1", "b2", "b3"}
	wantHolder := kafka.PruneHolder{Region: r, FirstNeeded: aIDs[1], ObsoleteUpTo: aIDs[0], Owner: "b", Epoch: 2}
	holder := func(s *kafka.LogStore) kafka.PruneResult {
		t.Helper()
		dry, err := s.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
		require.NoError(t, err)
		require.Len(t, dry.Holders, 1, "%+v", dry.Holders)
		h := dry.Holders[0]
		h.PinnedBytes = 0
		require.Equal(t, wantHolder, h, "A's late mark does not count")
		require.Equal(t, aIDs[1], dry.PrunePoint)
		return dry
	}
	stores := []*kafka.LogStore{b}
	if fencing == kafka.FencingLease {
		// A checked its mark after writing it and kept it out of its
		// own index too. (With fencing off, A's index takes it in: A
		// never learned of B's claim.)
		stores = append(stores, a)
	}
	for _, s := range stores {
		holder(s)
	}

	res, err := b.PruneWith(ctx, topic, kafka.PruneOptions{})
	require.NoError(t, err)
	require.True(t, res.Deleted, "A's own Obsolete, below B's claim, still prunes")
	require.Equal(t, aIDs[1], res.FirstID)
	fresh := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.PruneInterval = claims, 0 })
	stores = append(stores, fresh)
	readFrom := func(s *kafka.LogStore, from logstore.EntryID, noIndex bool) []string {
		t.Helper()
		var got []string
		for e, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{r: from}, kafka.ReadOptions{NoIndex: noIndex}) {
			require.NoError(t, err)
			got = append(got, string(e.Data))
		}
		return got
	}
	for _, s := range stores {
		holder(s)
		for _, noIndex := range []bool{false, true} {
			require.Equal(t, needed, readFrom(s, aIDs[1], noIndex), "every entry B needs survives the prune")
		}
	}

	// B's own Obsolete (epoch 2, above its claim) counts.
	require.NoError(t, b.Obsolete(ctx, topic, r, bIDs[0]))
	res, err = b.PruneWith(ctx, topic, kafka.PruneOptions{})
	require.NoError(t, err)
	require.True(t, res.Deleted)
	require.Equal(t, bIDs[1], res.FirstID)
	for _, s := range stores {
		require.Equal(t, needed[3:], readFrom(s, bIDs[1], false))
	}

	// B declares everything obsolete and the prune deletes it all: B's
	// replay from its next ID, below the new log start, is proven to have
	// lost nothing by the prune mark, whose statement of r carries epoch 2
	// (a statement the rule fenced would make it fail with ErrPruned).
	require.NoError(t, b.Obsolete(ctx, topic, r, bIDs[2]))
	res, err = b.PruneWith(ctx, topic, kafka.PruneOptions{})
	require.NoError(t, err)
	require.Greater(t, res.FirstID, bIDs[2]+1, "the marks above B's last entry went too")
	for _, s := range stores {
		for _, noIndex := range []bool{false, true} {
			require.Empty(t, readFrom(s, bIDs[2]+1, noIndex))
		}
	}
}
