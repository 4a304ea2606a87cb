package kafka

import (
	"encoding/binary"
	"iter"
	"math"
)

// batchFrame is what the framing of one record batch in a fetch response
// says. Every batch format frames a batch as base offset (8 bytes), length
// (4) and that many bytes; format 2 (the only one kwal's brokers write, and
// the only one with control batches) has its attributes at bytes 21-22
// (bit 0x20: control) and its last offset delta at bytes 23-26, inside a
// 61-byte header.
type batchFrame struct {
	base int64 // base offset (a log's is never negative; the walk does not check)
	size int64 // bytes of the whole batch, framing included
	// v2: format 2, with a whole header; control and next are valid.
	v2      bool
	control bool
	next    int64 // one past the batch's last offset; 0 when it would overflow or lies below base
}

// batchFrames walks the complete batches at the start of raw (a fetch
// response's record bytes, which the broker sent: any bytes), stopping at
// a partial batch or a frame too short to be one.
func batchFrames(raw []byte) iter.Seq[batchFrame] {
	return func(yield func(batchFrame) bool) {
		for len(raw) >= 17 {
			length := int64(int32(binary.BigEndian.Uint32(raw[8:12])))
			if length < 5 || 12+length > int64(len(raw)) {
				return // a partial batch at the end of the response
			}
			b := batchFrame{base: int64(binary.BigEndian.Uint64(raw[0:8])), size: 12 + length}
			if raw[16] == 2 && b.size >= 61 {
				b.v2 = true
				b.control = binary.BigEndian.Uint16(raw[21:23])&0x20 != 0
				last := int64(int32(binary.BigEndian.Uint32(raw[23:27])))
				if b.base >= 0 && last >= 0 && b.base <= math.MaxInt64-last-1 {
					b.next = b.base + last + 1
				}
			}
			if !yield(b) {
				return
			}
			raw = raw[b.size:]
		}
	}
}
