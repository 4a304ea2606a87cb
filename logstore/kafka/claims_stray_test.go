package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/testutil"
)

// produceRaw writes records to a topic as any other producer would.
func produceRaw(ctx context.Context, t testing.TB, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// TestStrayClaimsRecordsStopOnlyTheirRegion: a record of the claims topic
// that names no region is skipped and counted; a region's record that
// does not decode, or comes from a newer format, stops only that region
// (its appends, claims and reads fail naming the offset), and the events
// written after it in the same poll are folded (a claim among them fences
// as ever). Ownership lists the unreadable records, SkipClaimsRecord
// refuses an offset that is not one and repairs the region, and a store
// opened afterwards folds to the same answers.
func TestStrayClaimsRecordsStopOnlyTheirRegion(t *testing.T) {
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	a := openStore(t, brokers, func(c *kafka.Config) { c.Owner, c.ClaimsTopic, c.Registerer = "a", claims, reg })
	b := openStore(t, brokers, func(c *kafka.Config) { c.Owner, c.ClaimsTopic = "b", claims })
	for _, r := range []logstore.RegionID{1, 2, 3} {
		_, err := a.Claim(ctx, topic, r)
		require.NoError(t, err)
	}
	app := func(s *kafka.LogStore, r logstore.RegionID) error {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte("x")}})
		return err
	}
	for _, r := range []logstore.RegionID{1, 2, 3} {
		require.NoError(t, app(a, r))
	}

	// One batch: a foreign record, an undecodable record of region 2, an
	// event of region 3 in a newer format; then B claims region 1.
	produceRaw(ctx, t, brokers,
		&kgo.Record{Topic: claims, Key: []byte("someone else's"), Value: []byte("hello")},
		&kgo.Record{Topic: claims, Key: claim.Key(topic, 2), Value: []byte("{garbage")},
		&kgo.Record{Topic: claims, Key: claim.Key(topic, 3), Value: []byte(`{"v":9,"op":"pending","ns":"` + topic + `","region":3,"topic_id":"x","epoch":7,"token":"t"}`)},
	)
	_, err := b.Claim(ctx, topic, 1)
	require.ErrorIs(t, err, nil)

	require.ErrorIs(t, app(a, 1), kafka.ErrFenced, "the claim after the bad records is folded")
	for _, r := range []logstore.RegionID{2, 3} {
		err := app(a, r)
		require.ErrorIs(t, err, claim.ErrUnreadable, "region %d", r)
		require.ErrorContains(t, err, "offset")
		_, err = b.Claim(ctx, topic, r)
		require.ErrorIs(t, err, claim.ErrUnreadable)
		_, err = readErr(a.Read(ctx, topic, r, 1))
		require.ErrorIs(t, err, claim.ErrUnreadable)
	}
	require.NoError(t, app(b, 1), "other regions go on")
	require.NoError(t, app(a, 4), "unclaimed regions go on")
	got := collect(t, b.Read(ctx, topic, 1, 1))
	require.Len(t, got, 2, "A's entry before the claim, B's after")
	n, ok := metricSum(t, reg, "kwal_claims_bad_records_total", "kind", "foreign")
	require.True(t, ok)
	require.Equal(t, 1.0, n)
	n, _ = metricSum(t, reg, "kwal_claims_bad_records_total", "kind", "unreadable")
	require.Equal(t, 2.0, n)

	own, err := a.Ownership(ctx, topic)
	require.NoError(t, err)
	bad := map[logstore.RegionID]int64{}
	for _, o := range own {
		if len(o.Unreadable) > 0 {
			bad[o.Region] = o.Unreadable[0].Offset
		}
	}
	require.Len(t, bad, 2)
	require.ErrorIs(t, a.SkipClaimsRecord(ctx, topic, 2, bad[3]), kafka.ErrNotUnreadable, "region 3's record is not region 2's")
	require.ErrorIs(t, a.SkipClaimsRecord(ctx, topic, 2, bad[2]-1), kafka.ErrNotUnreadable)
	require.NoError(t, b.SkipClaimsRecord(ctx, topic, 2, bad[2]))
	require.NoError(t, app(a, 2), "the repaired region is A's again")
	require.ErrorIs(t, app(a, 3), claim.ErrUnreadable)

	// A store that folds the topic from its start agrees.
	c := openStore(t, brokers, func(c *kafka.Config) { c.Owner, c.ClaimsTopic = "c", claims })
	cl, err := c.Claim(ctx, topic, 2)
	require.NoError(t, err)
	require.Equal(t, uint64(2), cl.Epoch)
	_, err = c.Claim(ctx, topic, 3)
	require.ErrorIs(t, err, claim.ErrUnreadable)
	require.ErrorIs(t, app(a, 2), kafka.ErrFenced)
}
