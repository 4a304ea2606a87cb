package claim

import (
	"math/rand/v2"
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
	good.At = 5
	got, err := Decode(Key("ns", 7), Encode(good))
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

func FuzzDecode(f *testing.F) {
	good := ev(OpCommit, 2, "a")
	good.At = 5
	f.Add(Key("ns", 7), Encode(good))
	f.Add([]byte("x"), []byte(`{"op":"pending"}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		e, err := Decode(key, value)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
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
