package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestTLSOnRealBroker protects TLS against a real Kafka started with
// 'scripts/kafka.sh start --tls' or '--mtls' (skipped unless
// KWAL_KAFKA_TLS_BROKERS is set; KWAL_KAFKA_TLS_DIR is the script's
// $KWAL_KAFKA_HOME/tls, KWAL_KAFKA_TLS_MUTUAL=1 with --mtls): the store
// appends and replays trusting the run's CA (with the client certificate
// under mutual TLS); a broker certificate from a CA the client does not
// trust, and under mutual TLS a client without a certificate, fail Open
// within DialTimeout + RequestTimeout with an error that says so.
func TestTLSOnRealBroker(t *testing.T) {
	env := os.Getenv("KWAL_KAFKA_TLS_BROKERS")
	if env == "" {
		t.Skip("KWAL_KAFKA_TLS_BROKERS is not set: start a broker with 'scripts/kafka.sh start --tls' or '--mtls'")
	}
	dir := os.Getenv("KWAL_KAFKA_TLS_DIR")
	require.NotEmpty(t, dir, "KWAL_KAFKA_TLS_DIR names the script's certificates")
	mutual := os.Getenv("KWAL_KAFKA_TLS_MUTUAL") == "1"
	brokers := strings.Split(env, ",")
	const dial, request = 2 * time.Second, 5 * time.Second
	open := func(tc *kafka.TLSConfig) (*kafka.LogStore, time.Duration, error) {
		cfg := kafka.DefaultConfig()
		cfg.Brokers = brokers
		cfg.DialTimeout = dial
		cfg.RequestTimeout = request
		cfg.TLS = tc
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		s, err := kafka.Open(ctx, cfg)
		return s, time.Since(start), err
	}
	good := &kafka.TLSConfig{CAFile: filepath.Join(dir, "ca.pem")}
	if mutual {
		good.CertFile, good.KeyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	}
	s, _, err := open(good)
	require.NoError(t, err)
	ctx := context.Background()
	topic := testutil.Topic(t)
	for i := range 10 {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 7, Data: fmt.Appendf(nil, "tls-%d", i)}})
		require.NoError(t, err)
	}
	n := 0
	for _, err := range s.Read(ctx, topic, 7, 0) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 10, n)
	require.NoError(t, s.DeleteNamespace(ctx, topic))
	require.NoError(t, s.Close())

	refused := func(what string, tc *kafka.TLSConfig, says ...string) error {
		s, took, err := open(tc)
		if s != nil {
			_ = s.Close()
		}
		require.Error(t, err, what)
		t.Logf("%s: refused after %v: %v", what, took.Round(time.Millisecond), err)
		require.Less(t, took, dial+request+3*time.Second, "%s: refused within DialTimeout + RequestTimeout (+3 s margin)", what)
		msg := strings.ToLower(err.Error())
		ok := false
		for _, w := range says {
			ok = ok || strings.Contains(msg, w)
		}
		require.True(t, ok, "%s: the error says what failed (one of %v): %v", what, says, err)
		require.ErrorIs(t, err, kafka.ErrUnreachable, what)
		return err
	}
	_, other := testutil.SelfSignedTLS(t) // a CA the broker's certificate was not signed by
	untrusted := *good
	untrusted.CAFile = other
	err = refused("a broker certificate from an untrusted CA", &untrusted, "certificate", "x509")
	require.ErrorIs(t, err, kafka.ErrTLS, "an untrusted broker certificate is classified as a TLS failure")
	if mutual {
		err = refused("no client certificate under mutual TLS", &kafka.TLSConfig{CAFile: good.CAFile}, "certificate", "tls", "eof", "reset")
		require.ErrorIs(t, err, kafka.ErrTLS, "the broker's refusal of a missing client certificate is classified as a TLS failure")
	}
}
