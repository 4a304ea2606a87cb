package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/logstore/kafka/internal/retry"
)

// claimsFollower follows the claims topic (package claim explains it). One
// goroutine owns the consumer and the folded state; callers ask it for a
// catch-up (await), answered once the state holds every event the claims
// topic held when a look at its end, begun after the call asked, returned.
// One look serves every call queued before it began: that is what lets one
// look vouch for every append whose produce returned before it. Looks
// overlap (up to maxLooks on the wire), so a call waits about one round
// trip for a look that begins when it asks, not the rest of the look in
// flight and then a whole one. The looks share one connection, whose
// requests a broker answers one at a time, in order: a look waits there
// behind the ones ahead of it, not for their answers to travel back. (A
// connection per look measured no faster: docs/benchmarks.md, "Tried and
// dropped".)
type claimsFollower struct {
	topic string
	cl    *kgo.Client // asks for the claims topic's end
	// consumer reads the claims topic's events; made by the first
	// catch-up that finds any, so a cluster without claims fetches
	// nothing. Only the goroutine uses it.
	consumer *kgo.Client
	base     []kgo.Opt
	backoff  time.Duration
	log      *slog.Logger
	timeout  time.Duration

	mu    sync.Mutex // guards state; the goroutine writes it, Claim reads it
	state *claim.State
	// view is what the hot paths read without a lock: rebuilt after each
	// catch-up that folded an event.
	view atomic.Pointer[claimView]

	// lease is how long a look vouches for appends (Fencing "lease"; 0:
	// never, every append waits for a look).
	lease time.Duration
	// vouched is the leaseNow reading at which the latest look whose
	// catch-up completed began.
	vouched atomic.Int64

	reqs  chan chan error
	looks chan look // looks that returned, to the goroutine
	stop  chan struct{}
	done  chan struct{}
	// life ends when the store closes: it cancels the looks and a
	// catch-up in flight.
	life       context.Context
	cancelLife context.CancelFunc
}

// maxLooks bounds the looks at the claims topic's end on the wire at once.
// Calls that ask while that many are out wait for the next to begin;
// beyond a few, looks would only queue behind each other at the broker.
const maxLooks = 4

// look is one look at the claims topic's end and the calls it answers.
type look struct {
	began   time.Duration // leaseNow before the look was sent
	end     int64
	err     error
	waiting []chan error
}

// claimView is an immutable copy of the claims the hot paths need.
type claimView struct {
	namespaces map[string]bool // namespaces with any event
	regions    map[claim.ID]claim.Region
}

func newClaimsFollower(cfg Config, base []kgo.Opt, log *slog.Logger) (*claimsFollower, error) {
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("kwal: open: claims client: %w", err)
	}
	f := &claimsFollower{
		topic: cfg.ClaimsTopic, cl: cl, base: base[:len(base):len(base)], backoff: cfg.RetryBackoff, log: log, timeout: cfg.RequestTimeout,
		state: claim.NewState(), reqs: make(chan chan error, 64), looks: make(chan look, maxLooks),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.Fencing == FencingLease {
		f.lease = cfg.Lease
	}
	f.vouched.Store(math.MinInt64 / 2)
	f.life, f.cancelLife = context.WithCancel(context.Background())
	f.view.Store(&claimView{})
	go f.run()
	return f, nil
}

// close stops the goroutine and the consumer.
func (f *claimsFollower) close() {
	close(f.stop)
	f.cancelLife()
	<-f.done
	f.cl.Close()
	if f.consumer != nil {
		f.consumer.Close()
	}
}

// run owns the state: it starts a look for the calls queued since the last
// one began whenever fewer than maxLooks are out, and answers a look's
// calls once the state holds every event below the end it saw.
func (f *claimsFollower) run() {
	defer close(f.done)
	var queued []chan error
	out := 0
	defer func() {
		// The looks still out end with f.life; wait for them, so that no
		// goroutine outlives the follower.
		for ; out > 0; out-- {
			<-f.looks
		}
	}()
	for {
		if len(queued) > 0 && out < maxLooks {
			go f.lookAtEnd(queued)
			queued, out = nil, out+1
		}
		select {
		case <-f.stop:
			return
		case r := <-f.reqs:
			queued = append(queued, r)
		case lk := <-f.looks:
			out--
			err := lk.err
			if err == nil {
				ctx, cancel := context.WithTimeout(f.life, f.timeout)
				err = f.foldTo(ctx, lk.end)
				cancel()
			}
			if err == nil && int64(lk.began) > f.vouched.Load() {
				// After foldTo's view: whoever trusts this look reads a
				// view at least as new as the one it saw.
				f.vouched.Store(int64(lk.began))
			}
			for _, r := range lk.waiting {
				r <- err
			}
		}
	}
}

// lookAtEnd reads the claims topic's end for the calls waiting and hands
// the look to the goroutine.
func (f *claimsFollower) lookAtEnd(waiting []chan error) {
	ctx, cancel := context.WithTimeout(f.life, f.timeout)
	defer cancel()
	lk := look{began: leaseNow(), waiting: waiting}
	_, lk.err = retry.Every(ctx, f.backoff, func(int) (bool, error) {
		var err error
		lk.end, err = f.end(ctx)
		return err == nil || !kerr.IsRetriable(err), err
	})
	if lk.err != nil {
		lk.err = fmt.Errorf("kwal: claims topic %q: end offset: %w", f.topic, lk.err)
	}
	f.looks <- lk
}

// await returns once a look at the claims topic's end that began after the
// call has returned and the state holds every event below that end.
func (f *claimsFollower) await(ctx context.Context) error {
	r := make(chan error, 1)
	select {
	case f.reqs <- r:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-f.stop:
		return errClosedFollower
	}
	select {
	case err := <-r:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// vouch returns once the store's view of the claims topic may vouch for an
// append whose produce returned before the call: under a lease at once
// while the last look that completed began less than the lease ago (less
// a margin for clock rates), else after await. The look that await starts
// renews the lease for the appends after it: while appends come, about one
// waits for a look per lease.
func (f *claimsFollower) vouch(ctx context.Context) error {
	if f.lease > 0 && f.trusted() {
		return nil
	}
	return f.await(ctx)
}

// trusted reports whether the lease of the latest completed look holds.
// Why that is enough: Claim waits a lease after its pending event was
// acknowledged before it writes its claim record, so an entry above a
// claim record was written more than a lease after that event became
// visible, and a look that did not see the event began before then.
func (f *claimsFollower) trusted() bool {
	return leaseNow()-time.Duration(f.vouched.Load()) < f.lease-f.lease/64
}

var errClosedFollower = errors.New("kwal: the store is closing")

// foldTo folds every event below end into the state.
func (f *claimsFollower) foldTo(ctx context.Context, end int64) error {
	changed := false
	for {
		f.mu.Lock()
		next := f.state.Next
		f.mu.Unlock()
		if next >= end {
			break
		}
		if f.consumer == nil {
			c, err := kgo.NewClient(append(f.base,
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: {partition: kgo.NewOffset().At(next)}}),
				kgo.FetchMaxWait(time.Second),
			)...)
			if err != nil {
				return fmt.Errorf("kwal: claims topic %q: consumer: %w", f.topic, err)
			}
			f.consumer = c
		}
		fs := f.consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kwal: claims topic %q: reading offsets %d to %d: %w", f.topic, next, end, context.Cause(ctx))
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				ferr = errors.Join(ferr, fmt.Errorf("kwal: claims topic %q: fetch: %w", t, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		var derr error
		f.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			if derr != nil || rec.Offset < f.state.Next {
				return
			}
			ev, err := claim.Decode(rec.Key, rec.Value)
			if err != nil {
				// Skipping an event could drop a claim: refuse to vouch for
				// anything until someone repairs the topic.
				derr = fmt.Errorf("kwal: claims topic %q: the record at offset %d: %w", f.topic, rec.Offset, err)
				return
			}
			f.state.Apply(rec.Offset, ev)
			changed = true
		})
		f.mu.Unlock()
		if derr != nil {
			return derr
		}
	}
	if changed {
		f.rebuildView()
	}
	return nil
}

// end asks the claims partition's leader for its end (high watermark) in
// one round trip: the consumer client knows the leader, so unlike kadm's
// lookup no metadata request precedes it. A topic that does not exist ends
// at 0: no claim was ever made, and a claim creates it before its event
// lands, after this look.
func (f *claimsFollower) end(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = f.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.cl)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// No claims topic (AutoCreateTopics off and none created): no
		// claim was ever made; a claim needs the topic first.
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != f.topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return 0, nil
				}
				return 0, err
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("no answer for partition %d", partition)
}

func (f *claimsFollower) rebuildView() {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := &claimView{namespaces: make(map[string]bool), regions: make(map[claim.ID]claim.Region)}
	for _, ns := range f.state.Namespaces() {
		v.namespaces[ns] = true
		for _, id := range f.state.Regions(ns) {
			v.regions[id] = f.state.Region(id)
		}
	}
	f.view.Store(v)
}

// region returns what the state holds of id.
func (f *claimsFollower) region(id claim.ID) claim.Region {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.Region(id)
}
