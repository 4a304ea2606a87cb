package chaos_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/internal/chaos"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// claimsLeaderRounds is the number of rounds (a pause, then a kill, of the
// claims partition's leader) of TestRegionFailoverClaimsLeader:
// KWAL_CHAOS_CLAIMS_ROUNDS, default 1 (the CI's figure; a soak sets more).
func claimsLeaderRounds(t *testing.T) int {
	if s := os.Getenv("KWAL_CHAOS_CLAIMS_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "KWAL_CHAOS_CLAIMS_ROUNDS")
		return n
	}
	return 1
}

// claimsLeaderFaults is the faults TestRegionFailoverClaimsLeader runs on
// the claims partition's leader under a fencing mode, in order:
// KWAL_CHAOS_CLAIMS_FAULTS (a comma-separated list of pause and kill, for
// both modes), by default a pause under strict fencing, where every
// append's check looks at the claims partition, and a kill under a lease.
// One each keeps CI at about two minutes: a pause costs about 80 s here (a
// claim made while it lasts waits on requests its store sent to the
// stopped broker, 35 to 65 s after another broker leads), a kill about
// 40 s (a broker restarts in 15 to 30 s).
func claimsLeaderFaults(t *testing.T, fencing string) []string {
	if s := os.Getenv("KWAL_CHAOS_CLAIMS_FAULTS"); s != "" {
		return strings.Split(s, ",")
	}
	if fencing == kafka.FencingStrict {
		return []string{chaos.FaultPause}
	}
	return []string{chaos.FaultKill}
}

// TestRegionFailoverClaimsLeader protects fenced ownership when the broker
// that every append's check asks, the claims partition's leader, fails
// while regions move: three datanode processes share 8 regions of 4
// namespaces. Under strict fencing that broker is SIGSTOPped until another
// leads the partition (past the broker session timeout) and acknowledged
// the pending event of a claim made meanwhile, then SIGCONTed: a deposed
// leader resuming with the end it had. Under a lease it is SIGKILLed and
// restarted (claimsLeaderFaults: both under both on demand). While the
// fault lasts a region moves, its owner SIGSTOPped first so that its
// client still names the faulted broker as the leader when it resumes,
// and another region moves right after the recovery. Appends may fail
// while the claims topic is out of reach, but only then, and only as
// failed calls: every acknowledged entry is replayed once at its ID in
// order (through the index and by full scan), none lies above the
// SealedID of a claim that outranks it, each old owner's call in flight at
// its resume is refused with ErrFenced, acknowledged below the claim or
// failed, no replay returns an older epoch's entry after a newer one's,
// and every claim's SealedID is what the replays hold.
func TestRegionFailoverClaimsLeader(t *testing.T) {
	c := cluster(t)
	for _, mode := range []string{kafka.FencingStrict, kafka.FencingLease} {
		t.Run(mode, func(t *testing.T) { regionFailoverClaimsLeader(t, c, mode) })
	}
}

func regionFailoverClaimsLeader(t *testing.T, c *chaos.Cluster, fencing string) {
	cfg := kafka.DefaultConfig()
	cfg.Brokers = c.Brokers
	// Shorter than TestRegionFailover's: a request sent to the stopped
	// leader is abandoned after ProduceTimeout plus RequestTimeout, and
	// until then it holds up the claim of the hand-over during the pause.
	cfg.ProduceTimeout = 15 * time.Second
	cfg.RequestTimeout = 5 * time.Second
	cfg.Fencing = fencing
	if fencing == kafka.FencingLease {
		cfg.Lease = 500 * time.Millisecond
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	rounds, faults := claimsLeaderRounds(t), claimsLeaderFaults(t, fencing)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(rounds*len(faults))*2*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, chaos.RegionFailover, chaos.Options{
		Cluster: c,
		Store:   cfg,
		Topic:   testutil.Topic(t),
		// A lighter load than TestRegionFailover's: the faults are the
		// point, and on two cores the datanodes' appends slow the brokers'
		// recovery.
		Load:               chaos.Load{Writers: 3, Size: 512, Pace: 10 * time.Millisecond, CallTimeout: time.Minute},
		Cycles:             rounds,
		Datanode:           []string{os.Args[0], "-test.run=^$"},
		RegionsPerTopic:    2,
		ClaimsLeaderFaults: faults,
		Wait:               time.Minute,
		Logf:               t.Logf,
	})
	t.Log(describe(res))
	f := res.Failover
	if f != nil {
		t.Log(describeFailover(*f))
		for _, cf := range f.ClaimsFaults {
			t.Log(describeClaimsFault(cf))
		}
		defer func() {
			if t.Failed() {
				t.Logf("calls that failed otherwise than with ErrFenced:\n  %s\nproblems:\n  %s",
					strings.Join(f.Failures, "\n  "), strings.Join(f.Problems, "\n  "))
			}
		}()
	}
	require.NoError(t, err)
	require.NoError(t, res.Err())
	require.Len(t, f.ClaimsFaults, len(faults)*rounds)
	for i, cf := range f.ClaimsFaults {
		require.Equal(t, faults[i%len(faults)], cf.Kind)
		require.NotEqual(t, cf.Node, cf.NewLeader, "another broker leads the claims partition while its leader is %s", cf.Kind)
		require.Greater(t, cf.NewLeaderEpoch, cf.LeaderEpoch, "the new leader's epoch is above the faulted one's")
		require.Less(t, cf.Moved, cf.Held(), "the leadership moved while node %d was %s", cf.Node, cf.Kind)
		if cf.Kind == chaos.FaultPause {
			require.Greater(t, cf.Held(), chaos.BrokerSessionTimeout, "the paused leader outlasted the broker session timeout")
		}
	}
	require.Equal(t, 2*len(faults)*rounds, res.Cycles, "a region moved during and right after each fault")
	require.Zero(t, res.Lost(), "no acknowledged entry is lost")
	require.Zero(t, res.Duplicated())
	require.Zero(t, res.Reordered())
	require.Zero(t, res.Indexed.Phantom+res.Scan.Phantom)
	require.Equal(t, res.Stats.Acked, res.Indexed.Acked)
	require.Zero(t, f.AboveClaim, "no entry above a claim that outranks it is acknowledged")
	require.Zero(t, f.Stale, "no replay returns an entry its claim fenced")
	require.Zero(t, f.SealedWrong, "each claim's SealedID is the last entry of the earlier epochs the replays return")
	require.Zero(t, f.OtherFailed, "calls fail other than with ErrFenced only while the claims leader is faulted: %v", res.Errors)
	// Whether an old owner had calls in flight when it was stopped, and
	// whether they outlive ProduceTimeout while the claims leader is
	// frozen, is up to timing: what every run must show is that each moved
	// region's old owner ends fenced.
	require.Equal(t, f.ZombieCalls, f.ZombieRefused+f.ZombieAcked+f.ZombieFailed,
		"a call in flight at the resume is refused with ErrFenced, acknowledged below the claim or failed")
	require.Positive(t, f.FencedCalls, "the old owners' appends of the moved regions end fenced")
	require.Equal(t, f.FencedSkipped, f.FencedSkippedScan, "indexed and full-scan replays skip the same fenced entries")
}

func describeClaimsFault(cf chaos.ClaimsFault) string {
	return fmt.Sprintf("claims leader %s: node %d (leader epoch %d) %s for %v; node %d led (epoch %d) %v after the fault; %s moved during it under epoch %d (claim attempts %d, %d calls in flight at the old owner's resume), %s right after; calls failed in its window %d (until every replica was in sync, %v after the recovery); first success %v after the fault, %v after the recovery",
		cf.Kind, cf.Node, cf.LeaderEpoch, map[string]string{chaos.FaultPause: "stopped", chaos.FaultKill: "down"}[cf.Kind], cf.Held().Round(time.Millisecond),
		cf.NewLeader, cf.NewLeaderEpoch, cf.Moved.Round(time.Millisecond), cf.During, cf.DuringEpoch, cf.ClaimAttempts, cf.ZombieCalls, cf.After,
		cf.Failed, cf.InSync.Sub(cf.Recovered).Round(time.Millisecond), cf.FirstSuccess.Round(time.Millisecond), cf.FirstSuccessRecovered.Round(time.Millisecond))
}
