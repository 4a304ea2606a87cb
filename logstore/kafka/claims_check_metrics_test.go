package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// claimsCheckFailures returns kwal_claims_check_failures_total by cause.
func claimsCheckFailures(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, cause := range []string{"config", "timeout", "kafka_error", "gap"} {
		n, found := metricSum(t, reg, "kwal_claims_check_failures_total", "cause", cause)
		require.True(t, found, "cause %q is exported", cause)
		out[cause] = n
	}
	return out
}

// TestClaimsCheckFailuresAreCounted protects what the claims-check alert
// watches: each way a check of the claims topic fails is counted under its
// cause, and nothing else is. config: a claims topic that deletes events
// by age refuses a Claim; kafka_error and timeout: the look at the claims
// topic's end that a strict append waits for is answered with an error
// that is not retried, or with retriable ones until RequestTimeout (kfake
// only: they intercept the look); gap: the claims topic lost the records
// at its start, and the fold of a store that needs them fails closed.
func TestClaimsCheckFailuresAreCounted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := func(cause string) map[string]float64 {
		m := map[string]float64{"config": 0, "timeout": 0, "kafka_error": 0, "gap": 0}
		m[cause] = 1
		return m
	}

	t.Run("config", func(t *testing.T) {
		brokers := testutil.Brokers(t)
		adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
		require.NoError(t, err)
		defer adm.Close()
		claims := newTopic(t) + "-claims"
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": ptr("1000")}, claims)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
		reg := prometheus.NewRegistry()
		s := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.Registerer = claims, reg })
		_, err = s.Claim(ctx, newTopic(t), 1)
		require.ErrorContains(t, err, "retention.ms")
		require.Equal(t, want("config"), claimsCheckFailures(t, reg))
	})

	for _, tc := range []struct {
		cause string
		code  int16
	}{
		{"kafka_error", kerr.TopicAuthorizationFailed.Code},
		{"timeout", kerr.NotLeaderForPartition.Code},
	} {
		t.Run(tc.cause, func(t *testing.T) {
			c := testutil.NewCluster(t)
			reg := prometheus.NewRegistry()
			claims := newTopic(t) + "-claims"
			s := openStore(t, c.ListenAddrs(), func(c *kafka.Config) {
				c.ClaimsTopic, c.Registerer = claims, reg
				c.RequestTimeout, c.RetryBackoff = time.Second, 50*time.Millisecond
			})
			ns := newTopic(t)
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("ok")}})
			require.NoError(t, err)
			c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				r := req.(*kmsg.ListOffsetsRequest)
				if len(r.Topics) != 1 || r.Topics[0].Topic != claims {
					return nil, nil, false
				}
				resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
				for _, rt := range r.Topics {
					t := kmsg.NewListOffsetsResponseTopic()
					t.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						p := kmsg.NewListOffsetsResponseTopicPartition()
						p.Partition, p.ErrorCode = rp.Partition, tc.code
						t.Partitions = append(t.Partitions, p)
					}
					resp.Topics = append(resp.Topics, t)
				}
				return resp, nil, true
			})
			_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("refused")}})
			require.Error(t, err, "the append's check of the claims topic failed")
			require.Equal(t, want(tc.cause), claimsCheckFailures(t, reg))
		})
	}

	t.Run("gap", func(t *testing.T) {
		brokers := testutil.Brokers(t)
		claims := newTopic(t) + "-claims"
		ns := newTopic(t)
		first := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic = claims })
		for r := range logstore.RegionID(3) {
			_, err := first.Claim(ctx, ns, r+1)
			require.NoError(t, err)
		}
		require.NoError(t, first.Close())
		adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
		require.NoError(t, err)
		defer adm.Close()
		_, err = adm.DeleteRecords(ctx, kadm.Offsets{claims: {0: {Topic: claims, Partition: 0, At: 2}}})
		require.NoError(t, err)

		reg := prometheus.NewRegistry()
		s := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic, c.Registerer = claims, reg })
		_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 9, Data: []byte("x")}})
		require.ErrorContains(t, err, claims, "the fold fails closed at the gap")
		require.Equal(t, want("gap"), claimsCheckFailures(t, reg))
	})
}
