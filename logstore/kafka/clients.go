package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/kwal/kwal/internal/kwalerr"
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
		kgo.WithLogger(franzLogger(cfg.Logger)),
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
			return nil, kwalerr.Errorf("config: TLS.CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, kwalerr.Errorf("config: TLS.CAFile: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, kwalerr.Errorf("config: TLS.CertFile/KeyFile: %w", err)
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
	return kgo.NoCompression(), kwalerr.Errorf("%q is not one of none, gzip, snappy, lz4, zstd", name)
}

// franzLogger is the logger the store's franz-go clients log to: l, through
// franzLogHandler.
func franzLogger(l *slog.Logger) kgo.Logger {
	return kslog.New(slog.New(franzLogHandler{l.Handler()}))
}

// franzLogHandler is the slog handler franz-go's logs go through (franz-go's
// kslog adapter maps its levels one to one): each record goes to kwal's
// handler one level down from info, marked "franz-go: ". franz-go's info
// (connections opened and closed, metadata refreshes) is chatty for a
// library embedded in a database, so it is debug here; its warnings and
// errors keep their level. Through kslog's Level, franz-go then builds no
// info message at all unless kwal's logger takes debug.
type franzLogHandler struct{ h slog.Handler }

func (f franzLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return f.h.Enabled(ctx, demoteInfo(l))
}

func (f franzLogHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demoteInfo(r.Level)
	r.Message = "franz-go: " + r.Message
	return f.h.Handle(ctx, r)
}

func (f franzLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return franzLogHandler{f.h.WithAttrs(as)}
}

func (f franzLogHandler) WithGroup(name string) slog.Handler {
	return franzLogHandler{f.h.WithGroup(name)}
}

// demoteInfo turns info (and anything between debug and warn) into debug.
func demoteInfo(l slog.Level) slog.Level {
	if l > slog.LevelDebug && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}
