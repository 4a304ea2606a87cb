package claim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ev(op Op, epoch uint64, token string) Event {
	return Event{Op: op, Namespace: "ns", Region: 7, TopicID: "t1", Epoch: epoch, Token: token}
}

var id7 = ID{"ns", "t1", 7}

// TestRacingClaimsTheFirstWins: of two pending claims of one epoch the
// log's first counts; the loser's commit is ignored, and so is a commit of
// a pending claim that a newer one overtook.
func TestRacingClaimsTheFirstWins(t *testing.T) {
	s := NewState()
	require.True(t, s.Apply(0, ev(OpPending, 1, "a")))
	require.False(t, s.Apply(1, ev(OpPending, 1, "b")), "same epoch, later in the log")
	c := ev(OpCommit, 1, "b")
	c.At = 10
	require.False(t, s.Apply(2, c), "the loser's commit")
	c.Token = "a"
	require.True(t, s.Apply(3, c))
	r := s.Region(id7)
	require.Equal(t, []Committed{{Epoch: 1, At: 10, Offset: 3}}, r.Claims)
	require.Nil(t, r.Pending)
	require.Equal(t, 2, r.Lost)

	// Epoch 2 pending, overtaken by 3 before it commits: 2's commit is
	// ignored, writers of 2 are fenced by 3's pending claim.
	require.True(t, s.Apply(4, ev(OpPending, 2, "x")))
	require.True(t, s.Apply(5, ev(OpPending, 3, "y")))
	c2 := ev(OpCommit, 2, "x")
	c2.At = 20
	require.False(t, s.Apply(6, c2))
	r = s.Region(id7)
	require.Equal(t, uint64(3), r.MaxEpoch())
	require.Len(t, r.Claims, 1)

	// A commit whose At is not above the last one's is refused.
	c3 := ev(OpCommit, 3, "y")
	c3.At = 10
	require.False(t, s.Apply(7, c3))
	c3.At = 30
	require.True(t, s.Apply(8, c3))
	require.True(t, s.Apply(9, ev(OpRelease, 3, "y")))
	require.True(t, s.Region(id7).Released)
	require.False(t, s.Apply(10, ev(OpRelease, 2, "x")), "an older epoch cannot release")

	// Another incarnation of the topic has its own claims.
	other := ev(OpPending, 1, "z")
	other.TopicID = "t2"
	require.True(t, s.Apply(11, other))
	require.Equal(t, uint64(3), s.Region(id7).MaxEpoch())
	require.Len(t, s.Regions("ns"), 2)
	require.Equal(t, int64(12), s.Next)
}

// TestFencedMatchesTheRule checks Fenced against the rule as written
// ("fenced when some committed claim below the entry has a greater epoch")
// over random claim lists and entries.
func TestFencedMatchesTheRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var claims []Committed
		at, epoch := int64(-1), uint64(0)
		for range rng.IntN(6) {
			at += 1 + rng.Int64N(20)
			epoch += 1 + uint64(rng.IntN(3))
			claims = append(claims, Committed{Epoch: epoch, At: at})
		}
		off, e := rng.Int64N(at+30), uint64(rng.IntN(int(epoch)+2))
		want := false
		for _, c := range claims {
			if c.At < off && c.Epoch > e {
				want = true
			}
		}
		require.Equal(t, want, Fenced(claims, off, e), "claims %v, entry at %d epoch %d", claims, off, e)
	}
}

func TestDecode(t *testing.T) {
	good := ev(OpCommit, 2, "a")
	good.At, good.V = 5, Version
	got, err := Decode(Key("ns", 7), Encode(good))
	require.NoError(t, err)
	require.Equal(t, good, got)
	// Events written before versions existed read as version 1.
	got, err = Decode(Key("ns", 7), []byte(`{"op":"commit","ns":"ns","region":7,"topic_id":"t1","epoch":2,"token":"a","at":5}`))
	require.NoError(t, err)
	require.Equal(t, good, got)
	for name, bad := range map[string]Event{
		"op":       {Op: "steal", Namespace: "ns", Region: 7, TopicID: "t", Epoch: 1, Token: "a"},
		"epoch 0":  {Op: OpPending, Namespace: "ns", Region: 7, TopicID: "t", Token: "a"},
		"no topic": {Op: OpPending, Namespace: "ns", Region: 7, Epoch: 1, Token: "a"},
		"at < 0":   {Op: OpCommit, Namespace: "ns", Region: 7, TopicID: "t", Epoch: 1, Token: "a", At: -1},
		"key":      {Op: OpPending, Namespace: "ns", Region: 8, TopicID: "t", Epoch: 1, Token: "a"},
	} {
		_, err := Decode(Key("ns", 7), Encode(bad))
		require.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err = Decode(Key("ns", 7), []byte("{"))
	require.ErrorIs(t, err, ErrMalformed)
}

// TestFoldSortsRecords: a record that names no region is skipped; a
// region's record that does not decode, or comes in a newer format,
// makes only that region unreadable, until a skip event names it; every
// other region folds on.
func TestFoldSortsRecords(t *testing.T) {
	s := NewState()
	fold := func(off int64, key []byte, e Event) Kind {
		k, err := s.Fold(off, key, Encode(e))
		if k == Folded {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, fmt.Sprintf("offset %d", off))
		}
		return k
	}
	require.Equal(t, Folded, fold(0, Key("ns", 7), ev(OpPending, 1, "a")))
	for off, key := range [][]byte{nil, []byte("ns"), []byte("ns/"), []byte("ns/07"), []byte("ns/-1"), []byte("n s/1"), []byte("/1"), []byte("a/b/c")} {
		k, err := s.Fold(int64(1+off), key, []byte("whatever"))
		require.Equal(t, Foreign, k, "key %q", key)
		require.Error(t, err)
	}
	other := RegionKey{"ns", 8}
	k, err := s.Fold(20, Key("ns", 8), []byte("not json"))
	require.Equal(t, Bad, k)
	require.ErrorIs(t, err, ErrMalformed)
	newer := []byte(`{"v":2,"op":"pending","ns":"ns","region":9,"topic_id":"t1","epoch":5,"token":"q"}`)
	k, err = s.Fold(21, Key("ns", 9), newer)
	require.Equal(t, Bad, k)
	require.ErrorIs(t, err, ErrNewerFormat)
	unknownOp := []byte(`{"op":"handover","ns":"ns","region":8,"topic_id":"t1","epoch":5,"token":"q"}`)
	k, _ = s.Fold(22, Key("ns", 8), unknownOp)
	require.Equal(t, Bad, k)

	// Region 7 is untouched and folds on.
	c := ev(OpCommit, 1, "a")
	c.At = 3
	require.Equal(t, Folded, fold(23, Key("ns", 7), c))
	require.Len(t, s.Region(id7).Claims, 1)
	require.Empty(t, s.Unreadable(RegionKey{"ns", 7}))
	require.Equal(t, []Unreadable{{20, s.Unreadable(other)[0].Err}, {22, s.Unreadable(other)[1].Err}}, s.Unreadable(other))
	require.ErrorIs(t, s.Unreadable(other)[0].Error(other), ErrUnreadable)
	require.ErrorContains(t, s.Unreadable(other)[0].Error(other), "offset 20")

	// A skip of an offset that is not unreadable changes nothing; skips of
	// both make region 8 readable again.
	skip := Event{Op: OpSkip, Namespace: "ns", Region: 8, Skip: 21}
	require.Equal(t, Folded, fold(24, Key("ns", 8), skip))
	require.Len(t, s.Unreadable(other), 2)
	skip.Skip = 20
	fold(25, Key("ns", 8), skip)
	skip.Skip = 22
	fold(26, Key("ns", 8), skip)
	require.Empty(t, s.Unreadable(other))
	require.Len(t, s.Unreadable(RegionKey{"ns", 9}), 1)
	require.Equal(t, int64(27), s.Next)
}

// randomState folds a random claims history of a few regions, with
// unreadable records and skips among them.
func randomState(rng *rand.Rand, events int) *State {
	s := NewState()
	for off := int64(0); off < int64(events); off++ {
		region := uint64(rng.IntN(5))
		e := Event{Namespace: []string{"a", "b"}[rng.IntN(2)], Region: region, TopicID: []string{"t1", "t2"}[rng.IntN(2)],
			Epoch: uint64(1 + rng.IntN(8)), Token: fmt.Sprint(rng.IntN(3)), Owner: fmt.Sprint("o", rng.IntN(3)), At: int64(rng.IntN(100)), LeaseMS: int64(rng.IntN(2) * 500), UnixMilli: int64(rng.IntN(1000))}
		switch rng.IntN(10) {
		case 0:
			_, _ = s.Fold(off, Key(e.Namespace, region), []byte("{"))
			continue
		case 1:
			e.Op, e.Skip = OpSkip, off-int64(rng.IntN(10))
		case 2:
			e.Op = OpRelease
		case 3, 4, 5:
			e.Op = OpPending
		default:
			e.Op = OpCommit
		}
		_, _ = s.Fold(off, Key(e.Namespace, region), Encode(e))
	}
	return s
}

// TestTrimmedSnapshotKeepsFencing: a state resumed from a snapshot
// trimmed at a log start fences every offset at or above it as the state
// did, keeps its epochs, and drops claims only of the trimmed topic.
func TestTrimmedSnapshotKeepsFencing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dropped := 0
	for range 200 {
		s := randomState(rng, 300)
		start := int64(rng.IntN(110))
		b, err := s.MarshalTrimmed(map[Topic]int64{{"a", "t1"}: start})
		require.NoError(t, err)
		got := NewState()
		require.NoError(t, got.UnmarshalBinary(b))
		for _, ns := range s.Namespaces() {
			for _, id := range s.Regions(ns) {
				r, after := s.Region(id), got.Region(id)
				if id.Namespace != "a" || id.TopicID != "t1" {
					require.Equal(t, len(r.Claims), len(after.Claims))
					continue
				}
				dropped += len(r.Claims) - len(after.Claims)
				require.Equal(t, r.MaxEpoch(), after.MaxEpoch())
				require.Equal(t, r.Last(), after.Last())
				for off := start; off < 110; off++ {
					for e := uint64(0); e < 10; e++ {
						require.Equal(t, Fenced(r.Claims, off, e), Fenced(after.Claims, off, e), "offset %d epoch %d start %d", off, e, start)
					}
				}
			}
		}
	}
	require.Positive(t, dropped, "the workload trims nothing: the test proves nothing")
}

// TestSnapshotRoundTrip: a state resumed from its snapshot answers as the
// state did, and re-encodes to the same bytes.
func TestSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		s := randomState(rng, rng.IntN(400))
		b, err := s.MarshalBinary()
		require.NoError(t, err)
		got := NewState()
		require.NoError(t, got.UnmarshalBinary(b))
		require.Equal(t, s.Next, got.Next)
		require.Equal(t, s.Namespaces(), got.Namespaces())
		require.Equal(t, s.AllUnreadable(), got.AllUnreadable())
		for _, ns := range s.Namespaces() {
			require.Equal(t, s.Regions(ns), got.Regions(ns))
			for _, id := range s.Regions(ns) {
				want := s.Region(id)
				if want.Pending != nil {
					p := *want.Pending
					p.At, p.Sealed, p.UnixMilli, p.Skip = 0, 0, 0, 0
					p.V, p.Namespace, p.TopicID, p.Region = Version, id.Namespace, id.TopicID, id.Region
					want.Pending = &p
				}
				require.Equal(t, want, got.Region(id))
			}
		}
		again, err := got.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, again)
		// Any change to the bytes is refused.
		if len(b) > 20 {
			bad := slices.Clone(b)
			bad[12+rng.IntN(len(b)-12)] ^= 1 << rng.IntN(8)
			require.ErrorIs(t, NewState().UnmarshalBinary(bad), ErrBadSnapshot)
		}
	}
}

func FuzzSnapshot(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 5, 50} {
		b, _ := randomState(rng, n).MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewState()
		if err := s.UnmarshalBinary(data); err != nil {
			require.ErrorIs(t, err, ErrBadSnapshot)
			return
		}
		b, err := s.MarshalBinary()
		require.NoError(t, err)
		again := NewState()
		require.NoError(t, again.UnmarshalBinary(b))
		require.Equal(t, s.Next, again.Next)
		s.Apply(s.Next, ev(OpPending, 1, "a"))
	})
}

func FuzzFold(f *testing.F) {
	good := ev(OpCommit, 2, "a")
	good.At = 5
	f.Add(Key("ns", 7), Encode(good))
	f.Add([]byte("ns/7"), []byte(`{"op":"skip","ns":"ns","region":7,"skip":3}`))
	f.Add([]byte("x"), []byte(`{"op":"pending"}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		s := NewState()
		k, err := s.Fold(3, key, value)
		require.Equal(t, int64(4), s.Next)
		switch k {
		case Folded:
			require.NoError(t, err)
		case Foreign:
			_, _, ok := ParseKey(key)
			require.False(t, ok)
		case Bad:
			require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrNewerFormat), "%v", err)
			ns, region, _ := ParseKey(key)
			require.Len(t, s.Unreadable(RegionKey{ns, region}), 1)
		}
	})
}

func FuzzDecode(f *testing.F) {
	good := ev(OpCommit, 2, "a")
	good.At = 5
	f.Add(Key("ns", 7), Encode(good))
	f.Add([]byte("x"), []byte(`{"op":"pending"}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		e, err := Decode(key, value)
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrNewerFormat), "%v", err)
			return
		}
		// What decodes re-encodes to an event that decodes the same, and
		// folds without panicking.
		again, err := Decode(key, Encode(e))
		require.NoError(t, err)
		require.Equal(t, e, again)
		NewState().Apply(0, e)
	})
}

// BenchmarkFoldHeap reports the heap a fold holds per region, with one
// claim per region and with twenty (-benchtime=1x).
func BenchmarkFoldHeap(b *testing.B) {
	for _, many := range []int{1, 20} {
		b.Run(fmt.Sprintf("claims=%d", many), func(b *testing.B) {
			const regions = 100_000
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				st := NewState()
				off := int64(0)
				for r := range regions {
					for c := 1; c <= many; c++ {
						ev := Event{Op: OpPending, Namespace: "ns", Region: uint64(r), TopicID: "0123456789abcdef0123456789abcdef", Epoch: uint64(c), Token: strconv.Itoa(c), Owner: fmt.Sprintf("datanode-%d:%d", r%50, c%7)}
						st.Apply(off, ev)
						ev.Op, ev.At = OpCommit, int64(c)
						st.Apply(off+1, ev)
						off += 2
					}
				}
				st.Changed()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/regions, "heap-bytes/region")
				runtime.KeepAlive(st)
			}
		})
	}
}
