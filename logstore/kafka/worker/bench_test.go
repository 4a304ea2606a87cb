package worker

import (
	"context"
	"fmt"
	"sync"
	"syscall"
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

// BenchmarkDispatcherLayouts measures the write path's own CPU per call
// in the matrix's layouts without Kafka: 64 goroutines, each appending
// one-region calls of 10 entries of 2 KiB for a region of its own, the
// regions spread over 1, 16 or 64 topics, through 16 lanes whose "broker"
// answers at once. It reports the process CPU (user and system) per call,
// which counts the dispatcher's wake-ups as well as its work.
func BenchmarkDispatcherLayouts(b *testing.B) {
	for _, topics := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("64r-%dt", topics), func(b *testing.B) { benchDispatcher(b, topics) })
	}
}

func benchDispatcher(b *testing.B, topics int) {
	log := &fakeLog{discard: true}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 16)})
	const writers = 64
	ps := make([]*Producer, topics)
	for i := range ps {
		ps[i] = NewProducer(Options{Topic: fmt.Sprint("t", i), MaxBatchBytes: 1 << 20, MaxQueuedBytes: 64 << 20,
			ProduceTimeout: 10 * time.Second, Lanes: lanes, Metrics: NewMetrics()})
	}
	defer func() {
		for _, p := range ps {
			_ = p.Close(context.Background())
		}
		lanes.Close()
	}()
	ctx := context.Background()
	per := b.N/writers + 1
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			es := make([]Entry, 10)
			for i := range es {
				es[i] = Entry{Region: uint64(w), Data: make([]byte, 2048)}
			}
			p := ps[w%topics]
			for range per {
				pd, err := p.SubmitBy(ctx, es, Deadline{At: time.Now().Add(time.Minute), Cause: ErrTimeout})
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
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(writers*per), "cpu-ns/call")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
