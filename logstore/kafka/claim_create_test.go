package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestClaimCreatesTheNamespace protects a datanode opening a new region,
// which claims it before its first append: under AutoCreateTopics, Claim
// of a namespace whose topic does not exist yet creates it, as that append
// would, and the claim holds (epoch 1, nothing sealed, the owner's appends
// acknowledged). Without AutoCreateTopics the Claim fails with
// ErrUnknownNamespace, creates no topic and writes no claim event.
func TestClaimCreatesTheNamespace(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	claims := newTopic(t) + "-claims"
	auto := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.AutoCreateTopics = claims, true })
	manual := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.AutoCreateTopics = claims, false })
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()

	ns := newTopic(t)
	_, err = manual.Claim(ctx, ns, 1)
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	topics, err := adm.ListTopics(ctx, ns)
	require.NoError(t, err)
	require.False(t, topics.Has(ns) && topics[ns].Err == nil, "a Claim without AutoCreateTopics created the topic")
	ends, err := adm.ListEndOffsets(ctx, claims)
	require.NoError(t, err)
	end, ok := ends.Lookup(claims, 0)
	require.True(t, ok)
	require.Zero(t, end.Offset, "the refused Claim wrote no claim event")

	c, err := auto.Claim(ctx, ns, 1)
	require.NoError(t, err)
	require.Equal(t, kafka.Claim{Epoch: 1, SealedID: 0}, c)
	res, err := auto.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("first")}})
	require.NoError(t, err)
	got := collect(t, manual.Read(ctx, ns, 1, 0))
	require.Len(t, got, 1)
	require.Equal(t, res.LastEntryIDs[1], got[0].ID)
	own, err := manual.Ownership(ctx, ns)
	require.NoError(t, err)
	require.Len(t, own, 1)
	require.Equal(t, uint64(1), own[0].Epoch)
}
