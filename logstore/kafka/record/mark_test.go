package record

import (
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
	}
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
