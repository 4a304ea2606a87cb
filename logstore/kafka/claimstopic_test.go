package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestClaimRefusesAClaimsTopicThatDropsEvents protects fencing from a
// claims topic made by other means that would lose events: compacted (a
// region's last event kept, the claims before it dropped) or with a
// retention (events deleted by age). Claim fails with an error naming the
// topic, the config, its value and what it must be, and writes no event;
// once the topic is fixed, the next Claim checks again and succeeds.
func TestClaimRefusesAClaimsTopicThatDropsEvents(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	keep := map[string]*string{"cleanup.policy": ptr("delete"), "retention.ms": ptr("-1"), "retention.bytes": ptr("-1")}
	for _, tc := range []struct {
		name       string
		key, value string
		mustBe     string
	}{
		{name: "compacted", key: "cleanup.policy", value: "compact", mustBe: `"delete"`},
		{name: "compacted and deleting", key: "cleanup.policy", value: "compact,delete", mustBe: `"delete"`},
		{name: "retention by age", key: "retention.ms", value: "1000", mustBe: `"-1"`},
		{name: "retention by size", key: "retention.bytes", value: "1048576", mustBe: `"-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := newTopic(t) + "-claims"
			configs := map[string]*string{}
			for k, v := range keep {
				configs[k] = v
			}
			configs[tc.key] = ptr(tc.value)
			resp, err := adm.CreateTopic(ctx, 1, 1, configs, claims)
			require.NoError(t, err)
			require.NoError(t, resp.Err)
			s := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic = claims })
			ns := newTopic(t)
			require.NoError(t, s.CreateNamespace(ctx, ns))

			_, err = s.Claim(ctx, ns, 1)
			require.Error(t, err)
			for _, part := range []string{claims, tc.key, `"` + tc.value + `"`, "must be " + tc.mustBe} {
				require.ErrorContains(t, err, part)
			}
			ends, err := adm.ListEndOffsets(ctx, claims)
			require.NoError(t, err)
			end, ok := ends.Lookup(claims, 0)
			require.True(t, ok)
			require.Zero(t, end.Offset, "the refused Claim wrote no claim event")

			alter := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.key, Value: keep[tc.key]}}
			ar, err := adm.AlterTopicConfigs(ctx, alter, claims)
			require.NoError(t, err)
			altered, err := ar.On(claims, nil)
			require.NoError(t, err)
			require.NoError(t, altered.Err)
			// A broker applies an altered config through its metadata log:
			// wait until it describes the new value, as the store's check will.
			require.Eventually(t, func() bool {
				rcs, err := adm.DescribeTopicConfigs(ctx, claims)
				if err != nil {
					return false
				}
				rc, err := rcs.On(claims, nil)
				if err != nil {
					return false
				}
				for _, c := range rc.Configs {
					if c.Key == tc.key {
						return c.Value != nil && *c.Value == *keep[tc.key]
					}
				}
				return false
			}, time.Minute, 20*time.Millisecond)
			c, err := s.Claim(ctx, ns, 1)
			require.NoError(t, err, "the check runs again after a failed one")
			require.Equal(t, uint64(1), c.Epoch)
		})
	}
}
