package kafka

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchesWeight: the size sample weighs the complete batches of a
// response (a partial batch at the end, as a byte limit leaves it, is left
// out) over the offsets they span; a response with no complete batch
// weighs nothing.
func TestBatchesWeight(t *testing.T) {
	raw := batches([]int64{10, 15}, []int32{5, 3}, []bool{false, false})
	w, ok := batchesWeight(raw)
	require.True(t, ok)
	require.InDelta(t, float64(len(raw))/8, w, 1e-9)
	w, ok = batchesWeight(raw[:len(raw)-1])
	require.True(t, ok, "the first batch is complete")
	require.InDelta(t, float64(len(raw))/2/5, w, 1e-9)
	_, ok = batchesWeight(raw[:60])
	require.False(t, ok)
	_, ok = batchesWeight(nil)
	require.False(t, ok)
}

// FuzzBatchesWeight feeds the size sample's header walk arbitrary bytes
// (it reads what the broker sent): it never panics, and a weight it
// reports is positive and finite. Whole batches built from the seed weigh
// their bytes over their offsets.
func FuzzBatchesWeight(f *testing.F) {
	f.Add(batches([]int64{0, 3}, []int32{3, 1}, []bool{false, true}), uint64(0))
	f.Add([]byte{}, uint64(1))
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64) {
		if w, ok := batchesWeight(raw); ok {
			require.Positive(t, w)
			require.False(t, math.IsInf(w, 0) || math.IsNaN(w))
		}
		rng := rand.New(rand.NewPCG(seed, uint64(len(raw))))
		var bases []int64
		var ns []int32
		var ctl []bool
		off := int64(rng.IntN(1000))
		first := off
		for range 1 + rng.IntN(8) {
			n := int32(1 + rng.IntN(10))
			bases, ns, ctl = append(bases, off), append(ns, n), append(ctl, false)
			off += int64(n)
		}
		whole := batches(bases, ns, ctl)
		w, ok := batchesWeight(whole)
		require.True(t, ok)
		require.InDelta(t, float64(len(whole))/float64(off-first), w, 1e-9)
	})
}
