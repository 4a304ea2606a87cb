package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// The held epochs: what owning.owned holds (the epoch the store writes each
// claimed region under, and whether it released it) is kept, with the
// store's Owner, in a file of its own in the index's Store. A store reopened
// on it with the same Owner writes under the same epochs, so a restart does
// not leave it fenced until it claims every region again (each claim a
// lease long under lease fencing).
//
// Resuming is safe because one store at a time holds the file: an IndexDir
// is locked by the store that opens it (ErrIndexDirInUse), and an
// IndexStore belongs to one writer (index.Store). Two live stores resuming
// one file would write under one epoch, which no claim could tell apart.
// For the same reason a store opened with IndexReadOnly, a tool beside the
// process that owns the directory, neither reads nor writes the file.
//
// Resuming adds nothing the claims topic did not grant. Each entry names
// the topic incarnation (topic ID) it was claimed in, and at Open an entry
// is kept only when the namespace's topic still has that ID and, unless
// the region was released, the claims topic holds this owner's committed
// claim of that epoch. A kept epoch is then exactly what the store held
// before it closed: a claim made meanwhile outranks it, and the first
// append's check (or the view the check at Open caught up with) fences it.
// Nothing is written to the claims topic.

// heldEpochsFile is the name of the held epochs in the index's Store (the
// index ignores names that are not its checkpoints).
const heldEpochsFile = "held-epochs.json"

// heldEpochsVersion is the held-epochs file's format version.
const heldEpochsVersion = 1

// heldEpochsDoc is the held-epochs file: JSON, so that an operator can read
// it, with a CRC-32C (Castagnoli) of the compact form of Body, so that a
// damaged or hand-edited file is never taken for what the store held (a
// flipped released flag would pass every other check). For example:
//
//	{"version":1,"crc32c":"57d1c0b2","body":{"owner":"node-1","held":[
//	  {"ns":"wal-1","topic_id":"6f1c...","region":3,"epoch":2},
//	  {"ns":"wal-1","topic_id":"6f1c...","region":4,"epoch":1,"released":true}
//	]}}
type heldEpochsDoc struct {
	Version int             `json:"version"`
	CRC32C  string          `json:"crc32c"`
	Body    json.RawMessage `json:"body"`
}

// heldEpochsBody is what the file says: the Owner the epochs were claimed
// under, and one entry per region held or released, sorted.
type heldEpochsBody struct {
	Owner string       `json:"owner"`
	Held  []heldRegion `json:"held"`
}

// heldRegion is a region the store claimed or released.
type heldRegion struct {
	Namespace string `json:"ns"`
	// TopicID is the namespace's topic ID (hex) when the region was
	// claimed: an entry never applies to a recreated topic.
	TopicID  string `json:"topic_id"`
	Region   uint64 `json:"region"`
	Epoch    uint64 `json:"epoch"` // 0: released without being claimed
	Released bool   `json:"released,omitempty"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errHeldEpochsCorrupt is matched by decodeHeldEpochs' errors.
var errHeldEpochsCorrupt = errors.New("kwal: not a valid held-epochs file")

// encodeHeldEpochs writes one held region a line, so that the file reads
// (and diffs) as a list.
func encodeHeldEpochs(b heldEpochsBody) []byte {
	var body bytes.Buffer
	body.WriteString(`{"owner":`)
	body.Write(mustJSON(b.Owner))
	body.WriteString(`,"held":[`)
	for i, h := range b.Held {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString("\n  ")
		body.Write(mustJSON(h))
	}
	body.WriteString("\n]}")
	var compact bytes.Buffer
	if err := json.Compact(&compact, body.Bytes()); err != nil {
		panic(err)
	}
	var doc bytes.Buffer
	fmt.Fprintf(&doc, `{"version":%d,"crc32c":"%s","body":`, heldEpochsVersion, crcHex(compact.Bytes()))
	doc.Write(body.Bytes())
	doc.WriteString("}\n")
	return doc.Bytes()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings, integers and booleans only
	}
	return b
}

func crcHex(compact []byte) string {
	return fmt.Sprintf("%08x", crc32.Checksum(compact, castagnoli))
}

// decodeHeldEpochs decodes and checks a held-epochs file. Any input gives a
// body or an error matching errHeldEpochsCorrupt, never a panic. A version
// above heldEpochsVersion (a newer kwal's) is refused too: the store then
// holds nothing, which is safe.
func decodeHeldEpochs(data []byte) (heldEpochsBody, error) {
	bad := func(format string, args ...any) (heldEpochsBody, error) {
		return heldEpochsBody{}, kwalerr.Errorf("%w: %s", errHeldEpochsCorrupt, fmt.Sprintf(format, args...))
	}
	var doc heldEpochsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return bad("%v", err)
	}
	if doc.Version != heldEpochsVersion {
		return bad("format version %d (this kwal reads %d)", doc.Version, heldEpochsVersion)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc.Body); err != nil {
		return bad("body: %v", err)
	}
	if got := crcHex(compact.Bytes()); got != doc.CRC32C {
		return bad("checksum %s, the body's is %s", doc.CRC32C, got)
	}
	var b heldEpochsBody
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return bad("body: %v", err)
	}
	if b.Owner == "" {
		return bad("no owner")
	}
	seen := make(map[ownKey]bool, len(b.Held))
	for i, h := range b.Held {
		k := ownKey{h.Namespace, h.Region}
		switch {
		case validateTopic(h.Namespace) != nil:
			return bad("entry %d: namespace %q", i, h.Namespace)
		case h.TopicID == "":
			return bad("entry %d: no topic ID", i)
		case h.Epoch == 0 && !h.Released:
			return bad("entry %d: epoch 0 and not released", i)
		case seen[k]:
			return bad("entry %d: %q region %d twice", i, h.Namespace, h.Region)
		}
		seen[k] = true
	}
	return b, nil
}

// heldEpochs keeps owning.owned in the index's Store.
type heldEpochs struct {
	st      index.Store
	where   string // the file, for logs and errors
	timeout time.Duration
	log     *slog.Logger
	errs    *prometheus.CounterVec // op: read, write
	// topicID looks up a namespace's topic ID when owning.topics lacks
	// it (a region released without being claimed).
	topicID func(ctx context.Context, ns string) (string, error)
	// dirty is set while the file lags owned (its last write failed);
	// guarded by owning.mu. Close writes it again.
	dirty bool
}

// heldEpochsWhere names the held-epochs file of cfg's index store.
func heldEpochsWhere(cfg Config) string {
	if cfg.IndexStore != nil {
		return fmt.Sprintf("%s in the IndexStore (%T)", heldEpochsFile, cfg.IndexStore)
	}
	return filepath.Join(cfg.IndexDir, heldEpochsFile)
}

// openHeldEpochs reads the held-epochs file of st (Open, before the store
// is used; st is the index's writable Store), settles the store's Owner,
// resumes the epochs the file holds that still apply, and from then on
// keeps the file up to date with owned.
//
// A file that is not a valid held-epochs file is logged and counted
// (kwal_held_epochs_file_errors_total{op="read"}), and the store starts
// holding nothing: that is safe (a region held under epoch 0 is fenced
// wherever a claim exists), costs at most a claim per region, and a
// damaged file in a cache-like role should not keep a datanode from
// starting, as a damaged index checkpoint does not. An error reading it
// (the Store failed, not the content) fails Open: holding nothing then
// would overwrite a good file on the next change.
func (s *LogStore) openHeldEpochs(ctx context.Context, st index.Store) error {
	o := &s.owning
	h := &heldEpochs{st: st, where: heldEpochsWhere(s.cfg), timeout: s.cfg.RequestTimeout, log: s.log,
		errs: s.metrics.heldEpochsFileErrors, topicID: s.topicID}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	var file heldEpochsBody
	found := false
	data, err := st.Get(ctx, heldEpochsFile)
	switch {
	case errors.Is(err, index.ErrNotExist):
	case err != nil:
		return kwalerr.Errorf("open: reading the held epochs (%s) from the index store: %w", h.where, err)
	default:
		if file, err = decodeHeldEpochs(data); err != nil {
			h.errs.WithLabelValues("read").Inc()
			s.log.Warn("kwal: the held-epochs file is unreadable; the store holds no region until it claims them again (it is rewritten)", "file", h.where, "err", err)
		} else {
			found = true
		}
	}
	if found && s.cfg.Owner == "" {
		o.owner = file.Owner
	}
	var held []heldRegion
	switch {
	case !found:
	case file.Owner != o.owner:
		s.log.Info("kwal: Config.Owner is not the owner the held epochs were claimed under: resuming none", "file", h.where, "owner", o.owner, "held_by", file.Owner, "regions", len(file.Held))
	default:
		if held, err = s.stillHeld(ctx, file.Held); err != nil {
			return kwalerr.Errorf("open: resuming the held epochs %s: %w", h.where, err)
		}
	}
	m := make(map[ownKey]ownState, len(held))
	for _, r := range held {
		m[ownKey{r.Namespace, r.Region}] = ownState{epoch: r.Epoch, released: r.Released}
	}
	o.mu.Lock()
	o.owned.Store(&m)
	o.held = h
	if !found || file.Owner != o.owner || len(held) != len(file.Held) {
		o.writeHeld(m)
	}
	o.mu.Unlock()
	if len(held) > 0 {
		s.log.Info("kwal: resumed the epochs this store held", "file", h.where, "owner", o.owner, "regions", len(held))
	}
	return nil
}

// stillHeld returns the entries of held that still apply: the namespace's
// topic has the entry's ID, and the region was released or the claims topic
// holds this owner's committed claim of the entry's epoch. It catches up
// with the claims topic (reading only) and looks the topics up.
func (s *LogStore) stillHeld(ctx context.Context, held []heldRegion) ([]heldRegion, error) {
	if len(held) == 0 {
		return nil, nil
	}
	var names []string
	for _, r := range held {
		names = append(names, r.Namespace)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	td, err := s.adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, kwalerr.Errorf("looking up the topics' IDs: %w", err)
	}
	f := s.owning.follower
	if err := f.await(ctx); err != nil {
		return nil, err
	}
	var keep []heldRegion
	for _, r := range held {
		d, ok := td[r.Namespace]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			s.log.Info("kwal: not resuming a held epoch: the namespace was deleted", "topic", r.Namespace, "region", r.Region, "epoch", r.Epoch)
			continue
		case d.Err != nil:
			return nil, kwalerr.Errorf("topic ID of %q: %w", r.Namespace, d.Err)
		}
		tid := d.ID.String()
		s.owning.topics.Store(r.Namespace, tid)
		if tid != r.TopicID {
			s.log.Info("kwal: not resuming a held epoch: the namespace's topic was recreated", "topic", r.Namespace, "region", r.Region, "epoch", r.Epoch, "held_topic_id", r.TopicID, "topic_id", tid)
			continue
		}
		if !r.Released {
			reg := f.region(claim.ID{Namespace: r.Namespace, TopicID: tid, Region: r.Region})
			if !claimedBy(reg, r.Epoch, s.owning.owner) {
				// Outranked claims may be trimmed from the state; a
				// newer claim fences epoch 0 as it fences this one.
				msg, lvl := "kwal: not resuming a held epoch: the claims topic holds no claim of it by this owner", slog.LevelWarn
				if reg.MaxEpoch() > r.Epoch {
					msg, lvl = "kwal: not resuming a held epoch: a newer claim outranks it", slog.LevelInfo
				}
				s.log.Log(ctx, lvl, msg, "topic", r.Namespace, "region", r.Region, "epoch", r.Epoch, "owner", s.owning.owner, "newest_epoch", reg.MaxEpoch())
				continue
			}
		}
		keep = append(keep, r)
	}
	return keep, nil
}

// claimedBy reports whether r has a committed claim of epoch by owner.
func claimedBy(r claim.Region, epoch uint64, owner string) bool {
	return slices.ContainsFunc(r.Claims, func(c claim.Committed) bool { return c.Epoch == epoch && c.Owner == owner })
}

// writeHeld writes m, what owned now holds, to the held-epochs file (no-op
// without one). The caller holds o.mu, so the file follows the changes in
// their order, and a change's write is done when the change returns.
//
// A failed write is logged and counted
// (kwal_held_epochs_file_errors_total{op="write"}), not returned: the
// change it records (a claim that committed, a release, a deleted
// namespace) has happened and holds in memory, so failing the call would
// tell its caller something false, and a caller retrying a committed Claim
// would only raise the epoch and wait another lease. What a stale file
// costs is bounded: the next change or Close writes the whole state again,
// and a restart before that resumes the file's older state, which the
// claims topic still rules (an epoch a later claim of this store outranks
// is fenced; a region released since is writable until someone claims
// it, and that claim's SealedID covers what it wrote).
func (o *owning) writeHeld(m map[ownKey]ownState) {
	h := o.held
	if h == nil {
		return
	}
	if err := h.write(o, m); err != nil {
		h.dirty = true
		h.errs.WithLabelValues("write").Inc()
		h.log.Error("kwal: writing the held epochs failed: they are held in memory, and a restart before the next write that succeeds resumes the file's older state", "file", h.where, "err", err)
		return
	}
	h.dirty = false
}

// flushHeld writes the held-epochs file again if its last write failed
// (Close). The caller ends every call that could change owned first.
func (o *owning) flushHeld() error {
	h := o.held
	if h == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !h.dirty {
		return nil
	}
	var m map[ownKey]ownState
	if p := o.owned.Load(); p != nil {
		m = *p
	}
	if err := h.write(o, m); err != nil {
		h.errs.WithLabelValues("write").Inc()
		return kwalerr.Errorf("close: writing the held epochs %s: %w", h.where, err)
	}
	h.dirty = false
	return nil
}

func (h *heldEpochs) write(o *owning, m map[ownKey]ownState) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	b := heldEpochsBody{Owner: o.owner, Held: make([]heldRegion, 0, len(m))}
	for k, st := range m {
		if st.epoch == 0 && !st.released {
			continue
		}
		var tid string
		if v, ok := o.topics.Load(k.ns); ok {
			tid = v.(string)
		} else {
			var err error
			if tid, err = h.topicID(ctx, k.ns); errors.Is(err, ErrUnknownNamespace) {
				continue // no topic: nothing to resume
			} else if err != nil {
				return err
			}
		}
		b.Held = append(b.Held, heldRegion{Namespace: k.ns, TopicID: tid, Region: k.region, Epoch: st.epoch, Released: st.released})
	}
	slices.SortFunc(b.Held, func(x, y heldRegion) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Region, y.Region))
	})
	if err := h.st.Put(ctx, heldEpochsFile, encodeHeldEpochs(b)); err != nil {
		return kwalerr.Errorf("%s: %w", h.where, err)
	}
	return nil
}
