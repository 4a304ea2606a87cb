// Package chaos runs broker-fault scenarios against a real 3-node Kafka
// cluster started by scripts/kafka.sh (RF 3, min.insync.replicas=2,
// unclean leader election off) while writers append through a kwal store
// all the time, and checks the outcome with a ledger (testutil/ledger).
//
// A scenario opens its own store on a fresh topic, starts the writers,
// injects its faults through the script (SIGKILL, SIGTERM, SIGSTOP/SIGCONT
// of one node), waits after each fault until all three replicas are in
// sync again, stops the writers and replays every region twice: through
// the index and by a full scan. Its Result holds the figures of the table
// in docs/failures.md.
//
// The scenarios:
//   - leader-kill: the partition leader SIGKILLed and restarted, in cycles;
//   - leader-pause: the leader SIGSTOPped for twice ProduceTimeout, then
//     SIGCONTed;
//   - below-min-isr: both followers SIGKILLed (one replica left, below
//     min.insync.replicas) for twice ProduceTimeout, then restarted;
//   - rolling-restart: every node stopped (SIGTERM) and restarted in turn;
//   - region-failover: no broker fault; three datanode processes share
//     regions of four namespaces and one region moves every few seconds
//     while its owner is SIGSTOPped with calls in flight (failover.go): the
//     new owner claims it (LogStore.Claim) and appends, the old owner
//     resumes and its calls fail with ErrFenced, and no replay returns
//     what it wrote above the claim. With Options.ClaimsLeaderFaults the
//     regions move while the broker leading the claims topic's partition
//     is faulted instead (claimsfaults.go): SIGSTOPped until another
//     broker leads the partition and acknowledged a claim's first event,
//     then SIGCONTed (a deposed leader that resumes), or SIGKILLed, then
//     restarted.
//
// Time to first success is measured from the fault (the killed process is
// gone; a graceful stop begins) or from the recovery (resume, restart) to
// the end of the first acknowledged call
// that began after it; the worst over a scenario's cycles is reported.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil/ledger"
)

// Scenario names.
const (
	LeaderKill     = "leader-kill"
	LeaderPause    = "leader-pause"
	BelowMinISR    = "below-min-isr"
	RollingRestart = "rolling-restart"
	RegionFailover = "region-failover"
)

// BrokerScenarios lists the scenarios that fault the brokers, and
// Scenarios every scenario, in the order Run documents them.
var (
	BrokerScenarios = []string{LeaderKill, LeaderPause, BelowMinISR, RollingRestart}
	Scenarios       = append(slices.Clone(BrokerScenarios), RegionFailover)
)

// Options configures a scenario run.
type Options struct {
	Cluster *Cluster
	Store   kafka.Config // the store's config; Brokers defaults to the cluster's
	Topic   string       // a fresh topic for this run
	Load    Load
	Cycles  int           // leader-kill cycles, region-failover hand-overs or ClaimsLeaderFaults rounds (others: 1, or 3 restarts for rolling-restart)
	Settle  int           // acknowledged calls to wait for between faults (default 50)
	Wait    time.Duration // the longest wait for the cluster to recover from one fault (default 2 min)
	Logf    func(format string, args ...any)
	// Datanode is the command that starts a datanode process of the
	// region-failover scenario: a program that calls RunDatanode when
	// IsDatanode (the test binary, kwal chaos with the same flags).
	Datanode []string
	// HandoverEvery is the time between region-failover's hand-overs
	// (default 2 s), RegionsPerTopic the regions of each of its namespaces
	// (default 3). Its datanodes run Load.Writers lanes per owned region.
	HandoverEvery   time.Duration
	RegionsPerTopic int
	// ClaimsLeaderFaults, when set, makes region-failover fault the broker
	// that leads the claims topic's partition while regions move, instead
	// of moving one every HandoverEvery: each of Cycles rounds runs these
	// faults in order (FaultPause, FaultKill), each on the partition's
	// leader at that moment, moving one region while the fault lasts and
	// another right after it (claimsfaults.go).
	ClaimsLeaderFaults []string
	// Progress, when set, is called every second while the scenario runs
	// (from another goroutine than Run's).
	Progress func(Progress)
}

// Progress is a scenario's state for a progress line.
type Progress struct {
	Scenario string
	Cycles   int // faults done
	Of       int // faults planned (leader-kill: Cycles; rolling-restart: 3; else 1)
	Stats    ledger.Stats
	Elapsed  time.Duration
}

// Result is what one scenario run measured.
type Result struct {
	Scenario string
	Cycles   int
	Stats    ledger.Stats
	Indexed  ledger.Report // the replay through the index
	Scan     ledger.Report // the replay by full scan
	// Timeouts counts failed calls whose error matches kafka.ErrTimeout;
	// Errors lists every failed call's error, "count × first line".
	Timeouts int
	Errors   []string
	// FirstSuccess is the worst time from a fault or recovery to the first
	// acknowledged call that began after it.
	FirstSuccess time.Duration
	// FirstSuccesses holds that time for every fault or recovery, in order.
	FirstSuccesses []time.Duration
	// AckedDuringOutage counts calls that began after the cluster fell below
	// min.insync.replicas and were acknowledged before it recovered (must be
	// 0; below-min-isr only).
	AckedDuringOutage int
	// PeakHeap is the largest Go heap in use (HeapInuse, garbage included)
	// and PeakLive the largest live heap (as of the last GC) sampled every
	// 100 ms while the writers ran (not during the replays); the test
	// process's own ledger is in both.
	PeakHeap, PeakLive uint64
	Took               time.Duration
	// Failover holds region-failover's own figures (nil for the others).
	Failover *Failover
}

// Lost, Duplicated and Reordered are the worst of the two replays.
func (r Result) Lost() int       { return max(r.Indexed.Lost, r.Scan.Lost) }
func (r Result) Duplicated() int { return max(r.Indexed.Duplicated, r.Scan.Duplicated) }
func (r Result) Reordered() int {
	return max(r.Indexed.Reordered+r.Indexed.WrongID, r.Scan.Reordered+r.Scan.WrongID)
}

// Err returns the replays' violations, if any.
func (r Result) Err() error { return errors.Join(r.Indexed.Err(), r.Scan.Err(), r.Failover.Err()) }

type iterSeq = iter.Seq2[logstore.Entry, error]

// run is the state of one scenario run.
type run struct {
	Options
	store  *kafka.LogStore
	ledger *ledger.Ledger
	marks  []time.Time // faults and recoveries, for FirstSuccess
	mu     sync.Mutex  // guards cycles, read by the progress reporter
	cycles int
	outage [2]time.Time // below-min-isr: from the last kill to the first restart
}

// Run runs one scenario and returns its figures; an error means the
// scenario could not be carried out (the cluster did not recover, a node
// could not be driven), not that the log misbehaved: that is in the
// Result's reports.
func Run(ctx context.Context, scenario string, o Options) (Result, error) {
	if o.Settle == 0 {
		o.Settle = 50
	}
	if o.Wait == 0 {
		o.Wait = 2 * time.Minute
	}
	if o.Cycles == 0 {
		o.Cycles = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if len(o.Store.Brokers) == 0 {
		o.Store.Brokers = o.Cluster.Brokers
	}
	var step func(*run, context.Context) error
	switch scenario {
	case RegionFailover:
		return runFailover(ctx, o)
	case LeaderKill:
		step = (*run).leaderKill
	case LeaderPause:
		step = (*run).leaderPause
	case BelowMinISR:
		step = (*run).belowMinISR
	case RollingRestart:
		step = (*run).rollingRestart
	default:
		return Result{}, fmt.Errorf("chaos: unknown scenario %q (want one of %v)", scenario, Scenarios)
	}
	began := time.Now()
	store, err := kafka.Open(ctx, o.Store)
	if err != nil {
		return Result{}, fmt.Errorf("chaos: open store: %w", err)
	}
	defer store.Close()
	if err := store.CreateNamespace(ctx, o.Topic); err != nil {
		return Result{}, fmt.Errorf("chaos: create %s: %w", o.Topic, err)
	}
	r := &run{Options: o, store: store, ledger: ledger.New(nil)}
	if err := r.inSync(ctx); err != nil {
		return Result{}, err
	}
	nodes, err := o.Cluster.Nodes(ctx)
	if err != nil {
		return Result{}, err
	}

	// A GC first: the live-heap figure is as of the last GC, and the
	// previous scenario's replays (16 MiB fetches) must not count here.
	runtime.GC()
	heap := sampleHeap()
	w := StartLoad(store, r.ledger, o.Topic, o.Load)
	stopProgress := r.reportProgress(scenario, began)
	stepErr := r.settle(ctx)
	if stepErr == nil {
		stepErr = step(r, ctx)
	}
	if stepErr == nil {
		stepErr = r.settle(ctx)
	}
	w.Halt()
	stopProgress()
	res := Result{Scenario: scenario, Cycles: r.cycleCount(), Stats: r.ledger.Stats()}
	res.PeakHeap, res.PeakLive = heap()
	res.Timeouts, res.Errors = w.Errors()
	if stepErr != nil {
		r.restore(nodes)
		return res, stepErr
	}
	for _, m := range r.marks {
		d, ok := r.firstAckStartedAfter(m)
		if !ok {
			return res, fmt.Errorf("chaos: %s: no append succeeded after the fault or recovery at %s", scenario, m.Format(time.TimeOnly))
		}
		res.FirstSuccess = max(res.FirstSuccess, d)
		res.FirstSuccesses = append(res.FirstSuccesses, d)
	}
	if !r.outage[0].IsZero() {
		for _, c := range r.ledger.Calls() {
			if c.Outcome == ledger.Acked && c.Start.After(r.outage[0]) && c.End().Before(r.outage[1]) {
				res.AckedDuringOutage++
			}
		}
	}

	// Replays: through the index, then by full scan.
	if res.Indexed, err = r.ledger.Verify(o.Topic, func(region logstore.RegionID) iterSeq {
		return store.Read(ctx, o.Topic, region, 0)
	}); err != nil {
		return res, fmt.Errorf("chaos: indexed replay: %w", err)
	}
	if res.Scan, err = r.ledger.Verify(o.Topic, func(region logstore.RegionID) iterSeq {
		return store.ReadWith(ctx, o.Topic, map[logstore.RegionID]logstore.EntryID{region: 0}, kafka.ReadOptions{NoIndex: true})
	}); err != nil {
		return res, fmt.Errorf("chaos: full-scan replay: %w", err)
	}
	res.Took = time.Since(began)
	return res, nil
}

func (r *run) cycleDone() {
	r.mu.Lock()
	r.cycles++
	r.mu.Unlock()
}

func (r *run) cycleCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cycles
}

// reportProgress calls Progress every second until the returned function
// is called.
func (r *run) reportProgress(scenario string, began time.Time) (stop func()) {
	if r.Progress == nil {
		return func() {}
	}
	of := 1
	switch scenario {
	case LeaderKill:
		of = r.Cycles
	case RollingRestart:
		of = 3
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				r.mu.Lock()
				cycles := r.cycles
				r.mu.Unlock()
				r.Progress(Progress{Scenario: scenario, Cycles: cycles, Of: of, Stats: r.ledger.Stats(), Elapsed: time.Since(began)})
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// restore brings every node back after a scenario failed half-way, best
// effort: a SIGCONT to each (harmless when running) and a start of each
// (refused by the script when it runs), so the next run finds the cluster
// whole.
func (r *run) restore(nodes []int32) {
	ctx, cancel := context.WithTimeout(context.Background(), r.Wait)
	defer cancel()
	for _, id := range nodes {
		_ = r.Cluster.Node(ctx, "resume", id)
		_ = r.Cluster.Node(ctx, "start", id)
	}
}

// firstAckStartedAfter returns how long after t the first acknowledged
// call that began after t ended.
func (r *run) firstAckStartedAfter(t time.Time) (time.Duration, bool) {
	return firstAckStartedAfter(r.ledger.Calls(), t)
}

// sampleHeap samples the Go heap every 100 ms until the returned function
// is called, which stops the sampler and returns the peaks of the heap in
// use and of the live heap.
func sampleHeap() func() (inuse, live uint64) {
	stop := make(chan struct{})
	type peaks struct{ inuse, live uint64 }
	done := make(chan peaks)
	go func() {
		var p peaks
		var ms runtime.MemStats
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			metrics.Read(sample)
			p.inuse = max(p.inuse, ms.HeapInuse)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				p.live = max(p.live, sample[0].Value.Uint64())
			}
			select {
			case <-stop:
				done <- p
				return
			case <-t.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		close(stop)
		p := <-done
		return p.inuse, p.live
	}
}

// settle waits until the writers got Settle more calls acknowledged.
func (r *run) settle(ctx context.Context) error {
	want := r.ledger.Stats().AckedCalls + r.Settle
	ctx, cancel := context.WithTimeout(ctx, r.Wait)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for r.ledger.Stats().AckedCalls < want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: waiting for %d acknowledged appends: %w (%+v)", r.Settle, ctx.Err(), r.ledger.Stats())
		case <-t.C:
		}
	}
	return nil
}

// inSync waits until all three replicas of the topic are in sync.
func (r *run) inSync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.Wait)
	defer cancel()
	_, err := r.Cluster.WaitInSync(ctx, r.Topic, 3)
	return err
}

func (r *run) node(ctx context.Context, action string, id int32) error {
	r.Logf("node %d: %s", id, action)
	return r.Cluster.Node(ctx, action, id)
}

func (r *run) leader(ctx context.Context) (Partition, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Wait)
	defer cancel()
	return r.Cluster.WaitFor(ctx, r.Topic, "a leader", func(p Partition) bool { return p.Leader >= 0 })
}

// leaderKill: SIGKILL the leader, wait for appends to succeed, restart it,
// wait until it is back in sync; Cycles times.
func (r *run) leaderKill(ctx context.Context) error {
	for i := range r.Cycles {
		p, err := r.leader(ctx)
		if err != nil {
			return err
		}
		if err := r.node(ctx, "kill", p.Leader); err != nil {
			return err
		}
		// From the moment the process is gone: calls acknowledged by the old
		// leader before the kill landed do not count.
		r.marks = append(r.marks, time.Now())
		wctx, cancel := context.WithTimeout(ctx, r.Wait)
		q, err := r.Cluster.WaitFor(wctx, r.Topic, "a new leader", func(q Partition) bool { return q.Leader >= 0 && q.Leader != p.Leader })
		cancel()
		if err != nil {
			return fmt.Errorf("cycle %d, node %d killed: %w", i+1, p.Leader, err)
		}
		r.Logf("cycle %d: leader %d killed, node %d leads", i+1, p.Leader, q.Leader)
		if err := r.settle(ctx); err != nil {
			return fmt.Errorf("cycle %d, node %d killed: %w", i+1, p.Leader, err)
		}
		if err := r.node(ctx, "start", p.Leader); err != nil {
			return err
		}
		if err := r.inSync(ctx); err != nil {
			return err
		}
		r.cycleDone()
		r.Logf("cycle %d/%d done: %+v", i+1, r.Cycles, r.ledger.Stats())
		if err := r.settle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// leaderPause: SIGSTOP the leader for twice ProduceTimeout, SIGCONT it,
// wait until it is back in sync.
func (r *run) leaderPause(ctx context.Context) error {
	p, err := r.leader(ctx)
	if err != nil {
		return err
	}
	if err := r.node(ctx, "pause", p.Leader); err != nil {
		return err
	}
	paused := time.NewTimer(2 * r.Store.ProduceTimeout)
	select {
	case <-ctx.Done():
		paused.Stop()
		_ = r.Cluster.Node(context.WithoutCancel(ctx), "resume", p.Leader)
		return ctx.Err()
	case <-paused.C:
	}
	if err := r.node(ctx, "resume", p.Leader); err != nil {
		return err
	}
	r.marks = append(r.marks, time.Now())
	r.cycleDone()
	return r.inSync(ctx)
}

// belowMinISR: SIGKILL both followers, keep them down for twice
// ProduceTimeout, restart them, wait until all are in sync.
func (r *run) belowMinISR(ctx context.Context) error {
	p, err := r.leader(ctx)
	if err != nil {
		return err
	}
	nodes, err := r.Cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	followers := slices.DeleteFunc(nodes, func(id int32) bool { return id == p.Leader })
	for _, id := range followers {
		if err := r.node(ctx, "kill", id); err != nil {
			return err
		}
	}
	r.outage[0] = time.Now()
	down := time.NewTimer(2 * r.Store.ProduceTimeout)
	select {
	case <-ctx.Done():
		down.Stop()
		return ctx.Err()
	case <-down.C:
	}
	r.outage[1] = time.Now()
	// Both at once: the partition needs either of them back for min ISR.
	var wg sync.WaitGroup
	errs := make([]error, len(followers))
	for i, id := range followers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.node(ctx, "start", id)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.marks = append(r.marks, time.Now())
	r.cycleDone()
	return r.inSync(ctx)
}

// rollingRestart: every node in turn stopped with SIGTERM and restarted,
// each once all replicas are back in sync.
func (r *run) rollingRestart(ctx context.Context) error {
	nodes, err := r.Cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, id := range nodes {
		r.marks = append(r.marks, time.Now())
		if err := r.node(ctx, "stop", id); err != nil {
			return err
		}
		if err := r.node(ctx, "start", id); err != nil {
			return err
		}
		if err := r.inSync(ctx); err != nil {
			return err
		}
		r.cycleDone()
		if err := r.settle(ctx); err != nil {
			return err
		}
	}
	return nil
}
