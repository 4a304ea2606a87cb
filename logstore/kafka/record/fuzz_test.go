package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"testing"
)

// FuzzDecode: Decode never panics; it either fails with exactly one of its
// four error classes and an empty part, or returns a part that is internally
// consistent, whose data is the value, and whose re-encoded key is the key
// it was decoded from, byte for byte (the layout has no slack bits). It
// accepts a record exactly when its CRCs, summed directly over every byte,
// match (as far as a checksum decides: a record with other faults fails
// otherwise).
func FuzzDecode(f *testing.F) {
	rng := newRand(7)
	data := randBytes(rng, 40)
	var seeds []Part
	seeds = append(seeds, mustSplit(f, 1, nil, MinBatchBytes)...)
	seeds = append(seeds, mustSplit(f, 2, data[:10], MinBatchBytes+64)...)
	seeds = append(seeds, mustSplit(f, 3, data, MinBatchBytes+16)...) // first, middle, last
	for _, p := range seeds {
		f.Add(p.Key(), p.Data)
	}
	f.Add([]byte(nil), []byte("x"))
	f.Add([]byte("KW"), []byte(nil))
	f.Add([]byte("user-key"), []byte("user value"))
	v2 := seeds[1].Key()
	v2[2] = 2
	f.Add(v2, seeds[1].Data)
	f.Add(rawKey(3, 4, 0, 10, 0, data[:4]), data[:4]) // middle, seq 0
	f.Add(rawKey(9, 4, 1, 10, 0, data[:4]), data[:4]) // bad kind
	f.Add(rawKey(2, 4, 0, 2, 0, data[:4]), data[:4])  // first larger than size
	f.Add(rawKey(1, 4, 0, 4, 1, data[:4]), data[:4])  // whole, wrong entry CRC
	f.Add(append(seeds[1].Key(), 0), seeds[1].Data)   // long key
	for _, m := range markSeeds() {
		mp := MarkPart(m)
		f.Add(mp.Key(), mp.Data)
	}
	cp := ClaimPart(7, 3, []byte("node-a"))
	f.Add(cp.Key(), cp.Data)
	ep := seeds[0]
	ep.Epoch = 5
	f.Add(ep.Key(), ep.Data)

	f.Fuzz(func(t *testing.T, key, value []byte) {
		keyCopy, valueCopy := slices.Clone(key), slices.Clone(value)
		p, err := Decode(key, value)
		if !bytes.Equal(key, keyCopy) || !bytes.Equal(value, valueCopy) {
			t.Fatal("Decode modified its input")
		}
		// The CRCs as summed directly, over every byte (Decode combines
		// them from one pass over the value: crc.go).
		// Version 1 keys are 28 bytes, version 2 keys (with the epoch)
		// 36; the record CRC is the key's last 4 bytes.
		n := len(key)
		directOK := ((n == KeySize && key[2] == 1) || (n == KeySizeEpoch && key[2] == 2)) &&
			crc32.Update(crc32.Checksum(key[:n-4], castagnoli), castagnoli, value) == binary.BigEndian.Uint32(key[n-4:])
		if directOK && (key[3] == byte(KindWhole) || key[3] == byte(KindMark) || key[3] == byte(KindClaim)) {
			directOK = Checksum(value) == binary.BigEndian.Uint32(key[n-8:n-4])
		}
		if err != nil {
			requireOneClass(t, err, "Decode(%x, %x)", key, value)
			if p.Kind != 0 || p.Data != nil || p.Header != (Header{}) {
				t.Fatalf("failed Decode returned a part: %+v", p)
			}
			if errors.Is(err, ErrChecksum) && directOK {
				t.Fatalf("Decode(%x, %x): %v, but the CRCs summed directly match", key, value, err)
			}
			return
		}
		if !directOK {
			t.Fatalf("Decode(%x, %x) accepted a record whose CRCs summed directly do not match", key, value)
		}
		if got := p.Key(); !bytes.Equal(got, key) {
			t.Fatalf("re-encoded key %x, decoded from %x", got, key)
		}
		if len(p.Data) != len(value) || (len(value) > 0 && &p.Data[0] != &value[0]) {
			t.Fatal("the part's data is not the value")
		}
		if err := p.check(); err != nil {
			t.Fatalf("decoded part fails its own check: %v", err)
		}
		switch p.Kind {
		case KindWhole:
			if uint64(len(p.Data)) != uint64(p.Size) || Checksum(p.Data) != p.EntryCRC {
				t.Fatalf("whole part with inconsistent size or CRC: %+v", p.Header)
			}
		case KindFirst, KindMiddle, KindLast:
			if uint64(len(p.Data)) > uint64(p.Size) {
				t.Fatalf("part larger than its entry: %+v", p.Header)
			}
		case KindMark:
			if _, err := DecodeMark(p.Data); err != nil {
				t.Fatalf("decoded mark part whose payload does not decode: %v", err)
			}
		case KindClaim:
			if p.Epoch == 0 || uint64(len(p.Data)) != uint64(p.Size) || Checksum(p.Data) != p.EntryCRC {
				t.Fatalf("claim with epoch 0 or inconsistent size or CRC: %+v", p.Header)
			}
		default:
			t.Fatalf("decoded kind %d", p.Kind)
		}
	})
}

// opReader reads FuzzAssemble's operations; past the end it reads zeros.
type opReader struct{ b []byte }

func (r *opReader) more() bool { return len(r.b) > 0 }

func (r *opReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *opReader) bytes(n int) []byte {
	out := make([]byte, n)
	m := copy(out, r.b)
	r.b = r.b[m:]
	for i := m; i < n; i++ {
		out[i] = byte(i * 7) // past the input: a fixed pattern
	}
	return out
}

func (r *opReader) u32() uint32 { return binary.BigEndian.Uint32(r.bytes(4)) }

// FuzzAssemble interprets its input as operations on four regions' writers
// and feeds the records they produce, through Key and Decode, to an
// assembler. Each operation byte: bits 0-2 the operation, bits 3-4 the
// region, bits 5-7 a parameter.
//
//	0 start a new entry (length byte, data, part size 1+param) and write its first part
//	1 write the entry's next part
//	2 write the last written part again
//	3 write any part of the entry (index byte): skips, reorders
//	4 write a hand-made part: kind, seq, size, entry CRC and data from the input
//	5 write another region's current part under this region
//	6 skip offsets (count byte)
//	7 corrupt the entry's remaining parts (entry CRC or data)
//
// Whatever the input: no panic; Add fails only with ErrChecksum or
// ErrMalformed; every yielded entry has the length and CRC its last record
// declares, the offsets of the record that completed it, and stays intact
// when the caller reuses its buffers; drops name the record's region and lie
// within the offsets read; Open lists incomplete entries sorted. A first
// part always starts its region's entry over, so every split entry yielded,
// dropped as incomplete or listed by Open starts at its region's latest
// first part; a duplicate or orphan drop names the record itself, except
// that a repeated first part drops the earlier copy, at that latest first
// part's offset.
func FuzzAssemble(f *testing.F) {
	for _, seed := range assembleSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		type writer struct {
			data  []byte
			parts []Part
			next  int
			prev  *Part
		}
		var ws [4]writer
		a := NewAssembler()
		r := &opReader{b: ops}
		off := int64(0)
		type kept struct{ got, want []byte }
		var yielded []kept
		lastFirst := map[uint64]int64{} // offset of each region's latest first part

		emit := func(p Part) {
			key := p.Key()
			value := slices.Clone(p.Data)
			dp, err := Decode(key, value)
			if err != nil {
				requireOneClass(t, err, "hand-made part %+v", p.Header)
				return
			}
			st, err := a.Add(off, dp)
			if err != nil {
				requireOneClass(t, err, "Add")
				if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrMalformed) {
					t.Fatalf("Add failed with %v", err)
				}
				if st.Complete {
					t.Fatal("Add yielded an entry and an error")
				}
			}
			first, opened := lastFirst[dp.Region]
			if dp.Kind == KindFirst {
				lastFirst[dp.Region] = off
			}
			if st.Dropped {
				d := st.Drop
				if d.Region != dp.Region || d.First > d.Last || d.Last > off || d.First < 0 {
					t.Fatalf("@%d drop %+v for a part of region %d", off, d, dp.Region)
				}
				switch d.Reason {
				case DropDuplicate:
					if dp.Kind == KindFirst {
						// The earlier copy of the first part, which
						// opened the entry this one starts over.
						if !opened || d.First != first || d.Last != first || d.Last >= off {
							t.Fatalf("@%d duplicate first part drop spans %d..%d; the latest first part was at %d (%v)",
								off, d.First, d.Last, first, opened)
						}
					} else if d.First != off || d.Last != off {
						t.Fatalf("@%d %v drop spans %d..%d", off, d.Reason, d.First, d.Last)
					}
				case DropOrphan:
					if d.First != off || d.Last != off {
						t.Fatalf("@%d %v drop spans %d..%d", off, d.Reason, d.First, d.Last)
					}
				case DropIncomplete:
					if !opened || d.First != first {
						t.Fatalf("@%d incomplete drop %+v; the latest first part was at %d (%v)", off, d, first, opened)
					}
				default:
					t.Fatalf("drop reason %d", d.Reason)
				}
			}
			if st.Complete {
				e := st.Entry
				if uint64(len(e.Data)) != uint64(dp.Size) || Checksum(e.Data) != dp.EntryCRC {
					t.Fatalf("@%d yielded %d bytes with CRC %08x; the record declares %d bytes, CRC %08x",
						off, len(e.Data), Checksum(e.Data), dp.Size, dp.EntryCRC)
				}
				if e.Region != dp.Region || e.Last != off || e.First > e.Last || e.First < 0 {
					t.Fatalf("@%d entry of region %d at %d..%d", off, e.Region, e.First, e.Last)
				}
				if dp.Kind == KindWhole && e.First != e.Last {
					t.Fatalf("@%d whole entry spans %d..%d", off, e.First, e.Last)
				}
				if dp.Kind != KindWhole && (!opened || e.First != first) {
					t.Fatalf("@%d entry spans %d..%d; the latest first part was at %d (%v)", off, e.First, e.Last, first, opened)
				}
				if st.Dropped && st.Drop.Last >= e.First {
					t.Fatalf("@%d drop %+v does not precede entry %d..%d", off, st.Drop, e.First, e.Last)
				}
				if dp.Kind != KindWhole {
					yielded = append(yielded, kept{e.Data, slices.Clone(e.Data)})
				}
			}
			for i := range value {
				value[i] = 0xA5 // the caller reuses its buffer
			}
			off++
		}

		for r.more() {
			op := r.byte()
			w := &ws[(op>>3)&3]
			region := uint64((op >> 3) & 3)
			param := op >> 5
			switch op & 7 {
			case 0:
				w.data = r.bytes(int(r.byte()))
				parts, err := Split(region, w.data, MinBatchBytes+int(param))
				if err != nil {
					t.Fatal(err)
				}
				w.parts, w.next = parts, 0
				fallthrough
			case 1:
				if w.next < len(w.parts) {
					p := w.parts[w.next]
					w.next++
					w.prev = &p
					emit(p)
				}
			case 2:
				if w.prev != nil {
					emit(*w.prev)
				}
			case 3:
				i := int(r.byte())
				if len(w.parts) > 0 {
					i %= len(w.parts)
					p := w.parts[i]
					w.next, w.prev = i+1, &p
					emit(p)
				}
			case 4:
				p := Part{Header: Header{Kind: Kind(r.byte() % 6), Region: region}}
				if param&1 != 0 {
					p.Seq, p.Size = r.u32(), r.u32()
				} else {
					p.Seq, p.Size = uint32(r.byte()%4), uint32(r.byte())
				}
				if param&2 != 0 {
					p.EntryCRC = r.u32()
				} else {
					p.EntryCRC = Checksum(w.data) // matches the current entry
				}
				p.Data = r.bytes(int(r.byte() % 16))
				w.prev = &p
				emit(p)
			case 5:
				o := &ws[param&3]
				if o.next > 0 && o.next <= len(o.parts) {
					p := o.parts[o.next-1]
					p.Region = region
					w.prev = &p
					emit(p)
				}
			case 6:
				off += int64(r.byte())
			case 7:
				rest := w.parts[min(w.next, len(w.parts)):]
				for i := range rest {
					if param&1 != 0 && len(rest[i].Data) > 0 {
						rest[i].Data = slices.Clone(rest[i].Data)
						rest[i].Data[0] ^= 1 << (param >> 1)
					} else {
						rest[i].EntryCRC ^= 1 << param
					}
				}
			}
		}

		open := a.Open()
		for i, d := range open {
			if d.Reason != DropIncomplete || d.First > d.Last || d.Last >= off || d.Region > 3 {
				t.Fatalf("Open lists %+v", d)
			}
			if i > 0 && open[i-1].First >= d.First {
				t.Fatalf("Open not sorted: %+v", open)
			}
			if first, ok := lastFirst[d.Region]; !ok || d.First != first {
				t.Fatalf("Open lists %+v; the latest first part was at %d (%v)", d, first, ok)
			}
		}
		if lo, ok := a.MinOpenFirst(); ok != (len(open) > 0) || (ok && lo != open[0].First) {
			t.Fatalf("MinOpenFirst = %d, %v; Open = %+v", lo, ok, open)
		}
		if len(open) > len(ws) {
			t.Fatalf("%d entries open for %d regions", len(open), len(ws))
		}
		for i, y := range yielded {
			if !bytes.Equal(y.got, y.want) {
				t.Fatalf("yielded entry %d changed afterwards", i)
			}
		}
	})
}

// assembleSeeds are FuzzAssemble inputs that write valid logs: whole
// entries, split entries, interleaved regions, duplicates, a repeated first
// part, a dying writer, an entry retried after some of its parts, a corrupt
// entry.
func assembleSeeds() [][]byte {
	op := func(code, region, param byte) byte { return code | region<<3 | param<<5 }
	entry := func(region, partSize byte, data string) []byte {
		return append([]byte{op(0, region, partSize-1), byte(len(data))}, data...)
	}
	next := func(region byte, n int) []byte { return bytes.Repeat([]byte{op(1, region, 0)}, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		entry(0, 8, "whole"),
		cat(entry(0, 8, ""), entry(1, 8, "a")),
		cat(entry(0, 4, "0123456789"), next(0, 2)),
		cat(entry(0, 3, "aaaaaaaaa"), entry(1, 3, "bbbbbb"), next(0, 1), next(1, 1), next(0, 1)),
		cat(entry(2, 2, "abcdef"), []byte{op(2, 2, 0)}, next(2, 1), []byte{op(2, 2, 0), op(6, 0, 0), 9}, next(2, 1), []byte{op(2, 2, 0)}),
		cat(entry(3, 2, "abcdef"), next(3, 1), entry(3, 2, "ghij"), next(3, 1)),
		cat(entry(1, 4, "0123456789"), []byte{op(3, 1, 0), 2}, []byte{op(3, 1, 0), 1}),
		cat(entry(2, 2, "abcdef"), next(2, 1), entry(0, 8, "w"), []byte{op(3, 2, 0), 0}, next(2, 2)),
		cat(entry(3, 4, "0123456789"), entry(1, 8, "w"), []byte{op(6, 0, 0), 5, op(2, 3, 0)}, next(3, 2)),
		cat(entry(1, 4, "0123456789"), []byte{op(7, 1, 0)}, next(1, 2)),
		cat(entry(1, 4, "0123456789"), []byte{op(7, 1, 1)}, next(1, 2)),
		cat(entry(0, 4, "0123456789"), []byte{op(4, 0, 0), 3, 1, 10, 4}, []byte("4567"), []byte{op(4, 0, 0), 4, 2, 10, 2}, []byte("89")),
		cat(entry(0, 4, "0123456789"), []byte{op(5, 1, 0)}),
		{op(4, 0, 1), 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 'x'},
	}
}

// markSeeds are valid marks: Obsolete marks of epoch 0 and above, prune
// marks with empty and large tables, regions at the ends of the ID space,
// and tables mixing epoch 0 with others.
func markSeeds() []Mark {
	return []Mark{
		{Obsolete: []RegionPoint{{Region: 7, Before: 12}}},
		{Obsolete: []RegionPoint{{Region: 7, Before: 12, Epoch: 3}}},
		{Prune: true},
		{Prune: true, From: 3, Point: 900, Obsolete: []RegionPoint{
			{Region: 0, Before: 1}, {Region: 1, Before: 1 << 40}, {Region: 1 << 63, Before: 5}, {Region: math.MaxUint64, Before: math.MaxInt64}}},
		{Prune: true, From: 3, Point: 900, Obsolete: []RegionPoint{
			{Region: 0, Before: 1}, {Region: 1, Before: 1 << 40, Epoch: math.MaxUint64}, {Region: math.MaxUint64, Before: 2, Epoch: 1}}},
	}
}

// FuzzDecodeMark: DecodeMark never panics; it fails with ErrMalformed and an
// empty mark, or returns a mark that is valid (regions ascending, points in
// range, From <= Point) whose table answers Before and Region for every
// listed region, and that re-encodes to exactly its input (so a mark whose
// epochs are all 0 decodes only from the layout without epochs).
func FuzzDecodeMark(f *testing.F) {
	for _, m := range markSeeds() {
		f.Add(appendMark(nil, m))
	}
	f.Add([]byte{})
	f.Add([]byte{4, 0, 0, 0})                   // unknown flag
	f.Add([]byte{2, 0, 0, 1, 3, 5, 0})          // epochs flagged, every epoch 0
	f.Add([]byte{2, 0, 0, 1, 3, 5})             // epochs flagged, epoch missing
	f.Add([]byte{2, 0, 0, 1, 3, 5, 0x81, 0})    // non-shortest epoch
	f.Add([]byte{3, 0, 9, 2, 3, 5, 2, 0, 6, 0}) // prune mark with epochs
	f.Add([]byte{0, 1, 0, 0})                   // obsolete mark with a from
	f.Add([]byte{1, 5, 4, 0})                   // from above point
	f.Add([]byte{0, 0, 0, 1, 3, 0})             // before 0
	f.Add([]byte{0, 0, 0, 2, 3, 1})             // count beyond the bytes
	f.Add([]byte{0, 0, 0, 1, 0x80, 0, 1})       // non-shortest varint
	f.Add([]byte{0, 0, 0, 0, 9})                // trailing byte
	f.Fuzz(func(t *testing.T, b []byte) {
		in := slices.Clone(b)
		m, err := DecodeMark(b)
		if !bytes.Equal(b, in) {
			t.Fatal("DecodeMark modified its input")
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			if m.Prune || m.From != 0 || m.Point != 0 || m.Obsolete != nil {
				t.Fatalf("failed DecodeMark returned a mark: %+v", m)
			}
			return
		}
		if m.From < 0 || m.Point < m.From || (!m.Prune && (m.From != 0 || m.Point != 0)) {
			t.Fatalf("invalid points: %+v", m)
		}
		for i, rp := range m.Obsolete {
			if rp.Before <= 0 || (i > 0 && rp.Region <= m.Obsolete[i-1].Region) {
				t.Fatalf("invalid table at %d: %+v", i, m.Obsolete)
			}
			if m.Before(rp.Region) != rp.Before {
				t.Fatalf("Before(%d) = %d, want %d", rp.Region, m.Before(rp.Region), rp.Before)
			}
			if got, ok := m.Region(rp.Region); !ok || got != rp {
				t.Fatalf("Region(%d) = %+v, %v, want %+v", rp.Region, got, ok, rp)
			}
		}
		if got := appendMark(nil, m); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
