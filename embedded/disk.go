package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/internal/kwalerr"
)

// The check of a data directory before the broker loads it.
//
// kfake keeps each partition in <dir>/partitions/<topic>-<partition>/ as
// segment files <base offset>.dat of RecordBatches back to back. At start it
// reads every segment batch by batch and cuts a segment at its first batch
// that is incomplete or fails its CRC, dropping that batch and everything
// after it in the segment, and logs nothing kwal sees. checkDisk walks the
// segments by the same rule first and sorts what a cut would drop:
//   - a loss: intact batches follow the damage in the segment, a later
//     segment begins past it, or the manifest of the last clean shutdown
//     says the partition ended past it. Start refuses it unless AcceptLoss.
//   - a torn tail: nothing intact follows and nothing the last clean
//     shutdown knew of lies past it: the end of a write that a crash
//     interrupted. Start lets the broker cut it and logs what was cut.
//
// After a crash there is no manifest (Start removes it, Stop writes it), so
// damage in the last batch of a partition cannot be told from a torn write;
// damage anywhere before it can.

// Loss is what the broker would drop from one partition of a damaged data
// directory: the offsets [From, To).
type Loss struct {
	Topic     string
	Partition int32
	From, To  int64
	// Segment is the damaged segment file, At the byte of it where the
	// damage begins; Segment is "" when the partition's segments are
	// missing or end cleanly below what the last clean shutdown recorded.
	Segment string
	At      int64
	// Why says how the loss is known.
	Why string

	cut cut // where Start cuts the segment when the loss is accepted
}

func (l Loss) String() string {
	why := l.Why
	if l.Segment != "" {
		why = fmt.Sprintf("segment %s is damaged at byte %d, and %s", filepath.Base(l.Segment), l.At, l.Why)
	}
	return fmt.Sprintf("partition %s/%d loses offsets %d..%d (%d records): %s", l.Topic, l.Partition, l.From, l.To-1, l.To-l.From, why)
}

// ErrDamaged is matched (errors.Is) by a *DamagedError.
var ErrDamaged = errors.New("kwal: the data directory is damaged")

// DamagedError is Start's error when loading the data directory would drop
// records: Losses names each partition and the offsets it would lose. The
// broker did not start and nothing in the directory was changed. Start
// with AcceptLoss to drop them (copy the directory first to keep them).
type DamagedError struct {
	Dir    string
	Losses []Loss
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("kwal: the data directory %s is damaged: %s; the broker did not start and changed nothing (AcceptLoss starts it without these records)",
		e.Dir, e.Summary())
}

// maxLossesNamed bounds the partitions Summary names.
const maxLossesNamed = 3

// Summary names the losses on one line: the first few partitions in full,
// then how many more.
func (e *DamagedError) Summary() string {
	var parts []string
	for i, l := range e.Losses {
		if i == maxLossesNamed {
			var n int64
			for _, m := range e.Losses[i:] {
				n += m.To - m.From
			}
			parts = append(parts, fmt.Sprintf("and %d more partitions lose %d records", len(e.Losses)-i, n))
			break
		}
		parts = append(parts, l.String())
	}
	return strings.Join(parts, "; ")
}

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// tornTail is the end of a segment that holds no intact batch and no
// record known to have existed: the broker cuts it.
type tornTail struct {
	topic     string
	partition int32
	bytes     int64
	next      int64 // the offset the partition continues at
	cut
}

// diskReport is what checkDisk found.
type diskReport struct {
	losses []Loss
	torn   []tornTail
}

// checkDisk walks every partition's segments in dir. m is the manifest of
// the last clean shutdown, nil after a crash or on a first start.
func checkDisk(dir string, m *manifest) (diskReport, error) {
	var rep diskReport
	seen := map[partKey]bool{}
	pdirs, err := os.ReadDir(filepath.Join(dir, "partitions"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, err
	}
	for _, d := range pdirs {
		if !d.IsDir() {
			continue
		}
		k, ok := parsePartDir(d.Name())
		if !ok {
			continue
		}
		seen[k] = true
		mp, _ := m.lookup(k)
		if err := checkPartition(filepath.Join(dir, "partitions", d.Name()), k, mp, &rep); err != nil {
			return rep, kwalerr.Errorf("partition %s/%d: %w", k.topic, k.partition, err)
		}
	}
	if m != nil {
		for _, mp := range m.Partitions {
			k := partKey{mp.Topic, mp.Partition}
			if !seen[k] && mp.HighWatermark > mp.LogStart {
				rep.losses = append(rep.losses, Loss{Topic: k.topic, Partition: k.partition, From: mp.LogStart, To: mp.HighWatermark,
					Why: fmt.Sprintf("its directory is missing, though the last clean shutdown recorded offsets %d..%d", mp.LogStart, mp.HighWatermark-1)})
			}
		}
	}
	return rep, nil
}

// partKey names a partition.
type partKey struct {
	topic     string
	partition int32
}

// parsePartDir parses kfake's partition directory name: the topic
// URL-path-escaped, a dash, the partition.
func parsePartDir(name string) (partKey, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return partKey{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return partKey{}, false
	}
	topic, err := url.PathUnescape(name[:i])
	if err != nil {
		return partKey{}, false
	}
	return partKey{topic, int32(p)}, true
}

// checkPartition checks one partition's segments, adding what the broker's
// load would lose or cut to rep. mp is the partition's manifest entry (nil
// when none).
func checkPartition(pdir string, k partKey, mp *manifestPart, rep *diskReport) error {
	entries, err := os.ReadDir(pdir)
	if err != nil {
		return err
	}
	var bases []int64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".dat")
		if !ok || e.IsDir() {
			continue
		}
		if base, err := strconv.ParseInt(name, 10, 64); err == nil {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	end := int64(-1) // the offset after the last batch the load keeps
	var last *Loss   // a loss in the last segment, which the manifest may extend
	var lastTorn *tornTail
	for i, base := range bases {
		seg := filepath.Join(pdir, strconv.FormatInt(base, 10)+".dat")
		raw, err := os.ReadFile(seg)
		if err != nil {
			return err
		}
		// A batch may not end past the next segment's base, nor hold an
		// offset more than 2^31-1 above its segment's base (Kafka's segment
		// indexes store offsets relative to the base in 32 bits). The
		// manifest gives no bound: it may be older than the last appends.
		limit := base + math.MaxInt32 + 1
		if i+1 < len(bases) {
			limit = min(limit, bases[i+1])
		}
		w := walkSegment(raw, base, limit)
		if w.end >= 0 {
			end = w.end
		}
		last, lastTorn = nil, nil
		if w.pos == len(raw) {
			continue
		}
		from := w.end
		if from < 0 {
			from = base
		}
		to, intact := resync(raw[w.pos+1:], from, limit)
		why := ""
		if intact > 0 {
			why = fmt.Sprintf("%d intact records follow the damage in the segment", intact)
		}
		if i+1 < len(bases) && bases[i+1] > to {
			to = bases[i+1]
			why = fmt.Sprintf("the next segment begins at offset %d", to)
		}
		if mp != nil {
			from = max(from, mp.LogStart)
		}
		c := cut{segment: seg, at: int64(w.pos), self: !w.brokerCuts}
		if to > from {
			rep.losses = append(rep.losses, Loss{Topic: k.topic, Partition: k.partition, From: from, To: to, Segment: seg, At: c.at, Why: why, cut: c})
			last = &rep.losses[len(rep.losses)-1]
			continue
		}
		rep.torn = append(rep.torn, tornTail{topic: k.topic, partition: k.partition, bytes: int64(len(raw) - w.pos), next: from, cut: c})
		lastTorn = &rep.torn[len(rep.torn)-1]
	}
	if mp == nil {
		return nil
	}
	from := max(end, mp.LogStart)
	if from >= mp.HighWatermark {
		return nil
	}
	why := fmt.Sprintf("the last clean shutdown recorded the partition's end at offset %d", mp.HighWatermark)
	switch {
	case last != nil:
		if mp.HighWatermark > last.To {
			last.To, last.Why = mp.HighWatermark, last.Why+" ("+why+")"
		}
	case lastTorn != nil:
		// What looked like a torn write cuts records the stop knew of.
		t := *lastTorn
		rep.torn = rep.torn[:len(rep.torn)-1]
		rep.losses = append(rep.losses, Loss{Topic: k.topic, Partition: k.partition, From: from, To: mp.HighWatermark,
			Segment: t.segment, At: t.at, Why: why, cut: t.cut})
	default:
		rep.losses = append(rep.losses, Loss{Topic: k.topic, Partition: k.partition, From: from, To: mp.HighWatermark,
			Why: fmt.Sprintf("its segments end at offset %d, below the end the last clean shutdown recorded (offset %d)", from, mp.HighWatermark)})
	}
	return nil
}

// cut is where a segment must be cut: at byte at. The broker cuts there
// itself when the batch at that byte fails its CRC or is incomplete; self
// marks a cut it would not make (a batch intact but misnumbered), which
// Start makes before the broker loads the segment.
type cut struct {
	segment string
	at      int64
	self    bool
}

// apply makes the cut when the broker would not.
func (c cut) apply() error {
	if !c.self || c.segment == "" {
		return nil
	}
	f, err := os.OpenFile(c.segment, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	terr := f.Truncate(c.at)
	serr := f.Sync()
	return kwalerr.Join(terr, serr, f.Close())
}

// castagnoli is the CRC-32C table of Kafka's RecordBatch CRC.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchAt decodes the RecordBatch at the start of b as kfake's load does:
// 12 bytes of offset and length, the length within b and at most 1 GiB, the
// CRC and the header intact. It returns the batch's size in bytes and its
// offsets [first, next); ok is false where the load would cut.
func batchAt(b []byte) (size int, first, next int64, ok bool) {
	if len(b) < 12 {
		return 0, 0, 0, false
	}
	n := int64(binary.BigEndian.Uint32(b[8:12]))
	if n > 1<<30 || 12+n > int64(len(b)) {
		return 0, 0, 0, false
	}
	raw := b[:12+n]
	if len(raw) >= 21 && binary.BigEndian.Uint32(raw[17:21]) != crc32.Checksum(raw[21:], castagnoli) {
		return 0, 0, 0, false
	}
	var rb kmsg.RecordBatch
	if rb.ReadFrom(raw) != nil {
		return 0, 0, 0, false
	}
	return len(raw), rb.FirstOffset, rb.FirstOffset + int64(rb.LastOffsetDelta) + 1, true
}

// segWalk is where the load of a segment stops keeping batches.
type segWalk struct {
	pos int   // the byte where the segment must be cut (len(raw): nowhere)
	end int64 // the offset after the last batch kept; -1 when none
	// brokerCuts is set when the broker's load stops at pos too (the batch
	// there fails its CRC or is incomplete).
	brokerCuts bool
}

// walkSegment walks the intact batches of a segment whose first offset is
// base, whose batches must end at or below limit. Besides the broker's
// rule (CRC and length), offsets must not go backwards: the first offset
// is the one field of a batch its CRC does not cover, and a damaged one
// makes the broker serve the batch's records at wrong offsets. When a
// batch goes backwards after one that jumped forward, the jump is the
// damage.
func walkSegment(raw []byte, base, limit int64) segWalk {
	w := segWalk{end: -1}
	want := base                // the first offset the next batch may have
	lastAt, lastWant := 0, base // the last batch kept: its byte and the offset it was due at
	jumped := false
	for w.pos < len(raw) {
		size, first, next, ok := batchAt(raw[w.pos:])
		if !ok {
			w.brokerCuts = true
			return w
		}
		if first < want || next > limit {
			if jumped && first < want {
				w.pos, w.end = lastAt, lastWant
				if lastWant == base {
					w.end = -1
				}
			}
			return w
		}
		lastAt, lastWant, jumped = w.pos, want, first > want
		w.pos += size
		w.end, want = next, next
	}
	return w
}

// minBatch is the size of a RecordBatch with no records: 12 bytes of offset
// and length, then 49 of header.
const minBatch = 61

// resync looks past damage for intact batches within [from, limit), byte
// by byte until one decodes, then batch by batch (and byte by byte again
// past further damage). It returns the offset after the last one found
// (from when none) and how many records they hold. As in walkSegment, a
// batch that jumps forward and is followed by one going backwards is taken
// for misnumbered and left out, and so is a batch going backwards after
// one that did not jump.
func resync(b []byte, from, limit int64) (to, records int64) {
	// The last two batches kept: their offsets [first, next).
	type span struct{ first, next int64 }
	var prev, last span
	kept := 0
	for p := 0; p+minBatch <= len(b); {
		// Cheap tests first: magic 2 and a plausible first offset.
		if first := int64(binary.BigEndian.Uint64(b[p:])); b[p+16] != 2 || first < from || first >= limit {
			p++
			continue
		}
		size, first, next, ok := batchAt(b[p:])
		if !ok || next > limit {
			p++
			continue
		}
		p += size
		if kept > 0 && first < last.next {
			due := from // the offset the last batch kept was due at
			if kept > 1 {
				due = prev.next
			}
			if last.first == due || first < due {
				continue // this batch is the misnumbered one
			}
			records -= last.next - last.first
			kept--
			last = prev
		}
		records += next - first
		prev, last = last, span{first, next}
		kept++
	}
	if kept == 0 {
		return from, 0
	}
	return max(from, last.next), records
}
