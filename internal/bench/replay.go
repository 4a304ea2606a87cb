package bench

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

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
// kwal's full-scan replay. The time includes listing the offsets, as a
// kwal read's does.
func RawConsume(ctx context.Context, brokers []string, topic string, fetchMaxBytes int32) (ConsumeResult, error) {
	return RawConsumeWith(ctx, topic, fetchMaxBytes, kgo.SeedBrokers(brokers...))
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
