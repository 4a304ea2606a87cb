package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kwal/kwal/logstore/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// indexDir is the directory of the index checkpoints.
func (a *app) indexDir() string {
	if a.g.indexDir != "" {
		return a.g.indexDir
	}
	return filepath.Join(a.g.dataDir, "index")
}

// brokers returns the --brokers list, trimmed; empty means embedded.
func (a *app) brokers() []string {
	var out []string
	for _, b := range a.g.brokers {
		for _, p := range strings.Split(b, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// config builds the store configuration from the shared flags. Brokers is
// left empty for the embedded broker (the session fills it in).
func (a *app) config() (kafka.Config, error) {
	cfg := kafka.DefaultConfig()
	cfg.Brokers = a.brokers()
	cfg.RequestTimeout = a.g.requestTimeout
	cfg.DialTimeout = a.g.dialTimeout
	cfg.ProduceTimeout = a.g.produceTimeout
	cfg.IndexDir = a.indexDir()
	cfg.Logger = a.log
	g := a.g
	if g.tls || g.tlsCA != "" || g.tlsCert != "" || g.tlsKey != "" || g.tlsServerName != "" || g.tlsInsecure {
		cfg.TLS = &kafka.TLSConfig{
			CAFile: g.tlsCA, CertFile: g.tlsCert, KeyFile: g.tlsKey,
			ServerName: g.tlsServerName, InsecureSkipVerify: g.tlsInsecure,
		}
	}
	if g.saslMechanism != "" || g.saslUser != "" || g.saslPassword != "" {
		mech := strings.ToUpper(g.saslMechanism)
		if mech == "" {
			mech = kafka.SASLPlain
		}
		cfg.SASL = &kafka.SASLConfig{Mechanism: mech, Username: g.saslUser, Password: kafka.Secret(g.saslPassword)}
	}
	return cfg, nil
}

// session is the connection context of one command: the configuration,
// the embedded broker when there is one, and the metrics registry.
type session struct {
	a       *app
	cfg     kafka.Config
	cluster *kfake.Cluster // nil with --brokers
	reg     *prometheus.Registry
	srv     *http.Server
	srvDone chan struct{}
}

// startSession builds the configuration and starts the embedded broker
// when no --brokers are given. Close the session when done.
func (a *app) startSession() (*session, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	s := &session{a: a, cfg: cfg, reg: prometheus.NewRegistry()}
	s.cfg.Registerer = s.reg
	if len(cfg.Brokers) == 0 {
		dir := filepath.Join(a.g.dataDir, "kafka")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("embedded broker: data dir: %w", err)
		}
		c, err := kfake.NewCluster(
			kfake.NumBrokers(1),
			kfake.BrokerConfigs(map[string]string{"message.max.bytes": "67174400"}),
			kfake.DataDir(dir),
		)
		if err != nil {
			return nil, fmt.Errorf("embedded broker (data in %s): %w", dir, err)
		}
		s.cluster = c
		s.cfg.Brokers = c.ListenAddrs()
		a.log.Debug("embedded broker started", "addrs", s.cfg.Brokers, "data_dir", dir)
	}
	// Report bad flags before anything connects.
	if err := s.cfg.Validate(); err != nil {
		s.Close()
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if _, err := kafka.ClientOptions(s.cfg); err != nil { // TLS files load here
		s.Close()
		return nil, err
	}
	return s, nil
}

// brokerKind describes the broker for reports.
func (s *session) brokerKind() string {
	if s.cluster != nil {
		return "embedded-kfake"
	}
	return "kafka"
}

func (s *session) describeBroker() string {
	if s.cluster != nil {
		return fmt.Sprintf("embedded kfake broker, data in %s", filepath.Join(s.a.g.dataDir, "kafka"))
	}
	return "Kafka at " + strings.Join(s.cfg.Brokers, ",")
}

// Close stops the metrics server and the embedded broker.
func (s *session) Close() {
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		<-s.srvDone
		s.srv = nil
	}
	if s.cluster != nil {
		s.cluster.Close()
		s.cluster = nil
	}
}

// openStore opens the log store with the session's configuration, changed
// by mutate when set.
func (s *session) openStore(ctx context.Context, mutate func(*kafka.Config)) (*kafka.LogStore, error) {
	cfg := s.cfg
	if mutate != nil {
		mutate(&cfg)
	}
	st, err := kafka.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, s.reachHint())
	}
	return st, nil
}

func (s *session) reachHint() string {
	if s.cluster != nil {
		return ""
	}
	return " (check --brokers/KWAL_BROKERS and the TLS and SASL flags)"
}

// clientOpts are the franz-go options of a raw client: the store's seeds,
// timeouts, TLS and SASL.
func (s *session) clientOpts() ([]kgo.Opt, error) {
	opts, err := kafka.ClientOptions(s.cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return opts, nil
}

// rawClient returns a plain franz-go client (extra options appended) after
// checking that a broker answers within the request timeout.
func (s *session) rawClient(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := s.clientOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("no broker of %v answered within %v: %w%s", s.cfg.Brokers, s.cfg.RequestTimeout, err, s.reachHint())
	}
	return cl, nil
}
