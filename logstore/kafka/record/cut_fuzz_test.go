package record

import (
	"errors"
	"testing"
)

// FuzzAssembleCut interprets its input as operations on four regions'
// writers of split entries, and on the reader's memory bound. Each byte:
// bits 0-1 the operation, bits 2-3 the region.
//
//	0 start a new entry (length byte) and write its first part
//	1 write the entry's next part
//	2 Cut (give up the oldest open entry)
//	3 skip an offset
//
// Whatever the input: OpenBytes is the data of the entries open in a model
// of the assembler; Cut gives up the entry the model says is oldest; an
// entry that was cut is never yielded, and the first later part of it
// fails Add with ErrCutShort (and only that does); every other entry
// completes intact.
func FuzzAssembleCut(f *testing.F) {
	f.Add([]byte{0x00, 0x04, 0x01, 0x05, 0x02, 0x01, 0x01, 0x05})
	f.Add([]byte{0x00, 0x02, 0x01, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, ops []byte) {
		type writer struct {
			parts      []Part
			next       int
			first      int64
			open, cut  bool
			bytes      int64
			continuing bool // a part after the cut was written
		}
		var ws [4]writer
		a := NewAssembler()
		r := &opReader{b: ops}
		off := int64(0)
		for r.more() {
			op := r.byte()
			region := uint64((op >> 2) & 3)
			w := &ws[region]
			add := func(p Part) (Step, error) {
				st, err := a.Add(off, roundTripQuiet(t, p))
				off++
				return st, err
			}
			switch op & 3 {
			case 0:
				data := r.bytes(20 + int(r.byte()))
				w.parts = splitSmall(region, data)
				w.next, w.first, w.open, w.cut, w.continuing = 1, off, true, false, false
				w.bytes = int64(len(w.parts[0].Data))
				if _, err := add(w.parts[0]); err != nil {
					t.Fatalf("first part: %v", err)
				}
			case 1:
				if w.next == 0 || w.next >= len(w.parts) {
					continue
				}
				p := w.parts[w.next]
				w.next++
				st, err := add(p)
				switch {
				case w.open:
					if err != nil {
						t.Fatalf("part of an open entry: %v", err)
					}
					w.bytes += int64(len(p.Data))
					if p.Kind == KindLast {
						if !st.Complete || st.Entry.First != w.first {
							t.Fatalf("entry at %d not completed: %+v", w.first, st)
						}
						w.open = false
					}
				case w.cut && !w.continuing:
					if !errors.Is(err, ErrCutShort) {
						t.Fatalf("the first part after a cut of the entry at %d: %v", w.first, err)
					}
					w.continuing = true
				default:
					if err != nil || st.Complete {
						t.Fatalf("a later part of a cut entry: %+v, %v", st, err)
					}
				}
			case 2:
				oldest := -1
				for i := range ws {
					if ws[i].open && (oldest < 0 || ws[i].first < ws[oldest].first) {
						oldest = i
					}
				}
				d, ok := a.Cut()
				if ok != (oldest >= 0) || ok && (d.Region != uint64(oldest) || d.First != ws[oldest].first) {
					t.Fatalf("Cut gave %+v, %v; the oldest open entry is region %d's", d, ok, oldest)
				}
				if ok {
					ws[oldest].open, ws[oldest].cut = false, true
				}
			case 3:
				off++
			}
			var open int64
			for i := range ws {
				if ws[i].open {
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
