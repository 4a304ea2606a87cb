package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// asKwal, set in a child process's environment, makes the test binary
// run as the kwal command itself (main with the child's arguments): the
// tests of two processes and of real signals start it so.
const asKwal = "KWAL_TEST_RUN_AS_KWAL"

func TestMain(m *testing.M) {
	if os.Getenv(asKwal) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// listed returns the namespaces `kwal namespaces list` printed: the first
// column of the lines after the header.
func listed(stdout string) []string {
	var names []string
	for i, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if f := strings.Fields(l); i > 0 && len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// lockedBuffer is a bytes.Buffer safe for concurrent use, which can tell
// when something was written.
type lockedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	watchers []watcher
}

// watcher is a waitFor call not yet answered.
type watcher struct {
	substr string
	ch     chan struct{}
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	b.notify()
	return n, err
}

// waitFor returns a channel closed once the buffer holds substr.
func (b *lockedBuffer) waitFor(substr string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := watcher{substr: substr, ch: make(chan struct{})}
	b.watchers = append(b.watchers, w)
	b.notify()
	return w.ch
}

// notify closes the channels of the watchers whose text arrived; b.mu is
// held.
func (b *lockedBuffer) notify() {
	kept := b.watchers[:0]
	for _, w := range b.watchers {
		if strings.Contains(b.buf.String(), w.substr) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	b.watchers = kept
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is what one in-process run of the command printed.
type result struct {
	stdout, stderr string
	code           int
}

// kwal runs the command in-process with args and the given environment.
func kwal(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return kwalUntil(t, env, "", args...)
}

// kwalUntil is kwal, interrupted (as by Ctrl-C) once stderr shows
// interruptAt ("" never; "-" at once, before the command starts).
func kwalUntil(t *testing.T, env map[string]string, interruptAt string, args ...string) result {
	t.Helper()
	var out, errb lockedBuffer // franz-go may still log after run returns
	// A guard against a hung command; benches run whole workloads, which
	// take one to two minutes under the race detector.
	limit := 2 * time.Minute
	if len(args) > 0 && args[0] == "bench" {
		limit = 6 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ctx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	switch interruptAt {
	case "":
	case "-":
		interrupt()
	default:
		go func() {
			select {
			case <-errb.waitFor(interruptAt):
				interrupt()
			case <-ctx.Done():
			}
		}()
	}
	code := run(ctx, args, nil, &out, &errb, func(k string) string { return env[k] })
	r := result{stdout: out.String(), stderr: errb.String(), code: code}
	if testing.Verbose() {
		t.Logf("kwal %s -> %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, r.stdout, r.stderr)
	}
	return r
}

// cluster starts a kfake cluster for the test and returns the flags that
// point the command at it, with an index dir of the test's own.
func cluster(t *testing.T) []string {
	t.Helper()
	addrs := testutil.NewCluster(t).ListenAddrs()
	return []string{"--brokers", strings.Join(addrs, ","), "--index-dir", t.TempDir(), "--data-dir", t.TempDir()}
}

// flagValue returns the value that follows name in flags, or "".
func flagValue(flags []string, name string) string {
	for i, f := range flags {
		if f == name && i+1 < len(flags) {
			return flags[i+1]
		}
	}
	return ""
}

// populate appends entries to regions of ns through a store with the
// flags' brokers and index dir, and closes it (checkpointing the index).
// Region r gets n entries "r<r>-e<i>" padded to size bytes.
func populate(t *testing.T, flags []string, ns string, regions []logstore.RegionID, n, size int) map[logstore.RegionID][]logstore.EntryID {
	t.Helper()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = strings.Split(flagValue(flags, "--brokers"), ",")
	cfg.IndexDir = flagValue(flags, "--index-dir")
	cfg.Logger = slog.New(slog.DiscardHandler)
	// The tests size logs by their entries (repetitive bytes, which would
	// compress to almost nothing).
	cfg.Compression = "none"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	require.NoError(t, st.CreateNamespace(ctx, ns))
	ids := map[logstore.RegionID][]logstore.EntryID{}
	for i := range n {
		var batch []logstore.Entry
		for _, r := range regions {
			d := []byte(fmt.Sprintf("r%d-e%d;", r, i))
			d = append(d, bytes.Repeat([]byte{byte(i)}, max(0, size-len(d)))...)
			batch = append(batch, logstore.Entry{Namespace: ns, Region: r, Data: d})
		}
		res, err := st.AppendBatch(ctx, batch)
		require.NoError(t, err)
		for _, r := range regions {
			ids[r] = append(ids[r], res.LastEntryIDs[r])
		}
	}
	return ids
}

func TestHelpDocumentsEnvironment(t *testing.T) {
	r := kwal(t, nil, "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "KWAL_BROKERS")
	require.Contains(t, r.stdout, "[$KWAL_REQUEST_TIMEOUT]")
	for _, sub := range []string{"demo", "bench", "dump", "replay", "index", "namespaces"} {
		require.Contains(t, r.stdout, sub)
	}
	r = kwal(t, nil, "bench", "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "[$KWAL_ENTRY_SIZE]")
	require.Contains(t, r.stdout, "[$KWAL_BROKERS]")
}

func TestEnvironmentSetsFlags(t *testing.T) {
	flags := cluster(t)
	env := map[string]string{
		"KWAL_BROKERS":   flagValue(flags, "--brokers"),
		"KWAL_INDEX_DIR": flagValue(flags, "--index-dir"),
	}
	r := kwal(t, env, "namespaces", "create", "from-env")
	require.Equal(t, 0, r.code, r.stderr)
	r = kwal(t, env, "namespaces", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "from-env")

	// A flag on the command line wins over its variable.
	env["KWAL_REQUEST_TIMEOUT"] = "not-a-duration"
	r = kwal(t, env, "namespaces", "list")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "KWAL_REQUEST_TIMEOUT")
	r = kwal(t, env, "namespaces", "list", "--request-timeout", "5s")
	require.Equal(t, 0, r.code, r.stderr)
}

func TestNamespaces(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"namespaces", "create", "ns-a", "ns-b"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "created ns-a")
	r = kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"ns-a", "ns-b"}, listed(r.stdout))
	r = kwal(t, nil, append([]string{"ns", "delete", "ns-a"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "deleted ns-a")
	r = kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"ns-b"}, listed(r.stdout))

	r = kwal(t, nil, append([]string{"namespaces", "create", "bad/name"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not a valid topic name")
}

// TestUnreachableBroker: an address where nothing listens is reported as
// a refused connection, at once, not as a broker that did not answer in
// time.
func TestUnreachableBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	for _, args := range [][]string{
		{"namespaces", "list"},                 // through kafka.Open
		{"dump", "--namespace", "whatever"},    // through a raw client
		{"demo", "--entries", "10", "--quiet"}, // the main job
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			r := kwal(t, nil, append(args, "--brokers", addr, "--request-timeout", "1m", "--dial-timeout", "500ms",
				"--index-dir", t.TempDir(), "--data-dir", t.TempDir())...)
			require.Equal(t, 1, r.code)
			require.Less(t, time.Since(start), 30*time.Second) // not the minute of --request-timeout
			require.Contains(t, r.stderr, "kwal: no broker at "+addr+": connection refused, nothing listens there (is the broker running? check --brokers/KWAL_BROKERS)")
			require.NotContains(t, r.stderr, "answered within")
			require.Empty(t, r.stdout)
		})
	}
}

// A broker that accepts connections and never answers must not hang a
// command past its request timeout.
func TestSilentBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	defer func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for _, args := range [][]string{{"namespaces", "list"}, {"dump", "-n", "x"}} {
		start := time.Now()
		r := kwal(t, nil, append(args, "--brokers", ln.Addr().String(), "--request-timeout", "1s",
			"--index-dir", t.TempDir())...)
		require.Equal(t, 1, r.code)
		require.Less(t, time.Since(start), 8*time.Second)
		require.Contains(t, r.stderr, "no broker")
		require.Contains(t, r.stderr, "answered within 1s")
	}
}

func TestBadFlags(t *testing.T) {
	r := kwal(t, nil, "demo", "--regions", "0")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--regions")
	r = kwal(t, nil, "demo", "--no-such-flag")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "unknown flag")
	r = kwal(t, nil, "namespaces", "list", "--log-level", "loud")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--log-level")
	r = kwal(t, nil, "namespaces", "list", "--sasl-mechanism", "NOPE", "--sasl-user", "u", "--sasl-password", "hunter2",
		"--brokers", "127.0.0.1:1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "SASL.Mechanism")
	require.NotContains(t, r.stderr+r.stdout, "hunter2")
}

func TestPreview(t *testing.T) {
	require.Equal(t, `"hello"`, preview([]byte("hello"), 32))
	require.Equal(t, `"hel"…`, preview([]byte("hello"), 3))
	require.Equal(t, `"r1#0;" 0001`, preview([]byte("r1#0;\x00\x01"), 32))
	require.Equal(t, "0001", preview([]byte{0, 1}, 32))
}

func TestSASL(t *testing.T) {
	c := testutil.NewCluster(t, kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", "plainpass"),
		kfake.Superuser("SCRAM-SHA-256", "scramuser", "scrampass"))
	base := []string{"--brokers", strings.Join(c.ListenAddrs(), ","), "--index-dir", t.TempDir(), "--request-timeout", "2s"}

	r := kwal(t, map[string]string{"KWAL_SASL_PASSWORD": "plainpass"},
		append([]string{"namespaces", "create", "sasl-ns", "--sasl-user", "plainuser"}, base...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = kwal(t, map[string]string{"KWAL_SASL_USER": "scramuser", "KWAL_SASL_PASSWORD": "scrampass", "KWAL_SASL_MECHANISM": "scram-sha-256"},
		append([]string{"dump", "-n", "sasl-ns"}, base...)...) // a raw client
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "0 records")

	r = kwal(t, map[string]string{"KWAL_SASL_PASSWORD": "wrong-password"},
		append([]string{"namespaces", "list", "--sasl-user", "plainuser"}, base...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no broker")
	require.NotContains(t, r.stderr, "wrong-password")
}

func TestTLSFlags(t *testing.T) {
	r := kwal(t, nil, "namespaces", "list", "--brokers", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "TLS.CAFile: open /nonexistent/ca.pem") // named by its Config field, like every config error
	r = kwal(t, nil, "dump", "-n", "x", "--brokers", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "TLS.CAFile")
	r = kwal(t, nil, "namespaces", "list", "--brokers", "127.0.0.1:1", "--tls-cert", "c.pem")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "CertFile and KeyFile go together")
}

// testutilCluster starts a kfake cluster of its own for the test and
// returns its address.
func testutilCluster(t *testing.T) string {
	t.Helper()
	return strings.Join(testutil.NewCluster(t).ListenAddrs(), ",")
}

// TestVersion: kwal --version prints the module version and the build's
// Go version, and starts nothing.
func TestVersion(t *testing.T) {
	r := kwal(t, nil, "--version")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `^kwal version \S+.*, go1\.\d+`, r.stdout)
	require.Empty(t, r.stderr)
}
