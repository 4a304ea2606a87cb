package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestClaimFencesTheOldOwner: after B claims a region that A wrote, A's
// next append fails with ErrFenced (its entries land above the claim and
// no replay returns them), B's appends carry the new epoch, and every
// store's replay, with and without the index, returns A's acknowledged
// entries then B's. SealedID is A's last acknowledged entry; Release stops
// B's appends and returns its last acknowledged ID.
func TestClaimFencesTheOldOwner(t *testing.T) {
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := openStore(t, brokers, func(c *kafka.Config) { c.Owner = "a" })
	b := openStore(t, brokers, func(c *kafka.Config) { c.Owner = "b" })
	const r = logstore.RegionID(3)
	var acked []string
	add := func(s *kafka.LogStore, what string) error {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte(what)}, {Namespace: topic, Region: 99, Data: []byte("other " + what)}})
		if err == nil {
			acked = append(acked, what)
		}
		return err
	}
	for i := range 5 {
		require.NoError(t, add(a, fmt.Sprintf("a%d", i)))
	}
	res, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte("a5")}})
	require.NoError(t, err)
	acked = append(acked, "a5")

	c, err := b.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.Equal(t, uint64(1), c.Epoch)
	require.Equal(t, res.LastEntryIDs[r], c.SealedID, "the sealed ID is A's last acknowledged entry")

	// A has not looked at the claims topic since: its append is written,
	// then refused.
	err = add(a, "zombie")
	require.ErrorIs(t, err, kafka.ErrFenced)
	var fe *kafka.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(1), fe.Newer)
	require.Equal(t, "b", fe.Owner)
	require.ErrorIs(t, add(a, "zombie2"), kafka.ErrFenced, "now known before writing")
	require.ErrorIs(t, a.Obsolete(ctx, topic, r, 1), kafka.ErrFenced)

	for i := range 3 {
		require.NoError(t, add(b, fmt.Sprintf("b%d", i)))
	}
	fresh := openStore(t, brokers, nil)
	for _, s := range []*kafka.LogStore{a, b, fresh} {
		for _, noIndex := range []bool{false, true} {
			got, st := regionData(ctx, t, s, topic, r, noIndex)
			require.Equal(t, acked, got)
			require.Equal(t, int64(1), st.Fenced, "the zombie entry is skipped and counted")
		}
	}
	// The claim can be taken back: A claims again under epoch 2.
	c2, err := a.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.Equal(t, uint64(2), c2.Epoch)
	require.ErrorIs(t, add(b, "late b"), kafka.ErrFenced)
	require.NoError(t, add(a, "a again"))
	last, err := a.Release(ctx, topic, r)
	require.NoError(t, err)
	require.ErrorIs(t, add(a, "after release"), kafka.ErrFenced)
	got := collect(t, fresh.Read(ctx, topic, r, 0))
	require.Equal(t, last, got[len(got)-1].ID)
	var gotData []string
	for _, e := range got {
		gotData = append(gotData, string(e.Data))
	}
	require.Equal(t, acked, gotData)

	own, err := fresh.Ownership(ctx, topic)
	require.NoError(t, err)
	require.Len(t, own, 1)
	require.Equal(t, "a", own[0].Owner)
	require.Equal(t, uint64(2), own[0].Epoch)
	require.Equal(t, 2, own[0].Claims)
	require.True(t, own[0].Released)
}

// TestFencingCheckIsTimed protects what an operator reads to price
// fencing: every strict or lease append's check is timed in
// kwal_fencing_check_seconds, and a store with fencing off times none.
func TestFencingCheckIsTimed(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	for _, mode := range []string{kafka.FencingStrict, kafka.FencingLease, kafka.FencingOff} {
		reg := prometheus.NewRegistry()
		s := openStore(t, brokers, func(c *kafka.Config) { c.Fencing, c.Registerer = mode, reg })
		const calls = 5
		for i := range calls {
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte(fmt.Sprint(i))}})
			require.NoError(t, err)
		}
		checks, found := metricSum(t, reg, "kwal_fencing_check_seconds", "", "")
		require.True(t, found, mode)
		if mode != kafka.FencingOff {
			require.Equal(t, float64(calls), checks, "every strict or lease append is checked")
		} else {
			require.Zero(t, checks, "fencing off checks nothing")
		}
	}
}
