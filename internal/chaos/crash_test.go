package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/testutil"
	"github.com/kwal/kwal/testutil/ledger"
)

// The crash child is this test binary re-executed with crashChildEnv set:
// it opens a store on the brokers and index directory named in the
// environment, replays every region, journals every append of 4 writers to its own journal file,
// prints "ready" once open and "put NAME" whenever the index store starts
// writing a checkpoint blob, and appends until it is killed.
const (
	crashChildEnv   = "KWAL_CRASH_CHILD"
	crashBrokersEnv = "KWAL_CRASH_BROKERS"
	crashTopicEnv   = "KWAL_CRASH_TOPIC"
	crashIndexEnv   = "KWAL_CRASH_INDEX"
	crashJournalEnv = "KWAL_CRASH_JOURNAL"
	crashWriterEnv  = "KWAL_CRASH_WRITERS" // first writer ID
)

// crashChild is the child's main; it never returns normally.
func crashChild() {
	if err := runCrashChild(); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// notifyingStore announces every Put on stdout before making it, so that
// the parent can kill the process while the checkpoint is being written.
type notifyingStore struct {
	index.Store
	mu sync.Mutex
}

func (n *notifyingStore) Put(ctx context.Context, name string, data []byte) error {
	n.mu.Lock()
	fmt.Printf("put %s\n", name)
	n.mu.Unlock()
	return n.Store.Put(ctx, name, data)
}

func runCrashChild() error {
	firstWriter, err := strconv.Atoi(os.Getenv(crashWriterEnv))
	if err != nil {
		return err
	}
	journal, err := os.OpenFile(os.Getenv(crashJournalEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	ds, err := index.NewDirStore(os.Getenv(crashIndexEnv))
	if err != nil {
		return err
	}
	cfg := kafka.DefaultConfig()
	cfg.Brokers = strings.Split(os.Getenv(crashBrokersEnv), ",")
	cfg.IndexStore = &notifyingStore{Store: ds}
	cfg.IndexCheckpointInterval = 20 * time.Millisecond
	cfg.ProduceTimeout = 10 * time.Second
	ctx := context.Background()
	s, err := kafka.Open(ctx, cfg)
	if err != nil {
		return err
	}
	topic := os.Getenv(crashTopicEnv)
	if err := s.CreateNamespace(ctx, topic); err != nil {
		return err
	}
	// Replay every region first, as a datanode opening its regions does
	// (this also brings an index loaded from an older checkpoint up to
	// the log's end, after which checkpoints resume).
	from := map[logstore.RegionID]logstore.EntryID{}
	for r := range 6 {
		from[logstore.RegionID(r+1)] = 0
	}
	for _, err := range s.ReadRegions(ctx, topic, from) {
		if err != nil {
			return fmt.Errorf("replay after restart: %w", err)
		}
	}
	l := ledger.New(journal)
	fmt.Println("ready")
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := uint32(firstWriter + w)
			for seq := uint64(1); ; seq++ {
				tags := []ledger.Tag{{Region: logstore.RegionID(1 + (int(seq)+w)%6), Writer: id, Seq: seq}}
				if _, err := l.Append(ctx, s, topic, tags, 200+int(seq%7)*100); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	return <-errc
}

// crashBrokers returns brokers for the crash test: the real ones when
// KWAL_KAFKA_BROKERS is set, else a kfake cluster keeping its log on disk.
func crashBrokers(t *testing.T) []string {
	if b := testutil.RealBrokers(); len(b) > 0 {
		return b
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	c := testutil.NewCluster(t, kfake.Ports(port), kfake.DataDir(t.TempDir()), kfake.SyncWrites())
	return c.ListenAddrs()
}

// TestClientCrash protects a datanode's restart after it died with
// SIGKILL: the process running kwal is killed in the middle of appends
// and in the middle of index checkpoints (right after the index store
// began writing a blob), and restarted on the same index directory, six
// times; each restart opens (the index loads or falls back to scanning)
// and appends again; finally every region's replay, through the index and
// by full scan, matches the ledger the children journaled: every
// acknowledged entry once at its ID in writer order, an entry whose call
// was in flight at the kill at most once, nothing else.
func TestClientCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary several times")
	}
	brokers := crashBrokers(t)
	topic := testutil.Topic(t)
	dir := t.TempDir()
	indexDir := filepath.Join(dir, "index")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var journals []string
	for run := range 6 {
		midCheckpoint := run%2 == 1
		journal := filepath.Join(dir, fmt.Sprintf("journal-%d", run))
		journals = append(journals, journal)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			crashChildEnv+"=1",
			crashBrokersEnv+"="+strings.Join(brokers, ","),
			crashTopicEnv+"="+topic,
			crashIndexEnv+"="+indexDir,
			crashJournalEnv+"="+journal,
			crashWriterEnv+"="+strconv.Itoa(100*(run+1)),
		)
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		// The child's stdout, line by line, read all the time (a child
		// blocked on a full pipe would stop appending).
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				default: // nobody waits for lines now
				}
			}
		}()
		next := func() string {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "run %d: the child ended: %s", run, stderr.String())
				return l
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				require.FailNow(t, "no word from the child for a minute", "run %d: %s", run, stderr.String())
			}
			return ""
		}
		for next() != "ready" { // checkpoints written by the replay come first
		}

		// Mid-appends: wait for 50..500 journaled ends. Mid-checkpoint:
		// kill on the 3rd..12th Put, the moment the child announces it.
		var killedAt string
		if midCheckpoint {
			want := 3 + rng.IntN(10)
			for n := 0; n < want; {
				if l := next(); strings.HasPrefix(l, "put ") {
					n++
					killedAt = l
				}
			}
		} else {
			want := 50 + rng.IntN(450)
			waitForEnds(t, journal, want)
			killedAt = fmt.Sprintf("after %d acknowledged appends", want)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err = cmd.Wait()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "run %d: %v", run, err)
		ws := ee.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "run %d: the child ended on its own (%v) before the kill: %s", run, err, stderr.String())
		t.Logf("run %d: killed %s (mid-checkpoint %v)", run, killedAt, midCheckpoint)
	}

	var readers []io.Reader
	for _, j := range journals {
		f, err := os.Open(j)
		require.NoError(t, err)
		defer f.Close()
		readers = append(readers, f)
	}
	l, err := ledger.Load(readers...)
	require.NoError(t, err)
	st := l.Stats()
	t.Logf("ledger: %+v", st)
	require.Positive(t, st.Acked)

	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers
	cfg.IndexDir = indexDir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := kafka.Open(ctx, cfg)
	require.NoError(t, err, "the store opens on the index a killed process left")
	defer s.Close()
	indexed, err := l.Replay(topic, func(r logstore.RegionID) iterSeq { return s.Read(ctx, topic, r, 0) })
	require.NoError(t, err)
	scanned, err := l.Replay(topic, func(r logstore.RegionID) iterSeq {
		return s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, kafka.ReadOptions{NoIndex: true})
	})
	require.NoError(t, err)
	rep := l.Check(topic, indexed)
	t.Logf("indexed replay: acked %d, failed/unknown %d (in the log: %d), read %d", rep.Acked, rep.Failed+rep.Pending, rep.FailedPresent, rep.Read)
	require.NoError(t, rep.Err())
	require.NoError(t, l.Check(topic, scanned).Err())
	require.Equal(t, scanned, indexed, "indexed reads equal full scans")
}

// syncBuffer is a buffer that other goroutines write (the exec package's
// copying goroutine, franz-go's loggers) while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitForEnds waits until journal holds n end lines (acknowledged or
// failed calls), polling its size.
func waitForEnds(t *testing.T, journal string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(journal)
		return err == nil && strings.Count(string(b), `{"e":`) >= n
	}, time.Minute, 20*time.Millisecond, "%d appends journaled", n)
}
