package record

import (
	"hash/crc32"
	"sync"
)

// One pass per byte. A record's CRC covers its key's first 24 bytes and its
// value, and its entry's CRC covers the entry's data: a whole record's value
// again, or the parts' values one after the other. Checked as written, each
// data byte would go through CRC-32C twice on both paths, and CRC-32C is a
// large part of a scan's client CPU (in a CPU profile of a scan). CRC-32C
// is linear, so the CRC of a concatenation follows from the CRCs of its
// pieces and the second piece's length:
//
//	crc(A || B) = shift(crc(A), len(B)) ^ crc(B)
//
// where shift(c, n) is what n zero bytes do to a CRC register holding c
// (with the standard pre- and post-inversion the inversions cancel out).
// shift is linear over GF(2) in c: for each power of two 2^k a table maps
// c's four bytes to their images (shiftTables), and shift(c, n) applies the
// table of each bit set in n. So each data byte is summed once, into the
// value's CRC, and the record's and the entry's CRCs are combined from it
// in a few table lookups (a 2 KiB value: one), whatever the length, where a
// second pass would cost time in proportion to the bytes.

// castagnoliPoly is CRC-32C's polynomial, bit-reversed (the register
// shifts right).
const castagnoliPoly = 0x82F63B78

// shiftTable maps a CRC register, a byte at a time, to its image after a
// fixed number of zero bytes.
type shiftTable [4][256]uint32

func (t *shiftTable) apply(c uint32) uint32 {
	return t[0][c&0xff] ^ t[1][(c>>8)&0xff] ^ t[2][(c>>16)&0xff] ^ t[3][c>>24]
}

// shiftTables[k] shifts by 2^k zero bytes; built on first use (128 KiB).
var shiftTables = sync.OnceValue(func() *[32]shiftTable {
	var ts [32]shiftTable
	// op[i] is the image of the register bit i: a linear map by columns.
	var op [32]uint32
	for i := range op {
		c := uint32(1) << i
		for range 8 { // one zero byte
			if c&1 != 0 {
				c = c>>1 ^ castagnoliPoly
			} else {
				c >>= 1
			}
		}
		op[i] = c
	}
	apply := func(op *[32]uint32, c uint32) uint32 {
		var r uint32
		for i := 0; c != 0; i, c = i+1, c>>1 {
			if c&1 != 0 {
				r ^= op[i]
			}
		}
		return r
	}
	for k := range ts {
		for b := range 4 {
			for v := range 256 {
				ts[k][b][v] = apply(&op, uint32(v)<<(8*b))
			}
		}
		var sq [32]uint32 // op twice: the shift by 2^(k+1) bytes
		for i := range op {
			sq[i] = apply(&op, op[i])
		}
		op = sq
	}
	return &ts
})

// shift returns what n zero bytes do to a CRC-32C register holding c.
func shift(c uint32, n uint64) uint32 {
	ts := shiftTables()
	for k := 0; n != 0 && k < len(ts); k, n = k+1, n>>1 {
		if n&1 != 0 {
			c = ts[k].apply(c)
		}
	}
	return c
}

// combine returns the CRC-32C of A || B from crcA = CRC-32C(A), crcB =
// CRC-32C(B) and B's length. lenB is at most MaxEntrySize (an entry's or a
// part's length): the tables shift by up to 2^32-1 bytes.
func combine(crcA, crcB uint32, lenB int) uint32 {
	return shift(crcA, uint64(lenB)) ^ crcB
}

// recordCRC is a record's CRC: CRC-32C of the key up to its rCRC field followed by data, whose
// own CRC-32C is dataCRC.
func recordCRC(key []byte, dataCRC uint32, dataLen int) uint32 {
	return combine(crc32.Checksum(key[:len(key)-4], castagnoli), dataCRC, dataLen)
}
