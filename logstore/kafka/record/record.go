// Package record is kwal's record codec: how one WAL entry becomes one or more
// Kafka records, and how those records are decoded and reassembled.
//
// # Layout (versions 1 and 2)
//
// Every kwal record carries a fixed key; the record's value is the entry's
// data, or one part of it. Integers are big-endian. A record of a region
// never claimed (owner epoch 0) has a version 1 key of 28 bytes; a record
// written under an owner epoch > 0 (logstore/kafka's Claim) has a version 2
// key of 36 bytes, the same fields with the epoch after the region:
//
//	version 1 (28 bytes)
//	 0      2      3      4              12      16      20      24      28
//	 +------+------+------+---------------+-------+-------+-------+-------+
//	 | "KW" | ver  | kind |    region     |  seq  | size  | eCRC  | rCRC  |
//	 +------+------+------+---------------+-------+-------+-------+-------+
//	 magic    1     1..5       uint64       uint32  uint32  uint32  uint32
//
//	version 2 (36 bytes)
//	 0      2      3      4              12              20      24      28      32      36
//	 +------+------+------+---------------+---------------+-------+-------+-------+-------+
//	 | "KW" | ver  | kind |    region     |     epoch     |  seq  | size  | eCRC  | rCRC  |
//	 +------+------+------+---------------+---------------+-------+-------+-------+-------+
//	 magic    2     1..6       uint64          uint64       uint32  uint32  uint32  uint32
//
//	kind   1 whole, 2 first, 3 middle, 4 last, 5 mark (no entry: a
//	       statement about the log, see KindMark in mark.go), 6 claim (no
//	       entry: where an owner epoch of the region begins, see KindClaim)
//	epoch  the region's owner epoch its writer held; a version 1 record
//	       reads as epoch 0
//	seq    the part's index within its entry: 0 for whole and first parts
//	size   length of the whole entry's data, across all parts
//	eCRC   CRC-32C (Castagnoli) of the whole entry's data
//	rCRC   CRC-32C of the key up to rCRC followed by the value: it guards
//	       the header fields and this record's part of the data
//
// Writing version 1 for epoch 0 keeps a store that never claims a region
// byte for byte what it was, and readers of either version agree on every
// field. Every part of one entry carries the same epoch.
//
// An entry whose data fits in one record under the batch limit is one whole
// record. A larger entry is split into a first part, zero or more middle parts
// and a last part, written consecutively; each part repeats size and eCRC, so
// a reader can tell a duplicate part (same header, same seq) from the start of
// another entry, and can verify the reassembled data end to end.
//
// # Telling errors apart
//
// A record whose key is absent, shorter than 28 bytes or lacks the magic is
// not kwal's ([ErrNotKwal]): written by another program. A record with the
// magic but a newer version is [ErrVersion]. A kwal record whose record CRC
// does not match is [ErrChecksum]; one whose header fields contradict each
// other is [ErrMalformed]. The store maps the last three to logstore.ErrCorrupt
// and names the offset.
//
// # Entry IDs
//
// A split entry occupies several offsets. Its ID is derived from the offset of
// its first part, so "entries with ID >= from" are exactly those whose first
// part is at or after from's offset: a reader starting at an offset never
// needs to look back, and parts found before an entry's first part belong to
// entries the reader was not asked for.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"unsafe"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Version is the newest record format version this package writes and
// reads; it writes version 1 keys for epoch 0 (see the package comment).
const Version = 2

// KeySize is the size of a version 1 key (epoch 0), KeySizeEpoch of a
// version 2 key (epoch > 0). KeyLen gives a part's.
const (
	KeySize      = 28
	KeySizeEpoch = 36
)

// Overhead is how many bytes of a record batch a part must leave free for the
// batch header (61 bytes), the record's framing (at most ~30 bytes of
// varints and attributes) and the key, with room to spare; a part's data is
// at most maxBatchBytes-Overhead bytes.
const Overhead = 256

// MinBatchBytes is the smallest batch limit the codec accepts.
const MinBatchBytes = Overhead + 1

// MaxEntrySize is the largest entry the format can describe.
const MaxEntrySize = math.MaxUint32

var magic = [2]byte{'K', 'W'}

// Kind tells whether a record holds a whole entry or which part of one.
type Kind uint8

const (
	KindWhole  Kind = 1
	KindFirst  Kind = 2
	KindMiddle Kind = 3
	KindLast   Kind = 4
)

func (k Kind) String() string {
	switch k {
	case KindWhole:
		return "whole"
	case KindFirst:
		return "first"
	case KindMiddle:
		return "middle"
	case KindLast:
		return "last"
	case KindMark:
		return "mark"
	case KindClaim:
		return "claim"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var (
	// ErrNotKwal reports a record that kwal did not write: no key, a short
	// key, or no magic.
	ErrNotKwal = errors.New("kwal: record: not a kwal record")
	// ErrVersion reports a kwal record of a newer format version.
	ErrVersion = errors.New("kwal: record: unsupported format version")
	// ErrChecksum reports a kwal record whose record CRC does not match.
	ErrChecksum = errors.New("kwal: record: checksum mismatch")
	// ErrMalformed reports a kwal record whose header fields contradict
	// each other.
	ErrMalformed = errors.New("kwal: record: malformed header")
	// ErrTooLarge reports an entry larger than MaxEntrySize.
	ErrTooLarge = errors.New("kwal: record: entry too large")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of data, as stored in the entry CRC field.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// Header is the decoded key of a kwal record.
type Header struct {
	Kind     Kind
	Region   uint64
	Epoch    uint64 // the owner epoch of the region its writer held (0: never claimed)
	Seq      uint32 // the part's index within its entry
	Size     uint32 // the whole entry's length
	EntryCRC uint32 // CRC-32C of the whole entry's data
}

// Part is one record's worth of an entry: its header and its data. A part
// from Split or Decode remembers its data's CRC-32C; Key and AppendKey
// combine the record CRC from it, so the bytes of Data must not change in
// place before the part is encoded (Split's data must not change until
// its parts are written anyway). Data set to another slice is summed anew.
type Part struct {
	Header
	Data []byte
	// crc is CRC-32C of Data as Split or Decode set it (crcOf): the
	// record's and the entry's CRCs are combined from it rather than
	// summed over Data again (crc.go). It counts only while Data is the
	// slice it was summed over: a caller may put other data in a part.
	crc crcOf
}

// crcOf is the CRC-32C of one slice, known by its start and length.
type crcOf struct {
	ptr *byte
	n   int
	crc uint32
}

func sum(data []byte) crcOf {
	return crcOf{ptr: unsafe.SliceData(data), n: len(data), crc: Checksum(data)}
}

// dataCRC returns CRC-32C of p.Data, summed only if Split or Decode did not
// sum it already.
func (p *Part) dataCRC() uint32 {
	if p.crc.ptr == unsafe.SliceData(p.Data) && p.crc.n == len(p.Data) {
		return p.crc.crc
	}
	return Checksum(p.Data)
}

// KeyLen is the length of the part's key: KeySize for epoch 0,
// KeySizeEpoch otherwise.
func (h *Header) KeyLen() int {
	if h.Epoch == 0 {
		return KeySize
	}
	return KeySizeEpoch
}

// Key encodes the part's key (KeyLen bytes), including the record CRC over
// the key and the part's data.
func (p *Part) Key() []byte {
	key := make([]byte, p.KeyLen())
	p.putKey(key)
	return key
}

// AppendKey appends the part's key (KeyLen bytes) to dst, so that many
// keys can share one allocation.
func (p *Part) AppendKey(dst []byte) []byte {
	n, k := len(dst), p.KeyLen()
	dst = append(dst, make([]byte, k)...)
	p.putKey(dst[n : n+k])
	return dst
}

func (p *Part) putKey(key []byte) {
	copy(key[0:2], magic[:])
	key[2] = 1
	key[3] = byte(p.Kind)
	binary.BigEndian.PutUint64(key[4:12], p.Region)
	f := key[12:]
	if p.Epoch != 0 {
		key[2] = 2
		binary.BigEndian.PutUint64(key[12:20], p.Epoch)
		f = key[20:]
	}
	binary.BigEndian.PutUint32(f[0:4], p.Seq)
	binary.BigEndian.PutUint32(f[4:8], p.Size)
	binary.BigEndian.PutUint32(f[8:12], p.EntryCRC)
	binary.BigEndian.PutUint32(f[12:16], recordCRC(key, p.dataCRC(), len(p.Data)))
}

// MaxPartSize returns the largest part a batch of maxBatchBytes can carry.
func MaxPartSize(maxBatchBytes int) int { return maxBatchBytes - Overhead }

// Split turns one entry into the parts that carry it, each small enough for
// a record batch of maxBatchBytes. Parts share data's memory: data must not
// change until the parts are written. An empty entry is one whole part.
func Split(region uint64, data []byte, maxBatchBytes int) ([]Part, error) {
	if maxBatchBytes < MinBatchBytes {
		return nil, kwalerr.Errorf("record: batch limit %d is below the minimum %d", maxBatchBytes, MinBatchBytes)
	}
	if uint64(len(data)) > MaxEntrySize {
		return nil, kwalerr.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), uint64(MaxEntrySize))
	}
	max := MaxPartSize(maxBatchBytes)
	if len(data) <= max {
		c := sum(data)
		h := Header{Kind: KindWhole, Region: region, Size: uint32(len(data)), EntryCRC: c.crc}
		return []Part{{Header: h, Data: data, crc: c}}, nil
	}
	h := Header{Region: region, Size: uint32(len(data))}
	n := (len(data) + max - 1) / max
	parts := make([]Part, n)
	var entry uint32 // the entry's CRC, combined from its parts'
	for i := range n {
		lo, hi := i*max, min((i+1)*max, len(data))
		h.Seq = uint32(i)
		switch i {
		case 0:
			h.Kind = KindFirst
		case n - 1:
			h.Kind = KindLast
		default:
			h.Kind = KindMiddle
		}
		c := sum(data[lo:hi:hi])
		parts[i] = Part{Header: h, Data: data[lo:hi:hi], crc: c}
		if i == 0 {
			entry = c.crc
		} else {
			entry = combine(entry, c.crc, hi-lo)
		}
	}
	for i := range parts {
		parts[i].EntryCRC = entry
	}
	return parts, nil
}

// IsKwal reports whether key looks like a kwal record's key (magic present).
// It does not verify anything else.
func IsKwal(key []byte) bool {
	return len(key) >= 2 && key[0] == magic[0] && key[1] == magic[1]
}

// Decode decodes a record's key and value into a part. The part's Data
// aliases value. Any input gives a part or an error, never a panic.
func Decode(key, value []byte) (Part, error) {
	if len(key) < KeySize || !IsKwal(key) {
		// As documented: a key shorter than a kwal key is not kwal's, even
		// if it happens to start with the magic.
		if IsKwal(key) {
			return Part{}, kwalerr.Errorf("%w: key of %d bytes has the magic but is shorter than %d", ErrNotKwal, len(key), KeySize)
		}
		return Part{}, kwalerr.Errorf("%w: key of %d bytes", ErrNotKwal, len(key))
	}
	size, f := KeySize, key[12:]
	var epoch uint64
	switch key[2] {
	case 1:
	case 2:
		size, f = KeySizeEpoch, key[20:]
		if len(key) >= KeySizeEpoch {
			epoch = binary.BigEndian.Uint64(key[12:20])
		}
	default:
		return Part{}, kwalerr.Errorf("%w: version %d, this build reads 1 to %d", ErrVersion, key[2], Version)
	}
	if len(key) != size {
		return Part{}, kwalerr.Errorf("%w: key of %d bytes, version %d keys are %d", ErrMalformed, len(key), key[2], size)
	}
	want := binary.BigEndian.Uint32(f[12:16])
	c := sum(value)
	if got := recordCRC(key, c.crc, len(value)); got != want {
		return Part{}, kwalerr.Errorf("%w: record CRC %08x, computed %08x", ErrChecksum, want, got)
	}
	if key[2] == 2 && epoch == 0 {
		return Part{}, kwalerr.Errorf("%w: version 2 key with epoch 0", ErrMalformed)
	}
	p := Part{
		Header: Header{
			Kind:     Kind(key[3]),
			Region:   binary.BigEndian.Uint64(key[4:12]),
			Epoch:    epoch,
			Seq:      binary.BigEndian.Uint32(f[0:4]),
			Size:     binary.BigEndian.Uint32(f[4:8]),
			EntryCRC: binary.BigEndian.Uint32(f[8:12]),
		},
		Data: value,
		crc:  c,
	}
	if err := p.check(); err != nil {
		return Part{}, err
	}
	return p, nil
}

// check verifies that the header fields agree with each other and with the
// part's data.
func (p *Part) check() error {
	switch p.Kind {
	case KindWhole:
		if p.Seq != 0 {
			return kwalerr.Errorf("%w: whole record with seq %d", ErrMalformed, p.Seq)
		}
		if uint64(len(p.Data)) != uint64(p.Size) {
			return kwalerr.Errorf("%w: whole record of %d bytes declares size %d", ErrMalformed, len(p.Data), p.Size)
		}
		if p.dataCRC() != p.EntryCRC {
			return kwalerr.Errorf("%w: whole record data does not match its entry CRC %08x", ErrChecksum, p.EntryCRC)
		}
	case KindFirst:
		if p.Seq != 0 {
			return kwalerr.Errorf("%w: first part with seq %d", ErrMalformed, p.Seq)
		}
		fallthrough
	case KindMiddle, KindLast:
		if p.Kind != KindFirst && p.Seq == 0 {
			return kwalerr.Errorf("%w: %s part with seq 0", ErrMalformed, p.Kind)
		}
		if uint64(len(p.Data)) > uint64(p.Size) {
			return kwalerr.Errorf("%w: %s part of %d bytes exceeds its entry size %d", ErrMalformed, p.Kind, len(p.Data), p.Size)
		}
	case KindClaim:
		if p.Seq != 0 || p.Epoch == 0 {
			return kwalerr.Errorf("%w: claim with seq %d, epoch %d", ErrMalformed, p.Seq, p.Epoch)
		}
		if uint64(len(p.Data)) != uint64(p.Size) {
			return kwalerr.Errorf("%w: claim of %d bytes declares size %d", ErrMalformed, len(p.Data), p.Size)
		}
		if p.dataCRC() != p.EntryCRC {
			return kwalerr.Errorf("%w: claim data does not match its CRC %08x", ErrChecksum, p.EntryCRC)
		}
	case KindMark:
		if p.Seq != 0 || p.Region != 0 || p.Epoch != 0 {
			return kwalerr.Errorf("%w: mark with seq %d, region %d", ErrMalformed, p.Seq, p.Region)
		}
		if uint64(len(p.Data)) != uint64(p.Size) {
			return kwalerr.Errorf("%w: mark of %d bytes declares size %d", ErrMalformed, len(p.Data), p.Size)
		}
		if p.dataCRC() != p.EntryCRC {
			return kwalerr.Errorf("%w: mark data does not match its CRC %08x", ErrChecksum, p.EntryCRC)
		}
		if _, err := DecodeMark(p.Data); err != nil {
			return err
		}
	default:
		return kwalerr.Errorf("%w: unknown kind %d", ErrMalformed, uint8(p.Kind))
	}
	return nil
}
