// Package bench measures kwal against a raw franz-go producer and consumer
// on the same broker, with the same records, in the same run. The go test
// benchmarks and `kwal bench` both use it, so their figures mean the same.
//
// The append workload is a datanode's: Writers goroutines, each owning
// Regions/Writers regions, append calls of EntriesPerCall entries of one
// region and wait for each call's acknowledgement before the next.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// Workload describes an append workload.
type Workload struct {
	Topics         int // namespaces; region r lives in topic r % Topics
	Regions        int
	Writers        int // goroutines; writer w owns regions w, w+Writers, ... (or region w%Regions when Writers > Regions)
	EntrySize      int // bytes of entry data
	EntriesPerCall int
	Calls          int // calls per writer
	Seed           uint64
	// Payload is what the entries hold: PayloadRandom ("" too) or
	// PayloadDatanode (entries of about EntrySize bytes).
	Payload string
}

// Validate reports a workload that cannot run.
func (w Workload) Validate() error {
	switch {
	case w.Topics < 1, w.Regions < 1, w.Writers < 1, w.EntriesPerCall < 1, w.Calls < 1:
		return fmt.Errorf("bench: topics, regions, writers, entries per call and calls must be >= 1: %+v", w)
	case w.EntrySize < 0:
		return fmt.Errorf("bench: entry size %d < 0", w.EntrySize)
	}
	return ValidPayload(w.Payload)
}

// Entries is the total number of entries the workload appends.
func (w Workload) Entries() int64 { return int64(w.Writers * w.Calls * w.EntriesPerCall) }

// Bytes is the total entry data the workload appends (about, for the
// datanode payload).
func (w Workload) Bytes() int64 { return w.Entries() * int64(w.EntrySize) }

// Call is one append call of the workload.
type Call struct {
	Topic   string
	Region  logstore.RegionID
	Entries [][]byte
}

// Plan returns each writer's calls, deterministic for a seed. Random entry
// data (incompressible) starts with the region and a sequence number;
// datanode entries are each a mutation of rows of the region's table.
func (w Workload) Plan(topics []string) [][]Call {
	out, _ := w.PlanContext(context.Background(), topics)
	return out
}

// PlanContext is Plan, which stops when ctx ends (a large plan takes
// seconds to fill: 64 writers × 200 calls of 10 × 2 KiB, about 2 s) and
// returns ctx's error.
func (w Workload) PlanContext(ctx context.Context, topics []string) ([][]Call, error) {
	out := make([][]Call, w.Writers)
	for wr := range w.Writers {
		rng := rand.New(rand.NewPCG(w.Seed, uint64(wr)))
		tables := map[int]*regionRows{}
		var owned []int
		for r := wr; r < w.Regions; r += w.Writers {
			owned = append(owned, r)
		}
		if len(owned) == 0 { // more writers than regions: writers share regions
			owned = []int{wr % w.Regions}
		}
		for c := range w.Calls {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			r := owned[c%len(owned)]
			call := Call{Topic: topics[r%len(topics)], Region: logstore.RegionID(r + 1)}
			for i := range w.EntriesPerCall {
				if w.Payload == PayloadDatanode {
					t := tables[r]
					if t == nil {
						t = newRegionRows(r+1, rng)
						tables[r] = t
					}
					call.Entries = append(call.Entries, t.entry(w.EntrySize, rng))
					continue
				}
				data := make([]byte, w.EntrySize)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				copy(data, fmt.Sprintf("r%d/c%d/i%d;", r+1, c, i))
				call.Entries = append(call.Entries, data)
			}
			out[wr] = append(out[wr], call)
		}
	}
	return out, nil
}

// AppendResult is what one append run measured.
type AppendResult struct {
	Entries   int64
	Bytes     int64 // entry data bytes
	Elapsed   time.Duration
	Latencies []time.Duration // per call, sorted
}

// MBps is entry data throughput in MB/s (10^6 bytes).
func (r AppendResult) MBps() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// EntriesPerSec is entry throughput.
func (r AppendResult) EntriesPerSec() float64 { return float64(r.Entries) / r.Elapsed.Seconds() }

// Quantile returns the q-quantile of call latency.
func (r AppendResult) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.Latencies)-1))
	return r.Latencies[i]
}

// Appender appends one call; AppendKwal and AppendRaw provide one each.
type Appender func(ctx context.Context, c Call) error

// Run plays the plan's writers concurrently through app and times it.
// progress, when set, is called after every call with its entry count.
func Run(ctx context.Context, plan [][]Call, app Appender, progress func(entries, bytes int)) (AppendResult, error) {
	return play(ctx, plan, app, progress, func(i, n int) bool { return i < n })
}

// play runs each writer's calls in order, the i-th call (modulo the
// writer's count n) as long as more(i, n) holds, and times the whole.
func play(ctx context.Context, plan [][]Call, app Appender, progress func(entries, bytes int), more func(i, n int) bool) (AppendResult, error) {
	var (
		mu   sync.Mutex
		res  AppendResult
		errs []error
		wg   sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for _, calls := range plan {
		if len(calls) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lats := make([]time.Duration, 0, len(calls))
			var n, b int64
			for i := 0; more(i, len(calls)) && ctx.Err() == nil; i++ {
				c := calls[i%len(calls)]
				t0 := time.Now()
				if err := app(ctx, c); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel()
					return
				}
				lats = append(lats, time.Since(t0))
				cb := 0
				for _, e := range c.Entries {
					cb += len(e)
				}
				n += int64(len(c.Entries))
				b += int64(cb)
				if progress != nil {
					progress(len(c.Entries), cb)
				}
			}
			mu.Lock()
			res.Entries += n
			res.Bytes += b
			res.Latencies = append(res.Latencies, lats...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Latencies)
	return res, errors.Join(errs...)
}

// KwalAppender appends each call with one AppendBatch.
func KwalAppender(s logstore.LogStore) Appender {
	return func(ctx context.Context, c Call) error {
		batch := make([]logstore.Entry, len(c.Entries))
		for i, d := range c.Entries {
			batch[i] = logstore.Entry{Namespace: c.Topic, Region: c.Region, Data: d}
		}
		_, err := s.AppendBatch(ctx, batch)
		return err
	}
}

// RawOptions configure the raw franz-go producer like kwal's lanes.
type RawOptions struct {
	MaxBatchBytes int
	Compression   kgo.CompressionCodec
	Linger        time.Duration
}

// RawClient returns a plain franz-go producer client with acks=all and
// idempotence (franz-go's defaults), writing partition 0.
func RawClient(brokers []string, o RawOptions) (*kgo.Client, error) {
	return RawClientWith(o, kgo.SeedBrokers(brokers...))
}

// RawAppender produces each call's records, encoded exactly as kwal
// encodes them, with ProduceSync on one shared client: the same records,
// the same batch settings, the same concurrency, no kwal in between.
func RawAppender(cl *kgo.Client, maxBatchBytes int) Appender {
	return func(ctx context.Context, c Call) error {
		recs, err := Records(c, maxBatchBytes)
		if err != nil {
			return err
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	}
}

// Records encodes a call as kwal would.
func Records(c Call, maxBatchBytes int) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	for _, d := range c.Entries {
		parts, err := record.Split(uint64(c.Region), d, maxBatchBytes)
		if err != nil {
			return nil, err
		}
		for i := range parts {
			recs = append(recs, &kgo.Record{Topic: c.Topic, Partition: 0, Key: parts[i].Key(), Value: parts[i].Data})
		}
	}
	return recs, nil
}

// RawAsync produces every call's records from one goroutine without waiting
// (the fastest a single franz-go client can go) and waits for all
// acknowledgements.
func RawAsync(ctx context.Context, cl *kgo.Client, plan [][]Call, maxBatchBytes int) (AppendResult, error) {
	var all []*kgo.Record
	var res AppendResult
	// Interleave the writers' calls as they would arrive.
	for i := 0; ; i++ {
		any := false
		for _, calls := range plan {
			if i < len(calls) {
				any = true
				recs, err := Records(calls[i], maxBatchBytes)
				if err != nil {
					return res, err
				}
				all = append(all, recs...)
				res.Entries += int64(len(calls[i].Entries))
				for _, e := range calls[i].Entries {
					res.Bytes += int64(len(e))
				}
			}
		}
		if !any {
			break
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	wg.Add(len(all))
	for _, r := range all {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, first
}
