package index

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// modelRuns turns a set of offsets into its runs in [from, to).
func modelRuns(set map[int64]bool, from, to int64) []span {
	var out []span
	for o := from; o < to; o++ {
		if !set[o] {
			continue
		}
		if n := len(out); n > 0 && out[n-1].end == o {
			out[n-1].end++
		} else {
			out = append(out, span{o, o + 1})
		}
	}
	return out
}

func listRuns(l *runList, from, to int64) []span {
	var out []span
	l.each(from, to, func(s, e int64) bool {
		if n := len(out); n > 0 && out[n-1].end == s {
			panic("touching runs returned")
		}
		out = append(out, span{s, e})
		return true
	})
	return out
}

func TestRunListAgainstModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var l runList
		set := map[int64]bool{}
		next := int64(rng.IntN(100))
		low := int64(0)
		for op := 0; op < 3000; op++ {
			switch k := rng.IntN(20); {
			case k < 16: // append
				s := next + int64(rng.IntN(3))*int64(rng.IntN(200))
				if rng.IntN(4) == 0 {
					s = next // continue the last run
				}
				n := int64(1 + rng.IntN(30))
				if rng.IntN(3) == 0 {
					n = 1
				}
				l.appendRun(s, s+n)
				for o := s; o < s+n; o++ {
					set[o] = true
				}
				next = s + n
			case k < 18: // drop below
				x := low + int64(rng.IntN(int(next-low)+50))
				l.dropBelow(x)
				for o := range set {
					if o < x {
						delete(set, o)
					}
				}
				low = max(low, x)
			default: // check a window
				from := int64(rng.IntN(int(next + 10)))
				to := from + int64(rng.IntN(2000))
				require.Equal(t, modelRuns(set, from, to), listRuns(&l, from, to), "seed %d op %d", seed, op)
			}
			require.Equal(t, int64(len(set)), l.entries, "seed %d op %d", seed, op)
		}
		all := modelRuns(set, 0, next)
		require.Equal(t, all, listRuns(&l, 0, next+1))
		require.Equal(t, len(all), l.runs)
		require.Equal(t, len(all) == 0, l.empty())
	}
}

func TestRunListEachStops(t *testing.T) {
	t.Parallel()
	var l runList
	for i := range int64(1000) {
		l.appendRun(i*3, i*3+1)
	}
	n := 0
	l.each(0, 3000, func(s, e int64) bool { n++; return n < 5 })
	require.Equal(t, 5, n)
	require.Equal(t, int64(1000), l.entries)
	require.Equal(t, int64(2998), l.lastEnd())
	// Appending below the end ignores the overlapping part.
	l.appendRun(2990, 3005)
	require.Equal(t, []span{{2994, 2995}, {2997, 3005}}, listRuns(&l, 2994, 4000))
}
