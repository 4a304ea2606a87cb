package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeResult is what a raw consumer's full read of a topic measured.
type ConsumeResult struct {
	Records int64
	Bytes   int64 // keys and values
	Elapsed time.Duration
}

// RawConsume reads partition 0 of topic from its start to its current end
// with a plain franz-go consumer (fetch limits as given), the baseline for
// kwal's full-scan replay.
func RawConsume(ctx context.Context, brokers []string, topic string, fetchMaxBytes int32) (ConsumeResult, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return ConsumeResult{}, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return ConsumeResult{}, err
	}
	eo, ok := ends.Lookup(topic, 0)
	if !ok || eo.Err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: end offset of %s: %v", topic, eo.Err)
	}
	var res ConsumeResult
	if eo.Offset == 0 {
		return res, nil
	}
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(fetchMaxBytes), kgo.FetchMaxPartitionBytes(fetchMaxBytes))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return res, errs[0].Err
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			res.Records++
			res.Bytes += int64(len(r.Key) + len(r.Value))
			if r.Offset+1 >= eo.Offset {
				done = true
			}
		})
		if done {
			res.Elapsed = time.Since(start)
			return res, nil
		}
	}
}

// PeakHeap runs fn while sampling the Go heap every millisecond and
// returns the highest heap in use seen, in bytes, above what was in use
// before fn started. The collector runs at GOGC=10 meanwhile, so that the
// figure tracks what fn keeps alive rather than garbage awaiting a
// collection (whose allowance grows with everything else in the process,
// an in-process broker's data included).
func PeakHeap(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > peak {
					peak = m.HeapInuse - base
				}
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return peak
}
