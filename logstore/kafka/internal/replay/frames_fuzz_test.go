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

// TestControlSpans: the spans are exactly the control batches' offsets;
// a partial batch at the end of a response is left out.
func TestControlSpans(t *testing.T) {
	const control = 0x20
	raw := batches([]int64{0, 3, 4, 9}, []int32{3, 1, 5, 2}, []int16{0, control, 0, control})
	require.Equal(t, []offsetSpan{{3, 4}, {9, 11}}, controlSpans(raw))
	require.Equal(t, []offsetSpan{{3, 4}}, controlSpans(raw[:len(raw)-1]))
	require.Empty(t, controlSpans(nil))
}

// FuzzControlSpans feeds the batch-header walk arbitrary bytes (it reads
// what the broker sent): it never panics, and every span it returns is a
// non-empty run of non-negative offsets. Inputs built from whole batches
// give exactly their control batches.
func FuzzControlSpans(f *testing.F) {
	f.Add(batches([]int64{0, 3}, []int32{3, 1}, []int16{0, 0x20}), uint64(0))
	f.Add([]byte{}, uint64(1))
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64) {
		spans := controlSpans(raw)
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
			bases, ns, attrs = append(bases, off), append(ns, n), append(attrs, a)
			off += int64(n)
		}
		require.Equal(t, want, controlSpans(batches(bases, ns, attrs)))
	})
}
