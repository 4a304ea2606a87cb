package chaos_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// saslBrokersEnv names a broker started by 'scripts/kafka.sh start --sasl'
// (user kwal, password KWAL_KAFKA_SASL_PASSWORD, default kwal-secret).
const saslBrokersEnv = "KWAL_KAFKA_SASL_BROKERS"

// TestSASLOnRealBroker protects authentication against a real Kafka with
// SASL_PLAINTEXT (skipped unless KWAL_KAFKA_SASL_BROKERS is set): the
// store appends and replays over PLAIN and over SCRAM-SHA-512; a wrong
// password fails Open within DialTimeout + RequestTimeout with an error
// that says authentication failed; no log line of either run holds the
// password.
func TestSASLOnRealBroker(t *testing.T) {
	env := os.Getenv(saslBrokersEnv)
	if env == "" {
		t.Skipf("%s is not set: start a broker with 'scripts/kafka.sh start --sasl'", saslBrokersEnv)
	}
	password := os.Getenv("KWAL_KAFKA_SASL_PASSWORD")
	if password == "" {
		password = "kwal-secret"
	}
	brokers := strings.Split(env, ",")
	var logs syncBuffer
	open := func(mech, pw string) (*kafka.LogStore, time.Duration, error) {
		cfg := kafka.DefaultConfig()
		cfg.Brokers = brokers
		cfg.DialTimeout = 2 * time.Second
		cfg.RequestTimeout = 5 * time.Second
		cfg.SASL = &kafka.SASLConfig{Mechanism: mech, Username: "kwal", Password: kafka.Secret(pw)}
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		s, err := kafka.Open(ctx, cfg)
		return s, time.Since(start), err
	}
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			s, _, err := open(mech, password)
			require.NoError(t, err)
			defer s.Close()
			ctx := context.Background()
			topic := testutil.Topic(t)
			for i := range 10 {
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: fmt.Appendf(nil, "%s-%d", mech, i)}})
				require.NoError(t, err)
			}
			var got []string
			for e, err := range s.Read(ctx, topic, 1, 0) {
				require.NoError(t, err)
				got = append(got, string(e.Data))
			}
			require.Len(t, got, 10)
			require.Equal(t, mech+"-9", got[9])
			require.NoError(t, s.DeleteNamespace(ctx, topic))

			wrong := "not-" + password
			s2, took, err := open(mech, wrong)
			if s2 != nil {
				_ = s2.Close()
			}
			require.Error(t, err, "a wrong password is refused")
			require.Contains(t, strings.ToLower(err.Error()), "authentication", "the error says what failed: %v", err)
			require.ErrorIs(t, err, kafka.ErrAuthFailed, "a real broker's refusal is classified as an authentication failure")
			require.ErrorIs(t, err, kafka.ErrUnreachable)
			require.Less(t, took, 2*time.Second+5*time.Second+3*time.Second, "refused within DialTimeout + RequestTimeout (+3 s margin)")
			t.Logf("%s: wrong password refused after %v: %v", mech, took.Round(time.Millisecond), err)
			require.NotContains(t, logs.String(), password, "no log line holds the password")
			require.NotContains(t, err.Error(), password)
		})
	}
}
