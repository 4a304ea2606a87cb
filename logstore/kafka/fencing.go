package kafka

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/internal/replay"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// Config.Fencing values.
const (
	FencingStrict = "strict"
	FencingLease  = "lease"
	FencingOff    = "off"
)

// DefaultLease is Config.Lease under Fencing "lease" when none is set.
const DefaultLease = time.Second

// ErrFenced is matched (errors.Is) by the error of an append, Obsolete or
// Claim that a newer owner's claim of its region outranks, and of an
// append of a region this store released. The error is a *FencedError
// naming the region, the writer's epoch and the newer claim.
//
// A fenced AppendBatch is a failed call, and its caller must treat it as
// "maybe written": it is refused in one of two places.
//   - Before anything is written, when this store released the region or
//     its view of the claims topic already holds the newer claim: none of
//     the call's entries is in the log (the error says "nothing was
//     written").
//   - After the produce, when the look at the claims topic that Fencing
//     "strict" or "lease" takes before acknowledging finds the newer claim:
//     every entry of the call is in the log. Those wholly below the newer
//     claim's record (IDs up to its Claim.SealedID) are part of the
//     region's history, and every replay returns them, whoever reads;
//     those above it no replay returns. The call's entries of regions no
//     claim fences are replayed like any others.
//
// An Obsolete refused before its write wrote no mark; one refused after it
// left its mark in the log, where it counts only if no newer claim of the
// region lies below it.
var ErrFenced = errors.New("kwal: fenced")

// FencedError is ErrFenced with its particulars. ErrFenced says what a
// call that failed with it may have left in the log.
type FencedError struct {
	Op        string // "append", "obsolete", "claim"
	Namespace string
	Region    logstore.RegionID
	// Epoch is the epoch this store writes the region under (0: never
	// claimed by it).
	Epoch uint64
	// Newer is the newer claim's epoch and Owner its owner; Pending is set
	// while that claim is under way. Released is set instead when this
	// store released the region (Newer is then 0).
	Newer    uint64
	Owner    string
	Pending  bool
	Released bool
}

func (e *FencedError) Error() string {
	if e.Released {
		return fmt.Sprintf("kwal: %s %q region %d: this store released the region (epoch %d): %s", e.Op, e.Namespace, e.Region, e.Epoch, kwalerr.Bare(ErrFenced))
	}
	state := "claimed"
	if e.Pending {
		state = "being claimed"
	}
	return fmt.Sprintf("kwal: %s %q region %d: writer's epoch %d, the region is %s under epoch %d by %q: %s",
		e.Op, e.Namespace, e.Region, e.Epoch, state, e.Newer, e.Owner, kwalerr.Bare(ErrFenced))
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// Claim is the outcome of LogStore.Claim.
type Claim struct {
	Epoch    uint64           // the region's owner epoch after this claim (> every earlier claim's)
	SealedID logstore.EntryID // the region's last entry below the claim: where the previous owners' history ends
}

// ownKey names a region of a namespace.
type ownKey struct {
	ns     string
	region uint64
}

// ownState is what this store holds of a region it claimed or released.
type ownState struct {
	epoch    uint64
	released bool
}

// owning is the store's part in fencing: the epochs it writes under, what
// it acknowledged, the topics' IDs, and the claims topic's follower.
type owning struct {
	follower *claimsFollower
	owner    string

	mu     sync.Mutex                          // serialises changes of owned
	owned  atomic.Pointer[map[ownKey]ownState] // copied on write; read by every append
	ackMu  sync.Mutex
	acked  map[ownKey]logstore.EntryID // the last ID this store acknowledged, per region
	topics sync.Map                    // topic -> its ID (hex), as looked up
	// held keeps owned in the index's Store, written under mu with each
	// change (heldepochs.go); nil without a writable one.
	held *heldEpochs

	// appends are the appends in flight per region, which Release waits
	// for (inflight.go).
	appends appendsInFlight
	// claimsTopicChecked is set once the claims topic's configs were found
	// to keep every event (claimstopic.go).
	claimsTopicChecked atomic.Bool
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (o *owning) own(k ownKey) (ownState, bool) {
	m := o.owned.Load()
	if m == nil {
		return ownState{}, false
	}
	st, ok := (*m)[k]
	return st, ok
}

func (o *owning) setOwn(k ownKey, st ownState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next := make(map[ownKey]ownState)
	if m := o.owned.Load(); m != nil {
		for k, v := range *m {
			next[k] = v
		}
	}
	next[k] = st
	o.owned.Store(&next)
	o.writeHeld(next)
}

// forget drops what the store held of namespace's regions (the topic was
// deleted: a new one starts unclaimed).
func (o *owning) forget(ns string) {
	o.topics.Delete(ns)
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.owned.Load()
	if m == nil {
		return
	}
	next := make(map[ownKey]ownState)
	for k, v := range *m {
		if k.ns != ns {
			next[k] = v
		}
	}
	o.owned.Store(&next)
	o.writeHeld(next)
	o.ackMu.Lock()
	for k := range o.acked {
		if k.ns == ns {
			delete(o.acked, k)
		}
	}
	o.ackMu.Unlock()
}

// topicID returns topic's ID, looked up once.
func (s *LogStore) topicID(ctx context.Context, topic string) (string, error) {
	if id, ok := s.owning.topics.Load(topic); ok {
		return id.(string), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	td, err := s.adm.ListTopics(ctx, topic)
	if err != nil {
		return "", kwalerr.Errorf("topic ID: %w", err)
	}
	d, ok := td[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return "", kwalerr.Cause(ErrUnknownNamespace, d.Err)
	case d.Err != nil:
		return "", kwalerr.Errorf("topic ID: %w", d.Err)
	}
	id := d.ID.String()
	s.owning.topics.Store(topic, id)
	return id, nil
}

// newer reports the claim that outranks epoch for region of ns, as the
// store's view of the claims topic holds it (false: none). It needs the
// topic's ID only for a namespace with claims.
func (s *LogStore) newer(ctx context.Context, ns string, region uint64, epoch uint64) (claim.Region, bool, error) {
	if err := s.decided(ctx, ns, region); err != nil {
		return claim.Region{}, false, err
	}
	v := s.owning.follower.view.Load()
	if !v.has(ns) {
		return claim.Region{}, false, nil
	}
	tid, err := s.topicID(ctx, ns)
	if err != nil {
		return claim.Region{}, false, err
	}
	r := v.region(claim.ID{Namespace: ns, TopicID: tid, Region: region})
	return r, r.MaxEpoch() > epoch, nil
}

// decided returns an error naming the region's unreadable claims record
// when the claims cannot decide its fencing (nil: they can). A view that
// shows one may predate its repair, and nothing else starts a catch-up
// for an idle store: it catches up once before it says so.
func (s *LogStore) decided(ctx context.Context, ns string, region uint64) error {
	f := s.owning.follower
	if f.view.Load().undecided(ns, region) == nil {
		return nil
	}
	if err := f.await(ctx); err != nil {
		return err
	}
	return f.view.Load().undecided(ns, region)
}

func fencedBy(op, ns string, region uint64, epoch uint64, r claim.Region) *FencedError {
	e := &FencedError{Op: op, Namespace: ns, Region: logstore.RegionID(region), Epoch: epoch, Newer: r.MaxEpoch()}
	if r.Pending != nil && r.Pending.Epoch == e.Newer {
		e.Pending, e.Owner = true, r.Pending.Owner
	} else {
		e.Owner = r.Last().Owner
	}
	return e
}

// checkAppended is the check after an append's produce returned (Fencing
// "strict" or "lease"): a catch-up with the claims topic that began after
// it, or under a lease one that began less than a lease ago, then no
// region of the call may be outranked.
func (s *LogStore) checkAppended(ctx context.Context, batches []*nsBatch) error {
	if err := s.owning.follower.vouch(ctx); err != nil {
		return kwalerr.Errorf("append: the entries were written, but the claims topic could not be checked, so they are not acknowledged (a replay may return them): %w", err)
	}
	var errs []error
	for _, b := range batches {
		for j, e := range b.entries {
			if j > 0 && e.Region == b.entries[j-1].Region {
				continue
			}
			r, fenced, err := s.newer(ctx, b.topic, e.Region, e.Epoch)
			if err != nil {
				return kwalerr.Errorf("append to %q: the entries were written, but their claims could not be checked, so they are not acknowledged: %w", b.topic, err)
			}
			if fenced {
				errs = append(errs, fencedBy("append", b.topic, e.Region, e.Epoch, r))
			}
		}
	}
	if len(errs) > 0 {
		s.metrics.fencedAppends.WithLabelValues("after_produce").Inc()
		return kwalerr.Join(errs...)
	}
	return nil
}

// checkObsolete is the check before an Obsolete's mark is written: it
// refuses a region this store released, or one whose newer claim the
// store's view of the claims topic already holds, and returns the epoch
// the mark is written under. It does not look at the claims topic: a
// writer can pause between any look and its write, so the look that
// counts comes after the write (checkObsoleteWritten).
func (s *LogStore) checkObsolete(ctx context.Context, ns string, region uint64) (uint64, error) {
	st, _ := s.owning.own(ownKey{ns, region})
	if st.released {
		return 0, &FencedError{Op: "obsolete", Namespace: ns, Region: logstore.RegionID(region), Epoch: st.epoch, Released: true}
	}
	r, fenced, err := s.newer(ctx, ns, region, st.epoch)
	if err != nil {
		return 0, err
	}
	if fenced {
		return 0, fencedBy("obsolete", ns, region, st.epoch, r)
	}
	return st.epoch, nil
}

// checkObsoleteWritten is the check after an Obsolete mark's produce
// returned, the same as an append's (checkAppended): with Fencing "strict"
// or "lease", a look at the claims topic that began after the produce
// (or, under a lease, less than a lease ago) finds no claim of the region
// above epoch. A mark that passes lies below the claim record of every
// claim that look missed (package claim's argument, word for word with
// the mark for the entry), so no claim ever fences it, and the store's
// index may take it in. A mark that fails is a failed call: every store
// ignores it where a newer claim lies below it, and this one keeps it
// out of its index.
func (s *LogStore) checkObsoleteWritten(ctx context.Context, ns string, region uint64, epoch uint64) error {
	if s.cfg.Fencing != FencingOff {
		if err := s.owning.follower.vouch(ctx); err != nil {
			return kwalerr.Errorf("the mark was written, but the claims topic could not be checked, so the store's index does not take it in (it counts where no newer claim lies below it): %w", err)
		}
	}
	r, fenced, err := s.newer(ctx, ns, region, epoch)
	if err != nil {
		return kwalerr.Errorf("the mark was written, but its region's claims could not be checked, so the store's index does not take it in: %w", err)
	}
	if fenced {
		return fencedBy("obsolete", ns, region, epoch, r)
	}
	return nil
}

// ownersInto fills in the holders' owners and epochs from the store's view
// of the claims topic.
func (s *LogStore) ownersInto(ctx context.Context, ns string, holders []PruneHolder) {
	v := s.owning.follower.view.Load()
	if !v.has(ns) {
		return
	}
	tid, err := s.topicID(ctx, ns)
	if err != nil {
		return
	}
	for i, h := range holders {
		last := v.region(claim.ID{Namespace: ns, TopicID: tid, Region: uint64(h.Region)}).Last()
		holders[i].Owner, holders[i].Epoch = last.Owner, last.Epoch
	}
}

// noteAcked records the last IDs a successful append acknowledged.
func (s *LogStore) noteAcked(batches []*nsBatch, ids map[logstore.RegionID]logstore.EntryID) {
	o := &s.owning
	o.ackMu.Lock()
	defer o.ackMu.Unlock()
	for _, b := range batches {
		for j, r := range b.regions {
			if j > 0 && r == b.regions[j-1] {
				continue
			}
			k := ownKey{b.topic, uint64(r)}
			o.acked[k] = max(o.acked[k], ids[r])
		}
	}
}

// Fenced is replay.Host's: the store's view of the claims topic decides.
func (h readHost) Fenced(topic string, region uint64, offset int64, epoch uint64) bool {
	v := h.s.owning.follower.view.Load()
	if !v.has(topic) {
		return false
	}
	tid, ok := h.s.owning.topics.Load(topic)
	if !ok {
		return false // prepareRead looked it up for every namespace with claims
	}
	return claim.Fenced(v.region(claim.ID{Namespace: topic, TopicID: tid.(string), Region: region}).Claims, offset, epoch)
}

// JudgeMark is replay.Host's: the store's view of the claims topic
// decides, as for Fenced; it cannot yet tell while a claim of the region
// above epoch is pending (its claim record's offset comes with its
// commit), or while the region's claims do not decode.
func (h readHost) JudgeMark(topic string, region uint64, offset int64, epoch uint64) replay.Verdict {
	v := h.s.owning.follower.view.Load()
	unreadable := v.undecided(topic, region) != nil
	if !v.has(topic) {
		if unreadable {
			return replay.MarkUndecided
		}
		return replay.MarkCounts
	}
	tid, ok := h.s.owning.topics.Load(topic)
	if !ok {
		return replay.MarkUndecided // whoever notes marks looked it up (Sync, newer, highestEpochs)
	}
	r := v.region(claim.ID{Namespace: topic, TopicID: tid.(string), Region: region})
	switch {
	case claim.Fenced(r.Claims, offset, epoch):
		return replay.MarkFenced
	case unreadable || (r.Pending != nil && r.Pending.Epoch > epoch):
		return replay.MarkUndecided
	}
	return replay.MarkCounts
}

// Sync is replay.Host's: a pass catches up with the claims topic before it
// decodes, so that a read whose pass starts after a claim returned (on any
// store) fences by it. (A read that joins a running pass is served with
// what that pass's catch-up saw when the pass began.)
func (h readHost) Sync(ctx context.Context, topic string) error { return h.s.prepareRead(ctx, topic) }

// prepareRead catches up with the claims topic and looks the topic's ID up
// when it has claims.
func (s *LogStore) prepareRead(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.owning.follower.await(ctx); err != nil {
		return kwalerr.Errorf("read %q: %w", ns, err)
	}
	if s.owning.follower.view.Load().has(ns) {
		if _, err := s.topicID(ctx, ns); err != nil {
			return kwalerr.Errorf("read %q: %w", ns, err)
		}
	}
	return nil
}

// Claim makes this store the owner of region in namespace under a new
// epoch, above every earlier claim's, and returns it with the region's
// sealed ID: the last entry of the earlier epochs that every replay
// returns. From its return on, this store's appends of the region carry
// the new epoch; every earlier owner's appends fail with ErrFenced, and
// every replay (on any store, from any ID, with or without an index)
// skips the entries of earlier epochs that land above the claim.
//
// Claim writes a pending claim to the claims topic (Config.ClaimsTopic),
// then a claim record to the namespace's log, then reads the region's
// last entries below it, then commits the claim (package claim draws the
// steps and the argument). Two claims racing: the one the claims topic
// holds first wins; the other fails with ErrFenced, naming it. A Claim that
// fails after its pending claim was written leaves the region pending:
// earlier owners stay fenced, and the next Claim completes the move.
//
// A namespace with no topic yet is created under AutoCreateTopics, as an
// append would create it (a new region is claimed before its first
// append); without it, Claim fails with ErrUnknownNamespace.
func (s *LogStore) Claim(ctx context.Context, namespace string, region logstore.RegionID) (Claim, error) {
	if err := s.begin("claim"); err != nil {
		return Claim{}, err
	}
	defer s.end()
	start := time.Now()
	c, err := s.claim(ctx, namespace, uint64(region))
	switch {
	case err == nil:
		s.metrics.claims.WithLabelValues("ok").Inc()
		s.metrics.claimLatency.Observe(time.Since(start).Seconds())
		s.log.Info("kwal: claimed a region", "topic", namespace, "region", region, "epoch", c.Epoch, "sealed_id", c.SealedID, "owner", s.owning.owner)
	case errors.Is(err, ErrFenced):
		s.metrics.claims.WithLabelValues("lost").Inc()
	default:
		s.metrics.claims.WithLabelValues("error").Inc()
	}
	s.metrics.noteRefused(err)
	return c, err
}

func (s *LogStore) claim(ctx context.Context, ns string, region uint64) (Claim, error) {
	fail := func(err error) (Claim, error) {
		return Claim{}, kwalerr.Errorf("claim %q region %d: %w", ns, region, err)
	}
	if err := s.checkNamespace(ns); err != nil {
		return fail(err)
	}
	// Before the namespace is created: a claims topic that would lose the
	// claim's events fails the claim without leaving a new topic behind.
	if err := s.readyClaimsTopic(ctx); err != nil {
		return fail(err)
	}
	gen := s.reads.Gate().Generation(ns)
	// A datanode opening a new region claims it before its first append:
	// the namespace is created as that append would create it.
	if _, err := s.producer(ctx, ns, s.cfg.AutoCreateTopics); err != nil {
		return fail(err)
	}
	tid, err := s.topicID(ctx, ns)
	if err != nil {
		return fail(err)
	}
	id := claim.ID{Namespace: ns, TopicID: tid, Region: region}
	k := ownKey{ns, region}
	f := s.owning.follower
	if err := f.awaitDecided(ctx, ns, region); err != nil {
		return fail(err)
	}
	held, _ := s.owning.own(k)
	epoch := max(f.region(id).MaxEpoch(), held.epoch) + 1
	var buf [8]byte
	_, _ = rand.Read(buf[:])
	token := hex.EncodeToString(buf[:])
	ev := claim.Event{Op: claim.OpPending, Namespace: ns, Region: region, TopicID: tid, Epoch: epoch, Token: token, Owner: s.owning.owner, LeaseMS: int64((f.lease + time.Millisecond - 1) / time.Millisecond)}
	if err := s.writeEvent(ctx, ev); err != nil {
		return fail(err)
	}
	// The catch-up reads through the pending event: it counts only if no
	// other claim of an epoch >= this one came first.
	if err := f.awaitDecided(ctx, ns, region); err != nil {
		return fail(err)
	}
	r := f.region(id)
	if r.Pending == nil || r.Pending.Token != token {
		return fail(fencedBy("claim", ns, region, epoch, r))
	}
	// An owner fencing by lease may trust a look that missed the pending
	// event for a lease from its start: its appends acknowledged on it must
	// land below the claim record.
	if wait := max(s.cfg.Lease, time.Duration(r.Last().LeaseMS)*time.Millisecond); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fail(kwalerr.Errorf("waiting out the owner's lease (%v): %w", wait, context.Cause(ctx)))
		}
	}
	// The claim record: where the new epoch begins in the data log.
	p := record.ClaimPart(region, epoch, []byte(s.owning.owner))
	rec := &kgo.Record{Topic: ns, Partition: partition, Key: p.Key(), Value: p.Data}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
	err = produceWithin(pctx, s.markClient, rec)
	cancel()
	if err != nil {
		return fail(kwalerr.Errorf("writing the claim record: %w", err))
	}
	if s.index != nil {
		s.index.Observe(ns, []index.Run{{Start: rec.Offset, Count: 1, Foreign: true}})
	}
	if err := f.awaitDecided(ctx, ns, region); err != nil {
		return fail(err)
	}
	if r := f.region(id); r.Pending == nil || r.Pending.Token != token {
		return fail(fencedBy("claim", ns, region, epoch, r))
	}
	sealed, err := s.sealedBelow(ctx, ns, gen, region, rec.Offset)
	if err != nil {
		return fail(kwalerr.Errorf("finding the sealed ID: %w", err))
	}
	ev.Op, ev.At, ev.Sealed = claim.OpCommit, rec.Offset, uint64(sealed)
	if err := s.writeEvent(ctx, ev); err != nil {
		return fail(err)
	}
	if err := f.awaitDecided(ctx, ns, region); err != nil {
		return fail(err)
	}
	r = f.region(id)
	if last := r.Last(); last.Epoch != epoch || last.At != rec.Offset {
		return fail(fencedBy("claim", ns, region, epoch, r))
	}
	s.owning.setOwn(k, ownState{epoch: epoch})
	return Claim{Epoch: epoch, SealedID: sealed}, nil
}

// sealedBelow returns the ID of region's last entry that lies wholly below
// offset at (0: none), reading back from at in growing steps: exactly the
// last entry below the claim that replays return once it commits, since
// they fence every older record above at (an entry with a part above at
// is never complete for them).
func (s *LogStore) sealedBelow(ctx context.Context, ns string, gen uint64, region uint64, at int64) (logstore.EntryID, error) {
	start, _, err := s.offsetsWithin(ctx, ns)
	if err != nil {
		return 0, err
	}
	for step := int64(1024); ; step *= 16 {
		from := max(start, at-step)
		var last logstore.EntryID
		req := replay.Request{Topic: ns, From: map[logstore.RegionID]logstore.EntryID{logstore.RegionID(region): logstore.EntryID(from + 1)}, End: at}
		if err := s.reads.Read(ctx, req, func(e logstore.Entry) bool { last = e.ID; return true }, &replay.Stats{}); err != nil {
			return 0, err
		}
		if last > 0 || from == start {
			return last, nil
		}
	}
}

// writeEvent appends ev to the claims topic (acks=all).
func (s *LogStore) writeEvent(ctx context.Context, ev claim.Event) error {
	ev.UnixMilli = time.Now().UnixMilli()
	rec := &kgo.Record{Topic: s.cfg.ClaimsTopic, Partition: partition, Key: claim.Key(ev.Namespace, ev.Region), Value: claim.Encode(ev)}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
	defer cancel()
	if err := produceWithin(ctx, s.markClient, rec); err != nil {
		return kwalerr.Errorf("writing a %s event to the claims topic %q: %w", ev.Op, s.cfg.ClaimsTopic, err)
	}
	return nil
}

// produceWithin produces rec and returns at its acknowledgement or at the
// end of ctx, whichever comes first. franz-go cannot fail an idempotent
// record once its request was sent (it cannot know whether the broker
// took it), so ProduceSync to a leader frozen mid-request outlives any
// deadline. On ctx's end the record may still land: the call failed, and
// like any failed call it may have been written (a pending event then
// fences as a claim that never commits; a claim record is an offset that
// holds no entry).
func produceWithin(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	done := make(chan error, 1) // the promise never blocks
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Release stops this store's appends of region (later ones fail with
// ErrFenced until this store claims it again), waits for those in flight,
// and returns the ID of the region's last entry this store acknowledged
// since it opened (0: none). It is the cooperative hand-over: the next
// owner's Claim need not wait for anything, and its SealedID is at least
// the returned ID. It waits only for the appends that carry the region
// (those of other regions never wait for it, nor it for them); when ctx
// ends first it returns ctx's error, and the region stays released.
func (s *LogStore) Release(ctx context.Context, namespace string, region logstore.RegionID) (_ logstore.EntryID, err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("release"); err != nil {
		return 0, err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return 0, err
	}
	k := ownKey{namespace, uint64(region)}
	o := &s.owning
	st, _ := o.own(k)
	st.released = true
	o.setOwn(k, st)
	// The mark first: an append that enterAppend counts after it sees it,
	// so the appends to wait for are only those counted before.
	if drained := o.appendsDrained(k); drained != nil {
		if h := o.appends.waitingForTesting; h != nil {
			h(namespace, uint64(region))
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return 0, kwalerr.Errorf("release %q region %d: waiting for the appends in flight (the region is released): %w", namespace, region, context.Cause(ctx))
		}
	}
	o.ackMu.Lock()
	last := o.acked[k]
	o.ackMu.Unlock()
	if st.epoch > 0 {
		// Informational (regions show): nothing depends on it.
		if tid, err := s.topicID(ctx, namespace); err == nil {
			ev := claim.Event{Op: claim.OpRelease, Namespace: namespace, Region: uint64(region), TopicID: tid, Epoch: st.epoch, Token: "release", Owner: o.owner}
			if err := s.writeEvent(ctx, ev); err != nil {
				s.log.Warn("kwal: release: could not record the release in the claims topic (the region is released all the same)", "topic", namespace, "region", region, "err", err)
			}
		}
	}
	s.log.Info("kwal: released a region", "topic", namespace, "region", region, "epoch", st.epoch, "last_acknowledged_id", last)
	return last, nil
}

// RegionOwnership is what the claims topic and this store know of a
// region's ownership (kwal regions show).
type RegionOwnership struct {
	Namespace string
	Region    logstore.RegionID
	// Owner, Epoch, ClaimOffset and SealedID are the last committed
	// claim's (zero: never claimed).
	Owner       string
	Epoch       uint64
	ClaimOffset int64
	SealedID    logstore.EntryID
	ClaimedAt   time.Time
	// Claims is how many committed claims the region had; Pending is a
	// claim under way (0: none) and PendingOwner its owner.
	Claims       int
	Pending      uint64
	PendingOwner string
	Released     bool // the owner of Epoch released it
	// HeldEpoch is the epoch this store writes the region under, and
	// HeldReleased whether this store released it.
	HeldEpoch    uint64
	HeldReleased bool
	// Unreadable are the region's claims-topic records that do not decode
	// (none: its fencing is decided). While any is left, every append,
	// Claim and read of the region fails; SkipClaimsRecord repairs it.
	Unreadable []claim.Unreadable
}

// Ownership returns what is known of the ownership of namespace's claimed
// regions, after catching up with the claims topic; regions never claimed
// are absent.
func (s *LogStore) Ownership(ctx context.Context, namespace string) (_ []RegionOwnership, err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("ownership"); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return nil, err
	}
	if err := s.owning.follower.await(ctx); err != nil {
		return nil, kwalerr.Errorf("ownership of %q: %w", namespace, err)
	}
	tid, err := s.topicID(ctx, namespace)
	if err != nil {
		return nil, kwalerr.Errorf("ownership of %q: %w", namespace, err)
	}
	f := s.owning.follower
	f.mu.Lock()
	ids := f.state.Regions(namespace)
	bad := f.state.AllUnreadable()
	f.mu.Unlock()
	var out []RegionOwnership
	for _, id := range ids {
		if id.TopicID != tid {
			continue
		}
		r := f.region(id)
		last := r.Last()
		o := RegionOwnership{Namespace: namespace, Region: logstore.RegionID(id.Region), Owner: last.Owner, Epoch: last.Epoch,
			ClaimOffset: last.At, SealedID: logstore.EntryID(last.Sealed), Claims: len(r.Claims), Released: r.Released}
		if last.Unix > 0 {
			o.ClaimedAt = time.UnixMilli(last.Unix)
		}
		if r.Pending != nil {
			o.Pending, o.PendingOwner = r.Pending.Epoch, r.Pending.Owner
		}
		out = append(out, o)
	}
	// Regions known only by their unreadable records are listed too.
	for k := range bad {
		if k.Namespace == namespace && !slices.ContainsFunc(out, func(o RegionOwnership) bool { return uint64(o.Region) == k.Region }) {
			out = append(out, RegionOwnership{Namespace: namespace, Region: logstore.RegionID(k.Region)})
		}
	}
	slices.SortFunc(out, func(a, b RegionOwnership) int { return cmp.Compare(a.Region, b.Region) })
	for i := range out {
		o := &out[i]
		o.Unreadable = bad[claim.RegionKey{Namespace: namespace, Region: uint64(o.Region)}]
		held, _ := s.owning.own(ownKey{namespace, uint64(o.Region)})
		o.HeldEpoch, o.HeldReleased = held.epoch, held.released
	}
	return out, nil
}
