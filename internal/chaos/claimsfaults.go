package chaos

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/kwal/kwal/testutil/ledger"
)

// Faults of the claims partition's leader (Options.ClaimsLeaderFaults).
const (
	// FaultPause: SIGSTOP until another broker leads the partition, then
	// SIGCONT: a deposed leader that resumes, still holding the end of the
	// partition it had, as the clients that still name it as the leader.
	FaultPause = "pause"
	// FaultKill: SIGKILL, then a restart once another broker leads it.
	FaultKill = "kill"
)

// BrokerSessionTimeout is Kafka's broker.session.timeout.ms, which
// scripts/kafka.sh leaves at its default: the controller fences a broker
// that did not heartbeat for that long and elects other leaders for its
// partitions. A broker stopped or killed stays the claims partition's
// leader until then.
const BrokerSessionTimeout = 9 * time.Second

// claimBudget bounds the time from a fault to a claim made while the
// claims partition's leader is faulted. Each attempt ends at its
// ProduceTimeout, but the claims events of earlier attempts stay in
// flight to the frozen broker (franz-go cannot fail an idempotent record
// already sent), and a new attempt's events queue behind them: the claims
// topic is writable again only once the client gives up on that broker's
// connection, which took up to 65 s in the runs.
const claimBudget = 2 * time.Minute

// ClaimsFault is one fault of the broker that led the claims topic's
// partition, with a region moved while it lasted and another right after.
type ClaimsFault struct {
	Kind        string // FaultPause or FaultKill
	Node        int32  // the broker that led the claims partition at the fault
	LeaderEpoch int32  // the partition's leader epoch then
	// NewLeader led the partition under NewLeaderEpoch, first seen Moved
	// after the fault (the metadata is polled every 200 ms).
	NewLeader, NewLeaderEpoch int32
	Moved                     time.Duration
	// Began is when the fault was set off, At the fault (SIGSTOP sent, the
	// killed process gone), Recovered the SIGCONT or the restarted broker
	// ready, InSync when every replica of every topic of the run was in
	// sync again after the move right after it: the fault's window is
	// from Began to InSync.
	Began, At, Recovered, InSync time.Time
	// PendingSeen (pause) is the time from At until another leader had
	// acknowledged the first event of the claim made during the fault; the
	// broker was resumed once the claim completed, or claimSettle later.
	// 0: the claim completed before that was seen.
	PendingSeen time.Duration
	// During and After name the regions moved while the fault lasted and
	// right after it; DuringEpoch is the epoch of the one during.
	During, After string
	DuringEpoch   uint64
	// ClaimAttempts counts the attempts of the claim during the fault: an
	// attempt fails while the claims topic is out of reach (nothing is
	// acknowledged then) and is made again once another broker leads it.
	ClaimAttempts int
	// ZombieCalls counts the old owner's calls of During in flight at its
	// resume.
	ZombieCalls int
	// Failed counts the calls in the window that failed with another error
	// than ErrFenced (the claims topic or a namespace's leader out of
	// reach: not acknowledged).
	Failed int
	// FirstSuccess is the time from At, and FirstSuccessRecovered from
	// Recovered, to the end of the first acknowledged call that began
	// after it.
	FirstSuccess, FirstSuccessRecovered time.Duration
}

// Held is how long the broker was stopped or down.
func (c ClaimsFault) Held() time.Duration { return c.Recovered.Sub(c.At) }

// claimsLeaderFaults runs Cycles rounds of ClaimsLeaderFaults, each fault
// on the claims partition's leader of the moment, with a region moved
// while it lasts and another right after.
func (fo *failover) claimsLeaderFaults(ctx context.Context) error {
	for _, kind := range fo.ClaimsLeaderFaults {
		if kind != FaultPause && kind != FaultKill {
			return fmt.Errorf("chaos: unknown claims-leader fault %q (want %q or %q)", kind, FaultPause, FaultKill)
		}
	}
	keys := fo.regionKeys()
	next := 0
	for round := range fo.Cycles {
		for _, kind := range fo.ClaimsLeaderFaults {
			if err := fo.claimsFault(ctx, kind, keys, &next); err != nil {
				return fmt.Errorf("round %d, claims leader %s: %w", round+1, kind, err)
			}
		}
	}
	return nil
}

// claimsFault faults the broker leading the claims partition now. While it
// is stopped or down, one region moves as in handover: its owner stopped
// first, so that its client still names that broker, at its leader epoch,
// as the claims partition's leader when it resumes. A paused leader is
// resumed once another leader acknowledged the claim's pending event and
// the claim completed (or claimSettle later: requests stuck on the stopped
// broker can hold a claim up for ProduceTimeout plus RequestTimeout each),
// together with the old owner: both resume with a view of the partition
// that misses the claim. A killed
// leader is restarted once the claim completed and the old owner, resumed
// while it was down, had its lanes fenced. Right after the recovery
// another region moves, while the broker catches up.
func (fo *failover) claimsFault(ctx context.Context, kind string, keys []regionKey, next *int) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*fo.Wait)
	defer cancel()
	// Every replica in sync first: a fault on top of the last one's
	// catching up would take the partitions below min.insync.replicas.
	if err := fo.allInSync(ctx); err != nil {
		return err
	}
	leaders := map[string]int32{}
	for _, ns := range fo.f.Topics[:failoverPool] {
		p, err := fo.Cluster.Partition(ctx, ns)
		if err != nil {
			return err
		}
		leaders[ns] = p.Leader
	}
	p, err := fo.Cluster.Partition(ctx, fo.f.ClaimsTopic)
	if err != nil {
		return err
	}
	if p.Leader < 0 {
		return fmt.Errorf("chaos: the claims topic %s has no leader", fo.f.ClaimsTopic)
	}
	// Nothing else writes to the claims topic while the fault lasts: an
	// end above this one is the claim's first event.
	end0, err := fo.Cluster.EndOffset(ctx, fo.f.ClaimsTopic)
	if err != nil {
		return err
	}
	cf := ClaimsFault{Kind: kind, Node: p.Leader, LeaderEpoch: p.LeaderEpoch}
	// The region moved during the fault lives in a namespace another broker
	// leads, so that its new owner's appends wait for the claims partition
	// only, not for the faulted broker's own partitions.
	k, ok := pick(keys, next, func(k regionKey) bool { return leaders[k.ns] != cf.Node })
	if !ok {
		k, _ = pick(keys, next, func(regionKey) bool { return true })
		fo.Logf("region-failover: node %d leads every namespace: %s region %d moves on it", cf.Node, k.ns, k.region)
	}
	from := fo.owner[k]
	// The region moved right after has another owner, which the move
	// stops, so that the old owner of k resumes on its own.
	k2, ok := pick(keys, next, func(j regionKey) bool { return j != k && fo.owner[j] != from })
	if !ok {
		k2, _ = pick(keys, next, func(j regionKey) bool { return j != k })
	}
	cf.During, cf.After = fmt.Sprintf("%s/%d", k.ns, k.region), fmt.Sprintf("%s/%d", k2.ns, k2.region)
	old, oldEpoch := fo.nodes[from], fo.epoch[k]
	to := (from + 1 + fo.rng.IntN(failoverNodes-1)) % failoverNodes

	if err := old.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	cf.Began = time.Now()
	if err := fo.node(ctx, map[string]string{FaultPause: "pause", FaultKill: "kill"}[kind], cf.Node); err != nil {
		return err
	}
	cf.At = time.Now()
	recovered := false
	defer func() {
		if !recovered {
			// Bring the broker back, so that what runs next finds the
			// cluster whole.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), fo.Wait)
			defer rcancel()
			_ = fo.Cluster.Node(rctx, map[string]string{FaultPause: "resume", FaultKill: "start"}[kind], cf.Node)
		}
	}()
	fo.Logf("region-failover: %s claims leader node %d (leader epoch %d) %s; %s region %d moves from %s (epoch %d, stopped) to %s",
		cf.At.Format(clock), cf.Node, cf.LeaderEpoch, map[string]string{FaultPause: "paused", FaultKill: "killed"}[kind], k.ns, k.region, old.name, oldEpoch, fo.nodes[to].name)
	mctx, mcancel := context.WithCancel(ctx)
	m := fo.watchLeaderMove(mctx, cf.Node)
	defer func() {
		mcancel()
		<-m.done
	}()

	// The claim runs on its own while a pause waits for its first event.
	claimed := make(chan error, 1)
	joined := false
	go func() { claimed <- fo.claimThrough(ctx, k, to, m, &cf) }()
	defer func() {
		if !joined {
			cancel()
			<-claimed
		}
	}()
	join := func() error {
		if joined {
			return nil
		}
		joined = true
		return <-claimed
	}
	var claimErr error
	if kind == FaultPause {
		var ended bool
		if ended, claimErr, err = fo.awaitClaimEvent(ctx, m, end0, claimed, &cf); err != nil {
			return err
		}
		joined = ended
	} else {
		claimErr = join()
	}
	if claimErr != nil {
		return fmt.Errorf("moving %s region %d during the fault: %w", k.ns, k.region, claimErr)
	}
	if cf.ZombieCalls, err = fo.noteZombies(old, k); err != nil {
		return err
	}
	if err := m.wait(ctx); err != nil {
		return err
	}
	cf.NewLeader, cf.NewLeaderEpoch, cf.Moved = m.p.Leader, m.p.LeaderEpoch, m.at.Sub(cf.At)
	fo.Logf("region-failover: %s node %d leads the claims partition (leader epoch %d), %v after the fault",
		m.at.Format(clock), cf.NewLeader, cf.NewLeaderEpoch, cf.Moved.Round(time.Millisecond))

	switch kind {
	case FaultPause:
		// The deposed leader and the old owner resume together: the first
		// looks of the owner's calls may go to that broker before it
		// learned that it no longer leads.
		if err := fo.node(ctx, "resume", cf.Node); err != nil {
			return err
		}
		cf.Recovered, recovered = time.Now(), true
		if err := old.signal(syscall.SIGCONT); err != nil {
			return err
		}
		fo.Logf("region-failover: %s node %d and %s resumed", cf.Recovered.Format(clock), cf.Node, old.name)
		if err := join(); err != nil {
			return fmt.Errorf("moving %s region %d during the fault: %w", k.ns, k.region, err)
		}
		fo.logClaimed(k, to, &cf)
		if err := fo.handover(ctx, k2); err != nil {
			return fmt.Errorf("hand-over right after the resume (%s region %d): %w", k2.ns, k2.region, err)
		}
		if err := fo.awaitFenced(ctx, old, k, oldEpoch); err != nil {
			return err
		}
		fo.Logf("region-failover: %s's lanes of %s region %d fenced %v after its resume", old.name, k.ns, k.region, time.Since(cf.Recovered).Round(time.Millisecond))
	case FaultKill:
		fo.logClaimed(k, to, &cf)
		// The old owner resumes while the broker its client names as the
		// claims partition's leader is gone.
		if err := old.signal(syscall.SIGCONT); err != nil {
			return err
		}
		resumed := time.Now()
		if err := fo.awaitFenced(ctx, old, k, oldEpoch); err != nil {
			return err
		}
		fo.Logf("region-failover: %s %s resumed, its lanes of %s region %d fenced %v later", resumed.Format(clock), old.name, k.ns, k.region, time.Since(resumed).Round(time.Millisecond))
		began := time.Now()
		if err := fo.node(ctx, "start", cf.Node); err != nil {
			return err
		}
		cf.Recovered, recovered = time.Now(), true
		fo.Logf("region-failover: %s node %d restarted in %v", cf.Recovered.Format(clock), cf.Node, cf.Recovered.Sub(began).Round(time.Millisecond))
		if err := fo.handover(ctx, k2); err != nil {
			return fmt.Errorf("hand-over right after the restart (%s region %d): %w", k2.ns, k2.region, err)
		}
	}
	if err := fo.allInSync(ctx); err != nil {
		return err
	}
	cf.InSync = time.Now()
	fo.f.ClaimsFaults = append(fo.f.ClaimsFaults, cf)
	fo.Logf("region-failover: %s claims leader %s of node %d done: held %v, %d calls of %s in flight at the old owner's resume, every replica in sync %v after the recovery",
		cf.InSync.Format(clock), kind, cf.Node, cf.Held().Round(time.Millisecond), cf.ZombieCalls, cf.During, cf.InSync.Sub(cf.Recovered).Round(time.Millisecond))
	return nil
}

// awaitClaimEvent waits, while the claims partition's leader is paused,
// until another broker leads the partition and acknowledged an event past
// end0 (the claim's pending event), then up to claimSettle for the claim
// to end; ended reports whether it did, with its outcome in claimErr.
func (fo *failover) awaitClaimEvent(ctx context.Context, m *leaderMove, end0 int64, claimed <-chan error, cf *ClaimsFault) (ended bool, claimErr, err error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for cf.PendingSeen == 0 {
		select {
		case claimErr = <-claimed:
			return true, claimErr, nil
		case <-ctx.Done():
			return false, nil, fmt.Errorf("chaos: waiting for the claim's pending event in %s: %w", fo.f.ClaimsTopic, ctx.Err())
		case <-tick.C:
		}
		select {
		case <-m.done:
		default:
			continue // the stopped broker still leads: it answers nothing
		}
		if m.err != nil {
			return false, nil, m.err
		}
		// A short deadline: a request that went to the stopped broker would
		// otherwise wait for the client's own timeout.
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		end, err := fo.Cluster.EndOffset(pctx, fo.f.ClaimsTopic)
		pcancel()
		if err == nil && end > end0 {
			cf.PendingSeen = time.Since(cf.At)
			fo.Logf("region-failover: %s the claims partition's new leader acknowledged the claim's first event (end offset %d, was %d), %v after the fault",
				time.Now().Format(clock), end, end0, cf.PendingSeen.Round(time.Millisecond))
		}
	}
	// The claim record and the commit usually follow within milliseconds:
	// the old owner then resumes above a claim record, where an append it
	// is told succeeded would be fenced. A claim stuck on a request to the
	// stopped broker completes after the resume instead.
	t := time.NewTimer(claimSettle)
	defer t.Stop()
	select {
	case claimErr = <-claimed:
		return true, claimErr, nil
	case <-t.C:
		fo.Logf("region-failover: the claim did not complete within %v of its first event: it completes after the resume", claimSettle)
		return false, nil, nil
	case <-ctx.Done():
		return false, nil, fmt.Errorf("chaos: waiting for the claim during the pause: %w", ctx.Err())
	}
}

// claimSettle is how long a pause waits for a claim to complete after its
// first event was acknowledged.
const claimSettle = 2 * time.Second

func (fo *failover) logClaimed(k regionKey, to int, cf *ClaimsFault) {
	cf.DuringEpoch = fo.epoch[k]
	fo.Logf("region-failover: %s %s region %d claimed by %s under epoch %d, %v after the fault, %d attempts, the last one took %v",
		time.Now().Format(clock), k.ns, k.region, fo.nodes[to].name, cf.DuringEpoch, time.Since(cf.At).Round(time.Millisecond), cf.ClaimAttempts, fo.f.Claims[len(fo.f.Claims)-1].Round(time.Millisecond))
}

// claimThrough claims k on datanode to while the claims partition's leader
// is faulted. The first attempt is made at once, while no live broker may
// lead the partition; an attempt that fails (not acknowledged: the claims
// topic out of reach) is made again once another broker leads it.
func (fo *failover) claimThrough(ctx context.Context, k regionKey, to int, m *leaderMove, cf *ClaimsFault) error {
	for {
		cf.ClaimAttempts++
		began := time.Now()
		err := fo.claim(ctx, k, to)
		var ce *claimError
		if !errors.As(err, &ce) || time.Since(cf.At) > claimBudget {
			return err
		}
		fo.Logf("region-failover: %s claim attempt %d of %s region %d failed after %v (%v after the fault): %s",
			time.Now().Format(clock), cf.ClaimAttempts, k.ns, k.region, time.Since(began).Round(time.Millisecond), time.Since(cf.At).Round(time.Millisecond), ce.text)
		if err := m.wait(ctx); err != nil {
			return errors.Join(err, ce)
		}
	}
}

// awaitFenced waits until every lane of old's region k under epoch ended
// with ErrFenced.
func (fo *failover) awaitFenced(ctx context.Context, old *node, k regionKey, epoch uint64) error {
	reg, e := fmt.Sprint(k.region), fmt.Sprint(epoch)
	_, err := old.expect(ctx, "the fenced lanes of "+k.ns+" region "+reg, func(f []string) bool {
		return len(f) == 4 && f[0] == "fenced" && f[1] == k.ns && f[2] == reg && f[3] == e
	})
	return err
}

// allInSync waits until every replica of every topic of the run is in sync.
func (fo *failover) allInSync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fo.Wait)
	defer cancel()
	for _, t := range fo.f.Topics {
		if _, err := fo.Cluster.WaitInSync(ctx, t, 3); err != nil {
			return err
		}
	}
	return nil
}

func (fo *failover) node(ctx context.Context, action string, id int32) error {
	fo.Logf("node %d: %s", id, action)
	return fo.Cluster.Node(ctx, action, id)
}

// leaderMove is a watch for another leader of the claims partition.
type leaderMove struct {
	done chan struct{} // closed when p and at, or err, are set
	p    Partition
	at   time.Time
	err  error
}

// watchLeaderMove polls the claims partition until a broker other than
// from leads it, or ctx ends.
func (fo *failover) watchLeaderMove(ctx context.Context, from int32) *leaderMove {
	m := &leaderMove{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		var last Partition
		var lastErr error
		for {
			// A short deadline per request: one that went to the stopped
			// broker would otherwise wait for the client's own timeout while
			// the others already know the new leader.
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			p, err := fo.Cluster.Partition(pctx, fo.f.ClaimsTopic)
			cancel()
			if err == nil && p.Leader >= 0 && p.Leader != from {
				m.p, m.at = p, time.Now()
				return
			}
			last, lastErr = p, err
			select {
			case <-ctx.Done():
				m.err = fmt.Errorf("chaos: waiting for another leader of %s than node %d: %w (last seen: leader %d, epoch %d, ISR %v, error %v)",
					fo.f.ClaimsTopic, from, ctx.Err(), last.Leader, last.LeaderEpoch, last.ISR, lastErr)
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

// wait returns once another broker leads the partition (nil) or the watch
// ended without one.
func (m *leaderMove) wait(ctx context.Context) error {
	select {
	case <-m.done:
		return m.err
	case <-ctx.Done():
		return fmt.Errorf("chaos: waiting for another leader of the claims partition: %w", ctx.Err())
	}
}

// pick returns the first region of keys, from *next on (round the end),
// for which ok holds, and moves *next past it.
func pick(keys []regionKey, next *int, ok func(regionKey) bool) (regionKey, bool) {
	for i := range keys {
		j := (*next + i) % len(keys)
		if ok(keys[j]) {
			*next = (j + 1) % len(keys)
			return keys[j], true
		}
	}
	return regionKey{}, false
}

// faultOf returns the claims-leader fault whose window c overlaps (nil:
// none).
func (fo *failover) faultOf(c ledger.Call) *ClaimsFault {
	for i := range fo.f.ClaimsFaults {
		cf := &fo.f.ClaimsFaults[i]
		if c.Start.Before(cf.InSync) && c.End().After(cf.Began) {
			return cf
		}
	}
	return nil
}

// noteFailure describes c, a call that failed otherwise than with
// ErrFenced, in Failures.
func (fo *failover) noteFailure(c ledger.Call, cf *ClaimsFault) {
	if len(fo.f.Failures) >= 100 {
		return
	}
	t := c.Tags[0]
	owner := "?"
	for _, cl := range fo.claims {
		if cl.ns == c.Namespace && cl.region == t.Region && cl.epoch == t.Seq>>epochShift {
			owner = cl.node
		}
	}
	window := "outside every claims-leader fault"
	if cf != nil {
		window = fmt.Sprintf("in the %s of node %d (from %s)", cf.Kind, cf.Node, cf.At.Format(clock))
	}
	fo.f.Failures = append(fo.f.Failures, fmt.Sprintf("%s +%v %s %s region %d lane %d epoch %d, %s: %s",
		c.Start.Format(clock), c.Took.Round(time.Millisecond), owner, c.Namespace, t.Region, t.Writer, t.Seq>>epochShift, window, c.Err))
}

// clock formats the times the scenario logs, to match them with the
// brokers' logs.
const clock = "15:04:05.000"

// firstSuccesses sets each claims-leader fault's times to first success,
// and the Result's, from every datanode's calls.
func (fo *failover) firstSuccesses(calls []ledger.Call, res *Result) error {
	for i := range fo.f.ClaimsFaults {
		cf := &fo.f.ClaimsFaults[i]
		var ok1, ok2 bool
		cf.FirstSuccess, ok1 = firstAckStartedAfter(calls, cf.At)
		cf.FirstSuccessRecovered, ok2 = firstAckStartedAfter(calls, cf.Recovered)
		if !ok1 || !ok2 {
			return fmt.Errorf("chaos: region-failover: no append succeeded after the claims leader's %s at %s or its recovery at %s",
				cf.Kind, cf.At.Format(time.TimeOnly), cf.Recovered.Format(time.TimeOnly))
		}
		res.FirstSuccesses = append(res.FirstSuccesses, cf.FirstSuccess, cf.FirstSuccessRecovered)
		res.FirstSuccess = max(res.FirstSuccess, cf.FirstSuccess, cf.FirstSuccessRecovered)
	}
	return nil
}

// firstAckStartedAfter returns how long after t the first acknowledged
// call of calls that began after t ended.
func firstAckStartedAfter(calls []ledger.Call, t time.Time) (time.Duration, bool) {
	var best time.Duration
	found := false
	for _, c := range calls {
		if c.Outcome != ledger.Acked || c.Start.Before(t) {
			continue
		}
		if d := c.End().Sub(t); !found || d < best {
			best, found = d, true
		}
	}
	return best, found
}
