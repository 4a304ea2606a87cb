package worker

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkWorkerOverhead measures the producer's own cost per call: 64
// goroutines appending one-region calls of 10 small entries through 16
// lanes whose "broker" answers at once. It bounds how many calls per
// second kwal can group and resolve, independent of Kafka.
func BenchmarkWorkerOverhead(b *testing.B) {
	log := &fakeLog{}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 16)})
	p := NewProducer(Options{Topic: "t", MaxBatchBytes: 1 << 20, MaxQueuedBytes: 64 << 20, ProduceTimeout: 10 * time.Second, Lanes: lanes, Metrics: NewMetrics()})
	defer func() {
		_ = p.Close(context.Background())
		lanes.Close()
	}()
	ctx := context.Background()
	entries := make([]Entry, 10)
	for i := range entries {
		entries[i].Data = make([]byte, 64)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/64 + 1
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			es := make([]Entry, len(entries))
			copy(es, entries)
			for i := range es {
				es[i].Region = uint64(w)
			}
			for range per {
				pd, err := p.Submit(ctx, es)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := pd.Wait(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	log.mu.Lock()
	b.ReportMetric(float64(len(log.calls))/float64(64*per), "produces/call")
	log.recs = nil
	log.mu.Unlock()
}
