package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestReservedNamesAreNoNamespaces protects the claims topic and Kafka's
// internal topics from kwal's namespace calls: every store entry point
// that takes a namespace refuses the store's claims topic and any name
// starting with "__" with an error matching ErrInvalidNamespace that names
// it, before any request. Nothing is written to the claims topic (a record
// there that is no claim event would stop every store's appends), it is
// not deleted (that would forget every claim), and no "__" topic is made.
func TestReservedNamesAreNoNamespaces(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	claims := newTopic(t) + "-claims"
	s := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.AutoCreateTopics = claims, true })
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	claimsEnd := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, claims)
		require.NoError(t, err)
		o, ok := ends.Lookup(claims, 0)
		require.True(t, ok, "the claims topic exists")
		require.NoError(t, o.Err)
		return o.Offset
	}
	end := claimsEnd()
	internal := "__kwal-" + newTopic(t)

	for _, ns := range []string{claims, internal, "__consumer_offsets"} {
		refused := func(what string, err error) {
			t.Helper()
			require.ErrorIs(t, err, kafka.ErrInvalidNamespace, "%s of %q", what, ns)
			require.ErrorContains(t, err, ns, "%s: the error names the namespace", what)
		}
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
		refused("AppendBatch", err)
		_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: newTopic(t), Region: 1, Data: []byte("x")}, {Namespace: ns, Region: 2, Data: []byte("y")}})
		refused("AppendBatch of two namespaces", err)
		refused("CreateNamespace", s.CreateNamespace(ctx, ns))
		refused("DeleteNamespace", s.DeleteNamespace(ctx, ns))
		_, err = s.Claim(ctx, ns, 1)
		refused("Claim", err)
		_, err = s.Release(ctx, ns, 1)
		refused("Release", err)
		refused("Obsolete", s.Obsolete(ctx, ns, 1, 1))
		_, err = s.Ownership(ctx, ns)
		refused("Ownership", err)
		_, err = s.LatestEntryID(ctx, ns)
		refused("LatestEntryID", err)
		_, err = readErr(s.Read(ctx, ns, 1, 0))
		refused("Read", err)
		_, err = readErr(s.ReadRegions(ctx, ns, map[logstore.RegionID]logstore.EntryID{1: 0}))
		refused("ReadRegions", err)
		_, err = readErr(s.ReadWith(ctx, ns, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}))
		refused("ReadWith", err)
		_, err = s.Prune(ctx, ns)
		refused("Prune", err)
		_, err = s.PruneWith(ctx, ns, kafka.PruneOptions{DryRun: true})
		refused("PruneWith", err)
		_, err = s.TopicRetention(ctx, ns)
		refused("TopicRetention", err)
	}
	require.ErrorContains(t, s.DeleteNamespace(ctx, claims), "is the claims topic", "the error says why")
	require.ErrorContains(t, s.CreateNamespace(ctx, internal), `starts with "__"`, "the error says why")

	// A pool's names are checked as it is made ("__") and as it is created
	// through a store (that store's claims topic).
	_, err = kafka.NewTopicPool("__pool", 2)
	require.ErrorIs(t, err, kafka.ErrInvalidNamespace)
	prefix := strings.TrimSuffix(claims, "-claims")
	poolStore := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.AutoCreateTopics = prefix+"_0", true })
	pool, err := kafka.NewTopicPool(prefix, 1)
	require.NoError(t, err)
	require.ErrorIs(t, pool.Create(ctx, poolStore), kafka.ErrInvalidNamespace)

	require.Equal(t, end, claimsEnd(), "nothing was written to the claims topic")
	topics, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	require.False(t, topics.Has(internal), "no internal-looking topic was created")
}
