package record

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// crc32c is an independent CRC-32C (Castagnoli) table, so the tests do not
// trust the package's own checksum helpers to check the package.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// rawKey builds a version 1 key by hand, following the layout drawn in the
// package comment byte by byte, with a correct record CRC over key[0:24] and
// value. It lets tests present Decode with headers that Split never writes,
// so the header consistency checks are reached past the CRC check.
func rawKey(kind byte, region uint64, seq, size, entryCRC uint32, value []byte) []byte {
	key := make([]byte, KeySize)
	key[0], key[1] = 'K', 'W'
	key[2] = 1
	key[3] = kind
	binary.BigEndian.PutUint64(key[4:12], region)
	binary.BigEndian.PutUint32(key[12:16], seq)
	binary.BigEndian.PutUint32(key[16:20], size)
	binary.BigEndian.PutUint32(key[20:24], entryCRC)
	crc := crc32.Update(crc32.Checksum(key[:24], crc32c), crc32c, value)
	binary.BigEndian.PutUint32(key[24:28], crc)
	return key
}

// randBytes returns n bytes drawn from rng.
func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// newRand returns a deterministic generator for seed.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// roundTrip encodes p as a Kafka record (key, value) and decodes it back,
// the way the store reads it. The value is a fresh copy of p.Data.
func roundTrip(t testing.TB, p Part) Part {
	t.Helper()
	value := append([]byte(nil), p.Data...)
	got, err := Decode(p.Key(), value)
	require.NoError(t, err)
	return got
}

// mustSplit splits data; t may be nil (generators), then it panics on error.
func mustSplit(t testing.TB, region uint64, data []byte, limit int) []Part {
	parts, err := Split(region, data, limit)
	if t == nil {
		if err != nil {
			panic(err)
		}
		return parts
	}
	t.Helper()
	require.NoError(t, err)
	return parts
}
