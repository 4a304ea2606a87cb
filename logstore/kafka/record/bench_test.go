package record

import (
	"fmt"
	"testing"
)

// benchLimit is the store's default batch limit.
const benchLimit = 1 << 20

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkSplitEncode measures the write path: splitting an entry under
// the default 1 MiB batch limit and encoding every part's key (the key's
// record CRC covers the part's data, so this is mostly CRC-32C).
func BenchmarkSplitEncode(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		data := randBytes(newRand(1), size)
		b.Run(sizeName(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				parts, err := Split(1, data, benchLimit)
				if err != nil {
					b.Fatal(err)
				}
				for i := range parts {
					_ = parts[i].Key()
				}
			}
		})
	}
}

// BenchmarkDecode measures decoding one record: a 1 KiB whole entry (record
// CRC and entry CRC) and a full part under the 1 MiB limit.
func BenchmarkDecode(b *testing.B) {
	cases := []struct {
		name string
		p    Part
	}{
		{"whole-1KiB", mustSplit(b, 1, randBytes(newRand(2), 1<<10), benchLimit)[0]},
		{"part-1MiB", mustSplit(b, 1, randBytes(newRand(3), 2<<20), benchLimit)[0]},
	}
	for _, c := range cases {
		key, value := c.p.Key(), c.p.Data
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			for b.Loop() {
				if _, err := Decode(key, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAssemble measures reassembling decoded parts into entries under
// the 1 MiB limit: whole entries (no copy), and split entries (copy and
// end-to-end CRC).
func BenchmarkAssemble(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 16 << 20, 64 << 20} {
		parts := mustSplit(b, 1, randBytes(newRand(4), size), benchLimit)
		b.Run(fmt.Sprintf("%s-%dparts", sizeName(size), len(parts)), func(b *testing.B) {
			a := NewAssembler()
			off := int64(0)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, p := range parts {
					st, err := a.Add(off, p)
					if err != nil {
						b.Fatal(err)
					}
					off++
					if st.Dropped {
						b.Fatal("dropped", st.Drop)
					}
				}
			}
		})
	}
}
