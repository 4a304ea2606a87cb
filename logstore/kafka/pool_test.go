package kafka_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestTopicPoolNamesAndStableHash protects the pool's names (GreptimeDB's
// prefix_i) and the hash mapping: it must give the same topic for a region
// in every process and version (datanodes do not persist it), so its
// values are pinned here; and it spreads regions over the topics.
func TestTopicPoolNamesAndStableHash(t *testing.T) {
	p, err := kafka.NewTopicPool("greptimedb_wal_topic", 64)
	require.NoError(t, err)
	require.Equal(t, 64, p.Len())
	require.Equal(t, "greptimedb_wal_topic_0", p.Names()[0])
	require.Equal(t, "greptimedb_wal_topic_63", p.Names()[63])
	pinned := map[logstore.RegionID]string{}
	for _, r := range []logstore.RegionID{1, 2, 1 << 32, 4398046511105} {
		pinned[r] = p.Topic(r)
	}
	require.Equal(t, map[logstore.RegionID]string{
		1: "greptimedb_wal_topic_18", 2: "greptimedb_wal_topic_31",
		1 << 32: "greptimedb_wal_topic_34", 4398046511105: "greptimedb_wal_topic_46",
	}, pinned, "the hash mapping is stable across versions (values checked against an independent FNV-1a)")
	counts := map[string]int{}
	for r := range logstore.RegionID(1024) {
		require.Equal(t, p.Topic(r), p.Topic(r))
		counts[p.Topic(r)]++
	}
	require.Len(t, counts, 64, "1024 regions reach every topic")
	for topic, n := range counts {
		require.Less(t, n, 40, "topic %s is not overloaded (16 on average)", topic)
	}

	_, err = kafka.NewTopicPool("p", 0)
	require.Error(t, err)
	_, err = kafka.NewTopicPool("bad/name", 2)
	require.ErrorContains(t, err, "not a valid topic name")
}

// TestTopicPoolRoundRobin protects the round-robin selector: it hands the
// topics out in turn (128 regions over 64 topics: two each), the returned
// assignment is what it handed out, and selectors start at random topics.
func TestTopicPoolRoundRobin(t *testing.T) {
	p, err := kafka.NewTopicPool("wal", 64)
	require.NoError(t, err)
	rr := p.RoundRobin()
	var regions []logstore.RegionID
	for r := range logstore.RegionID(128) {
		regions = append(regions, r, r) // a repeated region keeps its topic
	}
	a := rr.Assign(regions)
	require.Len(t, a, 128)
	counts := map[string]int{}
	for _, topic := range a {
		counts[topic]++
	}
	require.Len(t, counts, 64)
	for _, n := range counts {
		require.Equal(t, 2, n)
	}
	starts := map[string]bool{}
	for range 20 {
		starts[p.RoundRobin().Next()] = true
	}
	require.Greater(t, len(starts), 1, "selectors start at a random topic")
}

// TestTopicPoolCreate protects pool creation: every topic exists with one
// partition and the store's TopicConfigs, and creating again is not an
// error.
func TestTopicPoolCreate(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.TopicConfigs = map[string]string{"retention.ms": "7200000"} })
	ctx := context.Background()
	p, err := kafka.NewTopicPool(newTopic(t), 6)
	require.NoError(t, err)
	require.NoError(t, p.Create(ctx, s))
	require.NoError(t, p.Create(ctx, s), "creating an existing pool is not an error")

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, p.Names()...)
	require.NoError(t, err)
	for _, n := range p.Names() {
		require.NoError(t, details[n].Err, n)
		require.Len(t, details[n].Partitions, 1, n)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, p.Names()...)
	require.NoError(t, err)
	for _, rc := range cfgs {
		require.NoError(t, rc.Err)
		found := false
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				require.Equal(t, "7200000", c.MaybeValue(), rc.Name)
				found = true
			}
		}
		require.True(t, found, "%s has retention.ms", rc.Name)
	}
	for _, n := range p.Names() {
		require.NoError(t, s.DeleteNamespace(ctx, n))
	}
}
