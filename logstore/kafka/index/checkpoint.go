package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Compaction policy: a topic's deltas are folded into a new base once they
// add up to more than the base, with a floor so that a small base does not
// make every delta a rewrite, and a cap on their number to bound what a load
// reads. On disk a topic then takes at most twice its base (plus the
// floor); for an index of steady size each byte of delta costs at most one
// more byte of base rewrite; a growing index writes about three bytes per
// byte it holds.
const (
	compactFloor = 4 << 10
	maxDeltas    = 128
)

// persistState is a topic's persistence bookkeeping, guarded by
// topic.persistMu.
type persistState struct {
	// known is false until the topic's files on the store are listed
	// (always true for topics found at load).
	known bool
	// lastSeq is the highest file sequence number on the store (or
	// written); new files take lastSeq+1.
	lastSeq uint64
	// baseSeq is the sequence number of the current base, 0 for none.
	baseSeq uint64
	// c and w are the accounted span as of the last file of the chain.
	c, w       int64
	baseBytes  int64
	deltaBytes int64
	deltas     int
	// files are the names of the topic's files on the store, for deletion.
	files []storedFile
}

// storedFile is one of a topic's checkpoint files on the store.
type storedFile struct {
	name string
	seq  uint64
	kind fileKind
}

// ---- file names ---------------------------------------------------------

// fileName is the store name of a topic's file:
//
//	idx-<escaped topic>.<seq, 16 lower-case hex digits>.base|delta
//
// The escaped topic keeps [A-Za-z0-9_-] and writes any other byte as %XX
// (upper-case hex), so it contains no '.', and each topic's files are the
// names beginning with topicPrefix(topic).
func fileName(topic string, seq uint64, kind fileKind) string {
	return topicPrefix(topic) + fmt.Sprintf("%016x", seq) + "." + kind.String()
}

const namePrefix = "idx-"

func topicPrefix(topic string) string { return namePrefix + escapeTopic(topic) + "." }

func escapeTopic(topic string) string {
	var b strings.Builder
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// parseFileName is the inverse of fileName; ok is false for any name
// fileName cannot produce.
func parseFileName(name string) (topic string, seq uint64, kind fileKind, ok bool) {
	rest, found := strings.CutPrefix(name, namePrefix)
	if !found {
		return "", 0, 0, false
	}
	rest, ext, found := cutLast(rest, ".")
	if !found {
		return "", 0, 0, false
	}
	switch ext {
	case "base":
		kind = kindBase
	case "delta":
		kind = kindDelta
	default:
		return "", 0, 0, false
	}
	esc, hex, found := cutLast(rest, ".")
	if !found || len(hex) != 16 || strings.ToLower(hex) != hex {
		return "", 0, 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return "", 0, 0, false
	}
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		c := esc[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		if c != '%' || i+2 >= len(esc) {
			return "", 0, 0, false
		}
		v, err := strconv.ParseUint(esc[i+1:i+3], 16, 8)
		if err != nil || plainByte(byte(v)) || fmt.Sprintf("%02X", v) != esc[i+1:i+3] {
			return "", 0, 0, false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), seq, kind, true
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// ---- writing ------------------------------------------------------------

// checkpoint writes one file for the topic if anything changed since its
// last one: a delta, or a base when needed or when the deltas have grown
// too large. It returns the bytes written.
func (t *topic) checkpoint(ctx context.Context, st Store) (int64, error) {
	t.persistMu.Lock()
	defer t.persistMu.Unlock()
	ps := &t.persist
	if !ps.known {
		if err := t.listFilesLocked(ctx, st); err != nil {
			return 0, err
		}
	}

	// Snapshot under the data lock: encode the file and hand the dirty set
	// over to it. The store write happens without the data lock, so that
	// Observe and Plan go on meanwhile.
	t.mu.Lock()
	if t.dropped || !t.covered {
		t.mu.Unlock()
		return 0, nil
	}
	base := t.needBase || ps.baseSeq == 0
	if !base && t.c == ps.c && t.w == ps.w && len(t.dirty) == 0 && !t.deletedDirty {
		t.mu.Unlock()
		return 0, nil
	}
	seq := ps.lastSeq + 1
	var data []byte
	if !base {
		data = appendFile(nil, t.deltaLocked(seq, ps.baseSeq, ps.w))
		if ps.deltas >= maxDeltas ||
			ps.deltaBytes+int64(len(data)) > max(ps.baseBytes, compactFloor) {
			base = true
		}
	}
	if base {
		data = appendFile(nil, t.baseLocked(seq))
	}
	dirty := t.dirty
	t.dirty = make(map[uint64]struct{})
	hadNeedBase, hadDeletedDirty := t.needBase, t.deletedDirty
	t.needBase, t.deletedDirty = false, false
	c, w := t.c, t.w
	t.mu.Unlock()

	kind := kindDelta
	if base {
		kind = kindBase
	}
	name := fileName(t.name, seq, kind)
	if err := st.Put(ctx, name, data); err != nil {
		// Give the changes back to the next checkpoint.
		t.mu.Lock()
		for id := range dirty {
			if _, ok := t.regions[id]; ok {
				t.dirty[id] = struct{}{}
			}
		}
		t.needBase = t.needBase || hadNeedBase
		t.deletedDirty = t.deletedDirty || (hadDeletedDirty && t.deleted != nil)
		t.mu.Unlock()
		return 0, kwalerr.Errorf("index: topic %q: writing checkpoint %s: %w", t.name, name, err)
	}
	t.m.checkpointBytes.WithLabelValues(kind.String()).Add(float64(len(data)))
	t.m.checkpointFiles.WithLabelValues(kind.String()).Inc()
	ps.lastSeq = seq
	ps.c, ps.w = c, w
	ps.files = append(ps.files, storedFile{name: name, seq: seq, kind: kind})
	if !base {
		ps.deltaBytes += int64(len(data))
		ps.deltas++
		return int64(len(data)), nil
	}
	ps.baseSeq = seq
	ps.baseBytes = int64(len(data))
	ps.deltaBytes, ps.deltas = 0, 0
	// The new base is durable: every older file is garbage. A failed delete
	// leaves a file that loads ignore (its seq is below the base's); it is
	// retried after the next base.
	keep := ps.files[:0]
	var errs []error
	for _, f := range ps.files {
		if f.seq >= seq {
			keep = append(keep, f)
			continue
		}
		if err := st.Delete(ctx, f.name); err != nil {
			errs = append(errs, err)
			keep = append(keep, f)
		}
	}
	ps.files = keep
	if len(errs) > 0 {
		t.log.Warn("index: deleting old checkpoint files", "err", kwalerr.Join(errs...))
	}
	return int64(len(data)), nil
}

// listFilesLocked learns the topic's files on the store (for a topic
// created after load, normally none). Any file found means they were not
// written by this Collector: the next checkpoint writes a base above them.
func (t *topic) listFilesLocked(ctx context.Context, st Store) error {
	names, err := st.List(ctx, topicPrefix(t.name))
	if err != nil {
		return kwalerr.Errorf("index: topic %q: listing checkpoint files: %w", t.name, err)
	}
	ps := &t.persist
	for _, n := range names {
		topic, seq, kind, ok := parseFileName(n)
		if !ok || topic != t.name {
			continue
		}
		ps.files = append(ps.files, storedFile{name: n, seq: seq, kind: kind})
		ps.lastSeq = max(ps.lastSeq, seq)
	}
	if len(ps.files) > 0 {
		t.mu.Lock()
		t.needBase = true
		t.mu.Unlock()
	}
	ps.known = true
	return nil
}

// baseLocked returns the base file of the topic's current state.
func (t *topic) baseLocked(seq uint64) *checkpointFile {
	f := &checkpointFile{Kind: kindBase, Topic: t.name, Seq: seq, BaseSeq: seq, C: t.c, Low: t.c, W: t.w, Deleted: t.deleted}
	ids := make([]uint64, 0, len(t.regions))
	for id := range t.regions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		f.Regions = append(f.Regions, t.regionRecordLocked(id, t.c))
	}
	return f
}

// deltaLocked returns the delta file from a previous file whose W was low.
func (t *topic) deltaLocked(seq, baseSeq uint64, low int64) *checkpointFile {
	f := &checkpointFile{Kind: kindDelta, Topic: t.name, Seq: seq, BaseSeq: baseSeq, C: t.c, Low: low, W: t.w}
	if t.deletedDirty {
		f.Deleted = t.deleted
	}
	ids := make([]uint64, 0, len(t.dirty))
	for id := range t.dirty {
		if _, ok := t.regions[id]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		f.Regions = append(f.Regions, t.regionRecordLocked(id, low))
	}
	return f
}

// regionRecordLocked returns the region's record of its runs in
// [from, W), streamed from its runList when the file is encoded (under the
// same lock).
func (t *topic) regionRecordLocked(id uint64, from int64) regionRecord {
	r := t.regions[id]
	return regionRecord{Region: id, DroppedBelow: r.dropped, src: &r.runs, lo: from, hi: t.w}
}

// ---- loading ------------------------------------------------------------

// fetchParallelism is the number of files of a topic fetched at once at
// load.
const fetchParallelism = 8

// loadFailure describes one file a load could not use.
type loadFailure struct {
	name   string
	reason string
	err    error
}

// load rebuilds the topic from its files on the store: the newest base that
// decodes, then its deltas in sequence while each one decodes and continues
// the chain. It returns the files it could not use; the topic is then at
// the last consistent state reached (or has no coverage), and its next
// checkpoint writes a new base.
func (t *topic) load(ctx context.Context, st Store, files []storedFile) []loadFailure {
	t.persistMu.Lock()
	defer t.persistMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := &t.persist
	ps.known = true
	ps.files = files
	for _, f := range files {
		ps.lastSeq = max(ps.lastSeq, f.seq)
	}
	slices.SortFunc(ps.files, func(a, b storedFile) int { return cmp.Compare(a.seq, b.seq) })

	var fails []loadFailure
	fail := func(f storedFile, reason string, err error) {
		fails = append(fails, loadFailure{name: f.name, reason: reason, err: err})
	}
	// Fetch the files concurrently (on an object store each is a round
	// trip), then apply them in order.
	type fetched struct {
		data []byte
		err  error
	}
	got := make([]fetched, len(ps.files))
	var eg errgroup.Group
	eg.SetLimit(fetchParallelism)
	for i, f := range ps.files {
		eg.Go(func() error {
			got[i].data, got[i].err = st.Get(ctx, f.name)
			return nil // each file's failure is its own (read below)
		})
	}
	_ = eg.Wait() // every Go returns nil
	pos := make(map[string]int, len(ps.files))
	for i, f := range ps.files {
		pos[f.name] = i
	}
	read := func(f storedFile) (*checkpointFile, int64, bool) {
		data, err := got[pos[f.name]].data, got[pos[f.name]].err
		if err != nil {
			fail(f, loadFailureReason(err), err)
			return nil, 0, false
		}
		dec, err := decodeFile(data)
		if err == nil && (dec.Topic != t.name || dec.Seq != f.seq || dec.Kind != f.kind) {
			err = kwalerr.Errorf("%w: file holds topic %q seq %d kind %v", ErrCorrupt, dec.Topic, dec.Seq, dec.Kind)
		}
		if err != nil {
			fail(f, loadFailureReason(err), err)
			return nil, 0, false
		}
		return dec, int64(len(data)), true
	}

	clean := true
	for bi := len(ps.files) - 1; bi >= 0; bi-- {
		bf := ps.files[bi]
		if bf.kind != kindBase {
			continue
		}
		base, n, ok := read(bf)
		if !ok {
			clean = false
			continue
		}
		t.applyLocked(base)
		ps.baseSeq, ps.baseBytes = bf.seq, n
		next := bf.seq + 1
		for _, df := range ps.files[bi+1:] {
			if df.kind == kindBase {
				break // an older base's chain ends where the next base begins
			}
			if df.seq != next {
				fail(df, reasonMissing, kwalerr.Errorf("expected delta %d of base %d", next, bf.seq))
				clean = false
				break
			}
			d, n, ok := read(df)
			if ok && (d.BaseSeq != bf.seq || d.Low != t.w) {
				fail(df, reasonCorrupt, kwalerr.Errorf("%w: delta of base %d from %d does not continue base %d at %d",
					ErrCorrupt, d.BaseSeq, d.Low, bf.seq, t.w))
				ok = false
			}
			if !ok {
				clean = false
				break
			}
			t.applyLocked(d)
			ps.deltaBytes += n
			ps.deltas++
			next++
		}
		break
	}
	if ps.baseSeq == 0 && len(ps.files) > 0 {
		if clean {
			// Only deltas: their base is gone.
			fail(ps.files[0], reasonMissing, errors.New("no base file"))
		}
		clean = false
	}
	ps.c, ps.w = t.c, t.w
	t.needBase = !clean
	clear(t.dirty)
	t.deletedDirty = false
	t.wm.Set(float64(t.w))
	return fails
}

// applyLocked applies a decoded base (onto an empty topic) or delta.
func (t *topic) applyLocked(f *checkpointFile) {
	if f.Kind == kindBase {
		t.resetLocked()
		t.covered = true
		t.c, t.w = f.C, f.C
	}
	t.raiseCLocked(f.C)
	for _, rec := range f.Regions {
		r := t.regions[rec.Region]
		if r == nil {
			r = &region{}
			t.regions[rec.Region] = r
		}
		if rec.DroppedBelow > r.dropped {
			r.dropped = rec.DroppedBelow
			r.runs.dropBelow(r.dropped)
		}
		for _, s := range rec.Runs {
			r.runs.appendRun(max(s.start, r.dropped, t.c), s.end)
		}
		if r.runs.empty() && r.dropped <= t.c {
			delete(t.regions, rec.Region)
		}
	}
	t.w = max(t.w, f.W)
	if f.Deleted != nil {
		// The span the index held at this checkpoint; it replaces what
		// raiseCLocked derived above from the previous file's runs.
		t.deleted = f.Deleted
	}
}

// checkpointAll checkpoints every topic, returning the bytes written.
func (g *Collector) checkpointAll(ctx context.Context) (int64, error) {
	if g.opts.Store == nil || g.opts.ReadOnly {
		return 0, nil
	}
	began := time.Now()
	var total int64
	var errs []error
	for _, t := range g.topicList() {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		n, err := t.checkpoint(ctx, g.opts.Store)
		total += n
		if err != nil {
			g.m.checkpointErrors.Inc()
			errs = append(errs, err)
		}
	}
	g.m.checkpointDuration.Observe(time.Since(began).Seconds())
	return total, kwalerr.Join(errs...)
}
