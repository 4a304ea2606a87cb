package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/kwal/kwal/logstore"
)

// Tag names one ledger entry: the region it was appended to, the writer
// that appended it, and that writer's sequence number for it. A writer's
// sequence numbers increase with every entry it appends, across regions.
type Tag struct {
	Region logstore.RegionID
	Writer uint32
	Seq    uint64
}

func (t Tag) String() string {
	return fmt.Sprintf("region %d writer %d seq %d", t.Region, t.Writer, t.Seq)
}

// Payload layout, big-endian:
//
//	magic "KWLG" | region u64 | writer u32 | seq u64 | length u32 | filler ... | CRC-32C u32
//
// length is the payload's whole length; the CRC covers every byte before
// it. The filler is derived from the tag, so equal tags give equal bytes.
const (
	magic      = "KWLG"
	headerSize = 4 + 8 + 4 + 8 + 4
	// MinPayloadSize is the smallest payload Encode produces.
	MinPayloadSize = headerSize + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrNotLedger is matched by Decode's error for data that is not a ledger
// payload or fails its checksum.
var ErrNotLedger = errors.New("ledger: not a ledger payload")

// Encode returns the payload of t, size bytes long (at least
// MinPayloadSize).
func Encode(t Tag, size int) []byte {
	size = max(size, MinPayloadSize)
	b := make([]byte, size)
	copy(b, magic)
	binary.BigEndian.PutUint64(b[4:], uint64(t.Region))
	binary.BigEndian.PutUint32(b[12:], t.Writer)
	binary.BigEndian.PutUint64(b[16:], t.Seq)
	binary.BigEndian.PutUint32(b[24:], uint32(size))
	x := uint64(t.Region)*0x9E3779B97F4A7C15 ^ uint64(t.Writer)<<32 ^ t.Seq
	for i := headerSize; i < size-4; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	binary.BigEndian.PutUint32(b[size-4:], crc32.Checksum(b[:size-4], castagnoli))
	return b
}

// Decode returns the tag of a payload made by Encode, or an error matching
// ErrNotLedger that says what is wrong.
func Decode(b []byte) (Tag, error) {
	if len(b) < MinPayloadSize {
		return Tag{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrNotLedger, len(b), MinPayloadSize)
	}
	if string(b[:4]) != magic {
		return Tag{}, fmt.Errorf("%w: magic %q", ErrNotLedger, b[:4])
	}
	if n := binary.BigEndian.Uint32(b[24:]); int(n) != len(b) {
		return Tag{}, fmt.Errorf("%w: length field %d, payload has %d bytes", ErrNotLedger, n, len(b))
	}
	want := binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(b[:len(b)-4], castagnoli); got != want {
		return Tag{}, fmt.Errorf("%w: CRC-32C %08x, stored %08x", ErrNotLedger, got, want)
	}
	return Tag{
		Region: logstore.RegionID(binary.BigEndian.Uint64(b[4:])),
		Writer: binary.BigEndian.Uint32(b[12:]),
		Seq:    binary.BigEndian.Uint64(b[16:]),
	}, nil
}
