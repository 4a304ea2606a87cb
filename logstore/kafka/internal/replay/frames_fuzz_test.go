package replay

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batches encodes record batches at the given base offsets, each of n
// offsets with the given attributes, as a fetch response carries them.
func batches(bases []int64, n []int32, attrs []int16) []byte {
	var raw []byte
	for i, base := range bases {
		b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: n[i] - 1, NumRecords: n[i], Records: make([]byte, 7), Attributes: attrs[i]}
		b.Length = int32(len(b.AppendTo(nil)) - 12)
		raw = b.AppendTo(raw)
	}
	return raw
}

// TestFrameFacts: the spans are exactly the control batches' offsets, and
// a response is compressed when any of its complete batches names a codec;
// a partial batch at the end of a response is left out.
func TestFrameFacts(t *testing.T) {
	const control, lz4 = 0x20, 0x03
	raw := batches([]int64{0, 3, 4, 9}, []int32{3, 1, 5, 2}, []int16{0, control, 0, control})
	spans, compressed, plain := frameFacts(raw)
	require.Equal(t, []offsetSpan{{3, 4}, {9, 11}}, spans)
	require.False(t, compressed)
	require.True(t, plain)
	spans, _, _ = frameFacts(raw[:len(raw)-1])
	require.Equal(t, []offsetSpan{{3, 4}}, spans)
	spans, compressed, plain = frameFacts(nil)
	require.Empty(t, spans)
	require.False(t, compressed || plain)

	raw = batches([]int64{0, 3, 4}, []int32{3, 1, 5}, []int16{0, control, lz4})
	_, compressed, plain = frameFacts(raw)
	require.True(t, compressed && plain)
	_, compressed, _ = frameFacts(raw[:len(raw)-1])
	require.False(t, compressed, "the compressed batch is partial")
	_, compressed, plain = frameFacts(batches([]int64{0, 3}, []int32{3, 1}, []int16{lz4, 0x04}))
	require.True(t, compressed)
	require.False(t, plain)
}

// FuzzControlSpans feeds the batch-header walk arbitrary bytes (it reads
// what the broker sent): it never panics, and every span it returns is a
// non-empty run of non-negative offsets. Inputs built from whole batches
// give exactly their control batches, and are compressed exactly when one
// of them is.
func FuzzControlSpans(f *testing.F) {
	f.Add(batches([]int64{0, 3}, []int32{3, 1}, []int16{0, 0x20}), uint64(0))
	f.Add([]byte{}, uint64(1))
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64) {
		spans, _, _ := frameFacts(raw)
		for _, s := range spans {
			require.GreaterOrEqual(t, s.from, int64(0))
			require.Less(t, s.from, s.to)
		}
		// A well-formed response derived from the seed.
		rng := rand.New(rand.NewPCG(seed, uint64(len(raw))))
		var bases []int64
		var ns []int32
		var attrs []int16
		var want []offsetSpan
		wantCompressed, wantPlain := false, false
		off := int64(rng.IntN(1000))
		for range rng.IntN(8) {
			n := int32(1 + rng.IntN(10))
			var a int16
			if rng.IntN(3) == 0 {
				a = 0x20
				want = append(want, offsetSpan{off, off + int64(n)})
			}
			if codec := int16(rng.IntN(5)); codec > 0 && rng.IntN(2) == 0 {
				a |= codec
			}
			wantCompressed, wantPlain = wantCompressed || a&7 != 0, wantPlain || a&7 == 0
			bases, ns, attrs = append(bases, off), append(ns, n), append(attrs, a)
			off += int64(n)
		}
		spans, compressed, plain := frameFacts(batches(bases, ns, attrs))
		require.Equal(t, want, spans)
		require.Equal(t, wantCompressed, compressed)
		require.Equal(t, wantPlain, plain)
	})
}
