package kafka_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/testutil"
)

// TestClaimsAtScale: a cluster whose claims topic holds many claimed
// regions, each claimed once or many times. A store opening folds it (from
// the topic's start, or from the snapshot a store closed before left in
// its IndexDir), then appends and claims: every answer is right whatever
// the history's length. The test logs what opening, the first append and
// a claim cost, for one claim per region against many, with and without
// a snapshot; KWAL_CLAIMS_SCALE_REGIONS sets the regions (2,000 by
// default; docs/fencing.md has the figures at 100,000).
func TestClaimsAtScale(t *testing.T) {
	regions := 2000
	if v := os.Getenv("KWAL_CLAIMS_SCALE_REGIONS"); v != "" {
		var err error
		regions, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	type cost struct{ open, claim time.Duration }
	costs := map[string]cost{}
	for _, many := range []int{1, 20} {
		topic := newTopic(t)
		claims := topic + "-claims"
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<20))
		require.NoError(t, err)
		adm := kadm.NewClient(cl)
		_, err = adm.CreateTopic(ctx, 1, -1, map[string]*string{"retention.ms": kadm.StringPtr("-1"), "retention.bytes": kadm.StringPtr("-1")}, claims)
		require.NoError(t, err)
		// The data log: the claims' records at offsets 1..many, and the log
		// pruned past all but the last (a datanode that flushed and pruned
		// since its regions moved).
		w := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic = claims })
		for i := range many + 5 {
			_, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(regions + 1), Data: []byte(strconv.Itoa(i))}})
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		td, err := adm.ListTopics(ctx, topic)
		require.NoError(t, err)
		tid := td[topic].ID.String()
		_, err = adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: int64(many)}}})
		require.NoError(t, err)
		start := time.Now()
		for r := range regions {
			for c := 1; c <= many; c++ {
				ev := claim.Event{Op: claim.OpPending, Namespace: topic, Region: uint64(r), TopicID: tid, Epoch: uint64(c), Token: strconv.Itoa(c), Owner: fmt.Sprintf("datanode-%d:%d", r%50, c%7)}
				cl.Produce(ctx, &kgo.Record{Topic: claims, Key: claim.Key(topic, uint64(r)), Value: claim.Encode(ev)}, nil)
				ev.Op, ev.At = claim.OpCommit, int64(c)
				cl.Produce(ctx, &kgo.Record{Topic: claims, Key: claim.Key(topic, uint64(r)), Value: claim.Encode(ev)}, nil)
			}
		}
		require.NoError(t, cl.Flush(ctx))
		t.Logf("%d regions × %d claims: %d events written in %v", regions, many, 2*regions*many, time.Since(start).Round(time.Millisecond))
		cl.Close()

		dir := t.TempDir()
		// Rounds: two from the claims topic's start, one that leaves the
		// first snapshot (not timed), two from it.
		for round, snap := range []bool{false, false, true, true, true} {
			cfg := func(c *kafka.Config) {
				c.ClaimsTopic, c.Owner = claims, "scale"
				if snap {
					c.IndexDir = dir
				}
			}
			start := time.Now()
			s := openStore(t, brokers, cfg)
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(regions), Data: []byte("new region")}})
			require.NoError(t, err)
			opened := time.Since(start)
			_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 0, Data: []byte("zombie")}})
			require.ErrorIs(t, err, kafka.ErrFenced, "epoch 0 under %d claims", many)
			start = time.Now()
			// A region of the history not claimed by an earlier round.
			c, err := s.Claim(ctx, topic, logstore.RegionID(1+round))
			require.NoError(t, err)
			claimed := time.Since(start)
			require.Equal(t, uint64(many+1), c.Epoch)
			require.NoError(t, s.Close())
			if round == 2 {
				continue
			}
			key := fmt.Sprintf("%d claims, snapshot %v", many, snap)
			old, seen := costs[key]
			if !seen || opened+claimed < old.open+old.claim {
				costs[key] = cost{opened, claimed}
			}
			t.Logf("%s: open + first append %v, claim %v", key, opened.Round(time.Millisecond), claimed.Round(time.Millisecond))
		}
	}
	for _, snap := range []bool{false, true} {
		one, twenty := costs[fmt.Sprintf("1 claims, snapshot %v", snap)], costs[fmt.Sprintf("20 claims, snapshot %v", snap)]
		t.Logf("snapshot %v: 20 claims ÷ 1 claim per region (best of 2): open + first append %.2fx, claim %.2fx, both %.2fx", snap,
			float64(twenty.open)/float64(one.open), float64(twenty.claim)/float64(one.claim), float64(twenty.open+twenty.claim)/float64(one.open+one.claim))
	}
}
