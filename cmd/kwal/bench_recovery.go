package main

import (
	"context"

	"github.com/kwal/kwal/internal/bench"
	"github.com/kwal/kwal/logstore/kafka"
)

// measureRecovery runs the recovery benchmark (internal/bench) on the
// first round's kwal topics, each phase on a store reopened with the run's
// index directory, as after a datanode restart.
func (b *benchRun) measureRecovery(ctx context.Context) error {
	if b.o.recovery == 0 {
		return nil
	}
	kt := b.rounds[0].kwal
	cfg := kafka.DefaultConfig()
	b.storeConfig(&cfg)
	b.phase("recovery: %d region(s) in %d topic(s), every phase on a store reopened with its index dir…", b.w.Regions, len(kt))
	rec, err := bench.MeasureRecovery(ctx, bench.RecoveryConfig{
		Open:    func(ctx context.Context) (*kafka.LogStore, error) { return b.s.openStore(ctx, b.storeConfig) },
		Topics:  kt,
		Regions: b.w.RegionsOf(kt),
		Runs:    b.o.recovery,
		Seed:    b.w.Seed,
		Layout: func(ctx context.Context, t string) (bench.Layout, error) {
			return bench.MeasureLayoutWith(ctx, t, b.copts...)
		},
		RawScan: func(ctx context.Context, t string) (bench.ConsumeResult, error) {
			return bench.RawConsumeWith(ctx, t, kafka.DefaultConfig().FetchMaxBytes, b.copts...)
		},
		Floor: func(ctx context.Context, ranges []bench.OffsetRange) (bench.FloorResult, error) {
			return bench.FetchFloor(ctx, ranges, cfg.FetchConnections(), b.copts...)
		},
		FloorChunk: cfg.FetchChunkBytes(),
	})
	if err != nil {
		return err
	}
	b.rep.Recovery = &rec
	return nil
}
