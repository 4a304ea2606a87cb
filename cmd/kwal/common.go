package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// envPrefix begins the environment variable of every flag: --foo-bar is
// also read from KWAL_FOO_BAR.
const envPrefix = "KWAL_"

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1 // the command failed
	exitMismatch = 2 // a check found data that differs (demo, index verify)
)

// exitErr carries a specific exit code.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

// mismatchError reports a failed data check: the command exits with
// exitMismatch.
func mismatchError(format string, args ...any) error {
	return &exitErr{code: exitMismatch, err: fmt.Errorf(format, args...)}
}

// app is one invocation of the command: its outputs, its environment and
// the flags every subcommand shares.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// interactive reports whether stderr is a terminal (progress bars draw
	// only then).
	interactive func() bool

	g   globalFlags
	log *slog.Logger
}

// globalFlags are the persistent flags of the root command.
type globalFlags struct {
	brokers  []string
	dataDir  string
	indexDir string

	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	tlsInsecure   bool

	saslMechanism string
	saslUser      string
	saslPassword  string

	requestTimeout time.Duration
	dialTimeout    time.Duration
	produceTimeout time.Duration

	logLevel string
}

// run builds the command tree, runs it with args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := newApp(stdout, stderr, getenv)
	stderr = a.stderr
	root := a.rootCmd()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "kwal: ") {
			msg = "kwal: " + msg
		}
		fmt.Fprintln(stderr, msg)
		if ee, ok := errors.AsType[*exitErr](err); ok {
			return ee.code
		}
		return exitError
	}
	return exitOK
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *app {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	// The logger writes from franz-go's goroutines too: one lock orders
	// every write to stderr.
	a := &app{stdout: stdout, stderr: &syncWriter{w: stderr}, getenv: getenv}
	a.interactive = func() bool {
		f, ok := stderr.(*os.File)
		return ok && term.IsTerminal(int(f.Fd()))
	}
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return a
}

const rootLong = `kwal is a write-ahead log for a database's datanodes on Apache Kafka. This
command plays a datanode (demo), measures kwal against a raw franz-go producer
(bench), and inspects namespaces, records, replays and the region index.

Brokers: with no --brokers, kwal starts an embedded in-process Kafka (kfake)
that keeps its data on disk under --data-dir (<data-dir>/kafka), so that
later commands see what earlier ones wrote. Do not run two kwal commands on
one data dir at the same time. With --brokers, any Kafka is used.

The region index is kept in --index-dir (default <data-dir>/index).

Environment: every flag can also be set from an environment variable named
KWAL_ followed by the flag's name in upper case with '-' turned into '_':
--brokers is KWAL_BROKERS, --request-timeout is KWAL_REQUEST_TIMEOUT,
--entry-size is KWAL_ENTRY_SIZE. A flag given on the command line wins over
its variable. Prefer KWAL_SASL_PASSWORD to --sasl-password (command lines
are visible to other users); the password is never printed.

Exit codes: 0 success, 1 error, 2 a check found differing data.`

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kwal",
		Short:         "kwal: a write-ahead log for datanodes on Apache Kafka",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.prepare(cmd)
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	})
	pf := root.PersistentFlags()
	pf.StringSliceVar(&a.g.brokers, "brokers", nil, "seed brokers host:port, comma-separated; empty starts an embedded broker")
	pf.StringVar(&a.g.dataDir, "data-dir", "./kwal-data", "directory of the embedded broker's data (<data-dir>/kafka) and of the default index dir")
	pf.StringVar(&a.g.indexDir, "index-dir", "", "directory of the region index checkpoints (default <data-dir>/index)")
	pf.BoolVar(&a.g.tls, "tls", false, "connect to the brokers with TLS (implied by the other --tls-* flags)")
	pf.StringVar(&a.g.tlsCA, "tls-ca", "", "PEM file of the CA certificates to trust (default: system roots)")
	pf.StringVar(&a.g.tlsCert, "tls-cert", "", "PEM file of the client certificate (with --tls-key)")
	pf.StringVar(&a.g.tlsKey, "tls-key", "", "PEM file of the client key (with --tls-cert)")
	pf.StringVar(&a.g.tlsServerName, "tls-server-name", "", "server name to verify (default: the broker's host)")
	pf.BoolVar(&a.g.tlsInsecure, "tls-insecure", false, "do not verify the brokers' certificates")
	pf.StringVar(&a.g.saslMechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default PLAIN when --sasl-user is set)")
	pf.StringVar(&a.g.saslUser, "sasl-user", "", "SASL user name")
	pf.StringVar(&a.g.saslPassword, "sasl-password", "", "SASL password (prefer the environment variable; never printed)")
	def := kafka.DefaultConfig()
	pf.DurationVar(&a.g.requestTimeout, "request-timeout", def.RequestTimeout, "bound of admin and fetch requests, and of reaching a broker at start")
	pf.DurationVar(&a.g.dialTimeout, "dial-timeout", def.DialTimeout, "bound of opening a connection to a broker")
	pf.DurationVar(&a.g.produceTimeout, "produce-timeout", def.ProduceTimeout, "bound of one produce request")
	pf.StringVar(&a.g.logLevel, "log-level", "warn", "log level to stderr: debug, info, warn or error")

	root.AddCommand(
		a.demoCmd(),
		a.benchCmd(),
		a.dumpCmd(),
		a.replayCmd(),
		a.indexCmd(),
		a.namespacesCmd(),
	)
	annotateEnv(root)
	return root
}

// prepare runs before every subcommand: it fills flags from the
// environment and sets up logging.
func (a *app) prepare(cmd *cobra.Command) error {
	if err := applyEnv(cmd.Flags(), a.getenv); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.g.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", a.g.logLevel)
	}
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
	return nil
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag that was not given on the command line from its
// environment variable (KWAL_<FLAG>), when that is set and not empty.
func applyEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		v := getenv(envName(f.Name))
		if strings.TrimSpace(v) == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: %w", envName(f.Name), err))
		}
	})
	return errors.Join(errs...)
}

// annotateEnv appends each flag's environment variable to its help text.
func annotateEnv(root *cobra.Command) {
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	note := func(f *pflag.Flag) {
		if seen[f] || f.Name == "help" {
			return
		}
		seen[f] = true
		f.Usage += " [$" + envName(f.Name) + "]"
	}
	walk = func(c *cobra.Command) {
		c.PersistentFlags().VisitAll(note)
		c.Flags().VisitAll(note)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

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

// serveMetrics serves the session's registry (kwal's metrics plus Go and
// process collectors) at http://addr/metrics until Close.
func (s *session) serveMetrics(addr string) error {
	if addr == "" {
		return nil
	}
	_ = s.reg.Register(collectors.NewGoCollector())
	_ = s.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.srvDone = make(chan struct{})
	go func() {
		defer close(s.srvDone)
		_ = s.srv.Serve(ln)
	}()
	fmt.Fprintf(s.a.stderr, "metrics: http://%s/metrics\n", ln.Addr())
	return nil
}

// ---- index files --------------------------------------------------------

// loadIndex loads the index checkpointed in dir without writing to it, for
// inspection through the index package's Topics and Stats. The caller
// closes it.
func loadIndex(dir string, log *slog.Logger) (*index.Global, error) {
	g, err := index.New(index.Options{Store: index.OpenDirStoreReadOnly(dir), ReadOnly: true, Logger: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, fmt.Errorf("loading the index in %s: %w", dir, err)
	}
	return g, nil
}

// indexBytes sums the checkpoint bytes of the given topics in dir.
func indexBytes(dir string, topics []string, log *slog.Logger) (bytes int64, files int, err error) {
	g, err := loadIndex(dir, log)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = g.Close(context.Background()) }()
	for _, t := range topics {
		if ts, ok := g.Stats(t, false); ok {
			bytes += ts.StoredBytes
			files += ts.Files
		}
	}
	return bytes, files, nil
}

// runStamp names one run's namespaces: the time to the second and a
// random suffix, so that runs within one second differ.
func runStamp() string {
	return fmt.Sprintf("%s-%04x", time.Now().Format("20060102-150405"), rand.Uint32()&0xffff)
}

// ---- formatting ---------------------------------------------------------

func mb(b int64) float64 { return float64(b) / 1e6 }

func humanBytes(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// quantile returns the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// preview renders the first n bytes of data: quoted when printable, hex
// otherwise, or a quoted printable prefix (of 3 bytes or more) followed by
// the rest in hex.
func preview(data []byte, n int) string {
	p := data[:min(len(data), n)]
	k := 0
	for k < len(p) && p[k] >= 0x20 && p[k] <= 0x7e {
		k++
	}
	more := ""
	if len(data) > n {
		more = "…"
	}
	switch {
	case k == len(p):
		return strconv.Quote(string(p)) + more
	case k >= 3:
		return fmt.Sprintf("%s %x%s", strconv.Quote(string(p[:k])), p[k:], more)
	}
	return fmt.Sprintf("%x%s", p, more)
}
