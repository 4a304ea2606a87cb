package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ---------------------------------------------------------------------------
// Constants and the byte layout

// TestConstants pins the numbers the store and the brokers' configuration
// depend on: changing any of them changes the on-disk format or what a batch
// limit means.
func TestConstants(t *testing.T) {
	assert.Equal(t, 2, Version)
	assert.Equal(t, 28, KeySize)
	assert.Equal(t, 36, KeySizeEpoch)
	assert.Equal(t, Kind(5), KindMark)
	assert.Equal(t, Kind(6), KindClaim)
	assert.Equal(t, 256, Overhead)
	assert.Equal(t, Overhead+1, MinBatchBytes)
	assert.Equal(t, 1, MaxPartSize(MinBatchBytes), "the smallest limit still carries one byte per part")
	assert.Equal(t, 1<<20-256, MaxPartSize(1<<20))
	assert.Equal(t, uint64(math.MaxUint32), uint64(MaxEntrySize))
	assert.Equal(t, Kind(1), KindWhole)
	assert.Equal(t, Kind(2), KindFirst)
	assert.Equal(t, Kind(3), KindMiddle)
	assert.Equal(t, Kind(4), KindLast)
}

// TestChecksumIsCRC32C protects the entry CRC's polynomial: "123456789" has
// the published CRC-32C check value 0xE3069283 (IEEE would give 0xCBF43926).
func TestChecksumIsCRC32C(t *testing.T) {
	assert.Equal(t, uint32(0xE3069283), Checksum([]byte("123456789")))
	assert.Equal(t, uint32(0), Checksum(nil))
}

// TestKeyLayout protects the version 1 key byte for byte, as drawn in the
// package comment: records already in Kafka must stay readable.
func TestKeyLayout(t *testing.T) {
	p := Part{
		Header: Header{Kind: KindMiddle, Region: 0x0102030405060708, Seq: 0x090A0B0C, Size: 0x0D0E0F10, EntryCRC: 0x11121314},
		Data:   []byte("part data"),
	}
	key := p.Key()
	want := []byte{
		'K', 'W', // magic
		0x01,                                           // version
		0x03,                                           // kind: middle
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // region
		0x09, 0x0A, 0x0B, 0x0C, // seq
		0x0D, 0x0E, 0x0F, 0x10, // size
		0x11, 0x12, 0x13, 0x14, // entry CRC
	}
	rcrc := crc32.Checksum(append(append([]byte(nil), want...), p.Data...), crc32c)
	want = binary.BigEndian.AppendUint32(want, rcrc)
	require.Len(t, key, KeySize)
	assert.Equal(t, want, key)
	assert.Equal(t, rawKey(3, 0x0102030405060708, 0x090A0B0C, 0x0D0E0F10, 0x11121314, p.Data), key)

	// The record CRC covers the data: the same header over other data
	// gives another key.
	q := p
	q.Data = []byte("other data")
	assert.Equal(t, key[:24], q.Key()[:24])
	assert.NotEqual(t, key[24:], q.Key()[24:])
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "whole", KindWhole.String())
	assert.Equal(t, "first", KindFirst.String())
	assert.Equal(t, "middle", KindMiddle.String())
	assert.Equal(t, "last", KindLast.String())
	assert.Equal(t, "kind(0)", Kind(0).String())
	assert.Equal(t, "kind(9)", Kind(9).String())
}

func TestIsKwal(t *testing.T) {
	assert.False(t, IsKwal(nil))
	assert.False(t, IsKwal([]byte("K")))
	assert.False(t, IsKwal([]byte("kw")))
	assert.False(t, IsKwal([]byte("WK......")))
	assert.True(t, IsKwal([]byte("KW")), "IsKwal looks at the magic only")
	assert.True(t, IsKwal((&Part{Header: Header{Kind: KindWhole}}).Key()))
}

// ---------------------------------------------------------------------------
// Split + Decode

// kafkaRecordBatchBytes is the size of a Kafka (magic v2) record batch that
// holds one record with this key and value, taking the worst case for the
// record's varint deltas: 61 bytes of batch header, then the record's length
// varint, attributes, timestamp delta (varlong, at most 10 bytes), offset
// delta (varint, at most 5), key length, key, value length, value, and the
// header count.
func kafkaRecordBatchBytes(keyLen, valueLen int) int {
	const batchHeader = 61
	body := 1 + binary.MaxVarintLen64 + binary.MaxVarintLen32 +
		varintLen(keyLen) + keyLen + varintLen(valueLen) + valueLen + varintLen(0)
	return batchHeader + varintLen(body) + body
}

// varintLen is the length of n as a Kafka (zigzag) varint.
func varintLen(n int) int {
	return len(binary.AppendVarint(nil, int64(n)))
}

// checkSplit verifies everything Split promises about parts of data: how
// many, their kinds, seqs, sizes and CRCs, that each is small enough for a
// batch of limit bytes once encoded, that each decodes back to itself, and
// that their data concatenates to the entry.
func checkSplit(t *testing.T, region uint64, data []byte, limit int) []Part {
	t.Helper()
	parts := mustSplit(t, region, data, limit)
	max := MaxPartSize(limit)
	wantN := 1
	if len(data) > max {
		wantN = (len(data) + max - 1) / max
	}
	require.Len(t, parts, wantN, "entry of %d bytes, parts of at most %d", len(data), max)

	crc := crc32.Checksum(data, crc32c)
	var cat []byte
	for i, p := range parts {
		switch {
		case wantN == 1:
			assert.Equal(t, KindWhole, p.Kind)
		case i == 0:
			assert.Equal(t, KindFirst, p.Kind)
		case i == wantN-1:
			assert.Equal(t, KindLast, p.Kind)
		default:
			assert.Equal(t, KindMiddle, p.Kind, "part %d", i)
		}
		assert.Equal(t, uint32(i), p.Seq, "part %d", i)
		assert.Equal(t, region, p.Region)
		assert.Equal(t, uint32(len(data)), p.Size, "every part repeats the entry's size")
		assert.Equal(t, crc, p.EntryCRC, "every part repeats the entry's CRC")
		if i < wantN-1 {
			assert.Len(t, p.Data, max, "every part but the last is full")
		} else {
			if len(data) > 0 {
				assert.NotEmpty(t, p.Data, "only an empty entry has an empty part")
			}
			assert.LessOrEqual(t, len(p.Data), max)
		}
		if wantN > 1 {
			assert.Equal(t, len(p.Data), cap(p.Data), "appending to a part must not overwrite the next one")
		}

		key := p.Key()
		require.Len(t, key, KeySize)
		assert.LessOrEqual(t, kafkaRecordBatchBytes(len(key), len(p.Data)), limit,
			"part %d (%d bytes) does not fit a batch of %d bytes with Kafka's framing", i, len(p.Data), limit)

		got, err := Decode(key, p.Data)
		require.NoError(t, err, "part %d", i)
		assert.Equal(t, p.Header, got.Header, "part %d", i)
		assert.True(t, bytes.Equal(p.Data, got.Data), "part %d data", i)
		cat = append(cat, got.Data...)
	}
	assert.True(t, bytes.Equal(data, cat), "parts concatenate to the entry")
	return parts
}

// TestSplitDecodeRoundTrip checks, at the boundaries where the number of
// parts changes and for several batch limits, that Split cuts an entry into
// the right parts and that every part survives encoding and decoding.
func TestSplitDecodeRoundTrip(t *testing.T) {
	rng := newRand(1)
	for _, limit := range []int{MinBatchBytes, MinBatchBytes + 1, 1 << 10, 1 << 20} {
		max := MaxPartSize(limit)
		sizes := []int{0, 1, 2, max - 1, max, max + 1, 2*max - 1, 2 * max, 2*max + 1, 3*max + 7}
		slices.Sort(sizes)
		for _, size := range slices.Compact(sizes) {
			t.Run(fmt.Sprintf("limit=%d/size=%d", limit, size), func(t *testing.T) {
				data := randBytes(rng, size)
				parts := checkSplit(t, 0xfeedface_00000000|uint64(size), data, limit)
				switch {
				case size <= max:
					assert.Len(t, parts, 1)
				case size <= 2*max:
					assert.Len(t, parts, 2, "no middle part")
				}
			})
		}
	}
}

// TestSplitEmptyEntry: an empty entry is one whole record with no data,
// size 0 and the CRC of nothing.
func TestSplitEmptyEntry(t *testing.T) {
	for _, data := range [][]byte{nil, {}} {
		parts := mustSplit(t, 7, data, MinBatchBytes)
		require.Len(t, parts, 1)
		assert.Equal(t, Header{Kind: KindWhole, Region: 7, Size: 0, EntryCRC: 0}, parts[0].Header)
		assert.Empty(t, parts[0].Data)
		got, err := Decode(parts[0].Key(), nil)
		require.NoError(t, err)
		assert.Equal(t, parts[0].Header, got.Header)
		assert.Empty(t, got.Data)
	}
}

// TestSplitOneBytePerPart: at the smallest limit every part carries one
// byte, so a 5-byte entry is first, three middles and a last.
func TestSplitOneBytePerPart(t *testing.T) {
	parts := checkSplit(t, 1, []byte("hello"), MinBatchBytes)
	require.Len(t, parts, 5)
	kinds := make([]Kind, len(parts))
	for i, p := range parts {
		kinds[i] = p.Kind
		assert.Equal(t, []byte{"hello"[i]}, p.Data)
	}
	assert.Equal(t, []Kind{KindFirst, KindMiddle, KindMiddle, KindMiddle, KindLast}, kinds)
}

// TestSplitSharesMemory: parts alias the entry's data (no copy on the write
// path), as documented.
func TestSplitSharesMemory(t *testing.T) {
	data := []byte("0123456789")
	parts := mustSplit(t, 1, data, MinBatchBytes+3)
	require.Len(t, parts, 3)
	assert.Equal(t, []byte("4567"), parts[1].Data)
	data[4] = 'X'
	assert.Equal(t, []byte("X567"), parts[1].Data)
}

// TestSplitLarge: a 64 MiB entry under the default 1 MiB batch limit is 65
// parts, 64 full ones and a 16 KiB tail, each fitting a batch with Kafka's
// framing, and they reassemble to the entry.
func TestSplitLarge(t *testing.T) {
	const size, limit = 64 << 20, 1 << 20
	data := randBytes(newRand(64), size)
	parts := checkSplit(t, 42, data, limit)
	require.Len(t, parts, 65)
	assert.Equal(t, KindFirst, parts[0].Kind)
	assert.Equal(t, KindLast, parts[64].Kind)
	assert.Equal(t, uint32(64), parts[64].Seq)
	assert.Len(t, parts[64].Data, size-64*(limit-Overhead))
	assert.Len(t, parts[64].Data, 16384)

	a := NewAssembler()
	for i, p := range parts {
		st, err := a.Add(int64(1000+i), p)
		require.NoError(t, err)
		assert.False(t, st.Dropped)
		require.Equal(t, i == 64, st.Complete)
		if st.Complete {
			assert.Equal(t, int64(1000), st.Entry.First)
			assert.Equal(t, int64(1064), st.Entry.Last)
			assert.True(t, bytes.Equal(data, st.Entry.Data))
		}
	}
}

// TestSplitRejectsSmallLimit: a limit that leaves no room for data after
// Kafka's framing is refused rather than producing empty or oversized parts.
func TestSplitRejectsSmallLimit(t *testing.T) {
	for _, limit := range []int{MinBatchBytes - 1, Overhead, 1, 0, -1, math.MinInt} {
		parts, err := Split(1, []byte("x"), limit)
		assert.Error(t, err, "limit %d", limit)
		assert.Nil(t, parts)
	}
	_, err := Split(1, nil, MinBatchBytes-1)
	assert.Error(t, err, "even an empty entry needs a valid limit")
}

// ---------------------------------------------------------------------------
// Decode errors

// errClasses are the errors Decode may return; every error must be exactly
// one of them, so the store can tell foreign records from corrupt ones.
var errClasses = []error{ErrNotKwal, ErrVersion, ErrChecksum, ErrMalformed}

func requireOneClass(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error: %s", fmt.Sprintf(format, args...))
	}
	n := 0
	for _, c := range errClasses {
		if errors.Is(err, c) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q must be exactly one of ErrNotKwal, ErrVersion, ErrChecksum, ErrMalformed (%s)", err, fmt.Sprintf(format, args...))
	}
}

// TestDecodeNotKwal: records kwal did not write (no key, a short key, a key
// without the magic) are ErrNotKwal, so the store can skip them instead of
// reporting corruption.
func TestDecodeNotKwal(t *testing.T) {
	valid := (&Part{Header: Header{Kind: KindWhole, Size: 1, EntryCRC: Checksum([]byte("x"))}, Data: []byte("x")}).Key()
	foreign := append([]byte(nil), valid...)
	foreign[0] = 'k'
	cases := map[string][]byte{
		"nil":                     nil,
		"empty":                   {},
		"one byte":                {'K'},
		"magic only":              []byte("KW"),
		"magic and version":       {'K', 'W', 1},
		"valid key truncated":     valid[:KeySize-1],
		"short foreign":           []byte("user-42"),
		"foreign of key size":     bytes.Repeat([]byte{'x'}, KeySize),
		"foreign longer":          []byte("order-000000000000000000000000000000000001"),
		"magic bytes swapped":     append([]byte("WK"), valid[2:]...),
		"valid key, bad magic[0]": foreign,
	}
	for name, key := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Decode(key, []byte("x"))
			requireOneClass(t, err, "")
			assert.ErrorIs(t, err, ErrNotKwal)
			assert.Equal(t, Part{}, p)
		})
	}
}

// TestDecodeVersion: a kwal key (magic present) of a newer version is
// ErrVersion, whatever its length: a newer version may have another key
// size, and must not be mistaken for corruption.
func TestDecodeVersion(t *testing.T) {
	for _, v := range []byte{3, 0x7f, 0xff} {
		for _, n := range []int{KeySize, KeySizeEpoch, KeySize + 4, 64} {
			key := make([]byte, n)
			copy(key, rawKey(1, 1, 0, 1, Checksum([]byte("x")), []byte("x")))
			key[2] = v
			_, err := Decode(key, []byte("x"))
			requireOneClass(t, err, "")
			assert.ErrorIs(t, err, ErrVersion, "version %d, key of %d bytes", v, n)
		}
	}
}

// TestDecodeMalformed: headers whose record CRC is right but whose fields
// contradict each other are ErrMalformed. The keys are built by hand with a
// correct record CRC, so it is the header check that rejects them.
func TestDecodeMalformed(t *testing.T) {
	ten := []byte("0123456789")
	crc := Checksum(ten)
	cases := []struct {
		name  string
		kind  byte
		seq   uint32
		size  uint32
		value []byte
	}{
		{"kind 0", 0, 0, 10, ten},
		{"kind 5", 5, 1, 10, ten},
		{"kind 255", 255, 0, 10, ten},
		{"whole with seq 1", 1, 1, 10, ten},
		{"whole with seq max", 1, math.MaxUint32, 10, ten},
		{"whole shorter than size", 1, 0, 11, ten},
		{"whole longer than size", 1, 0, 9, ten},
		{"first with seq 1", 2, 1, 20, ten},
		{"middle with seq 0", 3, 0, 20, ten},
		{"last with seq 0", 4, 0, 20, ten},
		{"first larger than size", 2, 0, 9, ten},
		{"middle larger than size", 3, 1, 9, ten},
		{"last larger than size", 4, 2, 9, ten},
		{"middle of an empty entry", 3, 1, 0, ten},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := rawKey(c.kind, 9, c.seq, c.size, crc, c.value)
			p, err := Decode(key, c.value)
			requireOneClass(t, err, "")
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Equal(t, Part{}, p)
		})
	}

	t.Run("key longer than 28 bytes", func(t *testing.T) {
		key := append(rawKey(1, 9, 0, 10, crc, ten), 0)
		_, err := Decode(key, ten)
		requireOneClass(t, err, "")
		assert.ErrorIs(t, err, ErrMalformed)
	})
}

// TestDecodeWholeEntryCRC: a whole record is a complete entry, so Decode
// also checks its entry CRC; a mismatch with a correct record CRC is
// ErrChecksum.
func TestDecodeWholeEntryCRC(t *testing.T) {
	v := []byte("whole entry")
	key := rawKey(1, 3, 0, uint32(len(v)), Checksum(v)^1, v)
	_, err := Decode(key, v)
	requireOneClass(t, err, "")
	assert.ErrorIs(t, err, ErrChecksum)
}

// TestDecodeAcceptsEdges: header values at the edges of what is consistent
// are accepted, so the checks do not reject parts a writer may produce.
func TestDecodeAcceptsEdges(t *testing.T) {
	ten := []byte("0123456789")
	cases := []struct {
		name string
		kind byte
		seq  uint32
		size uint32
		v    []byte
	}{
		{"first exactly size", 2, 0, 10, ten},
		{"middle exactly size", 3, 1, 10, ten},
		{"last, empty", 4, 1, 10, nil},
		{"last at seq max", 4, math.MaxUint32, math.MaxUint32, ten},
		{"first of the largest entry", 2, 0, math.MaxUint32, ten},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := rawKey(c.kind, math.MaxUint64, c.seq, c.size, 0xdeadbeef, c.v)
			p, err := Decode(key, c.v)
			require.NoError(t, err)
			assert.Equal(t, Header{Kind: Kind(c.kind), Region: math.MaxUint64, Seq: c.seq, Size: c.size, EntryCRC: 0xdeadbeef}, p.Header)
			assert.Equal(t, key, p.Key(), "re-encoding reproduces the key")
		})
	}
}

// TestDecodeAliasesValue: the decoded part's data is the value itself, not a
// copy (documented: the read path does not copy).
func TestDecodeAliasesValue(t *testing.T) {
	v := []byte("some data")
	p, err := Decode(rawKey(3, 1, 1, 100, 0, v), v)
	require.NoError(t, err)
	require.Len(t, p.Data, len(v))
	assert.Same(t, &v[0], &p.Data[0])
}

// TestDecodeBitFlips flips every bit of the key and of the value of records
// of each kind. Every flip must be detected: a flip in the value or in the
// record CRC is ErrChecksum; a flip elsewhere in the key is one of the four
// error classes (the CRC, or the magic or version check before it).
func TestDecodeBitFlips(t *testing.T) {
	rng := newRand(2)
	data := randBytes(rng, 100)
	var recs []Part
	recs = append(recs, mustSplit(t, 0x0123456789abcdef, nil, MinBatchBytes)...)          // empty whole
	recs = append(recs, mustSplit(t, 0x0123456789abcdef, data[:40], MinBatchBytes+64)...) // whole
	recs = append(recs, mustSplit(t, 0x0123456789abcdef, data, MinBatchBytes+40)...)      // first, middle, last
	require.Len(t, recs, 5)

	for _, p := range recs {
		key, value := p.Key(), append([]byte(nil), p.Data...)
		_, err := Decode(key, value)
		require.NoError(t, err)
		for bit := range 8 * KeySize {
			k := append([]byte(nil), key...)
			k[bit/8] ^= 1 << (bit % 8)
			_, err := Decode(k, value)
			requireOneClass(t, err, "%s part, key bit %d", p.Kind, bit)
			switch i := bit / 8; {
			case i < 2:
				assert.ErrorIs(t, err, ErrNotKwal, "magic bit %d", bit)
			case i == 2:
				assert.ErrorIs(t, err, ErrVersion, "version bit %d", bit)
			default:
				assert.ErrorIs(t, err, ErrChecksum, "%s part, key bit %d", p.Kind, bit)
			}
		}
		for bit := range 8 * len(value) {
			v := append([]byte(nil), value...)
			v[bit/8] ^= 1 << (bit % 8)
			_, err := Decode(key, v)
			requireOneClass(t, err, "")
			assert.ErrorIs(t, err, ErrChecksum, "%s part, value bit %d", p.Kind, bit)
		}
		// A value cut short or extended by one byte is caught too.
		_, err = Decode(key, append(append([]byte(nil), value...), 0))
		assert.ErrorIs(t, err, ErrChecksum)
		if len(value) > 0 {
			_, err = Decode(key, value[:len(value)-1])
			assert.ErrorIs(t, err, ErrChecksum)
		}
	}
}

// TestDecodeBitFlipsLargeValue samples bit flips across a 1 MiB part.
func TestDecodeBitFlipsLargeValue(t *testing.T) {
	rng := newRand(3)
	parts := mustSplit(t, 5, randBytes(rng, 3<<20), 1<<20)
	p := parts[1]
	key := p.Key()
	for range 64 {
		bit := rng.IntN(8 * len(p.Data))
		v := append([]byte(nil), p.Data...)
		v[bit/8] ^= 1 << (bit % 8)
		_, err := Decode(key, v)
		assert.ErrorIs(t, err, ErrChecksum, "value bit %d", bit)
	}
}

// TestEpochRoundTrip: parts written under an owner epoch carry it in a
// version 2 key and decode with it; epoch 0 keeps the version 1 key byte for
// byte (a store that never claims writes what it always wrote); a claim
// record decodes with its region and epoch; an assembled entry carries its
// parts' epoch, and a part of another epoch is another entry's.
func TestEpochRoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte("epoch"), 100)
	for _, epoch := range []uint64{0, 1, math.MaxUint64} {
		parts, err := Split(9, data, MinBatchBytes+100)
		require.NoError(t, err)
		asm := NewAssembler()
		for i := range parts {
			parts[i].Epoch = epoch
			key := parts[i].Key()
			if epoch == 0 {
				require.Len(t, key, KeySize)
				require.Equal(t, byte(1), key[2])
			} else {
				require.Len(t, key, KeySizeEpoch)
				require.Equal(t, byte(2), key[2])
			}
			p, err := Decode(key, parts[i].Data)
			require.NoError(t, err)
			require.Equal(t, epoch, p.Epoch)
			require.Equal(t, parts[i].Header, p.Header)
			st, err := asm.Add(int64(i), p)
			require.NoError(t, err)
			if i == len(parts)-1 {
				require.True(t, st.Complete)
				require.Equal(t, epoch, st.Entry.Epoch)
				require.Equal(t, data, st.Entry.Data)
			}
		}
	}

	cp := ClaimPart(7, 3, []byte("node-a"))
	p, err := Decode(cp.Key(), cp.Data)
	require.NoError(t, err)
	require.Equal(t, Header{Kind: KindClaim, Region: 7, Epoch: 3, Size: 6, EntryCRC: Checksum([]byte("node-a"))}, p.Header)
	_, err = NewAssembler().Add(0, p)
	require.ErrorIs(t, err, ErrMalformed, "a claim is not an entry part")

	// A claim with epoch 0 cannot be written as one: its key would be a
	// version 1 key, which the decoder refuses for a claim.
	bad := ClaimPart(7, 0, nil)
	_, err = Decode(bad.Key(), nil)
	require.ErrorIs(t, err, ErrMalformed)

	// A version 2 key that says epoch 0 is malformed: epoch 0 is written
	// as version 1.
	ep := ClaimPart(7, 1, nil)
	key := ep.Key()
	binary.BigEndian.PutUint64(key[12:20], 0)
	binary.BigEndian.PutUint32(key[32:36], recordCRC(key, Checksum(nil), 0))
	_, err = Decode(key, nil)
	require.ErrorIs(t, err, ErrMalformed)

	// The first parts of an entry under epoch 1, then its last part under
	// epoch 2: another writer's part, an orphan, which leaves the entry
	// open under epoch 1 alone.
	parts, err := Split(9, data, MinBatchBytes+100)
	require.NoError(t, err)
	require.Greater(t, len(parts), 2)
	asm := NewAssembler()
	for i := range parts {
		parts[i].Epoch = 1
		if i == len(parts)-1 {
			parts[i].Epoch = 2
		}
		p, err := Decode(parts[i].Key(), parts[i].Data)
		require.NoError(t, err)
		st, err := asm.Add(int64(i), p)
		require.NoError(t, err)
		require.False(t, st.Complete)
		if i == len(parts)-1 {
			require.True(t, st.Dropped)
			require.Equal(t, DropOrphan, st.Drop.Reason)
		}
	}
	require.Equal(t, []Drop{{Reason: DropIncomplete, Region: 9, First: 0, Last: int64(len(parts) - 2)}}, asm.Open())
}
