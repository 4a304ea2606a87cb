package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil/ledger"
)

// Failover is what the region-failover scenario measured beyond a Result's
// ledger figures.
type Failover struct {
	Topics      []string // the pool of namespaces, then the claims topic
	ClaimsTopic string
	// ZombieCalls counts the old owners' calls of the moving region still
	// in flight (begun, not ended) when they were resumed after the claim;
	// ZombieRefused those that failed with ErrFenced, ZombieAcked those
	// acknowledged (allowed: their check began before the claim, so they
	// landed below it; the replays and AboveClaim prove they did),
	// ZombieFailed those that failed otherwise (not acknowledged: under
	// ClaimsLeaderFaults the claims topic may be out of reach, or the
	// call's ProduceTimeout ran out while its owner was stopped).
	ZombieCalls, ZombieRefused, ZombieAcked, ZombieFailed int
	// AboveClaim counts acknowledged entries whose ID is above the
	// SealedID of a claim that outranks their epoch: an old owner told
	// "acknowledged" for what the claim fences (must be 0).
	AboveClaim int
	// FencedCalls counts every call that failed with ErrFenced.
	FencedCalls int
	// FencedSkipped is ReadStats.Fenced summed over every region's replay
	// (the indexed and the full-scan replays must agree).
	FencedSkipped, FencedSkippedScan int64
	// Stale counts entries of an older epoch that a replay returned after
	// an entry of a newer one: a fenced entry replayed (must be 0).
	Stale int
	// SealedWrong counts claims whose SealedID is not the last entry of
	// the earlier epochs that the replays return (must be 0).
	SealedWrong int
	// Claims holds every claim's latency (the initial ones included).
	Claims []time.Duration
	// ClaimsFaults holds each fault of the claims partition's leader
	// (Options.ClaimsLeaderFaults), in order.
	ClaimsFaults []ClaimsFault
	// FaultFailed counts the calls that failed with another error than
	// ErrFenced and overlapped a claims-leader fault (from the fault until
	// every replica was back in sync); OtherFailed the others (calls that
	// failed with no fault to explain it).
	FaultFailed, OtherFailed int
	// Failures describes the first calls that failed with another error
	// than ErrFenced: when each began, how long it took, its datanode and
	// region, the claims-leader fault it overlapped, its error.
	Failures []string
	// Problems describes the first violations of Stale, SealedWrong and
	// AboveClaim.
	Problems []string
}

// Err returns the violations of the fencing promise, if any.
func (f *Failover) Err() error {
	if f == nil || f.Stale+f.SealedWrong+f.AboveClaim == 0 && f.FencedSkipped == f.FencedSkippedScan {
		return nil
	}
	return fmt.Errorf("chaos: region-failover: %d stale entries replayed, %d wrong sealed IDs, %d acknowledged entries above a claim, fenced entries skipped %d (index) vs %d (scan):\n  %s",
		f.Stale, f.SealedWrong, f.AboveClaim, f.FencedSkipped, f.FencedSkippedScan, strings.Join(f.Problems, "\n  "))
}

func (f *Failover) problem(format string, args ...any) {
	if len(f.Problems) < 20 {
		f.Problems = append(f.Problems, fmt.Sprintf(format, args...))
	}
}

// failoverPool is the number of namespaces the datanodes share, and
// failoverNodes the number of datanode processes.
const (
	failoverPool  = 4
	failoverNodes = 3
)

// regionKey names a region of the pool.
type regionKey struct {
	ns     string
	region logstore.RegionID
}

// claimRec is one claim a datanode reported.
type claimRec struct {
	regionKey
	node   string
	epoch  uint64
	sealed logstore.EntryID
}

// node is one datanode process.
type node struct {
	name    string
	journal string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	stash   []string // lines read while waiting for another
	stderr  *lockedBuffer
	stopped bool
}

// lockedBuffer keeps a child's stderr (the exec package's goroutine writes
// it while the scenario may read it).
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (n *node) send(format string, args ...any) error {
	_, err := fmt.Fprintf(n.stdin, format+"\n", args...)
	if err != nil {
		return fmt.Errorf("datanode %s: %w", n.name, err)
	}
	return nil
}

// expect returns the first line (stashed or new) for which match is true,
// failing on an "error" line it does not match, the process's end, or ctx.
func (n *node) expect(ctx context.Context, what string, match func([]string) bool) ([]string, error) {
	// match first: a caller may expect an error line (a claim made while
	// the claims topic is out of reach).
	check := func(l string) ([]string, bool, error) {
		f := strings.Fields(l)
		if match(f) {
			return f, true, nil
		}
		if len(f) > 0 && f[0] == "error" {
			return nil, false, fmt.Errorf("datanode %s: %s", n.name, l)
		}
		return f, false, nil
	}
	for i, l := range n.stash {
		f, ok, err := check(l)
		if err != nil {
			return nil, err
		}
		if ok {
			n.stash = slices.Delete(n.stash, i, i+1)
			return f, nil
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("datanode %s: waiting for %s: %w", n.name, what, ctx.Err())
		case l, ok := <-n.lines:
			if !ok {
				return nil, fmt.Errorf("datanode %s ended while the scenario waited for %s: %s", n.name, what, lastLines(n.stderr.String(), 10))
			}
			f, ok, err := check(l)
			if err != nil {
				return nil, err
			}
			if ok {
				return f, nil
			}
			n.stash = append(n.stash, l)
		}
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

func (n *node) signal(sig syscall.Signal) error {
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("datanode %s: %v: %w", n.name, sig, err)
	}
	n.stopped = sig == syscall.SIGSTOP
	return nil
}

type zombieKey struct {
	ns  string
	tag ledger.Tag
}

// failover is the state of one region-failover run.
type failover struct {
	Options
	f       Failover
	nodes   []*node
	owner   map[regionKey]int
	epoch   map[regionKey]uint64
	claims  []claimRec
	zombies map[zombieKey]bool // each call in flight at a resume, by its namespace and first tag
	rng     *rand.Rand
}

// runFailover: three datanode processes (Options.Datanode) share a pool of
// four namespaces; every HandoverEvery one region moves: its owner is
// SIGSTOPped with calls in flight, another datanode claims it and appends,
// the old owner is resumed and its calls must fail with ErrFenced. Then
// every region is replayed on a fresh store, through the index and by full
// scan, and checked against the datanodes' journals.
func runFailover(ctx context.Context, o Options) (Result, error) {
	began := time.Now()
	if len(o.Datanode) == 0 {
		return Result{}, errors.New("chaos: region-failover needs Options.Datanode, the command that starts a datanode process")
	}
	if o.HandoverEvery == 0 {
		o.HandoverEvery = 2 * time.Second
	}
	if o.RegionsPerTopic == 0 {
		o.RegionsPerTopic = 3
	}
	fo := &failover{Options: o, owner: map[regionKey]int{}, epoch: map[regionKey]uint64{}, zombies: map[zombieKey]bool{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))}
	for i := range failoverPool {
		fo.f.Topics = append(fo.f.Topics, fmt.Sprintf("%s-%d", o.Topic, i))
	}
	fo.f.ClaimsTopic = o.Topic + "-claims"
	fo.f.Topics = append(fo.f.Topics, fo.f.ClaimsTopic)
	res := Result{Scenario: RegionFailover, Failover: &fo.f}

	store, err := kafka.Open(ctx, o.Store)
	if err != nil {
		return res, fmt.Errorf("chaos: open store: %w", err)
	}
	defer store.Close()
	for _, ns := range fo.f.Topics[:failoverPool] {
		if err := store.CreateNamespace(ctx, ns); err != nil {
			return res, fmt.Errorf("chaos: create %s: %w", ns, err)
		}
		wctx, cancel := context.WithTimeout(ctx, o.Wait)
		_, err := o.Cluster.WaitInSync(wctx, ns, 3)
		cancel()
		if err != nil {
			return res, err
		}
	}

	dir, err := os.MkdirTemp("", "kwal-failover-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	stepErr := fo.start(ctx, dir)
	if stepErr == nil {
		if len(o.ClaimsLeaderFaults) > 0 {
			stepErr = fo.claimsLeaderFaults(ctx)
		} else {
			stepErr = fo.handovers(ctx)
		}
	}
	stopErr := fo.stop(ctx)
	if stepErr == nil {
		stepErr = stopErr
	}
	if len(o.ClaimsLeaderFaults) > 0 {
		// What the datanodes' stores warned of while the claims partition's
		// leader was faulted: evidence behind a failed check. (franz-go's
		// own warnings, a line per refused dial, are left out.)
		for _, n := range fo.nodes {
			var ws []string
			for _, l := range strings.Split(n.stderr.String(), "\n") {
				if strings.Contains(l, `msg="kwal:`) {
					ws = append(ws, l)
				}
			}
			if len(ws) > 0 {
				fo.Logf("region-failover: datanode %s's last warnings:\n%s", n.name, strings.Join(ws[max(0, len(ws)-20):], "\n"))
			}
		}
	}
	if stepErr != nil {
		return res, stepErr
	}

	var journals []io.Reader
	for _, n := range fo.nodes {
		f, err := os.Open(n.journal)
		if err != nil {
			return res, err
		}
		defer f.Close()
		journals = append(journals, f)
	}
	l, err := ledger.Load(journals...)
	if err != nil {
		return res, err
	}
	res.Stats = l.Stats()
	res.Cycles = len(fo.claims) - failoverPool*o.RegionsPerTopic
	calls := l.Calls()
	for _, c := range calls {
		zombie := fo.zombies[zombieKey{c.Namespace, c.Tags[0]}]
		switch {
		case c.Outcome == ledger.Acked:
			if zombie {
				fo.f.ZombieAcked++
			}
			fo.checkAcked(c)
		case c.Outcome != ledger.Failed:
		case strings.HasPrefix(c.Err, fencedMark):
			fo.f.FencedCalls++
			if zombie {
				fo.f.ZombieRefused++
			}
		default:
			if zombie {
				fo.f.ZombieFailed++
			}
			cf := fo.faultOf(c)
			if cf != nil {
				cf.Failed++
				fo.f.FaultFailed++
			} else {
				fo.f.OtherFailed++
			}
			fo.noteFailure(c, cf)
			res.Errors = append(res.Errors, c.Err)
		}
	}
	res.Errors = countLines(res.Errors)
	if err := fo.firstSuccesses(calls, &res); err != nil {
		return res, err
	}
	if err := fo.verify(ctx, l, &res); err != nil {
		return res, err
	}
	res.Took = time.Since(began)
	return res, nil
}

// countLines turns error texts into "count × first line", most frequent first.
func countLines(errs []string) []string {
	counts := map[string]int{}
	for _, e := range errs {
		counts[strings.SplitN(e, "\n", 2)[0]]++
	}
	var out []string
	for e, n := range counts {
		out = append(out, fmt.Sprintf("%d × %s", n, e))
	}
	slices.Sort(out)
	return out
}

// start starts the datanodes and has each claim its share of the regions.
func (fo *failover) start(ctx context.Context, dir string) error {
	exe, err := exec.LookPath(fo.Datanode[0])
	if err != nil {
		return fmt.Errorf("chaos: datanode command: %w", err)
	}
	for i := range failoverNodes {
		n := &node{name: fmt.Sprintf("dn%d", i+1), journal: filepath.Join(dir, fmt.Sprintf("dn%d.journal", i+1)), stderr: &lockedBuffer{}}
		spec, err := json.Marshal(datanodeSpec{
			Name: n.name, Journal: n.journal, ClaimsTopic: fo.f.ClaimsTopic, Brokers: fo.Store.Brokers,
			Lanes: fo.Load.Writers, Size: fo.Load.Size, Pace: fo.Load.Pace,
			Fencing: fo.Store.Fencing, Lease: fo.Store.Lease, ProduceTimeout: fo.Store.ProduceTimeout, CallTimeout: fo.Load.CallTimeout, Report: 2 * fo.Load.Writers,
		})
		if err != nil {
			return err
		}
		n.cmd = exec.Command(exe, fo.Datanode[1:]...)
		n.cmd.Env = append(os.Environ(), DatanodeEnv+"="+string(spec))
		n.cmd.Stderr = n.stderr
		if n.stdin, err = n.cmd.StdinPipe(); err != nil {
			return err
		}
		out, err := n.cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := n.cmd.Start(); err != nil {
			return fmt.Errorf("chaos: start datanode %s: %w", n.name, err)
		}
		fo.nodes = append(fo.nodes, n)
		// Read all the time: a datanode blocked on a full pipe would stall.
		n.lines = make(chan string, 1<<16)
		go func() {
			defer close(n.lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				n.lines <- sc.Text()
			}
		}()
	}
	wctx, cancel := context.WithTimeout(ctx, fo.Wait)
	defer cancel()
	for _, n := range fo.nodes {
		if _, err := n.expect(wctx, "ready", func(f []string) bool { return len(f) == 1 && f[0] == "ready" }); err != nil {
			return err
		}
	}
	i := 0
	for _, ns := range fo.f.Topics[:failoverPool] {
		for r := range fo.RegionsPerTopic {
			k := regionKey{ns, logstore.RegionID(r + 1)}
			if err := fo.claim(wctx, k, i%failoverNodes); err != nil {
				return err
			}
			i++
		}
	}
	fo.Logf("region-failover: %d datanodes own %d regions of %d namespaces", failoverNodes, i, failoverPool)
	return nil
}

// claim has datanode to claim k and waits until it acknowledged appends
// of k under the new epoch.
func (fo *failover) claim(ctx context.Context, k regionKey, to int) error {
	n := fo.nodes[to]
	if err := n.send("claim %s %d", k.ns, k.region); err != nil {
		return err
	}
	reg := strconv.FormatUint(uint64(k.region), 10)
	f, err := n.expect(ctx, "the claim of "+k.ns+" region "+reg, func(f []string) bool {
		return len(f) == 6 && f[0] == "claimed" && f[1] == k.ns && f[2] == reg ||
			len(f) >= 4 && f[0] == "error" && f[1] == "claim" && f[2] == k.ns && f[3] == reg+":"
	})
	if err != nil {
		return err
	}
	if f[0] == "error" {
		return &claimError{node: n.name, k: k, text: strings.Join(f[4:], " ")}
	}
	epoch, err1 := strconv.ParseUint(f[3], 10, 64)
	sealed, err2 := strconv.ParseUint(f[4], 10, 64)
	took, err3 := strconv.ParseInt(f[5], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("datanode %s: %q: %w", n.name, strings.Join(f, " "), err)
	}
	if epoch <= fo.epoch[k] {
		return fmt.Errorf("datanode %s claimed %s region %d under epoch %d, not above the previous %d", n.name, k.ns, k.region, epoch, fo.epoch[k])
	}
	fo.claims = append(fo.claims, claimRec{regionKey: k, node: n.name, epoch: epoch, sealed: logstore.EntryID(sealed)})
	fo.f.Claims = append(fo.f.Claims, time.Duration(took))
	fo.owner[k], fo.epoch[k] = to, epoch
	e := f[3]
	_, err = n.expect(ctx, "acknowledged appends of "+k.ns+" region "+reg, func(f []string) bool {
		return len(f) == 4 && f[0] == "acked" && f[1] == k.ns && f[2] == reg && f[3] == e
	})
	return err
}

// claimError is a claim the datanode reported failed ("error claim").
type claimError struct {
	node string
	k    regionKey
	text string
}

func (e *claimError) Error() string {
	return fmt.Sprintf("datanode %s: claim of %s region %d failed: %s", e.node, e.k.ns, e.k.region, e.text)
}

// regionKeys returns every region of the pool in a random order.
func (fo *failover) regionKeys() []regionKey {
	keys := make([]regionKey, 0, len(fo.owner))
	for _, ns := range fo.f.Topics[:failoverPool] {
		for r := range fo.RegionsPerTopic {
			keys = append(keys, regionKey{ns, logstore.RegionID(r + 1)})
		}
	}
	fo.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// handovers moves Cycles regions, one every HandoverEvery.
func (fo *failover) handovers(ctx context.Context) error {
	keys := fo.regionKeys()
	tick := time.NewTicker(fo.HandoverEvery)
	defer tick.Stop()
	for i := range fo.Cycles {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		k := keys[i%len(keys)]
		if err := fo.handover(ctx, k); err != nil {
			return fmt.Errorf("hand-over %d (%s region %d): %w", i+1, k.ns, k.region, err)
		}
	}
	return nil
}

// handover moves k from its owner to another datanode: SIGSTOP the owner,
// claim on the other and append there, note the owner's calls of k in
// flight (its journal, which it cannot write while stopped), SIGCONT it,
// and wait until each of its lanes of k failed with ErrFenced.
func (fo *failover) handover(ctx context.Context, k regionKey) error {
	ctx, cancel := context.WithTimeout(ctx, fo.Wait)
	defer cancel()
	from := fo.owner[k]
	to := (from + 1 + fo.rng.IntN(failoverNodes-1)) % failoverNodes
	old, oldEpoch := fo.nodes[from], fo.epoch[k]
	if err := old.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	err := fo.claim(ctx, k, to)
	var inFlight int
	if err == nil {
		inFlight, err = fo.noteZombies(old, k)
	}
	if cerr := old.signal(syscall.SIGCONT); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fo.awaitFenced(ctx, old, k, oldEpoch); err != nil {
		return err
	}
	fo.Logf("region-failover: %s region %d moved from %s (epoch %d, %d calls in flight at the resume) to %s (epoch %d) in %v",
		k.ns, k.region, old.name, oldEpoch, inFlight, fo.nodes[to].name, fo.epoch[k], fo.f.Claims[len(fo.f.Claims)-1].Round(time.Millisecond))
	return nil
}

// noteZombies records the calls of k the stopped datanode has in flight.
func (fo *failover) noteZombies(n *node, k regionKey) (int, error) {
	f, err := os.Open(n.journal)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	l, err := ledger.Load(f)
	if err != nil {
		return 0, fmt.Errorf("datanode %s: journal: %w", n.name, err)
	}
	count := 0
	for _, c := range l.Calls() {
		if c.Outcome == ledger.Pending && c.Namespace == k.ns && len(c.Tags) > 0 && c.Tags[0].Region == k.region {
			fo.zombies[zombieKey{c.Namespace, c.Tags[0]}] = true
			count++
		}
	}
	fo.f.ZombieCalls += count
	return count, nil
}

// stop ends every datanode: resumed if stopped, asked to quit, killed if
// it does not end within Wait.
func (fo *failover) stop(ctx context.Context) error {
	var errs []error
	for _, n := range fo.nodes {
		if n.stopped {
			_ = n.signal(syscall.SIGCONT)
		}
		_ = n.send("quit")
		_ = n.stdin.Close()
	}
	for _, n := range fo.nodes {
		done := make(chan error, 1)
		go func() { done <- n.cmd.Wait() }()
		t := time.NewTimer(fo.Wait)
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("datanode %s: %w: %s", n.name, err, lastLines(n.stderr.String(), 10)))
			}
		case <-t.C:
			_ = n.cmd.Process.Kill()
			<-done
			errs = append(errs, fmt.Errorf("datanode %s did not quit within %v", n.name, fo.Wait))
		case <-ctx.Done():
			_ = n.cmd.Process.Kill()
			<-done
			errs = append(errs, ctx.Err())
		}
		t.Stop()
		for range n.lines { // the reader ends with the process's stdout
		}
	}
	return errors.Join(errs...)
}

// verify replays every region on a fresh store, through the index and by
// full scan, checks both against the ledger, and checks the fencing
// promise: epochs never fall along a region's replay, and every claim's
// SealedID is the last entry of the earlier epochs that the replay holds.
func (fo *failover) verify(ctx context.Context, l *ledger.Ledger, res *Result) error {
	cfg := fo.Store
	cfg.IndexDir, cfg.IndexStore = "", nil
	cfg.ClaimsTopic = fo.f.ClaimsTopic
	s, err := kafka.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("chaos: open the verifying store: %w", err)
	}
	defer s.Close()
	for _, noIndex := range []bool{false, true} {
		for _, ns := range fo.f.Topics[:failoverPool] {
			var fenced int64
			replay, err := l.Replay(ns, func(r logstore.RegionID) iterSeq {
				var st kafka.ReadStats
				return func(yield func(logstore.Entry, error) bool) {
					defer func() { fenced += st.Fenced }()
					for e, err := range s.ReadWith(ctx, ns, map[logstore.RegionID]logstore.EntryID{r: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}) {
						if !yield(e, err) {
							return
						}
					}
				}
			})
			if err != nil {
				return fmt.Errorf("chaos: replay (no index: %v): %w", noIndex, err)
			}
			rep := l.Check(ns, replay)
			if noIndex {
				res.Scan.Add(rep)
				fo.f.FencedSkippedScan += fenced
			} else {
				res.Indexed.Add(rep)
				fo.f.FencedSkipped += fenced
			}
			fo.checkEpochs(ns, replay, noIndex)
		}
	}
	return nil
}

// checkAcked counts c's acknowledged entries that lie above the SealedID
// of the first claim outranking their epoch. That claim fences every entry
// of an older epoch above its claim record, and its SealedID is the last
// entry of the older epochs below the record, so an acknowledged entry of
// an older epoch is at or below it; a later claim's record lies higher.
func (fo *failover) checkAcked(c ledger.Call) {
	for i, t := range c.Tags {
		id := c.IDs[i]
		if id == 0 {
			continue // not known exactly (an earlier tag of the region)
		}
		e := t.Seq >> epochShift
		for _, cl := range fo.claims { // a region's claims come in rising epochs
			if cl.ns != c.Namespace || cl.region != t.Region || cl.epoch <= e {
				continue
			}
			if id > cl.sealed {
				fo.f.AboveClaim++
				fo.f.problem("%s region %d: %v of epoch %d acknowledged at ID %d (call began %s, took %v), above the SealedID %d of the claim of epoch %d",
					c.Namespace, t.Region, t, e, id, c.Start.Format(clock), c.Took, cl.sealed, cl.epoch)
			}
			break
		}
	}
}

func (fo *failover) checkEpochs(ns string, replay map[logstore.RegionID][]logstore.Entry, noIndex bool) {
	how := "indexed"
	if noIndex {
		how = "full scan"
	}
	for r, es := range replay {
		var top uint64
		for _, e := range es {
			t, err := ledger.Decode(e.Data)
			if err != nil {
				continue // the ledger's check counts it
			}
			if ep := t.Seq >> epochShift; ep < top {
				fo.f.Stale++
				fo.f.problem("%s %s region %d: ID %d holds %v of epoch %d after an entry of epoch %d", how, ns, r, e.ID, t, ep, top)
			} else {
				top = ep
			}
		}
	}
	for _, c := range fo.claims {
		if c.ns != ns {
			continue
		}
		var last logstore.EntryID
		for _, e := range replay[c.region] {
			if t, err := ledger.Decode(e.Data); err == nil && t.Seq>>epochShift < c.epoch {
				last = max(last, e.ID)
			}
		}
		if last != c.sealed {
			fo.f.SealedWrong++
			fo.f.problem("%s %s region %d: the claim of epoch %d sealed ID %d, the replay's last entry of earlier epochs is %d", how, ns, c.region, c.epoch, c.sealed, last)
		}
	}
}
