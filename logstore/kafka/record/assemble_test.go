package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lim4 is a batch limit that leaves 4 bytes of data per part.
const lim4 = Overhead + 4

// feeder adds parts to an assembler at consecutive offsets, each part going
// through Key and Decode first as it would on the read path.
type feeder struct {
	t   *testing.T
	a   *Assembler
	off int64
}

func newFeeder(t *testing.T, off int64) *feeder { return &feeder{t: t, a: NewAssembler(), off: off} }

// add feeds p at the next offset and requires Add to succeed.
func (f *feeder) add(p Part) Step {
	f.t.Helper()
	st, err := f.a.Add(f.off, roundTrip(f.t, p))
	require.NoError(f.t, err, "offset %d", f.off)
	f.off++
	return st
}

// skip leaves n offsets out (records of other programs, control records).
func (f *feeder) skip(n int64) { f.off += n }

func dropStep(reason DropReason, region uint64, first, last int64) Step {
	return Step{Drop: Drop{Reason: reason, Region: region, First: first, Last: last}, Dropped: true}
}

func entryStep(region uint64, first, last int64, data []byte) Step {
	return Step{Entry: Assembled{Region: region, First: first, Last: last, Data: data, Size: uint32(len(data)), CRC: Checksum(data)}, Complete: true}
}

// assertStep compares steps, treating nil and empty data alike.
func assertStep(t *testing.T, want, got Step, msgAndArgs ...any) {
	t.Helper()
	if len(want.Entry.Data) == 0 && len(got.Entry.Data) == 0 {
		want.Entry.Data, got.Entry.Data = nil, nil
	}
	assert.Equal(t, want, got, msgAndArgs...)
}

func TestDropReasonString(t *testing.T) {
	assert.Equal(t, "duplicate", DropDuplicate.String())
	assert.Equal(t, "orphan", DropOrphan.String())
	assert.Equal(t, "incomplete", DropIncomplete.String())
	assert.Equal(t, "reason(0)", DropReason(0).String())
	assert.Equal(t, "reason(200)", DropReason(200).String())
}

// TestAssembleWhole: a whole record is a complete entry at its own offset.
func TestAssembleWhole(t *testing.T) {
	f := newFeeder(t, 100)
	for _, data := range [][]byte{[]byte("hello"), nil} {
		off := f.off
		assertStep(t, entryStep(3, off, off, data), f.add(mustSplit(t, 3, data, Overhead+8)[0]))
	}
	assert.Empty(t, f.a.Open())
}

// TestAssembleWholeNotDeduplicated: two identical whole records are two
// entries. A whole record carries nothing that tells a producer retry from
// the same data appended twice, and losing an entry is worse than
// delivering a duplicate one.
func TestAssembleWholeNotDeduplicated(t *testing.T) {
	f := newFeeder(t, 0)
	p := mustSplit(t, 1, []byte("same"), Overhead+8)[0]
	assertStep(t, entryStep(1, 0, 0, []byte("same")), f.add(p))
	assertStep(t, entryStep(1, 1, 1, []byte("same")), f.add(p))
}

// TestAssembleSplit: a split entry completes at its last part, spanning the
// offsets of its first and last parts, even with gaps between them.
func TestAssembleSplit(t *testing.T) {
	data := []byte("abcdefghij")
	parts := mustSplit(t, 9, data, lim4) // abcd efgh ij
	require.Len(t, parts, 3)
	f := newFeeder(t, 10)
	assertStep(t, Step{}, f.add(parts[0]))
	f.skip(5)
	assertStep(t, Step{}, f.add(parts[1]))
	assertStep(t, entryStep(9, 10, 17, data), f.add(parts[2]))
	assert.Empty(t, f.a.Open())
}

// TestAssembleInterleaved: regions are independent; entries come out in the
// order of their last parts.
func TestAssembleInterleaved(t *testing.T) {
	a := mustSplit(t, 1, []byte("AAAAAAAA"), lim4)   // 2 parts
	b := mustSplit(t, 2, []byte("BBBBBBBBBB"), lim4) // 3 parts
	w := mustSplit(t, 2, []byte("w"), lim4)[0]
	f := newFeeder(t, 0)
	assertStep(t, Step{}, f.add(b[0]))                                   // 0
	assertStep(t, Step{}, f.add(a[0]))                                   // 1
	assertStep(t, Step{}, f.add(b[1]))                                   // 2
	assertStep(t, entryStep(1, 1, 3, []byte("AAAAAAAA")), f.add(a[1]))   // 3
	assertStep(t, entryStep(2, 0, 4, []byte("BBBBBBBBBB")), f.add(b[2])) // 4
	assertStep(t, entryStep(2, 5, 5, []byte("w")), f.add(w))             // 5
	assert.Empty(t, f.a.Open())
}

// TestAssembleDuplicates: a middle or last part written twice (a producer
// retry) is dropped as a duplicate, wherever it lands before the entry's
// next part, and a repeated last part after the entry completed is a
// duplicate too, not an orphan. A repeated first part is different: the
// writer that wrote it again was told the later offset, so the entry starts
// over there, and it is the earlier copy that is dropped as a duplicate,
// named by its own offset (not the gap after it). The entry is yielded once,
// from its latest first part.
func TestAssembleDuplicates(t *testing.T) {
	data := []byte("0123456789AB")
	parts := mustSplit(t, 4, data, lim4) // 3 parts
	other := mustSplit(t, 5, []byte("other"), Overhead+8)[0]
	f := newFeeder(t, 20)
	assertStep(t, Step{}, f.add(parts[0]))                             // 20
	assertStep(t, dropStep(DropDuplicate, 4, 20, 20), f.add(parts[0])) // 21: right after itself; drops 20
	assertStep(t, entryStep(5, 22, 22, []byte("other")), f.add(other)) // 22
	f.skip(3)                                                          // 23..25: others' records
	assertStep(t, dropStep(DropDuplicate, 4, 21, 21), f.add(parts[0])) // 26: later, before the next part; drops 21
	assert.Equal(t, []Drop{{Reason: DropIncomplete, Region: 4, First: 26, Last: 26}}, f.a.Open(),
		"the entry starts at its latest first part")
	assertStep(t, Step{}, f.add(parts[1]))                             // 27
	assertStep(t, dropStep(DropDuplicate, 4, 28, 28), f.add(parts[1])) // 28
	assertStep(t, entryStep(4, 26, 29, data), f.add(parts[2]))         // 29
	assertStep(t, dropStep(DropDuplicate, 4, 30, 30), f.add(parts[2])) // 30: after completion
	assertStep(t, dropStep(DropDuplicate, 4, 31, 31), f.add(parts[1])) // 31: any part already taken
	assert.Empty(t, f.a.Open())
}

// TestAssembleFirstPartRestarts: a first part always starts its entry over,
// also when it repeats the open entry's first part after later parts were
// taken (the writer retried the whole entry): the earlier attempt is dropped
// as incomplete, up to the record before the new first part, and the entry
// is yielded from the latest first part.
func TestAssembleFirstPartRestarts(t *testing.T) {
	data := []byte("0123456789AB")
	parts := mustSplit(t, 4, data, lim4) // 3 parts
	f := newFeeder(t, 40)
	assertStep(t, Step{}, f.add(parts[0]))                              // 40
	assertStep(t, Step{}, f.add(parts[1]))                              // 41
	f.skip(2)                                                           // 42..43
	assertStep(t, dropStep(DropIncomplete, 4, 40, 43), f.add(parts[0])) // 44
	assertStep(t, dropStep(DropIncomplete, 4, 44, 45), f.add(parts[2]),
		"the earlier attempt's middle part does not count for the retry")
	assert.Empty(t, f.a.Open())

	f = newFeeder(t, 40)
	f.add(parts[0])                                                     // 40
	f.add(parts[1])                                                     // 41
	assertStep(t, dropStep(DropIncomplete, 4, 40, 41), f.add(parts[0])) // 42
	assertStep(t, dropStep(DropDuplicate, 4, 42, 42), f.add(parts[0]))  // 43: nothing followed 42
	assertStep(t, Step{}, f.add(parts[1]))                              // 44
	assertStep(t, entryStep(4, 43, 45, data), f.add(parts[2]))          // 45
	assert.Empty(t, f.a.Open())
}

// TestAssembleOrphans: middle and last parts with no first part seen (the
// read started after it) are orphans, dropped one by one; the region's next
// entry is assembled normally.
func TestAssembleOrphans(t *testing.T) {
	parts := mustSplit(t, 6, []byte("0123456789AB"), lim4)
	next := mustSplit(t, 6, []byte("next entry"), lim4)
	f := newFeeder(t, 0)
	assertStep(t, dropStep(DropOrphan, 6, 0, 0), f.add(parts[1]))
	assertStep(t, dropStep(DropOrphan, 6, 1, 1), f.add(parts[2]))
	assertStep(t, dropStep(DropOrphan, 6, 2, 2), f.add(parts[2]))
	assertStep(t, Step{}, f.add(next[0]))
	assertStep(t, Step{}, f.add(next[1]))
	assertStep(t, entryStep(6, 3, 5, []byte("next entry")), f.add(next[2]))

	// After a whole entry, a stray middle part is an orphan, not a
	// duplicate: a whole entry has no parts to repeat.
	w := mustSplit(t, 6, []byte("w"), lim4)[0]
	assertStep(t, entryStep(6, 6, 6, []byte("w")), f.add(w))
	assertStep(t, dropStep(DropOrphan, 6, 7, 7), f.add(parts[1]))
}

// TestAssembleIncomplete: when a writer dies mid-entry its next entry starts
// while the old one is open; the old one is dropped as incomplete, in the
// same step as (and before) the new entry, and never yielded.
func TestAssembleIncomplete(t *testing.T) {
	cut := mustSplit(t, 7, []byte("0123456789AB"), lim4)
	next := mustSplit(t, 7, []byte("abcdefgh"), lim4)
	w := mustSplit(t, 7, []byte("w"), lim4)[0]
	other := mustSplit(t, 8, []byte("x"), lim4)[0]

	t.Run("by a whole record", func(t *testing.T) {
		f := newFeeder(t, 0)
		f.add(cut[0])
		f.add(cut[1])
		f.add(other) // another region's record between them
		st := f.add(w)
		assert.True(t, st.Dropped)
		assert.Equal(t, Drop{Reason: DropIncomplete, Region: 7, First: 0, Last: 2}, st.Drop)
		assert.True(t, st.Complete)
		assert.Equal(t, entryStep(7, 3, 3, []byte("w")).Entry, st.Entry)
		assert.Less(t, st.Drop.Last, st.Entry.First, "the drop came first in the log")
		assert.Empty(t, f.a.Open())
	})
	t.Run("by a first part", func(t *testing.T) {
		f := newFeeder(t, 0)
		f.add(cut[0])
		assertStep(t, dropStep(DropIncomplete, 7, 0, 0), f.add(next[0]))
		assertStep(t, entryStep(7, 1, 2, []byte("abcdefgh")), f.add(next[1]))
	})
	t.Run("by a missing part", func(t *testing.T) {
		// The middle part never arrives: the last part cannot complete the
		// entry, and is dropped with it.
		f := newFeeder(t, 0)
		f.add(cut[0])
		assertStep(t, dropStep(DropIncomplete, 7, 0, 1), f.add(cut[2]))
		assert.Empty(t, f.a.Open())
	})
	t.Run("not by another entry's part", func(t *testing.T) {
		// Another entry's middle or last part (another writer's, whose
		// first part the reader did not see) is an orphan: the open entry
		// goes on and completes.
		f := newFeeder(t, 0)
		f.add(cut[0])
		assertStep(t, dropStep(DropOrphan, 7, 1, 1), f.add(next[1]))
		f.add(cut[1])
		st := f.add(cut[2])
		assert.True(t, st.Complete)
		assert.EqualValues(t, 0, st.Entry.First)
	})
	t.Run("by data exceeding the size", func(t *testing.T) {
		// Parts whose data overflow the declared size (only hand-made
		// parts can) abandon the entry.
		crc := Checksum([]byte("abcd"))
		f := newFeeder(t, 0)
		f.add(Part{Header: Header{Kind: KindFirst, Region: 7, Size: 4, EntryCRC: crc}, Data: []byte("abc")})
		assertStep(t, dropStep(DropIncomplete, 7, 0, 1),
			f.add(Part{Header: Header{Kind: KindLast, Region: 7, Seq: 1, Size: 4, EntryCRC: crc}, Data: []byte("de")}))
	})
}

// TestAssembleOpen: Open lists the entries still open, sorted by their first
// offset (that of their latest first part), their range covering every
// record of theirs seen since (duplicates included); it does not change the
// assembler.
func TestAssembleOpen(t *testing.T) {
	a := mustSplit(t, 1, []byte("0123456789AB"), lim4)
	b := mustSplit(t, 2, []byte("0123456789AB"), lim4)
	f := newFeeder(t, 50)
	assert.Empty(t, f.a.Open())
	f.add(a[0]) // 50
	f.add(b[0]) // 51
	f.add(a[0]) // 52: a repeated first part: region 1's entry starts over
	f.add(b[1]) // 53
	f.add(b[1]) // 54: duplicate
	want := []Drop{
		{Reason: DropIncomplete, Region: 2, First: 51, Last: 54},
		{Reason: DropIncomplete, Region: 1, First: 52, Last: 52},
	}
	assert.Equal(t, want, f.a.Open())
	assert.Equal(t, want, f.a.Open())
	f.add(b[2])
	assert.Equal(t, want[1:], f.a.Open())
}

// TestAssembleMinOpenFirst: MinOpenFirst reports the lowest first offset of
// the entries still open (a reader holds back completed entries that start
// after it, to yield in ID order), and false when none is.
func TestAssembleMinOpenFirst(t *testing.T) {
	a := mustSplit(t, 1, []byte("0123456789AB"), lim4)
	b := mustSplit(t, 2, []byte("0123456789AB"), lim4)
	f := newFeeder(t, 10)
	_, ok := f.a.MinOpenFirst()
	assert.False(t, ok)
	f.add(a[0]) // 10
	f.add(b[0]) // 11
	lo, ok := f.a.MinOpenFirst()
	assert.True(t, ok)
	assert.Equal(t, int64(10), lo)
	f.add(a[1])
	f.add(a[2]) // region 1 completes
	lo, ok = f.a.MinOpenFirst()
	assert.True(t, ok)
	assert.Equal(t, int64(11), lo)
	f.add(mustSplit(t, 2, []byte("w"), lim4)[0]) // region 2's entry abandoned
	_, ok = f.a.MinOpenFirst()
	assert.False(t, ok)

	// A repeated first part moves its entry's first offset to its own.
	f.add(a[0]) // 15
	f.add(b[0]) // 16
	f.add(a[0]) // 17
	lo, ok = f.a.MinOpenFirst()
	assert.True(t, ok)
	assert.Equal(t, int64(16), lo)
}

// TestAssembleCopiesOpenData: the caller may reuse a value's buffer once Add
// returns; parts of open entries are copied.
func TestAssembleCopiesOpenData(t *testing.T) {
	data := []byte("0123456789AB")
	parts := mustSplit(t, 1, data, lim4)
	a := NewAssembler()
	buf := make([]byte, 4)
	var got []byte
	for i, p := range parts {
		copy(buf, p.Data)
		dp, err := Decode(p.Key(), buf[:len(p.Data)])
		require.NoError(t, err)
		st, err := a.Add(int64(i), dp)
		require.NoError(t, err)
		if st.Complete {
			got = st.Entry.Data
		}
		copy(buf, "####")
	}
	assert.Equal(t, data, got)
}

// TestAssembleEntryChecksum: each part has a valid record CRC, so Decode
// accepts it, but the reassembled data does not match the entry CRC the
// parts declare. The end-to-end check catches it: Add returns an error
// wrapping ErrChecksum, and the entry is not yielded.
func TestAssembleEntryChecksum(t *testing.T) {
	data := []byte("0123456789AB")
	wrong := Checksum(data) ^ 0x00400000
	hdr := Header{Region: 11, Size: uint32(len(data)), EntryCRC: wrong}
	var keys, values [][]byte
	for i, chunk := range [][]byte{data[:4], data[4:8], data[8:]} {
		h := hdr
		h.Seq = uint32(i)
		h.Kind = []Kind{KindFirst, KindMiddle, KindLast}[i]
		keys = append(keys, rawKey(byte(h.Kind), h.Region, h.Seq, h.Size, h.EntryCRC, chunk))
		values = append(values, chunk)
	}
	a := NewAssembler()
	for i := range keys {
		p, err := Decode(keys[i], values[i])
		require.NoError(t, err, "part %d has a valid record CRC", i)
		st, err := a.Add(int64(i), p)
		if i < 2 {
			require.NoError(t, err)
			assert.Equal(t, Step{}, st)
			continue
		}
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrChecksum)
		assert.False(t, errors.Is(err, ErrMalformed))
		assert.False(t, st.Complete, "a corrupt entry is not yielded")
	}
	assert.Empty(t, a.Open(), "the corrupt entry is not left open either")

	// Same with a last part that is the right size but other data, and with
	// the entry CRC right but one part's data swapped for other bytes.
	good := mustSplit(t, 12, data, lim4)
	a = NewAssembler()
	swapped := good[1]
	swapped.Data = []byte("XXXX")
	for i, p := range []Part{good[0], swapped, good[2]} {
		st, err := a.Add(int64(i), roundTrip(t, p))
		if i < 2 {
			require.NoError(t, err)
			continue
		}
		assert.ErrorIs(t, err, ErrChecksum)
		assert.False(t, st.Complete)
	}
}

// TestAssembleShortEntry: a last part that arrives before the declared size
// is reached (hand-made parts only) fails the end-to-end length check with
// ErrMalformed.
func TestAssembleShortEntry(t *testing.T) {
	crc := Checksum([]byte("abcdef"))
	a := NewAssembler()
	_, err := a.Add(0, roundTrip(t, Part{Header: Header{Kind: KindFirst, Region: 1, Size: 6, EntryCRC: crc}, Data: []byte("abc")}))
	require.NoError(t, err)
	st, err := a.Add(1, roundTrip(t, Part{Header: Header{Kind: KindLast, Region: 1, Seq: 1, Size: 6, EntryCRC: crc}, Data: []byte("de")}))
	assert.ErrorIs(t, err, ErrMalformed)
	assert.False(t, st.Complete)
	assert.Empty(t, a.Open())
}

// TestAssemblePreallocationBounded: a first part's declared size is not
// trusted for allocation. A tiny first part claiming a 4 GiB entry must not
// make the assembler reserve 4 GiB.
func TestAssemblePreallocationBounded(t *testing.T) {
	a := NewAssembler()
	for r := range uint64(64) {
		p := roundTrip(t, Part{Header: Header{Kind: KindFirst, Region: r, Size: MaxEntrySize, EntryCRC: 1}, Data: []byte("x")})
		_, err := a.Add(int64(r), p)
		require.NoError(t, err)
	}
	var total int
	for _, pe := range a.open {
		total += cap(pe.data)
	}
	assert.Less(t, total, 64<<10, "64 one-byte first parts reserved %d bytes", total)
}

// TestAssembleGrowsToSize: entries assemble correctly however their size
// relates to the initial reservation (first part much smaller than the
// entry, many parts).
func TestAssembleGrowsToSize(t *testing.T) {
	rng := newRand(5)
	for _, size := range []int{1 << 10, 1<<20 + 3, 5 << 20} {
		data := randBytes(rng, size)
		parts := mustSplit(t, 1, data, MinBatchBytes+1000)
		a := NewAssembler()
		var got []byte
		for i, p := range parts {
			st, err := a.Add(int64(i), p)
			require.NoError(t, err)
			if st.Complete {
				got = st.Entry.Data
			}
		}
		require.True(t, bytes.Equal(data, got), "size %d", size)
		assert.Equal(t, size, cap(got), "the assembled entry holds no slack")
	}
}

// TestAssembleSpill: OpenBytes counts the open entries' data; Spill drops
// one entry's data (a reader bounded in memory), which then goes on being
// checked part by part: it completes without data, saying which records
// hold it and what they must add up to, and a part that breaks it still
// abandons it. Nothing is given up for lack of memory.
func TestAssembleSpill(t *testing.T) {
	a := mustSplit(t, 1, []byte("AAAAAAAAAA"), lim4) // 3 parts
	b := mustSplit(t, 2, []byte("BBBBBBBB"), lim4)   // 2 parts
	f := newFeeder(t, 0)
	require.Zero(t, f.a.Spill(Writer{Region: 1}), "nothing open")
	assertStep(t, Step{}, f.add(a[0])) // 0
	assertStep(t, Step{}, f.add(b[0])) // 1
	assertStep(t, Step{}, f.add(a[1])) // 2
	require.EqualValues(t, 12, f.a.OpenBytes())
	require.EqualValues(t, 8, f.a.Spill(Writer{Region: 1}))
	require.Zero(t, f.a.Spill(Writer{Region: 1}), "spilled already")
	require.EqualValues(t, 4, f.a.OpenBytes())
	lo, open := f.a.MinOpenFirst()
	require.True(t, open)
	require.EqualValues(t, 0, lo, "a spilled entry is still open")
	assertStep(t, dropStep(DropDuplicate, 1, 3, 3), f.add(a[1]))       // 3: a retry's copy
	assertStep(t, entryStep(2, 1, 4, []byte("BBBBBBBB")), f.add(b[1])) // 4
	st := f.add(a[2])                                                  // 5
	require.True(t, st.Complete)
	require.Equal(t, Assembled{Region: 1, First: 0, Last: 5, Spilled: true, Size: 10, CRC: Checksum([]byte("AAAAAAAAAA"))}, st.Entry)
	require.Zero(t, f.a.OpenBytes())

	// A spilled entry that a part breaks is abandoned as any other.
	f = newFeeder(t, 0)
	f.add(a[0])
	f.a.Spill(Writer{Region: 1})
	assertStep(t, dropStep(DropIncomplete, 1, 0, 1), f.add(a[2]))
	_, open = f.a.MinOpenFirst()
	require.False(t, open)
}

// TestAssembleOtherEpochBetweenParts: a region's records of another owner
// epoch (an old owner's late records between the new owner's parts, and
// the other way round) are another writer's: they never abandon, complete
// or move the ID of an entry open under this epoch, and Abandon gives an
// open entry up for its writer alone.
func TestAssembleOtherEpochBetweenParts(t *testing.T) {
	withEpoch := func(ps []Part, epoch uint64) []Part {
		for i := range ps {
			ps[i].Epoch = epoch
		}
		return ps
	}
	b := withEpoch(mustSplit(t, 1, []byte("BBBBBBBBBB"), lim4), 2) // 3 parts
	a := withEpoch(mustSplit(t, 1, []byte("AAAAAA"), lim4), 1)     // 2 parts
	w := withEpoch(mustSplit(t, 1, []byte("W"), lim4), 1)          // whole
	f := newFeeder(t, 0)
	assertStep(t, Step{}, f.add(b[0]))                                                                                                                                 // 0
	assertStep(t, Step{Entry: Assembled{Region: 1, Epoch: 1, First: 1, Last: 1, Data: []byte("W"), Size: 1, CRC: Checksum([]byte("W"))}, Complete: true}, f.add(w[0])) // 1
	assertStep(t, Step{}, f.add(a[0]))                                                                                                                                 // 2
	assertStep(t, Step{}, f.add(b[1]))                                                                                                                                 // 3
	st := f.add(a[1])                                                                                                                                                  // 4
	require.True(t, st.Complete)
	require.Equal(t, Assembled{Region: 1, Epoch: 1, First: 2, Last: 4, Data: []byte("AAAAAA"), Size: 6, CRC: Checksum([]byte("AAAAAA"))}, st.Entry)
	st = f.add(b[2]) // 5
	require.True(t, st.Complete)
	require.False(t, st.Dropped)
	require.Equal(t, Assembled{Region: 1, Epoch: 2, First: 0, Last: 5, Data: []byte("BBBBBBBBBB"), Size: 10, CRC: Checksum([]byte("BBBBBBBBBB"))}, st.Entry)

	// Abandon gives up one writer's open entry, not the other's.
	f = newFeeder(t, 0)
	f.add(b[0])
	f.add(a[0])
	d, ok := f.a.Abandon(Writer{Region: 1, Epoch: 1})
	require.True(t, ok)
	require.Equal(t, Drop{Reason: DropIncomplete, Region: 1, First: 1, Last: 1}, d)
	_, ok = f.a.Abandon(Writer{Region: 1, Epoch: 1})
	require.False(t, ok, "nothing open under epoch 1 any more")
	f.add(b[1])
	st = f.add(b[2])
	require.True(t, st.Complete)
	require.EqualValues(t, 0, st.Entry.First)
}
