package kafka

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLZ4CompressorWrites64KiBBlocks protects the lanes' lz4 frames: each
// declares 64 KiB blocks (what a reader allocates per decompression) and
// decompresses, with franz-go's decompressor as a reader uses it, to
// exactly its input, for empty, tiny, block-straddling and batch-sized
// inputs of random and repetitive bytes, from concurrent lanes sharing the
// compressor.
func TestLZ4CompressorWrites64KiBBlocks(t *testing.T) {
	c := newLZ4Compressor()
	d := kgo.DefaultDecompressor()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for _, n := range []int{0, 1, 100, 64<<10 - 1, 64 << 10, 64<<10 + 1, 300 << 10, 1 << 20} {
				for _, repetitive := range []bool{false, true} {
					src := make([]byte, n)
					for i := range src {
						if repetitive {
							src[i] = "host=h07 dc=eu-1 cpu=12.25\n"[i%27]
						} else {
							src[i] = byte(rng.Uint32())
						}
					}
					out, codec := c.Compress(new(bytes.Buffer), src)
					require.Equal(t, kgo.CodecLz4, codec)
					require.GreaterOrEqual(t, len(out), 7)
					require.Equal(t, uint32(0x184D2204), binary.LittleEndian.Uint32(out), "lz4 frame magic")
					require.Equal(t, byte(4), out[5]>>4&7, "block size index 4: 64 KiB blocks")
					got, err := d.Decompress(out, kgo.CodecLz4)
					require.NoError(t, err)
					require.True(t, bytes.Equal(src, got), "%d bytes, repetitive %v", n, repetitive)
				}
			}
		})
	}
	wg.Wait()
}
