package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// Config configures a Kafka log store. Start from DefaultConfig; Open
// validates it. Every field's default is set in DefaultConfig and stated in
// its comment.
type Config struct {
	// Brokers are the seed brokers, host:port. Default ["127.0.0.1:9092"].
	Brokers []string

	// MaxBatchBytes is the largest record batch kwal sends (Kafka's
	// max.message.bytes of the topic must be at least this). Entries larger
	// than one record under this limit are split into parts. It is also
	// the largest produce request a lane sends for one region at a time.
	// Default 1 MiB; at least record.MinBatchBytes, at most 64 MiB.
	MaxBatchBytes int

	// MaxEntryBytes is the largest entry AppendBatch accepts; a larger one
	// fails the call with an error matching ErrEntryTooLarge, before
	// anything is written. Every entry acknowledged must be readable by
	// every read with the same configuration, so it is at most
	// ReadHoldBytes (the entry data a read holds). Default 32 MiB.
	MaxEntryBytes int64

	// IndexDir is the local directory for region-index checkpoints and for
	// the epochs the store holds (held-epochs.json: each region it claimed
	// or released, with the claim's epoch and topic ID, and the Owner). A
	// store reopened on it with the same Owner resumes them: it appends to
	// its regions under the same epochs without claiming them again, and
	// the regions it released stay released. A claim made by another
	// store meanwhile still fences it, and a namespace deleted meanwhile
	// resumes nothing. Only one store at a time holds the directory
	// (ErrIndexDirInUse), which is what makes resuming safe. "" keeps the
	// index in memory only (it is rebuilt by reading after a restart) and
	// a restarted store holds no region: its appends of regions it had
	// claimed fail with ErrFenced until it claims them again. Default "".
	IndexDir string

	// IndexStore, when set, persists the index there instead of IndexDir
	// (for example blobstore.New over an object-storage bucket, so another
	// node can read this node's index), and the held epochs with it (see
	// IndexDir); like the index, only one store may write to it. Default
	// nil.
	IndexStore index.Store

	// IndexCheckpointInterval is how often changed index state is persisted
	// (only with IndexDir or IndexStore). Close always checkpoints. Default
	// 10s; 0 checkpoints only on Close.
	IndexCheckpointInterval time.Duration

	// IndexMergeGap is the largest run of other regions' offsets an indexed
	// read fetches through rather than starting a new fetch; -1 merges only
	// ranges that touch. Default 0: the index package's default.
	IndexMergeGap int64

	// IndexReadOnly loads the persisted index but never writes it (no
	// checkpoints, Close leaves the files as they are; IndexDir is opened
	// without being created or tidied): for tools that inspect or verify
	// another process's index. Such a store neither resumes nor writes the
	// held epochs (see IndexDir): it would write under the epochs of the
	// process that owns the directory. Default false.
	IndexReadOnly bool

	// PruneInterval, when positive, runs Prune on every namespace the index
	// knows at this period, so that Obsolete drives the deletion of records
	// no region needs: kwal's topics delete nothing by age or size, so
	// without it a log only grows. A round costs a few requests per topic
	// (BenchmarkPruneRound; docs/benchmarks.md). PruneWith with DryRun
	// names the region that
	// keeps a topic from shrinking. Needs the index (and is skipped with
	// IndexReadOnly). 0 prunes only when Prune is called. Default 1m.
	PruneInterval time.Duration

	// PruneMode says how Prune gets rid of the records no region needs.
	// PruneDelete ("delete", the default) writes a prune mark, then
	// deletes them with Kafka's DeleteRecords. PruneMarkOnly ("mark-only")
	// is for clusters that refuse DeleteRecords (some managed services
	// answer it with POLICY_VIOLATION or an authorization failure, or do
	// not serve it): Prune writes the prune mark only, so every store and
	// every replay knows what is obsolete, and leaves the deletion to the
	// topic's retention, which must then be finite (the log's start moves
	// only when the retention deletes; RetentionWarnMargin says when it
	// comes close to a record a region still needs). Under PruneDelete, a
	// refused DeleteRecords fails Prune with a *DeleteRefusedError naming
	// this setting; the mark it wrote stays valid.
	PruneMode string

	// RetentionWarnMargin: on a topic with a finite retention (retention.ms
	// or retention.bytes), Prune and PruneWith (dry runs too) report how
	// long the oldest record a region still needs has before the retention
	// may delete it (PruneStatus.RetentionHeadroom, and
	// kwal_retention_headroom_seconds), and log a warning when that is
	// less than this margin: time to flush the region holding the prune
	// point back (Obsolete), or to raise the retention. Default 6h; 0
	// warns only once the retention has passed the record.
	RetentionWarnMargin time.Duration

	// DisableIndex turns the region index off: every read scans the topic.
	// The held epochs are not kept either (see IndexDir). Default false.
	DisableIndex bool

	// Owner names this store in the claims it makes (LogStore.Claim) and
	// in ErrFenced errors. "" (the default) uses "host:pid" of the process,
	// except for a store with an IndexDir or IndexStore (not read-only):
	// its name is kept there with the epochs it holds at its first open,
	// and "" reuses it at every later open, so that a restarted store
	// resumes them. An Owner set to another name than the kept one resumes
	// nothing (logged at INFO), and is kept from then on.
	Owner string

	// ClaimsTopic is the topic where every store sharing the brokers
	// records region claims (package claim); all of a cluster's stores must
	// use the same one. Default "kwal-claims". It is created when
	// AutoCreateTopics is set, with retention off and cleanup.policy
	// delete (every event counts); a Claim fails while a topic made by
	// other means has other values. It is not a namespace: a call naming
	// it fails with ErrInvalidNamespace.
	ClaimsTopic string

	// Fencing says how an append learns that its region was claimed by a
	// newer owner. "strict" (the default): an append is acknowledged only
	// after a look at the claims topic that began after its produce
	// returned, so a store is never told "acknowledged" for entries that a
	// replay fences; the look is shared by every call whose produce
	// returned before it began (docs/fencing.md gives its cost). "lease":
	// the same promise without the wait, on a bound on clock rates: an
	// append is acknowledged at once while the last look that completed
	// began less than Lease ago (the first append after it waits for a
	// look, which renews it), and Claim waits Lease before it writes its claim
	// record, so a look an old owner still trusts predates the claim.
	// "off": no look; an old owner that missed a claim may be told
	// "acknowledged" for entries replay then fences, so use it only where
	// regions never move without Release. Claims and replay fencing work
	// in every mode.
	Fencing string

	// Lease is how long a look at the claims topic vouches for appends
	// under Fencing "lease" (default 1s there), and how long every Claim
	// waits between its pending event and its claim record, in every mode.
	// A claim also waits at least the lease the region's owner recorded
	// with its own claim, but an owner that never claimed its region
	// recorded none: where any store uses "lease", give every store that
	// may claim (strict ones too) a Lease at least as long. A longer lease
	// makes Claim slower and costs nothing else; the store trusts a look
	// for Lease less 1/64, a margin for clocks that run at different rates.
	Lease time.Duration

	// Compression of produced batches: "none", "gzip", "snappy", "lz4" or
	// "zstd". On a datanode's rows "lz4" cuts the bytes the broker stores
	// and replicates by more than half and appends faster where the network
	// limits appends, for about twice the client CPU per MB
	// (docs/benchmarks.md, "Compression"); "snappy"
	// stores a little more for a little less CPU; "none" suits entries that
	// do not compress (already compressed or encrypted). Reads count a
	// compressed batch at its decompressed size (ReadMemoryBound holds).
	// Default "lz4", written as frames of 64 KiB blocks.
	Compression string

	// ProduceLanes is how many produce connections (franz-go clients) carry
	// requests at once. A lane carries one dispatch at a time: at most one
	// group of pending calls (usually one region's) per namespace, each
	// group its own record batch, all in one produce request per broker.
	// Lanes beyond the first are used only when the ready groups cannot
	// share one request (two of one namespace, or more than
	// MaxRequestBytes) or have waited about one produce round trip. More
	// lanes hide more latency when few namespaces hold many regions.
	// Default 16; 1..256.
	ProduceLanes int

	// MaxRequestBytes bounds the record bytes of the groups one lane sends
	// together (one produce request per broker). A single group larger
	// than this still goes, alone. Default 4 MiB; at least MaxBatchBytes,
	// at most 64 MiB (below the broker's socket.request.max.bytes).
	MaxRequestBytes int64

	// MaxRegionsPerBatch lets a produce request carry up to this many
	// regions' pending calls when the topic has a backlog (more regions
	// ready to send than produce lanes free): fewer, larger requests drain
	// it faster, and a replay of one of those regions fetches the others'
	// records of that batch too. With lanes to spare, each region's calls
	// go out alone. 1 keeps every batch to one region. Default 1.
	MaxRegionsPerBatch int

	// Linger is how long the producer worker waits for more requests to a
	// region before sending a group that is smaller than MaxBatchBytes.
	// Default 0: send as soon as a lane is free (requests that arrive while
	// every lane is busy are merged anyway).
	Linger time.Duration

	// ProduceTimeout bounds an AppendBatch call as a whole: waiting for
	// queue room, waiting behind an earlier call of its region, and its
	// produce. Past it the call fails with ErrTimeout, even when the broker
	// never answers; entries that were not yet sent are withdrawn (not
	// written), those sent may still be written (the error says which).
	// Default 10s.
	ProduceTimeout time.Duration

	// RequestTimeout bounds admin and fetch requests. Default 10s.
	RequestTimeout time.Duration

	// DialTimeout bounds opening a connection to a broker. Default 3s.
	DialTimeout time.Duration

	// Dialer, when set, opens every connection to a broker instead of a
	// net.Dialer with DialTimeout (TLS, when configured, runs over the
	// connection it returns). For routing through proxies: kwal's fault
	// tests put a TCP proxy in front of every broker this way.
	Dialer func(ctx context.Context, network, address string) (net.Conn, error)

	// RetryBackoff is the pause between retries of a retriable request.
	// Default 100ms.
	RetryBackoff time.Duration

	// MaxQueuedBytes bounds the bytes of entries queued or in flight per
	// namespace; AppendBatch blocks (honouring its context) while the queue
	// is full, so memory stays bounded when Kafka is slow. It is also each
	// namespace's share of MaxStoreQueuedBytes: one hot namespace cannot
	// take all of the store's room. Default 64 MiB; at least MaxBatchBytes.
	MaxQueuedBytes int64

	// MaxStoreQueuedBytes bounds the bytes of entries queued or in flight
	// across every namespace of the store (over a pool of 64 topics the
	// per-namespace bound alone would allow 4 GiB). Calls wait for room in
	// the order they asked, after taking their namespace's share, so a
	// namespace that is over its share waits while the others proceed.
	// Default 256 MiB; a value below MaxQueuedBytes (0 included) is raised
	// to it.
	MaxStoreQueuedBytes int64

	// AutoCreateTopics creates a namespace's topic on first use, with one
	// partition, ReplicationFactor and TopicConfigs. When false, appending
	// to a missing topic fails. Default true.
	AutoCreateTopics bool

	// ReplicationFactor of created topics; -1 uses the broker's
	// default.replication.factor. Default -1.
	ReplicationFactor int16

	// TopicConfigs are topic-level configs applied when kwal creates a
	// topic, for example "segment.bytes". Unless set here, kwal creates
	// topics with retention.ms=-1, retention.bytes=-1 and
	// cleanup.policy=delete (only Prune deletes a WAL record; a finite
	// retention set here is logged as a warning), and
	// max.message.bytes=MaxBatchBytes + 64 KiB. Default nil.
	TopicConfigs map[string]string

	// FetchMaxBytes bounds the bytes one fetch response may carry, and the
	// byte limits of all the store's reads' fetches in flight or not yet
	// taken (see ReadMemoryBound). Default 16 MiB; at least MaxBatchBytes.
	FetchMaxBytes int32

	// ReadHoldBytes bounds the entry data all the store's reads hold before
	// yielding it: the parts of entries still open, and the entries of a
	// ReadRegions that wait behind an open one (entries are yielded in ID
	// order). Beyond it, reads spill the largest entries they hold and
	// read them back from the log when their turn comes: nothing is given
	// up for lack of memory. Default 64 MiB; at least MaxBatchBytes and
	// MaxEntryBytes.
	ReadHoldBytes int64

	// SkipCorrupt makes reads skip records that are not kwal's or fail
	// their checksum, and offsets missing from the log (counting each in
	// kwal_read_skipped_records_total and logging it), instead of failing
	// with ErrCorrupt. What a read skips stays out of the index, so later
	// reads without SkipCorrupt still fail on it; Prune never skips.
	// Default false.
	SkipCorrupt bool

	// TLS enables TLS to the brokers when non-nil.
	TLS *TLSConfig

	// SASL enables SASL authentication when non-nil.
	SASL *SASLConfig

	// Registerer receives kwal's Prometheus metrics (prefix kwal_). Default
	// nil: metrics are kept but not registered. Every store registers the
	// same metric names, so several stores on one registry must each get
	// prometheus.WrapRegistererWith(prometheus.Labels{"store": "..."}, reg)
	// with a label value of its own: their series then differ by that
	// label. A second store on the same (or the same wrapped) registerer
	// fails Open with an error naming the metric, and registers nothing.
	// Close unregisters the store's metrics.
	Registerer prometheus.Registerer

	// Logger receives kwal's logs. Default slog.Default().
	Logger *slog.Logger
}

// TLSConfig configures TLS to the brokers. Files are PEM.
type TLSConfig struct {
	CAFile             string // "" uses the system roots
	CertFile, KeyFile  string // client certificate; both or neither
	ServerName         string // "" uses the broker's host
	InsecureSkipVerify bool
}

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig configures SASL authentication.
type SASLConfig struct {
	Mechanism string // SASLPlain, SASLScramSHA256 or SASLScramSHA512
	Username  string
	Password  Secret
}

// Secret is a string that prints as [REDACTED], so configs can be logged.
type Secret string

const redacted = "[REDACTED]"

func (Secret) String() string       { return redacted }
func (Secret) GoString() string     { return `"` + redacted + `"` }
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }
func (s Secret) MarshalText() ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return []byte(redacted), nil
}

// DefaultConfig returns a usable configuration for a local broker.
func DefaultConfig() Config {
	return Config{
		Brokers:                 []string{"127.0.0.1:9092"},
		MaxBatchBytes:           1 << 20,
		MaxEntryBytes:           32 << 20,
		IndexCheckpointInterval: 10 * time.Second,
		PruneInterval:           time.Minute,
		PruneMode:               PruneDelete,
		RetentionWarnMargin:     6 * time.Hour,
		Compression:             "lz4",
		ClaimsTopic:             "kwal-claims",
		Fencing:                 FencingStrict,
		ProduceLanes:            16,
		MaxRegionsPerBatch:      1,
		ProduceTimeout:          10 * time.Second,
		RequestTimeout:          10 * time.Second,
		DialTimeout:             3 * time.Second,
		RetryBackoff:            100 * time.Millisecond,
		MaxQueuedBytes:          64 << 20,
		MaxStoreQueuedBytes:     256 << 20,
		MaxRequestBytes:         4 << 20,
		AutoCreateTopics:        true,
		ReplicationFactor:       -1,
		FetchMaxBytes:           16 << 20,
		ReadHoldBytes:           64 << 20,
	}
}

// ReadMemoryBound is the most memory all of the store's reads hold
// together, whatever their number or the topics' sizes, apart from the
// entries their callers keep (internal/replay's package comment argues it):
//   - their fetches (in flight, waiting to be decoded, or whose entries a
//     read has not taken yet) within twice FetchMaxBytes (FetchMaxBytes, and
//     as much again for the fetch each pass waits on first), counted at
//     the bytes Kafka sends: a compressed batch stays compressed until its
//     pass decodes it;
//   - two batches per fetch connection beyond that (at most MaxBatchBytes
//     each for kwal's batches, whose limit counts uncompressed bytes): Kafka
//     returns a batch whole to a fetch that asked for less (a range's first
//     fetch asks for one batch), and a fetch goroutine that decodes its
//     response ahead of the decoder passes its budget by at most one
//     batch; and the batch a pass's decoder decompresses itself (when its
//     fetch goroutine found no room), counted among them: a store reading
//     more namespaces at once than it has fetch connections may add one
//     batch for each;
//   - one more FetchMaxBytes and one entry (MaxEntryBytes) while a spilled
//     entry is read back (one at a time);
//   - ReadHoldBytes of entry data not yet yielded (a pass spills entries
//     once the total passes it, so each pass decoding at that moment may add
//     one entry more, and reads them back when their turn comes).
//
// A topic written by another writer may pass the bound by the excess of
// batches larger than MaxBatchBytes, and by lz4 frames of larger blocks
// than kwal writes (franz-go's default writes 4 MiB blocks: two buffers of
// that size while a batch decompresses). A loop body that keeps a read
// open without taking its entries holds its share until it does.
func (c Config) ReadMemoryBound() int64 {
	return 3*int64(c.FetchMaxBytes) + 2*int64(c.FetchConnections())*int64(c.MaxBatchBytes) + c.ReadHoldBytes + c.MaxEntryBytes
}

// FetchConnections is how many fetches a read keeps on the wire at most:
// one on each produce lane's client and one on the admin client, each its
// own connection to the leader.
func (c Config) FetchConnections() int { return c.ProduceLanes + 1 }

// FetchChunkBytes is the most a read asks of one fetch where a planned
// range or a stretch read whole is longer: FetchMaxBytes spread over the
// fetch connections, and at least one record batch.
func (c Config) FetchChunkBytes() int64 {
	return max(int64(c.FetchMaxBytes)/int64(c.FetchConnections()), int64(c.MaxBatchBytes))
}

// Validate checks every field and reports every invalid one: the error
// joins (kwalerr.Join: one line, unwrapping to each) one error per bad
// field, each naming the field ("kwal: config: Field: why"), in the order
// the fields are declared.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, kwalerr.Errorf("config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Brokers) == 0 {
		bad("Brokers", "at least one seed broker is needed")
	}
	if c.Fencing != FencingStrict && c.Fencing != FencingLease && c.Fencing != FencingOff {
		bad("Fencing", "%q is not %q, %q or %q", c.Fencing, FencingStrict, FencingLease, FencingOff)
	}
	if c.Lease < 0 || (c.Lease > 0 && c.Lease < time.Millisecond) {
		bad("Lease", "%v is neither 0 nor at least 1ms", c.Lease)
	}
	if err := validateTopic(c.ClaimsTopic); err != nil {
		bad("ClaimsTopic", "%v", err)
	}
	for i, b := range c.Brokers {
		if host, port, ok := strings.Cut(b, ":"); !ok || host == "" || port == "" {
			bad(fmt.Sprintf("Brokers[%d]", i), "%q is not host:port", b)
		}
	}
	if c.MaxBatchBytes < record.MinBatchBytes || c.MaxBatchBytes > 64<<20 {
		bad("MaxBatchBytes", "%d is outside [%d, %d]", c.MaxBatchBytes, record.MinBatchBytes, 64<<20)
	}
	if c.ProduceLanes < 1 || c.ProduceLanes > 256 {
		bad("ProduceLanes", "%d is outside [1, 256]", c.ProduceLanes)
	}
	if _, err := CompressionCodec(c.Compression); err != nil {
		bad("Compression", "%v", err)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"ProduceTimeout", c.ProduceTimeout}, {"RequestTimeout", c.RequestTimeout}, {"DialTimeout", c.DialTimeout}} {
		if d.d <= 0 {
			bad(d.name, "%v must be positive", d.d)
		}
	}
	if c.RetryBackoff < 0 {
		bad("RetryBackoff", "%v must not be negative", c.RetryBackoff)
	}
	if c.MaxRegionsPerBatch < 1 {
		bad("MaxRegionsPerBatch", "%d must be at least 1", c.MaxRegionsPerBatch)
	}
	if c.Linger < 0 {
		bad("Linger", "%v must not be negative", c.Linger)
	}
	if c.IndexCheckpointInterval < 0 {
		bad("IndexCheckpointInterval", "%v must not be negative", c.IndexCheckpointInterval)
	}
	if c.PruneInterval < 0 {
		bad("PruneInterval", "%v must not be negative", c.PruneInterval)
	}
	if c.PruneMode != PruneDelete && c.PruneMode != PruneMarkOnly {
		bad("PruneMode", "%q is not %q or %q", c.PruneMode, PruneDelete, PruneMarkOnly)
	}
	if c.RetentionWarnMargin < 0 {
		bad("RetentionWarnMargin", "%v must not be negative", c.RetentionWarnMargin)
	}
	if c.IndexMergeGap < -1 {
		bad("IndexMergeGap", "%d must be -1 (merge only touching ranges), 0 (the index default) or positive", c.IndexMergeGap)
	}
	if c.MaxQueuedBytes < int64(c.MaxBatchBytes) {
		bad("MaxQueuedBytes", "%d is below MaxBatchBytes (%d)", c.MaxQueuedBytes, c.MaxBatchBytes)
	}
	if c.MaxStoreQueuedBytes < 0 {
		bad("MaxStoreQueuedBytes", "%d must not be negative", c.MaxStoreQueuedBytes)
	}
	if c.MaxRequestBytes < int64(c.MaxBatchBytes) || c.MaxRequestBytes > 64<<20 {
		bad("MaxRequestBytes", "%d is outside [MaxBatchBytes (%d), %d]", c.MaxRequestBytes, c.MaxBatchBytes, 64<<20)
	}
	if c.FetchMaxBytes < int32(c.MaxBatchBytes) {
		bad("FetchMaxBytes", "%d is below MaxBatchBytes (%d)", c.FetchMaxBytes, c.MaxBatchBytes)
	}
	if c.ReadHoldBytes < int64(c.MaxBatchBytes) {
		bad("ReadHoldBytes", "%d is below MaxBatchBytes (%d)", c.ReadHoldBytes, c.MaxBatchBytes)
	}
	if c.MaxEntryBytes < 1 || c.MaxEntryBytes > c.ReadHoldBytes || c.MaxEntryBytes > record.MaxEntrySize {
		bad("MaxEntryBytes", "%d is outside [1, ReadHoldBytes (%d)]: every entry acknowledged must fit what a read holds", c.MaxEntryBytes, c.ReadHoldBytes)
	}
	if c.ReplicationFactor == 0 || c.ReplicationFactor < -1 {
		bad("ReplicationFactor", "%d must be -1 (broker default) or >= 1", c.ReplicationFactor)
	}
	for k, v := range c.TopicConfigs {
		if k == "" {
			bad("TopicConfigs", "empty config name")
		}
		if k == "cleanup.policy" && strings.Contains(v, "compact") {
			// Compaction deletes records from the middle of the log: reads
			// would find offsets missing and fail (see MissingError).
			bad("TopicConfigs", "cleanup.policy %q: kwal's logs must not be compacted (it deletes entries that are still needed)", v)
		}
	}
	if t := c.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		bad("TLS", "CertFile and KeyFile go together")
	}
	if s := c.SASL; s != nil {
		switch s.Mechanism {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			bad("SASL.Mechanism", "%q is not one of %s, %s, %s", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
		}
		if s.Username == "" {
			bad("SASL.Username", "must be set")
		}
	}
	return kwalerr.Join(errs...)
}

// String prints the configuration with secrets redacted.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Brokers=%v MaxBatchBytes=%d MaxEntryBytes=%d IndexDir=%q IndexStore=%s IndexCheckpointInterval=%v IndexMergeGap=%d IndexReadOnly=%v PruneInterval=%v PruneMode=%s RetentionWarnMargin=%v DisableIndex=%v",
		c.Brokers, c.MaxBatchBytes, c.MaxEntryBytes, c.IndexDir, typeOrNil(c.IndexStore), c.IndexCheckpointInterval, c.IndexMergeGap, c.IndexReadOnly, c.PruneInterval, c.PruneMode, c.RetentionWarnMargin, c.DisableIndex)
	fmt.Fprintf(&b, " Compression=%s ProduceLanes=%d MaxRequestBytes=%d MaxRegionsPerBatch=%d Linger=%v ProduceTimeout=%v RequestTimeout=%v DialTimeout=%v Dialer=%s RetryBackoff=%v",
		c.Compression, c.ProduceLanes, c.MaxRequestBytes, c.MaxRegionsPerBatch, c.Linger, c.ProduceTimeout, c.RequestTimeout, c.DialTimeout, setOrNil(c.Dialer != nil), c.RetryBackoff)
	fmt.Fprintf(&b, " MaxQueuedBytes=%d MaxStoreQueuedBytes=%d AutoCreateTopics=%v ReplicationFactor=%d TopicConfigs=%v FetchMaxBytes=%d ReadHoldBytes=%d SkipCorrupt=%v",
		c.MaxQueuedBytes, c.MaxStoreQueuedBytes, c.AutoCreateTopics, c.ReplicationFactor, c.TopicConfigs, c.FetchMaxBytes, c.ReadHoldBytes, c.SkipCorrupt)
	if c.TLS != nil {
		fmt.Fprintf(&b, " TLS={CA=%q Cert=%q Key=%q ServerName=%q Insecure=%v}", c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ServerName, c.TLS.InsecureSkipVerify)
	} else {
		b.WriteString(" TLS=nil")
	}
	if c.SASL != nil {
		fmt.Fprintf(&b, " SASL={%s user=%q password=%s}", c.SASL.Mechanism, c.SASL.Username, c.SASL.Password)
	} else {
		b.WriteString(" SASL=nil")
	}
	fmt.Fprintf(&b, " Owner=%q ClaimsTopic=%q Fencing=%s Lease=%v", c.Owner, c.ClaimsTopic, c.Fencing, c.Lease)
	fmt.Fprintf(&b, " Registerer=%s Logger=%s", typeOrNil(c.Registerer), setOrNil(c.Logger != nil))
	return b.String()
}

// typeOrNil names the dynamic type of an interface field (what was plugged
// in), or nil.
func typeOrNil(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}

// setOrNil is how String prints a field whose value says nothing readable
// (a function, a logger).
func setOrNil(set bool) string {
	if set {
		return "set"
	}
	return "nil"
}

// LogValue lets slog print the configuration with secrets redacted.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
