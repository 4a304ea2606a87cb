// Package embedded starts an in-process Kafka (franz-go's kfake) outside
// tests: for a program's own tests or demos that need a broker kwal can
// talk to, with nothing installed. (testutil.Brokers does the same inside
// a test, tied to its *testing.T.)
//
// With a data directory the broker keeps its topics on disk across
// restarts. The directory belongs to one process at a time: Start takes
// an OS file lock on it (flock, or LockFileEx on Windows, through
// gofrs/flock) before the broker touches it, and records in the lock file
// who holds it. Two brokers on one directory would each rewrite it from
// their own memory, and one process's topics would vanish when the other
// exits; instead the second Start fails at once with an *InUseError that
// names the first process and the address its broker listens on. The OS
// drops the lock when the process ends, however it ends, so a crash never
// leaves the directory locked. A restarted broker listens on the port its
// lock file names when that port is free, so that the address given to
// other programs (and the index directory kwal names after it) stays the
// same across restarts.
//
// The broker never drops records silently. Before loading the data
// directory, Start checks each partition's segments the way the broker
// loads them (disk.go). When loading would drop records (damage followed by
// intact records, a batch whose offset field is damaged, or a partition
// that ends below where the last clean stop recorded it in ManifestFile),
// Start refuses with a *DamagedError that names each partition and the
// offsets it would lose, and changes nothing; AcceptLoss starts the broker
// anyway, without those records. The torn end of a write that a crash
// interrupted (nothing intact after it, nothing recorded past it) is cut,
// and the cut is logged. A crash leaves no manifest, so after one, damage
// in the last batch of a partition cannot be told from a torn write.
package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwal/kwal/internal/dirlock"
	"github.com/kwal/kwal/internal/kwalerr"
)

// LockFile is the name of the lock file in a data directory.
const LockFile = "kwal.lock"

// MaxMessageBytes is the broker's message.max.bytes: kwal's largest batch
// (64 MiB) and room for its framing.
const MaxMessageBytes = 67174400

// options is what the Options set.
type options struct {
	owner      string
	kfake      []kfake.Opt
	acceptLoss bool
	log        *slog.Logger
}

// Option changes how Start starts the broker.
type Option func(*options)

// WithOwner describes the process in the lock file (for example "kwal
// demo"), so that a second process's error can say what holds the data
// directory. Default: the program's name.
func WithOwner(owner string) Option { return func(o *options) { o.owner = owner } }

// WithKfakeOptions appends options of kfake.NewCluster (SASL users,
// broker configs, ...).
func WithKfakeOptions(opts ...kfake.Opt) Option {
	return func(o *options) { o.kfake = append(o.kfake, opts...) }
}

// AcceptLoss starts the broker even when loading the data directory drops
// records (Start's *DamagedError names them): the broker cuts each damaged
// segment where the damage begins, as Kafka's own recovery does, and Start
// logs every partition's loss. Copy the directory first to keep what the
// cut drops.
func AcceptLoss() Option { return func(o *options) { o.acceptLoss = true } }

// WithLogger sets where Start logs the segment ends it lets the broker cut
// (torn writes, and losses under AcceptLoss). Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// ClusterOptions are the kfake options of every embedded broker: one
// broker that accepts kwal's largest batches.
func ClusterOptions() []kfake.Opt {
	return []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": fmt.Sprint(MaxMessageBytes)}),
	}
}

// Holder is who holds a data directory, as its lock file records.
type Holder struct {
	PID     int       `json:"pid"`
	Owner   string    `json:"owner"`
	Brokers []string  `json:"brokers,omitempty"`
	Since   time.Time `json:"since"`
}

// InUseError is Start's error when another process holds the data
// directory. Holder is what its lock file says (zero when the other
// process has not written it yet).
type InUseError struct {
	Dir    string
	Holder Holder
}

// ErrInUse is matched (errors.Is) by an *InUseError.
var ErrInUse = errors.New("kwal: the data directory is in use by another process")

func (e *InUseError) Error() string {
	h := e.Holder
	if h.PID == 0 {
		return fmt.Sprintf("kwal: the data directory %s is in use by another process (it is starting; its lock file %s names it once it has)", e.Dir, filepath.Join(e.Dir, LockFile))
	}
	msg := fmt.Sprintf("kwal: the data directory %s is in use by process %d (%s, since %s)", e.Dir, h.PID, h.Owner, h.Since.Local().Format(time.TimeOnly))
	if len(h.Brokers) > 0 {
		msg += fmt.Sprintf(", whose embedded broker listens at %s", strings.Join(h.Brokers, ","))
	}
	return msg
}

func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// Start starts a one-broker in-process Kafka and returns its addresses
// and a function that stops it (and releases the data directory). With
// dataDir "" the broker keeps its data in memory; otherwise in dataDir
// (created if needed), which it locks first: when another process holds
// it, Start returns an *InUseError at once. Then it checks the segments:
// when loading them would drop records, it returns a *DamagedError (unless
// AcceptLoss).
func Start(dataDir string, opts ...Option) (addrs []string, stop func(), err error) {
	o := options{owner: filepath.Base(os.Args[0])}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	kopts := ClusterOptions()
	var (
		lock *dirlock.Lock
		port int
	)
	if dataDir != "" {
		// The last broker's address, read before the lock records this
		// process in the file.
		port = previousPort(dataDir)
		if lock, err = lockDir(dataDir, o.owner); err != nil {
			return nil, nil, err
		}
		if err := checkBeforeLoad(dataDir, o); err != nil {
			_ = lock.Release()
			return nil, nil, err
		}
		kopts = append(kopts, kfake.DataDir(dataDir))
	}
	var c *kfake.Cluster
	if port > 0 {
		// The address other programs were given stays valid across
		// restarts when the port is free; when it is not, any port does.
		c, err = kfake.NewCluster(append(append(kopts, kfake.Ports(port)), o.kfake...)...)
	}
	if c == nil {
		c, err = kfake.NewCluster(append(kopts, o.kfake...)...)
	}
	if err != nil {
		_ = lock.Release()
		return nil, nil, kwalerr.Errorf("embedded broker: %w", err)
	}
	addrs = c.ListenAddrs()
	if lock != nil {
		// The broker runs: from now on the manifest of the last stop is
		// out of date until the next stop writes it again.
		if err := removeManifest(dataDir); err != nil {
			c.Close()
			_ = lock.Release()
			return nil, nil, kwalerr.Errorf("embedded broker: removing %s: %w", ManifestFile, err)
		}
		lock.Record(dirlock.Holder{Owner: o.owner, Brokers: addrs})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if lock == nil {
				c.Close()
				return
			}
			m, merr := snapshotManifest(c, dataDir)
			c.Close()
			if merr == nil {
				merr = writeManifest(dataDir, m)
			}
			if merr != nil {
				// Without it the next start checks the segments alone, as
				// after a crash.
				o.log.Warn("embedded broker: writing the shutdown manifest", "dir", dataDir, "err", merr)
			}
			_ = lock.Release()
		})
	}
	return addrs, stop, nil
}

// checkBeforeLoad checks the data directory's segments: it refuses a loss
// unless o.acceptLoss, and logs what the broker will cut.
func checkBeforeLoad(dir string, o options) error {
	m, err := readManifest(dir)
	if err != nil {
		// A manifest that cannot be read only weakens the check: the
		// segments are still checked, as after a crash.
		o.log.Warn("embedded broker: ignoring the shutdown manifest", "dir", dir, "err", err)
		m = nil
	}
	rep, err := checkDisk(dir, m)
	if err != nil {
		return kwalerr.Errorf("embedded broker: checking the data directory %s: %w", dir, err)
	}
	if len(rep.losses) > 0 && !o.acceptLoss {
		return &DamagedError{Dir: dir, Losses: rep.losses}
	}
	for _, l := range rep.losses {
		o.log.Warn("embedded broker: the loss is accepted: dropping records of a damaged segment", "loss", l.String())
		if err := l.cut.apply(); err != nil {
			return kwalerr.Errorf("embedded broker: cutting %s at byte %d: %w", l.cut.segment, l.cut.at, err)
		}
	}
	for _, t := range rep.torn {
		o.log.Warn("embedded broker: cutting the torn end of a segment (a write a crash interrupted; nothing intact follows it)",
			"topic", t.topic, "partition", t.partition, "segment", t.segment, "at_byte", t.at, "bytes", t.bytes, "next_offset", t.next)
		if err := t.cut.apply(); err != nil {
			return kwalerr.Errorf("embedded broker: cutting %s at byte %d: %w", t.segment, t.at, err)
		}
	}
	return nil
}

// previousPort is the port the directory's last broker listened on, as
// its lock file records it; 0 when unknown.
func previousPort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil {
		return 0
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil || len(h.Brokers) != 1 {
		return 0
	}
	_, p, err := net.SplitHostPort(h.Brokers[0])
	if err != nil {
		return 0
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return 0
	}
	return port
}

// lockDir takes the data directory's lock (internal/dirlock, which kwal's
// index directory uses too), or returns an *InUseError.
func lockDir(dir, owner string) (*dirlock.Lock, error) {
	lock, err := dirlock.Acquire(dir, LockFile, dirlock.Holder{Owner: owner})
	if e, ok := errors.AsType[*dirlock.InUseError](err); ok {
		return nil, &InUseError{Dir: dir, Holder: Holder(e.Holder)}
	}
	if err != nil {
		return nil, kwalerr.Errorf("embedded broker: data directory: %w", err)
	}
	return lock, nil
}
