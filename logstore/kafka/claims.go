package kafka

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/internal/kwalerr"
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
	// reseeked is set while the consumer was set back after an error and
	// has not yet handed the record it was set back to.
	reseeked bool
	base     []kgo.Opt
	backoff  time.Duration
	log      *slog.Logger
	timeout  time.Duration

	mu    sync.Mutex // guards state; the goroutine writes it, Claim reads it
	state *claim.State
	// view is what the hot paths read without a lock: brought in step
	// with the state after every fold, whatever its outcome, so that no
	// look vouches from a view older than the state it waited for.
	view atomic.Pointer[claimView]

	// leaderEpoch is the claims partition's leader epoch as last learned
	// from metadata (-1: to be learned): looks carry it, so that a
	// broker deposed since answers FENCED_LEADER_EPOCH instead of a stale
	// end.
	leaderEpoch atomic.Int32
	// exists is set once the claims topic was seen: from then on a broker
	// that does not know it is stale, not the truth.
	exists atomic.Bool
	// kick asks the store's claims snapshots to save (cap 1: asks
	// coalesce) once claimsSnapshotEvery records were folded since the
	// last save, which savedNext is the state's Next of.
	kick      chan struct{}
	savedNext atomic.Int64
	// records counts the claims topic's records that are no region's
	// (foreign) and regions' records that do not decode (unreadable);
	// failures counts looks and folds that failed, by cause.
	records, failures *prometheus.CounterVec

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

// claimView is an immutable copy of the claims the hot paths need. A fold
// replaces only the shards of the regions it changed (copy on write), so
// an event costs a shard's copy, not the cluster's regions'.
type claimView struct {
	next       int64           // the state's Next it was built at
	namespaces map[string]bool // namespaces with any region's event
	shards     [viewShards]map[claim.ID]*claim.Region
	// unreadable is each region's first unreadable record (nil: none).
	unreadable map[claim.RegionKey]claim.Unreadable
}

const viewShards = 256

func shardOf(id claim.ID) int {
	h := id.Region*0x9E3779B97F4A7C15 + uint64(len(id.Namespace))
	return int(h >> 56)
}

// has reports whether namespace has any region's event.
func (v *claimView) has(ns string) bool { return v.namespaces[ns] }

// region returns what the claims say of id (zero: nothing).
func (v *claimView) region(id claim.ID) claim.Region {
	if r := v.shards[shardOf(id)][id]; r != nil {
		return *r
	}
	return claim.Region{}
}

// undecided returns an error naming the region's unreadable record when
// its fencing cannot be decided (nil: it can).
func (v *claimView) undecided(ns string, region uint64) error {
	if len(v.unreadable) == 0 {
		return nil
	}
	k := claim.RegionKey{Namespace: ns, Region: region}
	if u, ok := v.unreadable[k]; ok {
		return u.Error(k)
	}
	return nil
}

func newClaimsFollower(cfg Config, base []kgo.Opt, log *slog.Logger, records, failures *prometheus.CounterVec) (*claimsFollower, error) {
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return nil, kwalerr.Errorf("open: claims client: %w", err)
	}
	f := &claimsFollower{
		topic: cfg.ClaimsTopic, cl: cl, base: base[:len(base):len(base)], backoff: cfg.RetryBackoff, log: log, timeout: cfg.RequestTimeout,
		state: claim.NewState(), reqs: make(chan chan error, 64), looks: make(chan look, maxLooks),
		stop: make(chan struct{}), done: make(chan struct{}), records: records, failures: failures, kick: make(chan struct{}, 1),
	}
	f.leaderEpoch.Store(-1)
	if cfg.Fencing == FencingLease {
		f.lease = cfg.Lease
	}
	f.vouched.Store(math.MinInt64 / 2)
	f.life, f.cancelLife = context.WithCancel(context.Background())
	f.view.Store(&claimView{next: -1})
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
			if err != nil && f.life.Err() == nil {
				// Once per look, not per call it answers; a look the
				// store's closing ended is no failure of the check.
				f.failures.WithLabelValues(claimsCheckCause(err)).Inc()
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
		lk.err = kwalerr.Errorf("claims topic %q: end offset: %w", f.topic, lk.err)
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

// awaitDecided is await, then an error naming the region's unreadable
// event when the claims cannot decide its fencing.
func (f *claimsFollower) awaitDecided(ctx context.Context, ns string, region uint64) error {
	if err := f.await(ctx); err != nil {
		return err
	}
	if u := f.unreadable(ns, region); len(u) > 0 {
		return u[0].Error(claim.RegionKey{Namespace: ns, Region: region})
	}
	return nil
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

// errClaimsGap is matched by a fold's error at a gap in the claims topic's
// offsets.
var errClaimsGap = errors.New("records were deleted (retention, compaction or DeleteRecords), and the claims they held are lost")

// claimsCheckCause is the cause label of kwal_claims_check_failures_total
// for a failed check of the claims topic.
func claimsCheckCause(err error) string {
	var loss *kgo.ErrDataLoss
	switch {
	case errors.Is(err, errClaimsTopicDrops):
		return checkConfig
	case errors.Is(err, errClaimsGap), errors.As(err, &loss), errors.Is(err, kerr.OffsetOutOfRange):
		// franz-go's data loss and an offset out of range: records the
		// fold needed are gone.
		return checkGap
	case errors.Is(err, context.DeadlineExceeded):
		return checkTimeout
	}
	return checkKafkaError
}

// foldTo folds every event below end into the state. On any error the
// consumer is set back to the first record not folded, so nothing it
// fetched past the error is skipped. (Closing it instead races with its
// fetches inside franz-go.)
func (f *claimsFollower) foldTo(ctx context.Context, end int64) (err error) {
	defer func() {
		f.mu.Lock()
		f.updateView()
		next := f.state.Next
		f.mu.Unlock()
		if next-f.savedNext.Load() >= claimsSnapshotEvery {
			select {
			case f.kick <- struct{}{}:
			default:
			}
		}
		if err != nil && f.consumer != nil {
			f.consumer.SetOffsets(map[string]map[int32]kgo.EpochOffset{f.topic: {partition: {Epoch: -1, Offset: next}}})
			f.reseeked = true
		}
	}()
	for {
		f.mu.Lock()
		next := f.state.Next
		f.mu.Unlock()
		if next >= end {
			// (next > end: this look began before one already folded.)
			return nil
		}
		if f.consumer == nil {
			c, err := kgo.NewClient(append(f.base,
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: {partition: kgo.NewOffset().At(next)}}),
				kgo.FetchMaxWait(time.Second),
				// A store opening reads the events since its snapshot (or
				// all of them) at once: fetch them in few round trips.
				kgo.FetchMaxPartitionBytes(16<<20),
				// Every offset, control records too: a gap then means records
				// were deleted, never a transaction's marker.
				kgo.KeepControlRecords(),
			)...)
			if err != nil {
				return kwalerr.Errorf("claims topic %q: consumer: %w", f.topic, err)
			}
			f.consumer = c
		}
		fs := f.consumer.PollFetches(ctx)
		if gap := f.foldPolled(fs); gap != nil {
			return gap
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			// An unknown topic is retried by the consumer and skips
			// nothing; any other error may have (data loss, a reset).
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				ferr = kwalerr.Join(ferr, err)
			}
		})
		if ferr == nil {
			ferr = context.Cause(ctx)
		}
		if ferr != nil {
			return kwalerr.Errorf("claims topic %q: reading offsets %d to %d: %w", f.topic, next, end, ferr)
		}
	}
}

// foldPolled folds a poll's records before its errors count (a poll that
// returns as its deadline passes hands what it fetched, and the consumer
// has moved past them), and returns an error at a gap. The lock is
// released however the fold ends.
func (f *claimsFollower) foldPolled(fs kgo.Fetches) (gap error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs.EachRecord(func(rec *kgo.Record) {
		switch {
		case gap != nil || rec.Offset < f.state.Next:
		case rec.Offset > f.state.Next && f.reseeked:
			// Fetched before the consumer was set back: it fetches
			// again from Next. (A real gap there fails the fold at its
			// deadline instead, as closed.)
		case rec.Offset > f.state.Next:
			gap = kwalerr.Errorf("claims topic %q: the record after offset %d is at offset %d: %w", f.topic, f.state.Next-1, rec.Offset, errClaimsGap)
		case rec.Attrs.IsControl():
			f.reseeked = false
			f.state.Next = rec.Offset + 1
		default:
			f.reseeked = false
			f.foldLocked(rec)
		}
	})
	return gap
}

// foldLocked folds one record (f.mu held), counting and logging what is
// not a region's event.
func (f *claimsFollower) foldLocked(rec *kgo.Record) {
	f.exists.Store(true)
	kind, err := f.state.Fold(rec.Offset, rec.Key, rec.Value)
	switch kind {
	case claim.Foreign:
		f.records.WithLabelValues("foreign").Inc()
		f.log.Warn("kwal: the claims topic holds a record that is not kwal's: skipped (find its producer)", "topic", f.topic, "offset", rec.Offset, "err", err)
	case claim.Bad:
		f.records.WithLabelValues("unreadable").Inc()
		f.log.Error("kwal: the claims topic holds an event that does not decode: its region fails closed until it is repaired (docs/failures.md)", "topic", f.topic, "offset", rec.Offset, "err", err)
	}
}

// end asks the claims partition's leader for its end (high watermark) in
// one round trip: the client knows the leader, so unlike kadm's lookup no
// metadata request precedes it. The request carries the leader epoch last
// learned, so a broker deposed since refuses it (and the retry learns the
// new one) instead of answering an end that may miss events acknowledged
// by its successor. A topic that does not exist ends at 0 (no claim was
// ever made; a claim creates it before its event lands, after this look)
// until the topic was seen once: from then on such an answer is a stale
// broker's, retried like any other.
func (f *claimsFollower) end(ctx context.Context) (int64, error) {
	epoch := f.leaderEpoch.Load()
	if epoch < 0 {
		var err error
		if epoch, err = f.learnLeaderEpoch(ctx); err != nil {
			return 0, err
		}
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = f.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.cl)
	if err == nil {
		err = errors.New("no answer for the partition")
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic == f.topic && p.Partition == partition {
					if err = kerr.ErrorForCode(p.ErrorCode); err == nil {
						f.exists.Store(true)
						return p.Offset, nil
					}
				}
			}
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) && !f.exists.Load() {
		return 0, nil
	}
	// Whatever the cause (a new leader, a stale broker), learn the epoch
	// again before the next try.
	f.leaderEpoch.Store(-1)
	return 0, err
}

// learnLeaderEpoch asks for the claims partition's leader epoch (-1 when
// the topic does not exist and was never seen).
func (f *claimsFollower) learnLeaderEpoch(ctx context.Context) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(f.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return -1, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != f.topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) && !f.exists.Load() {
				return -1, nil
			}
			return -1, err
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
					return -1, err
				}
				f.exists.Store(true)
				f.leaderEpoch.Store(p.LeaderEpoch)
				return p.LeaderEpoch, nil
			}
		}
	}
	return -1, kwalerr.Errorf("no metadata for partition %d", partition)
}

// updateView brings the view in step with the state (f.mu held): the
// shards of the regions changed since, and the unreadable records.
func (f *claimsFollower) updateView() {
	old := f.view.Load()
	ids, unreadable := f.state.Changed()
	if len(ids) == 0 && !unreadable && old.next == f.state.Next {
		return
	}
	v := *old
	v.next = f.state.Next
	if old.next < 0 || len(ids) > f.state.Len()/4 {
		// Most regions changed (the first fold, a snapshot): build anew.
		v.namespaces = make(map[string]bool)
		for _, ns := range f.state.Namespaces() {
			v.namespaces[ns] = true
		}
		for i := range v.shards {
			v.shards[i] = make(map[claim.ID]*claim.Region)
		}
		ids = ids[:0]
		for ns := range v.namespaces {
			ids = append(ids, f.state.Regions(ns)...)
		}
	} else {
		copied := map[int]bool{}
		for _, id := range ids {
			if sh := shardOf(id); !copied[sh] {
				copied[sh] = true
				v.shards[sh] = maps.Clone(v.shards[sh])
				if v.shards[sh] == nil {
					v.shards[sh] = make(map[claim.ID]*claim.Region)
				}
			}
			if !v.namespaces[id.Namespace] {
				v.namespaces = maps.Clone(v.namespaces)
				if v.namespaces == nil {
					v.namespaces = make(map[string]bool)
				}
				v.namespaces[id.Namespace] = true
			}
		}
	}
	for _, id := range ids {
		r := f.state.Region(id)
		v.shards[shardOf(id)][id] = &r
	}
	if unreadable || old.next < 0 {
		v.unreadable = nil
		for k, us := range f.state.AllUnreadable() {
			if v.unreadable == nil {
				v.unreadable = make(map[claim.RegionKey]claim.Unreadable)
			}
			v.unreadable[k] = us[0]
		}
	}
	f.view.Store(&v)
}

// install replaces the state with one resumed from a snapshot, before
// any fold (Open).
func (f *claimsFollower) install(st *claim.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state.Next != 0 {
		return
	}
	f.state = st
	f.savedNext.Store(st.Next)
	if st.Next > 0 {
		f.exists.Store(true)
	}
	f.view.Store(&claimView{next: -1})
	f.updateView()
}

// region returns what the state holds of id.
func (f *claimsFollower) region(id claim.ID) claim.Region {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.Region(id)
}

// unreadable returns the region's unreadable records.
func (f *claimsFollower) unreadable(ns string, region uint64) []claim.Unreadable {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.Unreadable(claim.RegionKey{Namespace: ns, Region: region})
}
