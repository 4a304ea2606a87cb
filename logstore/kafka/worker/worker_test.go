package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLog is an in-memory partition: each ProduceSync call appends its
// records atomically, after a random delay, unless told to fail.
type fakeLog struct {
	mu      sync.Mutex
	recs    []*kgo.Record
	calls   [][]uint64 // regions of each produce call
	delay   func() time.Duration
	failNth map[int]error // produce call number -> error for all its records
	n       int
	block   chan struct{} // when set, produce waits for it
}

type fakeClient struct{ log *fakeLog }

func (c fakeClient) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	l := c.log
	if l.delay != nil {
		time.Sleep(l.delay())
	}
	if l.block != nil {
		<-l.block
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	out := make(kgo.ProduceResults, len(rs))
	if err := l.failNth[l.n]; err != nil {
		for i, r := range rs {
			out[i] = kgo.ProduceResult{Record: r, Err: err}
		}
		return out
	}
	var regions []uint64
	for i, r := range rs {
		r.Offset = int64(len(l.recs))
		l.recs = append(l.recs, r)
		p, err := record.Decode(r.Key, r.Value)
		if err == nil {
			regions = append(regions, p.Region)
		}
		out[i] = kgo.ProduceResult{Record: r}
	}
	l.calls = append(l.calls, regions)
	return out
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
	clients := make([]Client, lanes)
	for i := range clients {
		clients[i] = fakeClient{log}
	}
	obs := &observed{}
	opts := Options{Topic: "t", MaxBatchBytes: 4096, MaxQueuedBytes: 1 << 20, ProduceTimeout: 10 * time.Second,
		Lanes: NewLanes(clients), Collector: obs, Metrics: NewMetrics()}
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
		opts.Lanes.Wait()
	})
	return p, obs
}

// TestOrderingProperty submits random requests (random regions, several
// per request, some entries split) from one goroutine without waiting, on
// several lanes with random produce delays, and checks the log: every
// region's entries appear in submission order, every request's records are
// contiguous and in slice order, the offsets the requests report are
// where their entries are, and the collector saw every record.
func TestOrderingProperty(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			var dmu sync.Mutex
			log := &fakeLog{delay: func() time.Duration {
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
						require.Equal(t, regions[0], r, "with MaxRegions 1, produce calls are region-pure")
					}
				}
			}
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
	clients := []Client{fakeClient{log}}
	lanes := NewLanes(clients)
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
	lanes.Wait()
}

// TestCloseAfterAWithdrawnRequestEnds protects Close when the only
// request left was withdrawn by its caller while it lingered: the drain
// ends at once rather than when Close's context does (a Ctrl-C of kwal
// demo once waited out the whole ProduceTimeout so).
func TestCloseAfterAWithdrawnRequestEnds(t *testing.T) {
	log := &fakeLog{}
	lanes := NewLanes([]Client{fakeClient{log}})
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
	lanes.Wait()
	require.Empty(t, log.recs, "the withdrawn request was not written")
}

// TestCloseTimeoutFailsPending protects Close against a stuck broker: when
// its context ends, every unresolved request fails with ErrClosed.
func TestCloseTimeoutFailsPending(t *testing.T) {
	log := &fakeLog{block: make(chan struct{})}
	lanes := NewLanes([]Client{fakeClient{log}})
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
	lanes.Wait()
}

// TestLingerHoldsSmallGroupsUntilClose protects Linger: a small request
// waits for more of its region (a caller may withdraw it meanwhile, and
// nothing is written), a group of MaxBatchBytes goes at once, and Close
// sends what is still lingering instead of waiting it out.
func TestLingerHoldsSmallGroupsUntilClose(t *testing.T) {
	log := &fakeLog{}
	lanes := NewLanes([]Client{fakeClient{log}})
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
	lanes.Wait()
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
	require.Eventually(t, func() bool { return len(p.queue) == 0 }, 10*time.Second, time.Millisecond)
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
