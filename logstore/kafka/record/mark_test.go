package record

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMarkRoundTrip: a mark survives MarkPart, the key and Decode, and its
// table answers Before for listed and absent regions.
func TestMarkRoundTrip(t *testing.T) {
	for _, m := range markSeeds() {
		p := MarkPart(m)
		got, err := Decode(p.Key(), p.Data)
		require.NoError(t, err)
		assert.Equal(t, KindMark, got.Kind)
		dm, err := DecodeMark(got.Data)
		require.NoError(t, err)
		if len(m.Obsolete) == 0 {
			m.Obsolete = nil
		}
		assert.Equal(t, m, dm)
		assert.Zero(t, dm.Before(123456), "absent region")
		_, ok := dm.Region(123456)
		assert.False(t, ok, "absent region")
	}
}

// TestMarkOldLayout: marks written before marks carried epochs (records
// already in users' logs, bytes as that encoder wrote them) still decode,
// every region as epoch 0, and a mark whose epochs are all 0 is still
// written in that layout, byte for byte.
func TestMarkOldLayout(t *testing.T) {
	for _, tc := range []struct {
		name, key, value string
		want             Mark
	}{
		{
			name:  "obsolete mark",
			key:   "4b57010500000000000000000000000000000006c545e861dc1d50e3",
			value: "00000001070c",
			want:  Mark{Obsolete: []RegionPoint{{Region: 7, Before: 12}}},
		},
		{
			name:  "prune mark",
			key:   "4b5701050000000000000000000000000000000a22d285fef2617c9e",
			value: "0103840702020a02ac02",
			want:  Mark{Prune: true, From: 3, Point: 900, Obsolete: []RegionPoint{{Region: 2, Before: 10}, {Region: 5, Before: 300}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := hex.DecodeString(tc.key)
			require.NoError(t, err)
			value, err := hex.DecodeString(tc.value)
			require.NoError(t, err)
			p, err := Decode(key, value)
			require.NoError(t, err)
			require.Equal(t, KindMark, p.Kind)
			m, err := DecodeMark(p.Data)
			require.NoError(t, err)
			assert.Equal(t, tc.want, m)
			for _, rp := range m.Obsolete {
				assert.Zero(t, rp.Epoch, "region %d", rp.Region)
			}
			again := MarkPart(m)
			assert.Equal(t, key, again.Key())
			assert.Equal(t, value, again.Data)
		})
	}
}

// TestMarkEpochs: a table with an epoch other than 0 carries every
// region's epoch (0 included) through encoding and decoding, and takes the
// epochs flag; the flag with every epoch 0 is refused, since the writer
// never sets it so.
func TestMarkEpochs(t *testing.T) {
	m := Mark{Prune: true, From: 1, Point: 50, Obsolete: []RegionPoint{{Region: 2, Before: 10}, {Region: 4, Before: 40, Epoch: 7}}}
	data := appendMark(nil, m)
	assert.Equal(t, byte(markFlagPrune|markFlagEpochs), data[0])
	got, err := DecodeMark(data)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	rp, ok := got.Region(4)
	assert.True(t, ok)
	assert.Equal(t, uint64(7), rp.Epoch)

	zero := appendMark(nil, Mark{Obsolete: []RegionPoint{{Region: 2, Before: 10, Epoch: 1}}})
	zero[len(zero)-1] = 0
	_, err = DecodeMark(zero)
	assert.ErrorIs(t, err, ErrMalformed)
}

// TestMarkRejects: a mark record whose header disagrees with its payload, or
// whose payload is invalid, is refused (and never reaches the assembler).
func TestMarkRejects(t *testing.T) {
	p := MarkPart(Mark{Obsolete: []RegionPoint{{Region: 1, Before: 5}}})
	bad := p
	bad.Region = 3
	_, err := Decode(bad.Key(), bad.Data)
	assert.ErrorIs(t, err, ErrMalformed)

	bad = p
	bad.Data = []byte{0, 0, 0, 1, 1, 0} // before 0
	bad.Size, bad.EntryCRC = uint32(len(bad.Data)), Checksum(bad.Data)
	_, err = Decode(bad.Key(), bad.Data)
	assert.ErrorIs(t, err, ErrMalformed)

	_, err = NewAssembler().Add(4, p)
	assert.True(t, errors.Is(err, ErrMalformed), "a mark is not an entry part: %v", err)
}
