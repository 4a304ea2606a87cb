package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientOptions returns the franz-go options the store's own clients use
// for cfg (seeds, timeouts, TLS, SASL, logging), so that tools can open
// plain clients to the same cluster the same way.
func ClientOptions(cfg Config) ([]kgo.Opt, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return baseOpts(cfg)
}

// baseOpts are the franz-go options every client of the store shares:
// seeds, timeouts, TLS, SASL and logging.
func baseOpts(cfg Config) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RequestTimeoutOverhead(cfg.RequestTimeout),
		kgo.RetryTimeout(cfg.RequestTimeout),
		kgo.RetryBackoffFn(func(int) time.Duration { return cfg.RetryBackoff }),
		kgo.WithLogger(slogAdapter{cfg.Logger}),
		kgo.MetadataMinAge(100 * time.Millisecond),
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout}
	var tc *tls.Config
	if cfg.TLS != nil {
		var err error
		if tc, err = tlsConfig(cfg.TLS); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.Dialer != nil:
		opts = append(opts, kgo.Dialer(customDialer(cfg.Dialer, cfg.DialTimeout, tc)))
	case tc != nil:
		td := &tls.Dialer{NetDialer: dialer, Config: tc}
		opts = append(opts, kgo.Dialer(td.DialContext))
	default:
		opts = append(opts, kgo.Dialer(dialer.DialContext))
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(saslMechanism(cfg.SASL)))
	}
	return opts, nil
}

// customDialer wraps Config.Dialer: DialTimeout bounds the dial and the
// TLS handshake (when tc is set), as it does for the default dialer.
func customDialer(dial func(ctx context.Context, network, address string) (net.Conn, error), timeout time.Duration, tc *tls.Config) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := dial(ctx, network, address)
		if err != nil || tc == nil {
			return conn, err
		}
		c := tc.Clone()
		if c.ServerName == "" {
			c.ServerName, _, _ = net.SplitHostPort(address)
		}
		tconn := tls.Client(conn, c)
		if err := tconn.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tconn, nil
	}
}

func tlsConfig(t *TLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka config: TLS.CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka config: TLS.CAFile: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka config: TLS.CertFile/KeyFile: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func saslMechanism(s *SASLConfig) sasl.Mechanism {
	switch s.Mechanism {
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: string(s.Password)}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: string(s.Password)}.AsSha512Mechanism()
	default:
		return plain.Auth{User: s.Username, Pass: string(s.Password)}.AsMechanism()
	}
}

// CompressionCodec maps a Config.Compression name to franz-go's codec.
func CompressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("%q is not one of none, gzip, snappy, lz4, zstd", name)
}

// slogAdapter sends franz-go's logs to slog, one level down (franz-go's
// info is chatty for a library).
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel {
	if a.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	}
	a.l.Log(context.Background(), l, "franz-go: "+msg, keyvals...)
}
