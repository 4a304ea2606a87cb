package index

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleFiles() []*checkpointFile {
	return []*checkpointFile{
		{Kind: kindBase, Topic: "wal_1", Seq: 1, BaseSeq: 1, C: 100, Low: 100, W: 100},
		{Kind: kindBase, Topic: "wal_1", Seq: 7, BaseSeq: 7, C: 100, Low: 100, W: 1000, Regions: []regionRecord{
			{Region: 0, Runs: []span{{100, 101}, {102, 110}}},
			{Region: 5, DroppedBelow: 300, Runs: []span{{300, 400}, {998, 1000}}},
			{Region: math.MaxUint64, DroppedBelow: math.MaxInt64},
		}},
		{Kind: kindDelta, Topic: "t\x00é", Seq: 9, BaseSeq: 7, C: 150, Low: 1000, W: 1200, Regions: []regionRecord{
			{Region: 3, Runs: []span{{1000, 1001}}},
			{Region: 4, Runs: []span{{1001, 1200}}},
		}},
		{Kind: kindDelta, Topic: "x", Seq: 3, BaseSeq: 2, C: 500, Low: 100, W: 600, Regions: []regionRecord{
			{Region: 1, Runs: []span{{500, 501}, {599, 600}}},
		}},
		{Kind: kindBase, Topic: "max", Seq: math.MaxUint64, BaseSeq: math.MaxUint64, C: 0, Low: 0, W: math.MaxInt64, Regions: []regionRecord{
			{Region: 1, Runs: []span{{0, math.MaxInt64}}},
		}},
		// Version 2: with what the index knew of deleted offsets.
		{Kind: kindBase, Topic: "wal_1", Seq: 8, BaseSeq: 8, C: 300, Low: 300, W: 1000, Regions: []regionRecord{
			{Region: 5, DroppedBelow: 300, Runs: []span{{300, 400}}},
		}, Deleted: &deletedSpan{from: 40, point: 300, last: map[uint64]int64{0: 110, 5: 300, math.MaxUint64: math.MaxInt64}}},
		{Kind: kindDelta, Topic: "wal_1", Seq: 9, BaseSeq: 8, C: 1000, Low: 1000, W: 1000,
			Deleted: &deletedSpan{from: 0, point: 1, last: map[uint64]int64{}}},
		{Kind: kindDelta, Topic: "max", Seq: 2, BaseSeq: 1, C: math.MaxInt64, Low: 0, W: math.MaxInt64,
			Deleted: &deletedSpan{from: 0, point: math.MaxInt64, last: map[uint64]int64{7: math.MaxInt64}}},
	}
}

func TestFormatRoundTrip(t *testing.T) {
	t.Parallel()
	for _, f := range sampleFiles() {
		data := appendFile(nil, f)
		got, err := decodeFile(data)
		require.NoError(t, err)
		if len(f.Regions) == 0 {
			f.Regions = []regionRecord{}
		}
		for i := range f.Regions {
			if f.Regions[i].Runs == nil {
				f.Regions[i].Runs = []span{}
			}
		}
		require.Equal(t, f, got)
		require.Equal(t, data, appendFile(nil, got))
	}
}

func TestFormatRejects(t *testing.T) {
	t.Parallel()
	good := appendFile(nil, sampleFiles()[1])
	mutate := func(fn func(b []byte) []byte) []byte { return fn(bytes.Clone(good)) }
	resum := func(b []byte) []byte {
		crc := crcUpdate(b[:12], b[headerLen:])
		binary.LittleEndian.PutUint32(b[12:], crc)
		return b
	}
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"header only", good[:headerLen], ErrTruncated},
		{"torn", good[:len(good)-1], ErrTruncated},
		{"torn header", good[:10], ErrTruncated},
		{"not ours", []byte("hello"), ErrCorrupt},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrCorrupt},
		{"newer version", mutate(func(b []byte) []byte { b[4] = formatVersion + 1; return b }), ErrVersion},
		{"version 2 without its deleted section", mutate(func(b []byte) []byte { b[4] = 2; return resum(b) }), ErrCorrupt},
		{"version 0", mutate(func(b []byte) []byte { b[4] = 0; return b }), ErrCorrupt},
		{"flipped bit", mutate(func(b []byte) []byte { b[len(b)-3] ^= 0x10; return b }), ErrCorrupt},
		{"trailing", append(bytes.Clone(good), 0), ErrCorrupt},
		{"bad kind", mutate(func(b []byte) []byte { b[5] = 3; return resum(b) }), ErrCorrupt},
		{"flags", mutate(func(b []byte) []byte { b[6] = 1; return resum(b) }), ErrCorrupt},
	}
	for _, c := range cases {
		_, err := decodeFile(c.data)
		require.ErrorIs(t, err, c.want, c.name)
	}
}

func crcUpdate(header, body []byte) uint32 {
	return crc32Update(crc32Update(0, header), body)
}

func TestFormatRejectsInvalidBodies(t *testing.T) {
	t.Parallel()
	body := func(f *checkpointFile) []byte { return appendBody(nil, f) }
	// Runs beyond W.
	b := body(&checkpointFile{Kind: kindBase, Topic: "t", Seq: 1, BaseSeq: 1, C: 0, Low: 0, W: 10,
		Regions: []regionRecord{{Region: 1, Runs: []span{{5, 11}}}}})
	_, err := decodeBody(1, kindBase, b)
	require.ErrorIs(t, err, ErrCorrupt)
	// A base whose base seq differs.
	b = body(&checkpointFile{Kind: kindBase, Topic: "t", Seq: 2, BaseSeq: 1})
	_, err = decodeBody(1, kindBase, b)
	require.ErrorIs(t, err, ErrCorrupt)
	// C above W.
	b = body(&checkpointFile{Kind: kindDelta, Topic: "t", Seq: 2, BaseSeq: 1, C: 20, Low: 5, W: 10})
	_, err = decodeBody(1, kindDelta, b)
	require.ErrorIs(t, err, ErrCorrupt)
	// A non-shortest varint.
	_, err = decodeBody(1, kindBase, []byte{0x81, 0x00, 't'})
	require.ErrorIs(t, err, ErrCorrupt)
	// Region count larger than the body.
	b = body(&checkpointFile{Kind: kindBase, Topic: "t", Seq: 1, BaseSeq: 1})
	b[len(b)-1] = 100
	_, err = decodeBody(1, kindBase, b)
	require.ErrorIs(t, err, ErrCorrupt)
	// Deleted sections: a region count larger than the body, an empty or
	// overflowing span, a last that overflows.
	withDeleted := func(d *deletedSpan) []byte {
		return body(&checkpointFile{Kind: kindBase, Topic: "t", Seq: 1, BaseSeq: 1, C: 10, Low: 10, W: 10, Deleted: d})
	}
	b = withDeleted(&deletedSpan{from: 0, point: 5, last: map[uint64]int64{}})
	b[len(b)-1] = 100
	_, err = decodeBody(2, kindBase, b)
	require.ErrorIs(t, err, ErrCorrupt)
	b = withDeleted(&deletedSpan{from: math.MaxInt64 - 1, point: math.MaxInt64, last: map[uint64]int64{}})
	_, err = decodeBody(2, kindBase, b)
	require.NoError(t, err)
	b[len(b)-2]++ // the width: point beyond MaxInt64
	_, err = decodeBody(2, kindBase, b)
	require.ErrorIs(t, err, ErrCorrupt)
	b = withDeleted(&deletedSpan{from: 5, point: 6, last: map[uint64]int64{1: math.MaxInt64}})
	_, err = decodeBody(2, kindBase, b)
	require.NoError(t, err)
	b = append(b[:len(b)-9], binary.AppendUvarint(nil, math.MaxInt64-5)...) // last beyond MaxInt64
	_, err = decodeBody(2, kindBase, b)
	require.ErrorIs(t, err, ErrCorrupt)
	// A version 1 body with a deleted section has bytes left over.
	_, err = decodeBody(1, kindBase, withDeleted(&deletedSpan{from: 0, point: 5, last: map[uint64]int64{}}))
	require.ErrorIs(t, err, ErrCorrupt)
}

// FuzzDecodeFile: any bytes decode to a file or an error, never a panic;
// what decodes re-encodes to the same bytes.
func FuzzDecodeFile(f *testing.F) {
	for _, cf := range sampleFiles() {
		f.Add(appendFile(nil, cf))
	}
	f.Add([]byte("KWIX"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeFile(data)
		if err != nil {
			return
		}
		require.Equal(t, data, appendFile(nil, got))
	})
}

// FuzzDecodeBody fuzzes the body decoder directly (FuzzDecodeFile rarely
// gets past the checksum): the first byte picks the kind (bit 0) and the
// version (bit 1).
func FuzzDecodeBody(f *testing.F) {
	for _, cf := range sampleFiles() {
		b := byte(cf.Kind)
		if cf.Deleted != nil {
			b |= 2
		}
		f.Add(append([]byte{b}, appendBody(nil, cf)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		kind := kindBase
		if data[0]&1 == 0 {
			kind = kindDelta
		}
		version := 1 + data[0]>>1&1
		got, err := decodeBody(version, kind, data[1:])
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, data[1:], appendBody(nil, got))
		file := appendFile(nil, got)
		again, err := decodeFile(file)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, crcTable, b) }
