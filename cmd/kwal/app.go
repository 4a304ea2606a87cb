package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1 // the command failed
	exitMismatch = 2 // a check found data that differs (demo, index verify)
	// exitInterrupted is the shells' status of a command ended by SIGINT
	// (128+2): the command stopped at Ctrl-C and said what it had done.
	exitInterrupted = 130
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

// requiredFlag is the error of a required flag left out, naming the
// command and the flag as it is typed: "regions show: -n/--namespace is
// required". The command is named without the root's "kwal": errorText
// prints every message after one "kwal: ".
func requiredFlag(cmd *cobra.Command, name string) error {
	return fmt.Errorf("%s: %s is required", commandName(cmd), flagSpelling(cmd.Flags().Lookup(name)))
}

// commandName is cmd's path below the root ("regions show").
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// flagSpelling is f as a user types it: "-n/--namespace", or "--skip"
// for a flag without a shorthand.
func flagSpelling(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + "/--" + f.Name
	}
	return "--" + f.Name
}

// defaultDataDir is --data-dir's default.
const defaultDataDir = "./kwal-data"

// interruptedError reports a command stopped by Ctrl-C (or SIGTERM): one
// line saying what it was doing and what it had done.
func interruptedError(format string, args ...any) error {
	return &exitErr{code: exitInterrupted, err: fmt.Errorf(format, args...)}
}

// app is one invocation of the command: its outputs, its environment and
// the flags every subcommand shares.
type app struct {
	stdin          io.Reader // nil: no input (confirmations need --yes)
	stdout, stderr io.Writer
	getenv         func(string) string
	// interactive reports whether stderr is a terminal (progress bars draw
	// only then).
	interactive func() bool
	// canAsk reports whether stdin is a terminal a question can be put to.
	canAsk func() bool

	g     globalFlags
	log   *slog.Logger
	level *slog.LevelVar // log's level: --log-level, raised once interrupted
	// dedup holds back repeats of a log line (a broker outage logs the
	// same warning for every request) and counts them.
	dedup *dedupHandler
	// cmdPath is the running command ("kwal demo"), recorded as the owner
	// of the data directory's lock.
	cmdPath string
	// limits holds the range of every numeric flag (limits.go).
	limits map[*pflag.Flag]limit
}

// globalFlags are the persistent flags of the root command.
type globalFlags struct {
	brokers    []string
	dataDir    string
	indexDir   string
	acceptLoss bool

	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	tlsInsecure   bool

	saslMechanism string
	saslUser      string
	saslPassword  string

	claimsTopic string
	lease       time.Duration

	pruneMode           string
	retentionWarnMargin time.Duration

	requestTimeout time.Duration
	dialTimeout    time.Duration
	produceTimeout time.Duration

	logLevel string
}

// run builds the command tree, runs it with args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := newApp(stdout, stderr, getenv)
	a.stdin = stdin
	stderr = a.stderr
	root := a.rootCmd()
	root.SetArgs(args)
	// Once interrupted, warnings of connections closing are noise: the
	// command reports the interruption in one line.
	stopQuiet := context.AfterFunc(ctx, func() {
		if a.level.Level() < slog.LevelError {
			a.level.Set(slog.LevelError)
		}
	})
	defer stopQuiet()
	err := root.ExecuteContext(ctx)
	// What the log held back (repeats of a warning) is said before the
	// command's last word.
	a.dedup.flush()
	if err != nil {
		if _, ok := errors.AsType[*exitErr](err); !ok && ctx.Err() != nil {
			err = interruptedError("%s interrupted before it finished (%v)", cmp.Or(strings.TrimPrefix(a.cmdPath, "kwal "), "kwal"), err)
		}
		fmt.Fprintln(stderr, errorText(err))
		if ee, ok := errors.AsType[*exitErr](err); ok {
			return ee.code
		}
		return exitError
	}
	return exitOK
}

// linesError is an error whose message is a list, one item a line (the
// namespaces a pattern matches, the regions that differ, several flags'
// errors): it is printed as it is.
type linesError struct{ error }

func (e linesError) Unwrap() error { return e.error }

// errorText is the command's error as printed: "kwal: " once, then the
// message on one line, as the library's errors read (internal/kwalerr: a
// library error is printed as it is); a linesError keeps its lines. The
// command's own wraps (fmt.Errorf("replaying %s: %w", ...)) and the bench
// and chaos harnesses' show a wrapped error with its "kwal: ", and an
// errors.Join puts each error on a line of its own: both are said once,
// on one line, here.
func errorText(err error) string {
	msg := kwalerr.Bare(err)
	if _, ok := errors.AsType[linesError](err); ok {
		msg = strings.TrimPrefix(err.Error(), kwalerr.Prefix)
	}
	msg = strings.ReplaceAll(msg, ": "+kwalerr.Prefix, ": ")
	msg = strings.ReplaceAll(msg, "; "+kwalerr.Prefix, "; ")
	for strings.HasPrefix(msg, kwalerr.Prefix) {
		msg = strings.TrimPrefix(msg, kwalerr.Prefix)
	}
	return kwalerr.Prefix + msg
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
	a := &app{stdout: stdout, stderr: &syncWriter{w: stderr}, getenv: getenv, limits: map[*pflag.Flag]limit{}}
	a.interactive = func() bool {
		f, ok := stderr.(*os.File)
		return ok && term.IsTerminal(int(f.Fd()))
	}
	a.canAsk = func() bool {
		f, ok := a.stdin.(*os.File)
		return ok && term.IsTerminal(int(f.Fd()))
	}
	a.level = new(slog.LevelVar)
	a.level.Set(slog.LevelWarn)
	a.dedup = newDedupHandler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: a.level}), time.Now)
	a.log = slog.New(a.dedup)
	return a
}

const rootLong = `kwal is a write-ahead log for a database's datanodes on Apache Kafka. This
command plays a datanode (demo), measures kwal against a raw franz-go producer
(bench), and inspects namespaces, records, replays and the region index.

Brokers: with no --brokers, kwal starts an embedded in-process Kafka (kfake)
that keeps its data on disk under --data-dir (<data-dir>/kafka), so that
later commands see what earlier ones wrote. The data dir belongs to one
command at a time (an OS file lock): a second command on it fails at once,
naming the process that holds it and the address its broker listens on.
Before it starts, the embedded broker checks its files: when loading them
would drop records (a damaged disk), it refuses, naming each partition and
the offsets it would lose, and changes nothing; --accept-data-loss starts
it without them. With --brokers, any Kafka is used.

The region index is kept in --index-dir: by default <data-dir>/index for the
embedded broker and <data-dir>/index-<brokers> with --brokers, so that the
indexes of different clusters never mix.

Environment: every flag can also be set from an environment variable named
KWAL_ followed by the flag's name in upper case with '-' turned into '_':
--brokers is KWAL_BROKERS, --request-timeout is KWAL_REQUEST_TIMEOUT,
--entry-size is KWAL_ENTRY_SIZE. A flag given on the command line wins over
its variable. Prefer KWAL_SASL_PASSWORD to --sasl-password (command lines
are visible to other users); the password is never printed.

Exit codes: 0 success, 1 error, 2 a check found differing data, 130
interrupted (Ctrl-C; the command says what it had done).`

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kwal",
		Short:         "kwal: a write-ahead log for datanodes on Apache Kafka",
		Version:       version(),
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
		if ive, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
			err = valueError(ive.GetFlag(), ive.GetValue(), ive.Unwrap())
		}
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	})
	pf := root.PersistentFlags()
	pf.StringSliceVar(&a.g.brokers, "brokers", nil, "seed brokers host:port, comma-separated; empty starts an embedded broker")
	pf.StringVar(&a.g.dataDir, "data-dir", defaultDataDir, "directory of the embedded broker's data (<data-dir>/kafka) and of the default index dir")
	pf.BoolVar(&a.g.acceptLoss, "accept-data-loss", false, "start the embedded broker even when its data dir is damaged, without the records the refusal named (copy <data-dir>/kafka aside first to keep them)")
	pf.StringVar(&a.g.indexDir, "index-dir", "", "directory of the region index checkpoints (default <data-dir>/index, or <data-dir>/index-<brokers> with --brokers)")
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
	pf.StringVar(&a.g.claimsTopic, "claims-topic", def.ClaimsTopic, "topic of the region claims that every store of the cluster shares (the claims fence replays and appends)")
	pf.DurationVar(&a.g.lease, "lease", 0, "how long a claim waits before its claim record, for owners that fence appends by lease (Config.Lease; give it the longest lease of the cluster's stores)")
	pf.StringVar(&a.g.pruneMode, "prune-mode", def.PruneMode, "how prune gets rid of what no region needs: delete (DeleteRecords) or mark-only (write the prune mark and leave deleting to the topic's retention, for clusters that refuse DeleteRecords; Config.PruneMode)")
	pf.DurationVar(&a.g.retentionWarnMargin, "retention-warn-margin", def.RetentionWarnMargin, "on a topic with a finite retention, warn when the oldest entry a region still needs is closer than this to being deleted by it (Config.RetentionWarnMargin)")
	pf.DurationVar(&a.g.requestTimeout, "request-timeout", def.RequestTimeout, "bound of admin and fetch requests, and of reaching a broker at start")
	pf.DurationVar(&a.g.dialTimeout, "dial-timeout", def.DialTimeout, "bound of opening a connection to a broker")
	pf.DurationVar(&a.g.produceTimeout, "produce-timeout", def.ProduceTimeout, "bound of each append call as a whole (waiting for queue room and behind its region's earlier call, the produce, the fencing check) and of each claim, release or mark write; past it the call fails, and entries already sent may still be written")
	pf.StringVar(&a.g.logLevel, "log-level", "warn", "log level to stderr: debug, info, warn or error")
	const longWait = "a longer wait only hides a broker that is gone"
	a.boundDuration(pf, "request-timeout", time.Millisecond, time.Hour, longWait)
	a.boundDuration(pf, "lease", 0, 10*time.Minute, "a claim waits the lease; a datanode's lease is seconds")
	a.boundDuration(pf, "retention-warn-margin", 0, 365*24*time.Hour, "a margin beyond a year warns about every finite retention")
	a.boundDuration(pf, "dial-timeout", time.Millisecond, time.Hour, longWait)
	a.boundDuration(pf, "produce-timeout", time.Millisecond, time.Hour, longWait)

	root.AddCommand(
		a.demoCmd(),
		a.benchCmd(),
		a.dumpCmd(),
		a.replayCmd(),
		a.indexCmd(),
		a.namespacesCmd(),
		a.regionsCmd(),
		a.chaosCmd(),
	)
	a.annotateLimits()
	annotateEnv(root)
	return root
}

// prepare runs before every subcommand: it fills flags from the
// environment and sets up logging.
func (a *app) prepare(cmd *cobra.Command) error {
	a.cmdPath = cmd.CommandPath()
	if err := applyEnv(cmd.Flags(), a.getenv); err != nil {
		return err
	}
	if err := a.checkLimits(cmd); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.g.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", a.g.logLevel)
	}
	a.level.Set(lvl)
	a.dedup.holdBack(lvl > slog.LevelDebug)
	if a.g.dataDir == "" && (len(a.brokers()) == 0 || a.g.indexDir == "") {
		// "" would keep the embedded broker's data in memory (gone when the
		// command ends) and put the index in the working directory.
		return errors.New("--data-dir is empty: give the directory of the embedded broker's data and of the default index dir (default " + defaultDataDir + ")")
	}
	return nil
}
