package record

import (
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCombine: the CRC-32C of a concatenation combined from its pieces'
// CRCs is the CRC summed over it, for pieces of any length (empty, one
// byte, around a power of two, a few MiB), and a record's CRC combined from
// its data's is the one summed over its key's 24 bytes and its data.
func TestCombine(t *testing.T) {
	rng := newRand(11)
	lengths := []int{0, 1, 2, 7, 8, 9, 24, 255, 256, 1023, 1024, 1025, 2048, 4096 + 3, 65536, 1 << 20, 3<<20 + 17}
	for range 40 {
		lengths = append(lengths, rng.IntN(1<<16))
	}
	for _, la := range []int{0, 1, 24, 1000} {
		a := randBytes(rng, la)
		for _, lb := range lengths {
			b := randBytes(rng, lb)
			want := crc32.Update(Checksum(a), castagnoli, b)
			require.Equal(t, want, combine(Checksum(a), Checksum(b), len(b)), "len(A)=%d len(B)=%d", la, lb)
		}
	}
	key := randBytes(rng, KeySize)
	for _, n := range lengths {
		data := randBytes(rng, n)
		want := crc32.Update(crc32.Checksum(key[:24], castagnoli), castagnoli, data)
		require.Equal(t, want, recordCRC(key, Checksum(data), len(data)), "data of %d bytes", n)
	}
}

// TestPartCRCFollowsItsData: a part remembers its data's CRC only for the
// slice it summed; a caller that puts other data in the part gets a key
// and checks summed over that data.
func TestPartCRCFollowsItsData(t *testing.T) {
	p := mustSplit(t, 1, []byte("hello, world"), 1<<20)[0]
	require.Equal(t, Checksum(p.Data), p.dataCRC())
	p.Data = []byte("another entry")
	p.Size, p.EntryCRC = uint32(len(p.Data)), Checksum(p.Data)
	require.Equal(t, Checksum(p.Data), p.dataCRC())
	got, err := Decode(p.Key(), p.Data)
	require.NoError(t, err)
	require.Equal(t, p.Data, got.Data)
	p.Data = p.Data[:4] // the same start, another length
	require.Equal(t, Checksum(p.Data), p.dataCRC())
}
