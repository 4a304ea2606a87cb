package replay

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// claimedRegion is the only region fakeClaims gives claims to.
const claimedRegion = 1

// fakeClaims is a Host that knows the claims of claimedRegion only: its
// committed claims and the epoch of a pending one (0: none).
type fakeClaims struct {
	Host
	claims  []claim.Committed
	pending uint64
}

func (f *fakeClaims) Fenced(_ string, region uint64, offset int64, epoch uint64) bool {
	return region == claimedRegion && claim.Fenced(f.claims, offset, epoch)
}

func (f *fakeClaims) JudgeMark(topic string, region uint64, offset int64, epoch uint64) Verdict {
	switch {
	case f.Fenced(topic, region, offset, epoch):
		return MarkFenced
	case region == claimedRegion && f.pending > epoch:
		return MarkUndecided
	}
	return MarkCounts
}

func marksReads(t *testing.T, h Host) (*Reads, *index.Collector) {
	t.Helper()
	g, err := index.New(index.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	r := &Reads{opts: Options{Host: h, Index: g}, log: slog.New(slog.DiscardHandler)}
	r.marks.init()
	return r, g
}

// TestNoteMarkIgnoresFencedStatements protects the new owner's pruning
// from an old owner's marks: the index takes in a mark's statement of a
// region only where a record of the region with the statement's epoch at
// the mark's offset would not be fenced (epoch 0 included, with no special
// case), in Obsolete and prune marks alike; other regions' statements are
// unaffected.
func TestNoteMarkIgnoresFencedStatements(t *testing.T) {
	const topic = "t"
	h := &fakeClaims{claims: []claim.Committed{{Epoch: 2, At: 10}}}
	r, g := marksReads(t, h)
	obsolete := func(offset int64, region uint64, before int64, epoch uint64) {
		r.NoteMark(topic, 0, offset, record.Mark{Obsolete: []record.RegionPoint{{Region: region, Before: before, Epoch: epoch}}})
	}
	point := func(region uint64) int64 { return g.ObsoletePoint(topic, region) }

	obsolete(5, claimedRegion, 4, 1)
	require.Equal(t, int64(4), point(claimedRegion), "the old owner's mark below the claim counts")
	obsolete(12, claimedRegion, 20, 1)
	require.Equal(t, int64(4), point(claimedRegion), "the old owner's mark above the claim is fenced")
	obsolete(12, claimedRegion, 20, 0)
	require.Equal(t, int64(4), point(claimedRegion), "epoch 0 above a claim is fenced like any older epoch")
	obsolete(13, claimedRegion, 15, 2)
	require.Equal(t, int64(15), point(claimedRegion), "the owner's mark counts")
	obsolete(12, 2, 20, 0)
	require.Equal(t, int64(20), point(2), "a region never claimed is not fenced")

	r.NoteMark(topic, 0, 16, record.Mark{Prune: true, Point: 16, Obsolete: []record.RegionPoint{
		{Region: claimedRegion, Before: 30, Epoch: 1}, {Region: 2, Before: 25}}})
	assert.Equal(t, int64(15), point(claimedRegion), "a prune mark's fenced statement is ignored")
	assert.Equal(t, int64(25), point(2), "its other statements count")
	pm, ok := r.marks.known(topic)
	require.True(t, ok, "the prune mark is still the topic's proof; its statements are judged where used")
	assert.Equal(t, int64(16), pm.offset)
}

// TestPruneMarkProvesOnlyUnfencedStatements protects reads from below the
// log start: a prune mark's statement of a region proves the region lost
// nothing only when it is not fenced at the mark's offset; a region the
// table does not list had no record there.
func TestPruneMarkProvesOnlyUnfencedStatements(t *testing.T) {
	h := &fakeClaims{claims: []claim.Committed{{Epoch: 2, At: 10}}}
	at := func(offset int64) pruneMark {
		return pruneMark{offset: offset, m: record.Mark{Prune: true, Point: offset, Obsolete: []record.RegionPoint{
			{Region: claimedRegion, Before: 5, Epoch: 1}, {Region: 3, Before: 5}}}}
	}
	assert.True(t, at(9).covers(h, "t", claimedRegion, 6), "written below the claim: its statement stands")
	assert.False(t, at(9).covers(h, "t", claimedRegion, 4), "below the region's point")
	assert.False(t, at(12).covers(h, "t", claimedRegion, 6), "written above a claim its epoch is below: proves nothing")
	assert.True(t, at(12).covers(h, "t", 3, 6))
	assert.False(t, at(12).covers(h, "t", 3, 4))
	assert.True(t, at(12).covers(h, "t", 7, 0), "an absent region had no record there")
}

// TestUndecidedMarksWaitForTheClaim protects both owners across a claim in
// progress: a statement a pending claim may fence stays out of the index
// (it cannot be taken back) until the claim commits; then it goes in if
// the claim record lies above the mark, and is dropped if below. A mark of
// the pending claim's own epoch or above counts at once.
func TestUndecidedMarksWaitForTheClaim(t *testing.T) {
	const topic = "t"
	h := &fakeClaims{claims: []claim.Committed{{Epoch: 1, At: 0}}, pending: 2}
	r, g := marksReads(t, h)
	obsolete := func(offset int64, before int64, epoch uint64) {
		r.NoteMark(topic, 0, offset, record.Mark{Obsolete: []record.RegionPoint{{Region: claimedRegion, Before: before, Epoch: epoch}}})
	}
	point := func() int64 { return g.ObsoletePoint(topic, claimedRegion) }

	obsolete(4, 3, 1)  // below the claim record, as the commit will show
	obsolete(9, 9, 1)  // above it
	obsolete(9, 9, 1)  // read again by another pass
	obsolete(11, 2, 2) // the claimer's own epoch
	require.Equal(t, int64(2), point(), "only the claimer's epoch counts while its claim is pending")
	r.SettleMarks(topic)
	require.Equal(t, int64(2), point(), "still pending: nothing decided")

	h.claims, h.pending = append(h.claims, claim.Committed{Epoch: 2, At: 5}), 0
	r.SettleMarks(topic)
	require.Equal(t, int64(3), point(), "the mark below the claim record counts, the one above is fenced")
	r.marks.mu.Lock()
	defer r.marks.mu.Unlock()
	require.Empty(t, r.marks.undecided[topic], "decided statements are not held")
}
