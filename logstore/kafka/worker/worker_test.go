package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLog is an in-memory broker with one partition per topic. A client's
// Flush writes what it buffered with the freedom franz-go has: each
// topic's records leave as batches of at most batchBytes (0: one batch),
// the k-th batches of all topics travelling in the flush's k-th produce
// request (Kafka takes one batch per partition per request). Each request
// is appended atomically after a random delay, so other clients' requests
// may land between the requests of one flush, and each batch may fail on
// its own.
type fakeLog struct {
	mu         sync.Mutex
	recs       []*kgo.Record // every record, in the order written
	byTopic    map[string]int64
	calls      [][]uint64 // regions of each batch written
	flushes    [][]string // topics of each produce request written, one per batch
	delay      func() time.Duration
	failNth    map[int]error            // flush number -> error for all its records
	failTopic  func(topic string) error // when set, the error for a topic's batch
	batchBytes int                      // a batch's bound (key and value bytes); 0: none
	n          int
	// requests counts the produce requests written; split counts flushes
	// that left as several, interleaved those of them that had another
	// client's request land between two of theirs.
	requests, split, interleaved int
	block                        chan struct{} // when set, flush waits for it
	entered                      chan struct{} // when set, flush signals it first
	discard                      bool          // keep no records, batches or requests (a benchmark's log)
}

// fakeClient buffers produced records until Flush, as a kgo client with
// ManualFlushing does.
type fakeClient struct {
	log *fakeLog
	mu  sync.Mutex
	buf []fakeRec
}

type fakeRec struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

func newFakeClients(log *fakeLog, n int) []Client {
	out := make([]Client, n)
	for i := range out {
		out[i] = &fakeClient{log: log}
	}
	return out
}

func (c *fakeClient) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	c.mu.Lock()
	c.buf = append(c.buf, fakeRec{r, promise})
	c.mu.Unlock()
}

func (c *fakeClient) Flush(context.Context) error {
	c.mu.Lock()
	buf := c.buf
	c.buf = nil
	c.mu.Unlock()
	l := c.log
	if l.entered != nil {
		l.entered <- struct{}{}
	}
	if l.block != nil {
		<-l.block
	}
	l.mu.Lock()
	l.n++
	flushErr := l.failNth[l.n]
	batchBytes := l.batchBytes
	l.mu.Unlock()
	// Each topic's records, in the order the topics first appear, cut into
	// batches.
	var topics []string
	batches := map[string][][]int{}
	size := map[string]int{}
	for i, fr := range buf {
		t := fr.r.Topic
		bs, ok := batches[t]
		if !ok {
			topics = append(topics, t)
		}
		n := len(fr.r.Key) + len(fr.r.Value)
		if len(bs) == 0 || (batchBytes > 0 && size[t]+n > batchBytes && len(bs[len(bs)-1]) > 0) {
			bs, size[t] = append(bs, nil), 0
		}
		bs[len(bs)-1] = append(bs[len(bs)-1], i)
		size[t] += n
		batches[t] = bs
	}
	errs := make([]error, len(buf))
	lastRequest := -1
	wasInterleaved := false
	for round := 0; ; round++ {
		if l.delay != nil {
			time.Sleep(l.delay()) // a random interleaving with other clients' requests, not synchronisation
		}
		l.mu.Lock()
		if l.byTopic == nil {
			l.byTopic = map[string]int64{}
		}
		var sent []string
		for _, t := range topics {
			if round >= len(batches[t]) {
				continue
			}
			batch := batches[t][round]
			err := flushErr
			if err == nil && l.failTopic != nil {
				err = l.failTopic(t)
			}
			if err != nil {
				for _, i := range batch {
					errs[i] = err
				}
				continue
			}
			var regions []uint64
			for _, i := range batch {
				r := buf[i].r
				r.Offset = l.byTopic[t]
				l.byTopic[t]++
				if l.discard {
					continue
				}
				// The log keeps copies, as a broker keeps bytes: the
				// producer reuses a record's memory once its lane is back.
				l.recs = append(l.recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
					Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)})
				if p, err := record.Decode(r.Key, r.Value); err == nil {
					regions = append(regions, p.Region)
				}
			}
			if !l.discard {
				l.calls = append(l.calls, regions)
			}
			sent = append(sent, t)
		}
		if len(sent) > 0 && !l.discard {
			l.flushes = append(l.flushes, sent)
			if lastRequest >= 0 && l.requests > lastRequest+1 {
				wasInterleaved = true
			}
			lastRequest = l.requests
			l.requests++
		}
		more := false
		for _, t := range topics {
			more = more || round+1 < len(batches[t])
		}
		if !more {
			if round > 0 {
				l.split++
				if wasInterleaved {
					l.interleaved++
				}
			}
			l.mu.Unlock()
			break
		}
		l.mu.Unlock()
	}
	for i, fr := range buf {
		fr.promise(fr.r, errs[i])
	}
	return nil
}

type observed struct {
	mu   sync.Mutex
	runs []index.Run
}

func (o *observed) Observe(_ string, runs []index.Run) {
	o.mu.Lock()
	o.runs = append(o.runs, runs...)
	o.mu.Unlock()
}

func newTestProducer(t *testing.T, log *fakeLog, lanes int, mutate func(*Options)) (*Producer, *observed) {
	t.Helper()
	obs := &observed{}
	opts := Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: 10 * time.Second,
		Lanes: NewLanes(LanesOptions{Clients: newFakeClients(log, lanes)}), Collector: obs, Metrics: NewMetrics()}
	if mutate != nil {
		mutate(&opts)
	}
	p := NewProducer(opts)
	t.Cleanup(func() {
		if log.block != nil {
			select {
			case <-log.block:
			default:
				close(log.block)
			}
		}
		require.NoError(t, p.Close(context.Background()))
		opts.Lanes.Close()
	})
	return p, obs
}

// TestOrderingProperty submits random requests (random regions, several
// per request, some entries split) from one goroutine without waiting, on
// several lanes with random produce delays, a flush leaving as several
// requests as franz-go may (see fakeLog), and checks the log: every
// region's entries appear in submission order, every request's entries in
// slice order, the offsets the requests report are where their entries
// are, and the collector saw every record, each in a run of its region.
func TestOrderingProperty(t *testing.T) {
	var split atomic.Int64
	defer func() { require.Positive(t, split.Load(), "some flushes left as several requests") }()
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			var dmu sync.Mutex
			log := &fakeLog{batchBytes: 4096, delay: func() time.Duration {
				dmu.Lock()
				defer dmu.Unlock()
				return time.Duration(rng.IntN(300)) * time.Microsecond
			}}
			p, obs := newTestProducer(t, log, 1+int(seed%5), func(o *Options) {
				if seed%2 == 0 {
					o.MaxRegions = 3
				}
			})
			ctx := context.Background()
			type sub struct {
				pd      *Pending
				entries []Entry
			}
			var subs []sub
			dmu.Lock()
			n := 50 + rng.IntN(100)
			for i := range n {
				var es []Entry
				single := uint64(1 + rng.IntN(6)) // odd seeds: one region per request
				for j := range 1 + rng.IntN(4) {
					size := rng.IntN(200)
					if rng.IntN(8) == 0 {
						size = 5000 + rng.IntN(6000)
					}
					data := make([]byte, size)
					copy(data, fmt.Sprintf("%d/%d", i, j))
					region := uint64(1 + rng.IntN(6))
					if seed%2 == 1 {
						region = single
					}
					es = append(es, Entry{Region: region, Data: data})
				}
				dmu.Unlock()
				pd, err := p.Submit(ctx, es)
				dmu.Lock()
				require.NoError(t, err)
				subs = append(subs, sub{pd, es})
			}
			dmu.Unlock()
			lastPos := map[uint64]int64{}
			for _, s := range subs {
				offs, err := s.pd.Wait(ctx)
				require.NoError(t, err)
				require.Len(t, offs, len(s.entries))
				_ = offs
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			// Reassemble the log and map each entry's first offset to it.
			asm := record.NewAssembler()
			at := map[int64]record.Assembled{}
			for _, r := range log.recs {
				part, err := record.Decode(r.Key, r.Value)
				require.NoError(t, err)
				st, err := asm.Add(r.Offset, part)
				require.NoError(t, err)
				require.False(t, st.Dropped, "nothing is dropped at offset %d", r.Offset)
				if st.Complete {
					at[st.Entry.First] = st.Entry
				}
			}
			for _, s := range subs {
				offs, _ := s.pd.Wait(ctx)
				for i, e := range s.entries {
					got, ok := at[offs[i]]
					require.True(t, ok, "an entry starts at reported offset %d", offs[i])
					require.Equal(t, e.Region, got.Region)
					require.Equal(t, e.Data, got.Data)
					require.Greater(t, offs[i], lastPos[e.Region]-1, "region %d keeps submission order", e.Region)
					lastPos[e.Region] = got.Last + 1
					if i > 0 {
						require.Greater(t, offs[i], offs[i-1], "a request keeps slice order")
					}
				}
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			seen := 0
			for _, r := range obs.runs {
				for o := r.Start; o < r.Start+r.Count; o++ {
					p, err := record.Decode(log.recs[o].Key, log.recs[o].Value)
					require.NoError(t, err)
					require.Equal(t, p.Region, r.Region, "observed run region at %d", o)
				}
				seen += int(r.Count)
			}
			require.Equal(t, len(log.recs), seen, "every acknowledged record was observed once")
			if seed%2 == 1 {
				for _, regions := range log.calls {
					for _, r := range regions {
						require.Equal(t, regions[0], r, "with MaxRegions 1, batches are region-pure")
					}
				}
			}
			split.Add(int64(log.split))
		})
	}
}

// TestFailedProduceFailsExactlyItsRequests protects error fan-out: the
// requests of a failed produce call fail with its error, requests of other
// calls succeed, and the producer keeps serving.
func TestFailedProduceFailsExactlyItsRequests(t *testing.T) {
	boom := errors.New("boom")
	log := &fakeLog{failNth: map[int]error{2: boom}}
	p, _ := newTestProducer(t, log, 1, nil)
	ctx := context.Background()
	var errs []error
	for i := range 4 {
		pd, err := p.Submit(ctx, []Entry{{Region: uint64(i), Data: []byte("x")}})
		require.NoError(t, err)
		_, err = pd.Wait(ctx)
		errs = append(errs, err)
	}
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], boom)
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
}

// TestTimeoutFailsAndHoldsRegion protects the produce timeout: a produce
// that never returns fails its request with ErrTimeout, and the region
// stays busy (its next request waits) until the produce really returns.
func TestTimeoutFailsAndHoldsRegion(t *testing.T) {
	log := &fakeLog{block: make(chan struct{})}
	p, _ := newTestProducer(t, log, 2, func(o *Options) { o.ProduceTimeout = 50 * time.Millisecond })
	ctx := context.Background()
	pd, err := p.Submit(ctx, []Entry{{Region: 1, Data: []byte("stuck")}})
	require.NoError(t, err)
	_, err = pd.Wait(ctx)
	require.ErrorIs(t, err, ErrTimeout)

	pd2, err := p.Submit(ctx, []Entry{{Region: 1, Data: []byte("next")}})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = pd2.Wait(wctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "region 1 is held while the stuck produce may still land")
	require.Contains(t, err.Error(), "withdrawn", "it never left the queue")
	close(log.block)
	pd3, err := p.Submit(ctx, []Entry{{Region: 1, Data: []byte("after")}})
	require.NoError(t, err)
	_, err = pd3.Wait(ctx)
	require.NoError(t, err)
}

// TestCloseDrainsQueue protects Close: everything queued before Close is
// sent and resolved, and Submit after Close fails with ErrClosed.
func TestCloseDrainsQueue(t *testing.T) {
	log := &fakeLog{delay: func() time.Duration { return time.Millisecond }}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 1)})
	p := NewProducer(Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: time.Second, Lanes: lanes})
	ctx := context.Background()
	var pds []*Pending
	for i := range 50 {
		pd, err := p.Submit(ctx, []Entry{{Region: uint64(i % 3), Data: []byte("x")}})
		require.NoError(t, err)
		pds = append(pds, pd)
	}
	require.NoError(t, p.Close(ctx))
	for _, pd := range pds {
		_, err := pd.Wait(ctx)
		require.NoError(t, err)
	}
	_, err := p.Submit(ctx, []Entry{{Region: 1}})
	require.ErrorIs(t, err, logstore.ErrClosed)
	require.NoError(t, p.Close(ctx), "idempotent")
	lanes.Close()
}

// TestCloseAfterAWithdrawnRequestEnds protects Close when the only
// request left was withdrawn by its caller while it lingered: the drain
// ends at once rather than when Close's context does (a Ctrl-C of kwal
// demo once waited out the whole ProduceTimeout so).
func TestCloseAfterAWithdrawnRequestEnds(t *testing.T) {
	log := &fakeLog{}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 1)})
	p := NewProducer(Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: time.Hour,
		Linger: time.Hour, Lanes: lanes})
	pd, err := p.Submit(context.Background(), []Entry{{Region: 1, Data: []byte("lingering")}})
	require.NoError(t, err)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = pd.Wait(canceled)
	require.ErrorContains(t, err, "withdrawn")
	cctx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClose()
	require.NoError(t, p.Close(cctx), "Close waited for its context: the drain missed that nothing was left")
	lanes.Close()
	require.Empty(t, log.recs, "the withdrawn request was not written")
}

// TestCloseTimeoutFailsPending protects Close against a stuck broker: when
// its context ends, every unresolved request fails with ErrClosed.
func TestCloseTimeoutFailsPending(t *testing.T) {
	log := &fakeLog{block: make(chan struct{})}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 1)})
	p := NewProducer(Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: time.Hour, Lanes: lanes})
	ctx := context.Background()
	pd, err := p.Submit(ctx, []Entry{{Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
	pd2, err := p.Submit(ctx, []Entry{{Region: 1, Data: []byte("y")}})
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Close(cctx), context.DeadlineExceeded)
	for _, d := range []*Pending{pd, pd2} {
		_, err := d.Wait(ctx)
		require.ErrorIs(t, err, logstore.ErrClosed)
	}
	close(log.block)
	lanes.Close()
}

// TestLingerHoldsSmallGroupsUntilClose protects Linger: a small request
// waits for more of its region (a caller may withdraw it meanwhile, and
// nothing is written), a group of MaxBatchBytes goes at once, and Close
// sends what is still lingering instead of waiting it out.
func TestLingerHoldsSmallGroupsUntilClose(t *testing.T) {
	log := &fakeLog{}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 1)})
	p := NewProducer(Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: time.Second, Linger: time.Hour, Lanes: lanes})
	ctx := context.Background()
	pd, err := p.Submit(ctx, []Entry{{Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = pd.Wait(wctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "withdrawn")

	full, err := p.Submit(ctx, []Entry{{Region: 2, Data: make([]byte, 4096)}}) // two parts: a full batch
	require.NoError(t, err)
	_, err = full.Wait(ctx)
	require.NoError(t, err, "a full group does not linger")

	pd, err = p.Submit(ctx, []Entry{{Region: 1, Data: []byte("y")}})
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
	_, err = pd.Wait(ctx)
	require.NoError(t, err, "Close sent the lingering request")
	lanes.Close()
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, r := range log.recs {
		require.NotEqual(t, "x", string(r.Value), "the withdrawn request was never written")
	}
}

// TestMaxRegionsMergesOnlyABacklog protects the MaxRegions knob: with a
// backlog (more regions ready than lanes), produce calls carry up to
// MaxRegions regions, never more; without one, each region goes alone.
func TestMaxRegionsMergesOnlyABacklog(t *testing.T) {
	log := &fakeLog{block: make(chan struct{})}
	p, _ := newTestProducer(t, log, 1, func(o *Options) { o.MaxRegions = 3 })
	ctx := context.Background()
	first, err := p.Submit(ctx, []Entry{{Region: 100, Data: []byte("holds the lane")}})
	require.NoError(t, err)
	var pds []*Pending
	for r := range 10 {
		pd, err := p.Submit(ctx, []Entry{{Region: uint64(r), Data: []byte("x")}})
		require.NoError(t, err)
		pds = append(pds, pd)
	}
	// Once the worker took every request from the queue, they are all
	// pending together when the lane frees.
	require.Eventually(t, func() bool { return p.lanes.in.len() == 0 }, 10*time.Second, time.Millisecond)
	close(log.block)
	_, err = first.Wait(ctx)
	require.NoError(t, err)
	for _, pd := range pds {
		_, err := pd.Wait(ctx)
		require.NoError(t, err)
	}
	log.mu.Lock()
	calls := append([][]uint64(nil), log.calls...)
	log.mu.Unlock()
	mixed := 0
	for _, regions := range calls {
		distinct := map[uint64]bool{}
		for _, r := range regions {
			distinct[r] = true
		}
		require.LessOrEqual(t, len(distinct), 3, "a produce carries at most MaxRegions regions")
		if len(distinct) > 1 {
			mixed++
		}
	}
	require.Positive(t, mixed, "a backlog is drained by merged produces")
	require.Less(t, len(calls), 11)

	// No backlog: one request at a time goes out alone.
	log.mu.Lock()
	log.calls = nil
	log.mu.Unlock()
	for r := range 5 {
		pd, err := p.Submit(ctx, []Entry{{Region: uint64(r), Data: []byte("y")}})
		require.NoError(t, err)
		_, err = pd.Wait(ctx)
		require.NoError(t, err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.calls, 5)
}

// TestOrderingPropertyAcrossTopics drives several topics' producers on one
// dispatcher with random delays and random batch failures, from one
// submitting goroutine per topic that does not wait. The fake client
// splits a flush as franz-go may: batches of at most MaxBatchBytes, one
// per topic per produce request, other lanes' requests landing in between,
// each batch failing on its own. It checks what the lanes guarantee even
// so: every batch is region-pure (one group) and no request carries two
// batches of one topic; a successful call's entries are where it was told
// and in slice order (not contiguous); every region's acknowledged entries
// keep submission order; a partial entry (a failed batch's) comes only from
// a failed call and is never assembled; the queue room of every call is
// freed. Some callers give up at once (Wait with an ended context): a call
// withdrawn that way is never written, one already on a lane may be.
func TestOrderingPropertyAcrossTopics(t *testing.T) {
	var split, interleaved atomic.Int64
	defer func() {
		require.Positive(t, split.Load(), "some flushes left as several requests")
		require.Positive(t, interleaved.Load(), "some had another lane's request land between theirs")
	}()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			var rmu sync.Mutex
			intn := func(n int) int {
				rmu.Lock()
				defer rmu.Unlock()
				return rng.IntN(n)
			}
			boom := errors.New("boom")
			log := &fakeLog{
				batchBytes: 4096,
				delay:      func() time.Duration { return time.Duration(intn(200)) * time.Microsecond },
				failTopic:  func(string) error { return map[bool]error{true: boom}[intn(6) == 0] },
			}
			lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 1+int(seed%4)), MaxRequestBytes: int64(4096 * (1 + seed%3)), MaxQueuedBytes: 64 << 10})
			topics := []string{"a", "b", "c", "d"}[:2+seed%3]
			ps := make([]*Producer, len(topics))
			for i, tp := range topics {
				ps[i] = NewProducer(Options{Topic: tp, MaxBatchBytes: 4096, MaxQueuedBytes: 32 << 10, ProduceTimeout: time.Minute, Lanes: lanes})
			}
			type sub struct {
				topic     string
				entries   []Entry
				offs      []int64
				err       error
				withdrawn bool // Wait gave up while it was queued
				abandoned bool // Wait gave up after a lane took it
			}
			gaveUp, cancel := context.WithCancel(context.Background())
			cancel()
			subs := make([][]*sub, len(topics))
			var wg sync.WaitGroup
			for ti := range topics {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					var pds []*Pending
					for i := range 40 + intn(40) {
						var es []Entry
						region := uint64(1 + intn(5)) // a datanode's call: one region
						for j := range 1 + intn(3) {
							size := 16 + intn(300) // room for the unique prefix
							if intn(10) == 0 {
								size = 4000 + intn(5000) // split into parts
							}
							data := make([]byte, size)
							copy(data, fmt.Sprintf("%s/%d/%d", topics[ti], i, j))
							es = append(es, Entry{Region: region, Data: data})
						}
						pd, err := ps[ti].Submit(ctx, es)
						if !assert.NoError(t, err) {
							return
						}
						pds = append(pds, pd)
						s := &sub{topic: topics[ti], entries: es}
						subs[ti] = append(subs[ti], s)
						if intn(8) == 0 {
							// The call may have completed before its caller gave up
							// (the fake lanes may answer at once): then Wait returns
							// its own result, nil or its failure, and it is waited
							// for again below.
							if _, err := pd.Wait(gaveUp); errors.Is(err, context.Canceled) {
								s.withdrawn = strings.Contains(err.Error(), "withdrawn before it was sent")
								s.abandoned = !s.withdrawn
								s.err = err
							}
						}
					}
					for i, pd := range pds {
						if s := subs[ti][i]; !s.withdrawn && !s.abandoned {
							s.offs, s.err = pd.Wait(ctx)
						}
					}
				}()
			}
			wg.Wait()
			for _, p := range ps {
				require.NoError(t, p.Close(context.Background()))
				require.True(t, p.sem.TryAcquire(p.opts.MaxQueuedBytes), "every call's room was freed")
			}
			lanes.Close()
			require.True(t, lanes.sem.TryAcquire(64<<10), "the store's room was freed")

			log.mu.Lock()
			defer log.mu.Unlock()
			failedRegions := map[string]map[uint64]bool{} // regions of the calls that failed, by topic
			for ti := range topics {
				failedRegions[topics[ti]] = map[uint64]bool{}
				for _, s := range subs[ti] {
					if s.err != nil && !s.withdrawn {
						failedRegions[topics[ti]][s.entries[0].Region] = true
					}
				}
			}
			for _, regions := range log.calls {
				for _, r := range regions {
					require.Equal(t, regions[0], r, "a batch is region-pure")
				}
			}
			for _, ts := range log.flushes {
				seen := map[string]bool{}
				for _, tp := range ts {
					require.False(t, seen[tp], "one batch per topic per request")
					seen[tp] = true
				}
			}
			// Reassemble each topic's log.
			at := map[string]map[int64]record.Assembled{}
			asm := map[string]*record.Assembler{}
			count := map[string]int64{}
			for _, r := range log.recs {
				if asm[r.Topic] == nil {
					asm[r.Topic], at[r.Topic] = record.NewAssembler(), map[int64]record.Assembled{}
				}
				require.Equal(t, count[r.Topic], r.Offset)
				count[r.Topic]++
				part, err := record.Decode(r.Key, r.Value)
				require.NoError(t, err)
				st, err := asm[r.Topic].Add(r.Offset, part)
				require.NoError(t, err)
				// A failed batch may leave the parts of an entry whose other
				// parts went in another batch: the reader drops them; they
				// come only from a region whose call failed.
				require.False(t, st.Dropped && !failedRegions[r.Topic][st.Drop.Region], "a partial entry at offset %d of %s, whose calls all succeeded", r.Offset, r.Topic)
				if st.Complete {
					at[r.Topic][st.Entry.First] = st.Entry
				}
			}
			written := map[string]bool{} // the unique prefix of every entry in the log
			for _, entries := range at {
				for _, e := range entries {
					written[string(e.Data[:bytes.IndexByte(e.Data, 0)])] = true
				}
			}
			failed, withdrawn := 0, 0
			for ti := range topics {
				last := map[uint64]int64{}
				for i, s := range subs[ti] {
					if s.withdrawn {
						withdrawn++
						for j := range s.entries {
							require.False(t, written[fmt.Sprintf("%s/%d/%d", topics[ti], i, j)], "a withdrawn call's entry was written")
						}
						continue
					}
					if s.abandoned {
						continue // may be written or not
					}
					if s.err != nil {
						// Its entries may be in the log (the contract allows
						// it), whole; a partial one is never assembled.
						require.ErrorIs(t, s.err, boom)
						failed++
						continue
					}
					require.Len(t, s.offs, len(s.entries))
					for i, e := range s.entries {
						got, ok := at[s.topic][s.offs[i]]
						require.True(t, ok, "an entry starts at reported offset %d", s.offs[i])
						require.Equal(t, e.Region, got.Region)
						require.Equal(t, e.Data, got.Data)
						require.GreaterOrEqual(t, s.offs[i], last[e.Region], "region %d of %s keeps submission order", e.Region, s.topic)
						last[e.Region] = got.Last + 1
						if i > 0 {
							// Not contiguous: a call's records may leave as
							// several batches with other lanes' in between.
							require.Greater(t, s.offs[i], at[s.topic][s.offs[i-1]].Last, "a call's entries keep slice order")
						}
					}
				}
			}
			t.Logf("%d requests, %d batches, %d calls failed, %d withdrawn, %d flushes split (%d interleaved)", len(log.flushes), len(log.calls), failed, withdrawn, log.split, log.interleaved)
			split.Add(int64(log.split))
			interleaved.Add(int64(log.interleaved))
		})
	}
}

// boundedReq is the bytes of each request of boundedStore's entry: one
// record, a 28-byte key and 1972 bytes of data.
const boundedReq = 2000

// boundedStore is a store bound to 3 requests' bytes over a blocked log,
// with two namespaces a and b, each bound to 2 requests' bytes (raised to
// MaxBatchBytes), and entry makes one request's entries of a region.
func boundedStore() (log *fakeLog, lanes *Lanes, a, b *Producer, entry func(region uint64) []Entry) {
	log = &fakeLog{block: make(chan struct{})}
	lanes = NewLanes(LanesOptions{Clients: newFakeClients(log, 2), MaxQueuedBytes: 3 * boundedReq})
	a = NewProducer(Options{Topic: "a", MaxBatchBytes: 4096, MaxQueuedBytes: 2 * boundedReq, ProduceTimeout: time.Hour, Lanes: lanes})
	b = NewProducer(Options{Topic: "b", MaxBatchBytes: 4096, MaxQueuedBytes: 2 * boundedReq, ProduceTimeout: time.Hour, Lanes: lanes})
	entry = func(region uint64) []Entry {
		return []Entry{{Region: region, Data: make([]byte, boundedReq-record.KeySize)}}
	}
	return log, lanes, a, b, entry
}

// TestStoreBoundAndNamespaceShare protects the store-wide memory bound: a
// namespace holds at most its own MaxQueuedBytes of the store's bound
// (here 2 requests' bytes, raised to MaxBatchBytes, of 3), so another namespace still gets room, and
// once the store's bound is reached no namespace gets more until requests
// are resolved.
func TestStoreBoundAndNamespaceShare(t *testing.T) {
	log, lanes, a, b, entry := boundedStore()
	ctx := context.Background()
	tryIn := func(p *Producer, region uint64) error {
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := p.Submit(tctx, entry(region))
		return err
	}
	var pds []*Pending
	for r := range uint64(2) {
		pd, err := a.Submit(ctx, entry(r))
		require.NoError(t, err)
		pds = append(pds, pd)
	}
	err := tryIn(a, 9)
	require.ErrorIs(t, err, context.DeadlineExceeded, "namespace a is at its share")
	require.Contains(t, err.Error(), "nothing was written")
	pd, err := b.Submit(ctx, entry(1))
	require.NoError(t, err, "namespace b still gets room: a cannot take the whole store")
	pds = append(pds, pd)
	require.ErrorIs(t, tryIn(b, 2), context.DeadlineExceeded, "the store is at its bound")

	close(log.block)
	for _, pd := range pds {
		_, err := pd.Wait(ctx)
		require.NoError(t, err)
	}
	pd, err = b.Submit(ctx, entry(2))
	require.NoError(t, err, "room is back once requests are resolved")
	_, err = pd.Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Close(ctx))
	require.NoError(t, b.Close(ctx))
	lanes.Close()
}

// watchedCtx is a context that tells when a derived context is first made
// from it (Done is then called): Submit makes one only on its slow path,
// submitWaiting, before it waits for room.
type watchedCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWatchedCtx(ctx context.Context) *watchedCtx {
	return &watchedCtx{Context: ctx, waiting: make(chan struct{})}
}

func (c *watchedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// TestQueueWaitFailureReleasesItsRoom protects the store-wide queue bound's
// wait (submitWaiting): a call that took its namespace's room, then waits
// for the store's, and whose context ends (or whose producer closes, as
// the store's Close does) while it waits fails with the context's error
// (ErrClosed), gives back the namespace room it took and takes none of the
// store's, and nothing of it is written.
func TestQueueWaitFailureReleasesItsRoom(t *testing.T) {
	log, lanes, a, b, entry := boundedStore()
	ctx := context.Background()
	var pds []*Pending
	for _, in := range []struct {
		p      *Producer
		region uint64
	}{{a, 1}, {a, 2}, {b, 1}} { // the store's bound reached
		pd, err := in.p.Submit(ctx, entry(in.region))
		require.NoError(t, err)
		pds = append(pds, pd)
	}
	// submit submits a request of region to b that must wait for the
	// store's room, and returns its result once it waits.
	submit := func(wctx *watchedCtx, region uint64, then func()) error {
		errc := make(chan error, 1)
		go func() {
			pd, err := b.Submit(wctx, entry(region))
			if pd != nil {
				t.Errorf("region %d: queued though the store has no room", region)
			}
			errc <- err
		}()
		<-wctx.waiting
		then()
		return <-errc
	}
	// roomLeft checks what each semaphore has free.
	roomLeft := func(what string, ns, store int64) {
		t.Helper()
		require.True(t, b.sem.TryAcquire(ns), "%s: namespace b has %d bytes of room", what, ns)
		require.False(t, b.sem.TryAcquire(1), "%s: namespace b has no more than %d bytes of room", what, ns)
		b.sem.Release(ns)
		if store > 0 {
			require.True(t, lanes.sem.TryAcquire(store), "%s: the store has %d bytes of room", what, store)
			lanes.sem.Release(store)
		}
		require.False(t, lanes.sem.TryAcquire(store+1), "%s: the store has no more than %d bytes of room", what, store)
	}
	nsRoom := b.opts.MaxQueuedBytes // 2 requests' bytes, raised to MaxBatchBytes
	roomLeft("before", nsRoom-boundedReq, 0)

	cctx, cancel := context.WithCancelCause(ctx)
	cause := errors.New("the caller gave up")
	err := submit(newWatchedCtx(cctx), 8, func() { cancel(cause) })
	require.ErrorIs(t, err, cause)
	require.Contains(t, err.Error(), "nothing was written")
	roomLeft("after the caller's context ended", nsRoom-boundedReq, 0)

	closed := make(chan error, 1)
	err = submit(newWatchedCtx(ctx), 9, func() { go func() { closed <- b.Close(ctx) }() })
	require.ErrorIs(t, err, logstore.ErrClosed)
	roomLeft("after the producer closed", nsRoom-boundedReq, 0)

	close(log.block)
	for _, pd := range pds {
		_, err := pd.Wait(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, <-closed)
	require.NoError(t, a.Close(ctx))
	lanes.Close()
	roomLeft("after every request resolved", nsRoom, 3*boundedReq)
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.recs, 3, "only the queued requests were written")
	for _, r := range log.recs {
		p, err := record.Decode(r.Key, r.Value)
		require.NoError(t, err)
		require.Less(t, p.Region, uint64(8), "a failed request was written")
	}
}

// TestRecordMemoryOutlivesAnAbandonedCall protects the recycling of record
// memory: a call that returned ErrTimeout while its produce is still on the
// lane leaves its records to franz-go, so their memory is not reused by
// later calls before the lane is back: the log holds the timed-out call's
// own bytes when the produce finally lands.
func TestRecordMemoryOutlivesAnAbandonedCall(t *testing.T) {
	log := &fakeLog{block: make(chan struct{})}
	p, _ := newTestProducer(t, log, 2, func(o *Options) { o.ProduceTimeout = 50 * time.Millisecond })
	ctx := context.Background()
	stuck := bytes.Repeat([]byte("A"), 1000)
	pd, err := p.Submit(ctx, []Entry{{Region: 1, Data: stuck}})
	require.NoError(t, err)
	_, err = pd.Wait(ctx)
	require.ErrorIs(t, err, ErrTimeout)

	// Later calls of the same shape: were the stuck call's memory pooled
	// already, they would encode into it.
	var later []*Pending
	for i := range 20 {
		pd, err := p.Submit(ctx, []Entry{{Region: uint64(2 + i), Data: bytes.Repeat([]byte("B"), 1000)}})
		require.NoError(t, err)
		later = append(later, pd)
	}
	close(log.block)
	for _, pd := range later {
		_, _ = pd.Wait(ctx) // some time out while the lanes were blocked; only the log matters here
	}
	require.NoError(t, p.Close(ctx))
	log.mu.Lock()
	defer log.mu.Unlock()
	found := false
	for _, r := range log.recs {
		part, err := record.Decode(r.Key, r.Value)
		require.NoError(t, err)
		if part.Region == 1 {
			found = true
			require.Equal(t, stuck, part.Data, "the timed-out call's record kept its own bytes")
		}
	}
	require.True(t, found, "the stuck produce landed once released")
}

// TestDeadlineResolvesQueuedAndSentRequests protects SubmitBy's Deadline,
// which the dispatcher enforces without a timer per request: past it, a
// request still queued (behind its region's stuck produce) is withdrawn
// and never written, one on a lane is abandoned (its entries may still be
// written), both with the Deadline's cause, while the produce timeout
// (an hour here) has not fired; a request without a Deadline is untouched,
// a Deadline already past fails Submit, and every request leaves the
// deadline heap once resolved.
func TestDeadlineResolvesQueuedAndSentRequests(t *testing.T) {
	log := &fakeLog{block: make(chan struct{}), entered: make(chan struct{}, 8)}
	lanes := NewLanes(LanesOptions{Clients: newFakeClients(log, 1)})
	p := NewProducer(Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: time.Hour,
		Lanes: lanes, Metrics: NewMetrics()})
	cause := fmt.Errorf("the call's deadline: %w", ErrTimeout)
	ctx := context.Background()
	// A guard far beyond the deadlines: a Wait that ends on it means the
	// dispatcher did not enforce a Deadline.
	guard, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sent, err := p.SubmitBy(ctx, []Entry{{Region: 1, Data: []byte("sent")}}, Deadline{At: time.Now().Add(time.Second), Cause: cause})
	require.NoError(t, err)
	select {
	case <-log.entered: // "sent" is on the lane, which holds it
	case <-guard.Done():
		t.Fatal("the first request never reached the lane")
	}
	queued, err := p.SubmitBy(ctx, []Entry{{Region: 1, Data: []byte("queued")}}, Deadline{At: time.Now().Add(50 * time.Millisecond), Cause: cause})
	require.NoError(t, err)
	unbounded, err := p.Submit(ctx, []Entry{{Region: 2, Data: []byte("unbounded")}})
	require.NoError(t, err)
	_, err = queued.Wait(guard)
	require.ErrorIs(t, err, cause)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "withdrawn before it was sent")
	_, err = sent.Wait(guard)
	require.ErrorIs(t, err, cause)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "may still be written")

	close(log.block)
	_, err = unbounded.Wait(guard)
	require.NoError(t, err, "a request without a Deadline is not bounded by another's")
	after, err := p.SubmitBy(ctx, []Entry{{Region: 1, Data: []byte("after")}}, Deadline{At: time.Now().Add(time.Hour), Cause: cause})
	require.NoError(t, err)
	_, err = after.Wait(guard)
	require.NoError(t, err)
	past, err := p.SubmitBy(ctx, []Entry{{Region: 3, Data: []byte("past")}}, Deadline{At: time.Now().Add(-time.Second), Cause: cause})
	require.ErrorIs(t, err, cause, "a deadline already past fails Submit; nothing is queued")
	require.Nil(t, past)

	require.NoError(t, p.Close(ctx))
	lanes.Close() // the dispatcher has exited: its state can be read
	require.Empty(t, lanes.deadlines, "resolved requests left the deadline heap")
	var written []string
	log.mu.Lock()
	for _, r := range log.recs {
		written = append(written, string(r.Value))
	}
	log.mu.Unlock()
	require.Contains(t, written, "sent", "the abandoned produce still landed")
	require.NotContains(t, written, "queued", "the withdrawn request was never written")
	require.Contains(t, written, "after")
}
