package record

import (
	"bytes"
	"testing"
)

// FuzzAssembleSpill interprets its input as operations on four regions'
// writers of split entries, and on the reader's memory bound. Each byte:
// bits 0-1 the operation, bits 2-3 the region.
//
//	0 start a new entry (length byte) and write its first part
//	1 write the entry's next part
//	2 Spill the region's open entry
//	3 skip an offset
//
// Whatever the input: OpenBytes is the data of the open entries not
// spilled, in a model of the assembler; every entry whose parts were all
// written completes, at its first offset, with its data when it was never
// spilled and without it (Spilled, with its size and CRC) when it was.
func FuzzAssembleSpill(f *testing.F) {
	f.Add([]byte{0x00, 0x04, 0x01, 0x05, 0x02, 0x01, 0x01, 0x05})
	f.Add([]byte{0x00, 0x02, 0x01, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, ops []byte) {
		type writer struct {
			data          []byte
			parts         []Part
			next          int
			first         int64
			open, spilled bool
			bytes         int64
		}
		var ws [4]writer
		a := NewAssembler()
		r := &opReader{b: ops}
		off := int64(0)
		for r.more() {
			op := r.byte()
			region := uint64((op >> 2) & 3)
			w := &ws[region]
			add := func(p Part) Step {
				st, err := a.Add(off, roundTripQuiet(t, p))
				if err != nil {
					t.Fatalf("offset %d: %v", off, err)
				}
				off++
				return st
			}
			switch op & 3 {
			case 0:
				w.data = r.bytes(20 + int(r.byte()))
				w.parts = splitSmall(region, w.data)
				w.next, w.first, w.open, w.spilled = 1, off, true, false
				w.bytes = int64(len(w.parts[0].Data))
				add(w.parts[0])
			case 1:
				if w.next == 0 || w.next >= len(w.parts) {
					continue
				}
				p := w.parts[w.next]
				w.next++
				st := add(p)
				if !w.spilled {
					w.bytes += int64(len(p.Data))
				}
				if p.Kind == KindLast {
					e := st.Entry
					switch {
					case !st.Complete || e.First != w.first || e.Spilled != w.spilled:
						t.Fatalf("entry at %d (spilled %v) completed as %+v", w.first, w.spilled, st)
					case w.spilled && (e.Data != nil || e.Size != uint32(len(w.data)) || e.CRC != Checksum(w.data)):
						t.Fatalf("spilled entry at %d: %+v", w.first, e)
					case !w.spilled && !bytes.Equal(e.Data, w.data):
						t.Fatalf("entry at %d: wrong data", w.first)
					}
					w.open = false
				}
			case 2:
				freed := a.Spill(Writer{Region: region})
				want := int64(0)
				if w.open && !w.spilled {
					want = w.bytes
				}
				if freed != want {
					t.Fatalf("Spill(%d) freed %d, the entry held %d", region, freed, want)
				}
				if w.open {
					w.spilled = true
				}
			case 3:
				off++
			}
			var open int64
			for i := range ws {
				if ws[i].open && !ws[i].spilled {
					open += ws[i].bytes
				}
			}
			if a.OpenBytes() != open {
				t.Fatalf("OpenBytes %d, the open entries hold %d", a.OpenBytes(), open)
			}
		}
	})
}

// splitSmall splits data into parts of at most 8 bytes, so short inputs
// make split entries.
func splitSmall(region uint64, data []byte) []Part {
	return mustSplit(nil, region, data, Overhead+8)
}

// roundTripQuiet is roundTrip for fuzz bodies that report their own
// failures.
func roundTripQuiet(t *testing.T, p Part) Part {
	t.Helper()
	got, err := Decode(p.Key(), append([]byte(nil), p.Data...))
	if err != nil {
		t.Fatal(err)
	}
	return got
}
