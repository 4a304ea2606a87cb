package kafka_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestOpenSaysWhyNoBrokerAnswered protects Open's error when it cannot
// reach the cluster: it matches ErrUnreachable and the sentinel of what
// happened (a refused connection, refused credentials, a failed TLS
// handshake, no answer in time), and only the timeout claims that no
// broker answered within the request timeout. A caller's context that
// ended is not reported as an unreachable cluster.
func TestOpenSaysWhyNoBrokerAnswered(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, ctx context.Context, brokers []string, mutate func(*kafka.Config)) error {
		cfg := kafka.DefaultConfig()
		cfg.Brokers = brokers
		cfg.RequestTimeout = 5 * time.Second
		cfg.DisableIndex = true
		if mutate != nil {
			mutate(&cfg)
		}
		s, err := kafka.Open(ctx, cfg)
		if err == nil {
			_ = s.Close()
		}
		require.Error(t, err)
		return err
	}
	mustBe := func(t *testing.T, err error, reason error) {
		require.ErrorIs(t, err, kafka.ErrUnreachable)
		require.ErrorIs(t, err, reason)
		for _, other := range []error{kafka.ErrRefused, kafka.ErrAuthFailed, kafka.ErrTLS, kafka.ErrBrokerTimeout} {
			if other != reason {
				require.NotErrorIs(t, err, other)
			}
		}
		require.Contains(t, err.Error(), "no broker of")
	}

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // nothing listens there now
		err = open(t, t.Context(), []string{addr}, nil)
		mustBe(t, err, kafka.ErrRefused)
		require.NotContains(t, err.Error(), "answered within")
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		// A listener that accepts and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var mu sync.Mutex
		var conns []net.Conn
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
		t.Cleanup(func() {
			_ = ln.Close()
			wg.Wait()
			for _, c := range conns {
				_ = c.Close()
			}
		})
		err = open(t, t.Context(), []string{ln.Addr().String()}, func(c *kafka.Config) { c.RequestTimeout = 300 * time.Millisecond })
		mustBe(t, err, kafka.ErrBrokerTimeout)
		require.Contains(t, err.Error(), "answered within 300ms")
	})

	t.Run("auth", func(t *testing.T) {
		t.Parallel()
		c := testutil.NewCluster(t, kfake.EnableSASL(), kfake.Superuser(kafka.SASLScramSHA256, "admin", "right"))
		// kfake drops the connection on bad credentials; Kafka answers
		// SASL_AUTHENTICATION_FAILED, as this does.
		c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			resp := req.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
			resp.ErrorMessage = &msg
			return resp, nil, true
		})
		err := open(t, t.Context(), c.ListenAddrs(), func(cfg *kafka.Config) {
			cfg.SASL = &kafka.SASLConfig{Mechanism: kafka.SASLScramSHA256, Username: "admin", Password: "wrong"}
		})
		mustBe(t, err, kafka.ErrAuthFailed)
	})

	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		srv, _ := testutil.SelfSignedTLS(t)
		c := testutil.NewCluster(t, kfake.TLS(srv))
		err := open(t, t.Context(), c.ListenAddrs(), func(cfg *kafka.Config) {
			cfg.TLS = &kafka.TLSConfig{} // the system roots do not know the certificate
		})
		mustBe(t, err, kafka.ErrTLS)
	})

	t.Run("client certificate refused", func(t *testing.T) {
		t.Parallel()
		// Mutual TLS: the broker asks for a client certificate the
		// store does not have and sends an alert, which crypto/tls
		// reports as a "remote error" (not as tls.AlertError).
		srv, ca := testutil.SelfSignedTLS(t)
		srv.ClientAuth = tls.RequireAnyClientCert
		c := testutil.NewCluster(t, kfake.TLS(srv))
		err := open(t, t.Context(), c.ListenAddrs(), func(cfg *kafka.Config) {
			cfg.TLS = &kafka.TLSConfig{CAFile: ca}
		})
		mustBe(t, err, kafka.ErrTLS)
	})

	t.Run("caller's context", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := open(t, ctx, testutil.Brokers(t), nil)
		require.NotErrorIs(t, err, kafka.ErrUnreachable)
		require.True(t, errors.Is(err, context.Canceled), err)
	})
}
