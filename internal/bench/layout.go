package bench

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Layout describes how a topic's records are laid out in record batches,
// which is what a replay of one region must fetch at the least: Kafka
// serves whole batches.
type Layout struct {
	Batches         int
	BatchBytes      int64 // bytes of all record batches
	Records         int64
	RegionsPerBatch float64 // mean distinct regions per batch
	// Selectivity is, averaged over regions, the bytes of the batches that
	// hold a region's records divided by that region's own entry data
	// bytes: 1 is ideal, about the number of regions is a fully mixed log.
	Selectivity    float64
	MaxSelectivity float64
	// PerRegion holds each region's own data bytes and the bytes of the
	// batches that hold its records.
	PerRegion map[uint64]RegionLayout
	// Spans lists the batches in log order: their bytes and, per region
	// they hold, the offset of its last record there.
	Spans []BatchSpan
}

// BatchSpan is one record batch of a Layout.
type BatchSpan struct {
	Base, End int64 // its offsets: [Base, End)
	Bytes     int64
	Last      map[uint64]int64 // region -> offset of its last record in the batch
}

// NeededBytes is what a replay of the regions, each from its own offset,
// must fetch at the least: the bytes of the batches holding a record of a
// region at or after its offset (regions not in from are not replayed).
func (l Layout) NeededBytes(from map[uint64]int64) int64 {
	var n int64
	for _, b := range l.Spans {
		for region, last := range b.Last {
			if f, ok := from[region]; ok && last >= f {
				n += b.Bytes
				break
			}
		}
	}
	return n
}

// RegionLayout is one region's share of a Layout.
type RegionLayout struct {
	OwnBytes   int64
	BatchBytes int64
}

// MeasureLayout reads the whole topic batch by batch with raw fetch
// requests and reports its layout.
func MeasureLayout(ctx context.Context, brokers []string, topic string) (Layout, error) {
	return MeasureLayoutWith(ctx, topic, kgo.SeedBrokers(brokers...))
}
