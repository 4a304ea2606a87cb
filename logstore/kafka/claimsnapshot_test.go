package kafka_test

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestClaimsSnapshotThatDoesNotDecodeIsIgnored: a store whose IndexDir
// holds a damaged claims snapshot reads the claims topic from its start
// instead, and fences as a store with a good one does; Close writes a good
// snapshot again.
func TestClaimsSnapshotThatDoesNotDecodeIsIgnored(t *testing.T) {
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	a := openStore(t, brokers, func(c *kafka.Config) { c.Owner, c.ClaimsTopic, c.IndexDir = "a", claims, dir })
	_, err := a.Claim(ctx, topic, 1)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	b := openStore(t, brokers, func(c *kafka.Config) { c.Owner, c.ClaimsTopic = "b", claims })
	_, err = b.Claim(ctx, topic, 1)
	require.NoError(t, err)

	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	td, err := adm.ListTopics(ctx, claims)
	require.NoError(t, err)
	id := td[claims].ID
	snap := filepath.Join(dir, "claims-snapshot-"+hex.EncodeToString(id[:]))
	good, err := os.ReadFile(snap)
	require.NoError(t, err, "Close saved a snapshot")
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff
	require.NoError(t, os.WriteFile(snap, bad, 0o644))

	// Reopened with A's epoch resumed: B's newer claim, which the damaged
	// snapshot cannot hold anyway, fences A once the topic is read.
	a = openStore(t, brokers, func(c *kafka.Config) { c.Owner, c.ClaimsTopic, c.IndexDir = "a", claims, dir })
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("zombie")}})
	require.ErrorIs(t, err, kafka.ErrFenced)
	own, err := a.Ownership(ctx, topic)
	require.NoError(t, err)
	require.Len(t, own, 1)
	require.Equal(t, "b", own[0].Owner)
	require.Equal(t, 2, own[0].Claims)
	require.NoError(t, a.Close())
	again, err := os.ReadFile(snap)
	require.NoError(t, err)
	require.NotEqual(t, bad, again, "Close wrote a good snapshot over the damaged one")
}
