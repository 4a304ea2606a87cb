package bench

// The peers: emulations, on franz-go, of the Kafka WAL producers a datanode
// team runs today, so that kwal is measured against them on the same broker,
// workload and network. Each follows its published design where it decides
// the figures (connections, requests per call, what is awaited, batch
// settings); docs/benchmarks.md says what each emulates and from which
// source.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// GreptimeOptions configure the GreptimeDB-style producer.
type GreptimeOptions struct {
	MaxBatchBytes int                  // a produce request's records (GreptimeDB max_batch_bytes); 0: 1 MiB
	Compression   kgo.CompressionCodec // GreptimeDB's is LZ4
	RequestBatch  int                  // requests a topic worker drains at once; 0: 64
}

// greptimeMetaSize is the room GreptimeDB keeps in a record for its JSON
// key (ESTIMATED_META_SIZE): an entry is split into records of at most
// max_batch_bytes minus this.
const greptimeMetaSize = 256

// Greptime is the GreptimeDB-style producer: one worker goroutine per
// topic, each with its own client (so its own connection), which takes the
// next request and up to RequestBatch-1 more that are already waiting,
// then produces each request's records as one produce request (more only
// when they exceed MaxBatchBytes), waiting for each before the next. The
// records' keys are GreptimeDB's JSON record metadata. It keeps each
// region's record offsets, as GreptimeDB's index collector does, for
// GreptimeReplay.
type Greptime struct {
	o       GreptimeOptions
	workers map[string]*greptimeWorker
	wg      sync.WaitGroup
	stop    chan struct{}
	// ctx is the workers' produces' context, ended by Close: GreptimeDB
	// awaits a produce whatever its caller does, but Close must not wait
	// for a broker that never answers.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	offsets map[string]map[uint64][]int64 // topic -> region -> offsets of its records, in log order
}

type greptimeWorker struct {
	topic string
	cl    *kgo.Client
	in    chan greptimeReq
}

type greptimeReq struct {
	c    Call
	done chan error // buffered: the worker never blocks on an abandoned caller
}

// NewGreptime starts a worker, with a client of its own made with opts
// (seeds, dialer, TLS, SASL), for each topic. Close stops them.
func NewGreptime(topics []string, o GreptimeOptions, opts ...kgo.Opt) (*Greptime, error) {
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = 1 << 20
	}
	if o.RequestBatch == 0 {
		o.RequestBatch = 64
	}
	if o.MaxBatchBytes <= greptimeMetaSize {
		return nil, fmt.Errorf("bench: GreptimeDB-style max batch bytes %d must exceed %d", o.MaxBatchBytes, greptimeMetaSize)
	}
	g := &Greptime{o: o, workers: map[string]*greptimeWorker{}, stop: make(chan struct{}), offsets: map[string]map[uint64][]int64{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, t := range topics {
		cl, err := kgo.NewClient(append(slices.Clone(opts),
			kgo.ManualFlushing(), // a request's records leave together, when the worker flushes them
			kgo.DisableIdempotentWrite(),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchMaxBytes(int32(o.MaxBatchBytes)),
			kgo.ProducerBatchCompression(o.Compression),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.MaxBufferedRecords(math.MaxInt32),
		)...)
		if err != nil {
			g.Close()
			return nil, err
		}
		w := &greptimeWorker{topic: t, cl: cl, in: make(chan greptimeReq, o.RequestBatch)}
		g.workers[t] = w
		g.offsets[t] = map[uint64][]int64{}
		g.wg.Add(1)
		go g.run(w)
	}
	return g, nil
}

// Close stops the workers and closes their clients; requests still queued
// fail.
func (g *Greptime) Close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	g.cancel()
	g.wg.Wait()
	for _, w := range g.workers {
		w.cl.Close()
	}
}

var errGreptimeClosed = errors.New("bench: GreptimeDB-style producer closed")

// Appender queues each call to its topic's worker and waits for its result.
func (g *Greptime) Appender() Appender {
	return func(ctx context.Context, c Call) error {
		w := g.workers[c.Topic]
		if w == nil {
			return fmt.Errorf("bench: GreptimeDB-style producer has no worker for topic %q", c.Topic)
		}
		r := greptimeReq{c: c, done: make(chan error, 1)}
		select {
		case w.in <- r:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.stop:
			return errGreptimeClosed
		}
		select {
		case err := <-r.done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *Greptime) run(w *greptimeWorker) {
	defer g.wg.Done()
	batch := make([]greptimeReq, 0, g.o.RequestBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-w.in:
			batch = append(batch, r)
		case <-g.stop:
			g.failQueued(w)
			return
		}
	drain:
		for len(batch) < g.o.RequestBatch {
			select {
			case r := <-w.in:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		for _, r := range batch {
			r.done <- g.produce(w, r.c)
		}
	}
}

func (g *Greptime) failQueued(w *greptimeWorker) {
	for {
		select {
		case r := <-w.in:
			r.done <- errGreptimeClosed
		default:
			return
		}
	}
}

// produce sends one request's records: in groups of at most MaxBatchBytes
// (by key and value length, GreptimeDB's approximate size), each flushed
// and awaited before the next.
func (g *Greptime) produce(w *greptimeWorker, c Call) error {
	recs := GreptimeRecords(c, g.o.MaxBatchBytes)
	ctx := g.ctx
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) {
			s := len(recs[n].Key) + len(recs[n].Value)
			if n > 0 && size+s > g.o.MaxBatchBytes {
				break
			}
			size += s
			n++
		}
		group := recs[:n]
		recs = recs[n:]
		var (
			mu    sync.Mutex
			first error
		)
		for _, r := range group {
			w.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			})
		}
		if err := w.cl.Flush(ctx); err != nil {
			return err
		}
		mu.Lock()
		err := first
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("bench: GreptimeDB-style produce to %s: %w", w.topic, err)
		}
		g.mu.Lock()
		offs := g.offsets[w.topic]
		for _, r := range group {
			offs[uint64(c.Region)] = append(offs[uint64(c.Region)], r.Offset)
		}
		g.mu.Unlock()
	}
	return nil
}

// RegionOffsets returns the offsets of region's records in topic, in log
// order (what GreptimeDB's index holds for the region).
func (g *Greptime) RegionOffsets(topic string, region uint64) []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.offsets[topic][region])
	slices.Sort(out)
	return out
}

// GreptimeRecords encodes a call as GreptimeDB does: each entry is one
// record (type Full), or, when larger than maxBatchBytes less room for the
// key, records of type First, Middle(i) and Last; the key is the JSON of
// the record's metadata {version, tp, entry_id, ns}.
func GreptimeRecords(c Call, maxBatchBytes int) []*kgo.Record {
	part := maxBatchBytes - greptimeMetaSize
	var recs []*kgo.Record
	for _, d := range c.Entries {
		if len(d) <= part {
			recs = append(recs, &kgo.Record{Topic: c.Topic, Key: greptimeKey(`"Full"`, uint64(c.Region)), Value: d})
			continue
		}
		for i := 0; i*part < len(d); i++ {
			tp := `{"Middle":` + strconv.Itoa(i) + `}`
			switch {
			case i == 0:
				tp = `"First"`
			case (i+1)*part >= len(d):
				tp = `"Last"`
			}
			recs = append(recs, &kgo.Record{Topic: c.Topic, Key: greptimeKey(tp, uint64(c.Region)), Value: d[i*part : min(len(d), (i+1)*part)]})
		}
	}
	return recs
}

// greptimeKey is serde_json's encoding of GreptimeDB's RecordMeta (version
// 0, entry_id 0 and an empty topic, as GreptimeDB writes them).
func greptimeKey(tp string, region uint64) []byte {
	return []byte(`{"version":0,"tp":` + tp + `,"entry_id":0,"ns":{"region_id":` + strconv.FormatUint(region, 10) + `,"topic":""}}`)
}

// GreptimeRegion returns the region of a GreptimeDB-style record key.
func GreptimeRegion(key []byte) (uint64, bool) {
	const tag = `"region_id":`
	s := string(key)
	i := strings.Index(s, tag)
	if i < 0 {
		return 0, false
	}
	s = s[i+len(tag):]
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	r, err := strconv.ParseUint(s[:j], 10, 64)
	return r, err == nil
}

// MimirOptions configure the Mimir-style producer.
type MimirOptions struct {
	Compression kgo.CompressionCodec
}

// Mimir's writer client settings (pkg/storage/ingest/writer_client.go and
// writer.go).
const (
	MimirLinger     = 50 * time.Millisecond
	MimirInFlight   = 20
	MimirBatchBytes = 16_000_000
)

// WithMimirTopicConfigs returns topic configs (a copy) that let the
// Mimir-style producer's batches in: max.message.bytes, unless set, of
// MimirBatchBytes (or maxBatchBytes) and room for framing.
func WithMimirTopicConfigs(c map[string]string, maxBatchBytes int) map[string]string {
	c = maps.Clone(c)
	if c == nil {
		c = map[string]string{}
	}
	if _, ok := c["max.message.bytes"]; !ok {
		c["max.message.bytes"] = strconv.Itoa(max(MimirBatchBytes, maxBatchBytes) + 64<<10)
	}
	return c
}

// MimirClient is the Mimir-style producer: one client shared by every
// writer, idempotence off, up to MimirInFlight produce requests in flight
// per broker, a MimirLinger linger and MimirBatchBytes batches, unbounded
// buffering. RawAppender on it is Mimir's ProduceSync: each call produces
// its records and waits for them.
func MimirClient(o MimirOptions, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(slices.Clone(opts),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(MimirBatchBytes),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(MimirLinger),
		kgo.MaxProduceRequestsInflightPerBroker(MimirInFlight),
		kgo.ProducerBatchCompression(o.Compression),
		kgo.MaxBufferedRecords(math.MaxInt32),
		kgo.MaxBufferedBytes(0),
	)...)
}
