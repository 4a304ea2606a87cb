package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kwal/kwal/embedded"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// indexDir is the directory of the index checkpoints: --index-dir, or by
// default <data-dir>/index for the embedded broker and, with --brokers,
// <data-dir>/index-<seed brokers>, so that the index of one cluster's
// topics never mixes with another's (a namespace name may exist on both).
func (a *app) indexDir() string {
	if a.g.indexDir != "" {
		return a.g.indexDir
	}
	b := a.brokers()
	if len(b) == 0 {
		return filepath.Join(a.g.dataDir, "index")
	}
	b = slices.Clone(b)
	slices.Sort(b)
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		}
		return '_'
	}, strings.Join(b, ","))
	if len(name) > 100 {
		name = name[:100]
	}
	return filepath.Join(a.g.dataDir, "index-"+name)
}

// embeddedDir is the embedded broker's data directory.
func (a *app) embeddedDir() string { return filepath.Join(a.g.dataDir, "kafka") }

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
	cfg.ClaimsTopic = a.g.claimsTopic
	cfg.Lease = a.g.lease
	cfg.PruneMode = a.g.pruneMode
	cfg.RetentionWarnMargin = a.g.retentionWarnMargin
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
	a          *app
	cfg        kafka.Config
	embedded   bool   // the broker is this process's own (no --brokers)
	stopBroker func() // stops the embedded broker; nil once stopped
	reg        *prometheus.Registry
	srv        *http.Server
	srvDone    chan struct{}
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
		dir := a.embeddedDir()
		opts := []embedded.Option{embedded.WithOwner(a.cmdPath), embedded.WithLogger(a.log)}
		if a.g.acceptLoss {
			opts = append(opts, embedded.AcceptLoss())
		}
		addrs, stop, err := embedded.Start(dir, opts...)
		if de, ok := errors.AsType[*embedded.DamagedError](err); ok {
			return nil, fmt.Errorf("the embedded broker's data in %s is damaged: %s; the broker did not start and nothing was changed: to start without these records, run the command again with --accept-data-loss (copy %s aside first to keep them)",
				dir, de.Summary(), dir)
		}
		if inUse, ok := errors.AsType[*embedded.InUseError](err); ok {
			hint := "; wait until it ends, or give this command another --data-dir"
			if b := inUse.Holder.Brokers; len(b) > 0 {
				hint = fmt.Sprintf(": pass --brokers %s to talk to its broker (this command then keeps its index apart), or wait until it ends", strings.Join(b, ","))
			}
			return nil, fmt.Errorf("%w%s", err, hint)
		}
		if err != nil {
			return nil, fmt.Errorf("embedded broker (data in %s): %w", dir, err)
		}
		s.embedded, s.stopBroker = true, stop
		s.cfg.Brokers = addrs
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
	if s.embedded {
		return "embedded-kfake"
	}
	return "kafka"
}

func (s *session) describeBroker() string {
	if s.embedded {
		return fmt.Sprintf("embedded kfake broker, data in %s", s.a.embeddedDir())
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
	if s.stopBroker != nil {
		s.stopBroker()
		s.stopBroker = nil
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
		return nil, s.unreachable(err)
	}
	return st, nil
}

func (s *session) reachHint() string {
	if s.embedded {
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
	if err := kafka.Ping(ctx, cl, s.cfg); err != nil {
		cl.Close()
		return nil, s.unreachable(err)
	}
	return cl, nil
}

// refusedError is a failure to reach the brokers because nothing listens
// at their addresses: it says so, rather than that no broker answered in
// time (which a refused connection learns at once, not after a timeout).
type refusedError struct {
	brokers []string
	err     error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("no broker at %s: connection refused, nothing listens there (is the broker running? check --brokers/KWAL_BROKERS)",
		strings.Join(e.brokers, ","))
}

func (e *refusedError) Unwrap() error { return e.err }

// unreachable adds to a failure to reach the brokers what to check, and
// tells a refused connection from a timeout.
func (s *session) unreachable(err error) error {
	if errors.Is(err, kafka.ErrRefused) {
		return &refusedError{brokers: s.cfg.Brokers, err: err}
	}
	// Other errors (a bad setting, a closed context) get no hint about
	// the brokers.
	if !errors.Is(err, kafka.ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w%s", err, s.reachHint())
}
