package index

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Checkpoint file format, version 2.
//
// Every file (base or delta) is a 16-byte header followed by a body:
//
//	0        4         5        6        8           12          16
//	+--------+---------+--------+--------+-----------+-----------+==========+
//	| "KWIX" | version | kind   | flags  | body len  | CRC-32C   |   body   |
//	| magic  | uint8   | 1 base | uint16 | uint32 LE | uint32 LE | body len |
//	|        |         | 2 delta| = 0    |           |           |  bytes   |
//	+--------+---------+--------+--------+-----------+-----------+==========+
//
// The CRC-32C (Castagnoli) covers header bytes 0-11 and the body. A file
// shorter than its header says is truncated (a torn write); a checksum
// mismatch or any invalid field is corruption; a version above 2 was written
// by a newer kwal. Readers refuse all three. A file is written as version 1
// when it carries no deleted section, which version 1 lacks, so that an
// older kwal still reads most files.
//
// The body is a sequence of unsigned varints (uv), all in shortest form:
//
//		body    := uv(len(topic)) topic-bytes uv(seq) uv(baseSeq)
//		           uv(C) uv(low) uv(W-low) uv(nRegions) region* [deleted]
//		region  := uv(id delta) uv(droppedBelow) uv(nRuns) run*
//		run     := uv(gap<<1 | 1)                      a single offset
//		         | uv(gap<<1) uv(count-2)              count >= 2 offsets
//		deleted := uv(from) uv(point-from-1) uv(nLast) (uv(id delta) uv(last-from-1))*
//		                                               version 2 only
//
//	  - seq numbers the topic's files; a base has baseSeq == seq, a delta
//	    names the base it extends (baseSeq < seq).
//	  - [C, W) is the accounted span after this file is applied. low is where
//	    the file's runs begin: C for a base, the W of the previous file of
//	    the chain for a delta (which is how a loader checks the chain).
//	  - Regions ascend by id: the first id is stored as is, each next one as
//	    id - previous id - 1.
//	  - droppedBelow is the region's Obsolete point (0 for none).
//	  - Runs ascend within [max(low, C), W) and never touch: the first run's
//	    gap is its start - max(low, C), each next one's is start - previous
//	    end - 1.
//	  - deleted is what the index knew of deleted offsets [from, point)
//	    (deleted.go): each listed region's records there lay below its last
//	    (last > from), an unlisted region had none. Ids ascend as regions'
//	    do. A base carries the topic's span when it has one, a delta when it
//	    changed since the previous file; a loader keeps the last one read.
//
// A base holds every region's runs in [C, W). A delta holds, for each region
// changed since the previous file, its Obsolete point and its runs in
// [low, W); applying it raises C (dropping offsets below it), drops each
// listed region's offsets below droppedBelow, appends the runs and sets W.
//
// Sizes: a region's isolated offset 64 offsets after its previous one costs
// 1 byte; a run of 10 records 630 offsets after its previous run 3 bytes.
const (
	fileMagic     = "KWIX"
	formatVersion = 2
	headerLen     = 16
)

type fileKind uint8

const (
	kindBase  fileKind = 1
	kindDelta fileKind = 2
)

func (k fileKind) String() string {
	switch k {
	case kindBase:
		return "base"
	case kindDelta:
		return "delta"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// checkpointFile is the decoded content of one file.
type checkpointFile struct {
	Kind    fileKind
	Topic   string
	Seq     uint64
	BaseSeq uint64
	C, Low  int64
	W       int64
	Regions []regionRecord
	// Deleted, when set, is the topic's deleted span (version 2).
	Deleted *deletedSpan
}

type regionRecord struct {
	Region       uint64
	DroppedBelow int64
	Runs         []span
	// src, when set, is encoded instead of Runs: its runs in [lo, hi). The
	// encoder streams them, not holding them as spans (decodeFile never sets
	// it).
	src    *runList
	lo, hi int64
}

// appendFile encodes f after dst. f must be valid (as decodeFile would
// return it); the encoder does not check.
func appendFile(dst []byte, f *checkpointFile) []byte {
	start := len(dst)
	dst = append(dst, fileMagic...)
	version := byte(1)
	if f.Deleted != nil {
		version = 2
	}
	dst = append(dst, version, byte(f.Kind), 0, 0)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // body length and CRC, filled below
	dst = appendBody(dst, f)
	body := dst[start+headerLen:]
	binary.LittleEndian.PutUint32(dst[start+8:], uint32(len(body)))
	crc := crc32.Update(0, crcTable, dst[start:start+12])
	crc = crc32.Update(crc, crcTable, body)
	binary.LittleEndian.PutUint32(dst[start+12:], crc)
	return dst
}

func appendBody(dst []byte, f *checkpointFile) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(f.Topic)))
	dst = append(dst, f.Topic...)
	dst = binary.AppendUvarint(dst, f.Seq)
	dst = binary.AppendUvarint(dst, f.BaseSeq)
	dst = binary.AppendUvarint(dst, uint64(f.C))
	dst = binary.AppendUvarint(dst, uint64(f.Low))
	dst = binary.AppendUvarint(dst, uint64(f.W-f.Low))
	dst = binary.AppendUvarint(dst, uint64(len(f.Regions)))
	lb := max(f.Low, f.C)
	var tmp []byte // a streamed region's runs, to count them first
	for i, r := range f.Regions {
		id := r.Region
		if i > 0 {
			id = r.Region - f.Regions[i-1].Region - 1
		}
		dst = binary.AppendUvarint(dst, id)
		dst = binary.AppendUvarint(dst, uint64(r.DroppedBelow))
		if r.src != nil {
			var n uint64
			prev := lb
			tmp = tmp[:0]
			r.src.each(r.lo, r.hi, func(s, e int64) bool {
				gap := s - prev
				if n > 0 {
					gap--
				}
				tmp = appendRunRec(tmp, gap, e-s)
				prev = e
				n++
				return true
			})
			dst = binary.AppendUvarint(dst, n)
			dst = append(dst, tmp...)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(r.Runs)))
		prev := lb
		for j, s := range r.Runs {
			gap := s.start - prev
			if j > 0 {
				gap--
			}
			dst = appendRunRec(dst, gap, s.end-s.start)
			prev = s.end
		}
	}
	if d := f.Deleted; d != nil {
		dst = binary.AppendUvarint(dst, uint64(d.from))
		dst = binary.AppendUvarint(dst, uint64(d.point-d.from-1))
		dst = binary.AppendUvarint(dst, uint64(len(d.last)))
		ids := slices.Sorted(maps.Keys(d.last))
		for i, id := range ids {
			delta := id
			if i > 0 {
				delta = id - ids[i-1] - 1
			}
			dst = binary.AppendUvarint(dst, delta)
			dst = binary.AppendUvarint(dst, uint64(d.last[id]-d.from-1))
		}
	}
	return dst
}

// decodeFile decodes and validates one checkpoint file. Errors match
// ErrTruncated, ErrCorrupt or ErrVersion.
func decodeFile(data []byte) (*checkpointFile, error) {
	if len(data) < headerLen {
		if n := min(len(data), len(fileMagic)); string(data[:n]) != fileMagic[:n] {
			return nil, kwalerr.Errorf("%w: bad magic", ErrCorrupt)
		}
		return nil, kwalerr.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrTruncated, len(data), headerLen)
	}
	if string(data[:4]) != fileMagic {
		return nil, kwalerr.Errorf("%w: bad magic %q", ErrCorrupt, data[:4])
	}
	switch v := data[4]; {
	case v == 0:
		return nil, kwalerr.Errorf("%w: version 0", ErrCorrupt)
	case v > formatVersion:
		return nil, kwalerr.Errorf("%w: version %d, this build reads up to %d", ErrVersion, v, formatVersion)
	}
	bodyLen := int64(binary.LittleEndian.Uint32(data[8:]))
	switch have := int64(len(data) - headerLen); {
	case have < bodyLen:
		return nil, kwalerr.Errorf("%w: body has %d of %d bytes", ErrTruncated, have, bodyLen)
	case have > bodyLen:
		return nil, kwalerr.Errorf("%w: %d bytes after the %d-byte body", ErrCorrupt, have-bodyLen, bodyLen)
	}
	body := data[headerLen:]
	crc := crc32.Update(0, crcTable, data[:12])
	crc = crc32.Update(crc, crcTable, body)
	if want := binary.LittleEndian.Uint32(data[12:]); crc != want {
		return nil, kwalerr.Errorf("%w: CRC-32C %08x, header says %08x", ErrCorrupt, crc, want)
	}
	if data[6] != 0 || data[7] != 0 {
		return nil, kwalerr.Errorf("%w: unknown flags %02x%02x", ErrCorrupt, data[7], data[6])
	}
	kind := fileKind(data[5])
	if kind != kindBase && kind != kindDelta {
		return nil, kwalerr.Errorf("%w: unknown file kind %d", ErrCorrupt, data[5])
	}
	return decodeBody(data[4], kind, body)
}

// bodyReader reads the body's varints, remembering the first error.
type bodyReader struct {
	b   []byte
	err error
}

func (r *bodyReader) uv(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n, err := readUvarint(r.b)
	if err != nil {
		r.err = kwalerr.Errorf("%w: %s: %w", ErrCorrupt, what, err)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// offset reads a uvarint that must fit an int64 offset.
func (r *bodyReader) offset(what string) int64 {
	v := r.uv(what)
	if v > math.MaxInt64 {
		r.fail("%s %d out of range", what, v)
		return 0
	}
	return int64(v)
}

func (r *bodyReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = kwalerr.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

// decodeBody decodes and validates a body of the given version and kind.
// Errors match ErrCorrupt.
func decodeBody(version byte, kind fileKind, body []byte) (*checkpointFile, error) {
	r := &bodyReader{b: body}
	f := &checkpointFile{Kind: kind}
	tl := r.uv("topic length")
	if r.err == nil && tl > uint64(len(r.b)) {
		r.fail("topic length %d beyond the body", tl)
	}
	if r.err != nil {
		return nil, r.err
	}
	f.Topic = string(r.b[:tl])
	r.b = r.b[tl:]
	f.Seq = r.uv("seq")
	f.BaseSeq = r.uv("base seq")
	f.C = r.offset("C")
	f.Low = r.offset("low")
	width := r.offset("W-low")
	if r.err != nil {
		return nil, r.err
	}
	if f.Low > math.MaxInt64-width {
		return nil, kwalerr.Errorf("%w: W overflows", ErrCorrupt)
	}
	f.W = f.Low + width
	switch {
	case f.C > f.W:
		return nil, kwalerr.Errorf("%w: C %d above W %d", ErrCorrupt, f.C, f.W)
	case kind == kindBase && f.BaseSeq != f.Seq:
		return nil, kwalerr.Errorf("%w: base with base seq %d != seq %d", ErrCorrupt, f.BaseSeq, f.Seq)
	case kind == kindBase && f.Low != f.C:
		return nil, kwalerr.Errorf("%w: base with low %d != C %d", ErrCorrupt, f.Low, f.C)
	case kind == kindDelta && f.BaseSeq >= f.Seq:
		return nil, kwalerr.Errorf("%w: delta with base seq %d >= seq %d", ErrCorrupt, f.BaseSeq, f.Seq)
	}
	lb := max(f.Low, f.C)
	nRegions := r.uv("region count")
	// Each region takes at least 3 bytes: refuse counts the body cannot
	// hold before allocating for them.
	if r.err == nil && nRegions > uint64(len(r.b)/3) {
		r.fail("region count %d beyond the body", nRegions)
	}
	if r.err != nil {
		return nil, r.err
	}
	f.Regions = make([]regionRecord, 0, nRegions)
	for i := range nRegions {
		id := r.uv("region id")
		if i > 0 {
			prev := f.Regions[i-1].Region
			if r.err == nil && (prev == math.MaxUint64 || id > math.MaxUint64-prev-1) {
				r.fail("region id overflows")
			}
			id += prev + 1
		}
		rec := regionRecord{Region: id}
		rec.DroppedBelow = r.offset("dropped below")
		nRuns := r.uv("run count")
		if r.err == nil && nRuns > uint64(len(r.b)) {
			r.fail("run count %d beyond the body", nRuns)
		}
		if r.err != nil {
			return nil, r.err
		}
		rec.Runs = make([]span, 0, nRuns)
		prev := lb
		for j := range nRuns {
			head := r.uv("run")
			count := uint64(1)
			if head&1 == 0 {
				count = r.uv("run count")
				if r.err == nil && count > math.MaxUint64-2 {
					r.fail("run length overflows")
				}
				count += 2
			}
			if r.err != nil {
				return nil, r.err
			}
			gap := head >> 1
			if j > 0 {
				gap++ // cannot overflow: head>>1 < 2^63
			}
			room := uint64(f.W - prev)
			if gap > room || count > room-gap {
				return nil, kwalerr.Errorf("%w: region %d run %d beyond W %d", ErrCorrupt, id, j, f.W)
			}
			s := prev + int64(gap)
			e := s + int64(count)
			rec.Runs = append(rec.Runs, span{s, e})
			prev = e
		}
		f.Regions = append(f.Regions, rec)
	}
	if version >= 2 {
		if f.Deleted = r.deleted(); r.err != nil {
			return nil, r.err
		}
	}
	if len(r.b) != 0 {
		return nil, kwalerr.Errorf("%w: %d bytes after the last section", ErrCorrupt, len(r.b))
	}
	return f, nil
}

// deleted reads a deleted section.
func (r *bodyReader) deleted() *deletedSpan {
	from := r.offset("deleted from")
	width := r.uv("deleted width")
	if r.err == nil && width >= uint64(math.MaxInt64-from) {
		r.fail("deleted span overflows")
	}
	n := r.uv("deleted region count")
	// Each region takes at least 2 bytes.
	if r.err == nil && n > uint64(len(r.b)/2) {
		r.fail("deleted region count %d beyond the body", n)
	}
	if r.err != nil {
		return nil
	}
	d := &deletedSpan{from: from, point: from + int64(width) + 1, last: make(map[uint64]int64, n)}
	var prev uint64
	for i := range n {
		id := r.uv("deleted region id")
		if i > 0 {
			if r.err == nil && (prev == math.MaxUint64 || id > math.MaxUint64-prev-1) {
				r.fail("deleted region id overflows")
			}
			id += prev + 1
		}
		past := r.uv("deleted last")
		if r.err == nil && past >= uint64(math.MaxInt64-from) {
			r.fail("deleted last of region %d overflows", id)
		}
		if r.err != nil {
			return nil
		}
		d.last[id] = from + int64(past) + 1
		prev = id
	}
	return d
}
