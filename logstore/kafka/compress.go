package kafka

import (
	"bytes"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compression is the producer option of the store's lanes for Config.Compression
// (already validated): franz-go's codecs, except that lz4 goes through
// lz4Compressor, shared by every lane.
func compression(name string) kgo.ProducerOpt {
	if name == "lz4" {
		return kgo.WithCompressor(newLZ4Compressor())
	}
	codec, _ := CompressionCodec(name)
	return kgo.ProducerBatchCompression(codec)
}

// lz4Compressor writes lz4 frames of 64 KiB blocks, as Kafka's Java client
// does, instead of the 4 MiB blocks of pierrec/lz4's default (which
// franz-go's compressor keeps). Whoever decompresses a frame holds two
// buffers of its block size while it does: with 4 MiB blocks, each fetch
// a read decompresses takes 8 MiB beyond its records, and a read of a
// compressed log held several times ReadMemoryBound. lz4 finds matches at
// most 64 KiB back, so smaller blocks cost little compression (the
// benchmark's datanode payload: docs/benchmarks.md). One compressor serves
// every lane, so that its pool holds as many writers as compress at once,
// not as many per lane.
type lz4Compressor struct{ writers sync.Pool }

func newLZ4Compressor() *lz4Compressor {
	c := &lz4Compressor{}
	c.writers.New = func() any {
		w := lz4.NewWriter(nil)
		// Only an option's own bad value fails, and 64 KiB is valid.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}
	return c
}

// Compress implements kgo.Compressor.
func (c *lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	w := c.writers.Get().(*lz4.Writer)
	defer c.writers.Put(w)
	w.Reset(dst)
	if _, err := w.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := w.Close(); err != nil {
		return nil, kgo.CodecError
	}
	return dst.Bytes(), kgo.CodecLz4
}
