package chaos_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/internal/chaos"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
	"github.com/kwal/kwal/testutil/ledger"
	"github.com/kwal/kwal/testutil/netfault"
)

// netTimeout is ProduceTimeout and RequestTimeout in the network-fault
// test.
const netTimeout = 3 * time.Second

// TestNetworkFaults protects appends against a bad network between kwal
// and the brokers (a Toxiproxy proxy in front of every broker, through
// Config.Dialer), with 4 writers appending throughout: 150 ms latency, a
// 32 KB/s bandwidth limit, connections reset 200 ms into carrying data,
// and a blackhole for twice ProduceTimeout, one after the other. Every
// call ends within ProduceTimeout (plus the fault tests' margin), appends
// fail with ErrTimeout under the blackhole and succeed again once each
// fault is lifted, and replays (through the index and by full scan, on a
// store that does not go through the proxy) match the ledger. On kfake by
// default; on the 3-node cluster when KWAL_KAFKA_CLUSTER3 is set, else on
// the brokers in KWAL_KAFKA_BROKERS.
func TestNetworkFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each fault for seconds")
	}
	brokers, err := chaos.BrokersFromEnv()
	if err != nil {
		brokers = testutil.Brokers(t)
	}
	proxies, err := netfault.New(brokers)
	require.NoError(t, err)
	defer proxies.Close()

	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers
	cfg.Dialer = proxies.Dial
	cfg.ProduceTimeout = netTimeout
	cfg.RequestTimeout = netTimeout
	cfg.IndexDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	defer s.Close()
	topic := testutil.Topic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))

	l := ledger.New(nil)
	w := chaos.StartLoad(s, l, topic, chaos.Load{Writers: 4, Regions: 4, Size: 512, Pace: 10 * time.Millisecond, CallTimeout: 4 * netTimeout})
	halted := false
	defer func() {
		if !halted {
			w.Halt()
		}
	}()
	// acksAfter waits until n calls that began after t were acknowledged.
	acksAfter := func(t0 time.Time, n int) time.Duration {
		var took time.Duration
		require.Eventually(t, func() bool {
			k := 0
			var first time.Time
			for _, c := range l.Calls() {
				if c.Outcome == ledger.Acked && !c.Start.Before(t0) {
					k++
					if first.IsZero() || c.End().Before(first) {
						first = c.End()
					}
				}
			}
			took = first.Sub(t0)
			return k >= n
		}, time.Minute, 20*time.Millisecond, "appends succeed after %v", t0)
		return took
	}

	faults := []struct {
		name   string
		toxics []netfault.Toxic
		hold   time.Duration
	}{
		{"latency 150 ms", netfault.Latency(150, 20), 2 * time.Second},
		{"bandwidth 32 KB/s", netfault.Bandwidth(32), 2 * time.Second},
		{"reset 200 ms into a connection", netfault.ResetPeer(200), 2 * time.Second},
		{"blackhole", netfault.Blackhole(), 2 * netTimeout},
	}
	for _, f := range faults {
		acksAfter(time.Now(), 20)
		before := l.Stats()
		timeoutsBefore, _ := w.Errors()
		require.NoError(t, proxies.Add(f.toxics))
		hold := time.NewTimer(f.hold)
		<-hold.C
		proxies.Clear()
		lifted := time.Now()
		firstOK := acksAfter(lifted, 1)
		after := l.Stats()
		timeouts, _ := w.Errors()
		t.Logf("%s for %v: calls %d (acked %d, failed %d, %d ErrTimeout), longest call so far %v; first success %v after it was lifted",
			f.name, f.hold, after.Calls-before.Calls, after.AckedCalls-before.AckedCalls, after.FailedCalls-before.FailedCalls,
			timeouts-timeoutsBefore, after.LongestCall.Round(time.Millisecond), firstOK.Round(time.Millisecond))
		if f.name == "blackhole" {
			require.Greater(t, timeouts, timeoutsBefore, "calls fail with ErrTimeout while nothing gets through")
		}
	}
	w.Halt()
	halted = true

	st := l.Stats()
	_, errs := w.Errors()
	t.Logf("ledger: %+v; errors: %v", st, errs)
	// Replays on a store that does not go through the proxies.
	direct := kafka.DefaultConfig()
	direct.Brokers = brokers
	rs, err := kafka.Open(ctx, direct)
	require.NoError(t, err)
	defer rs.Close()
	for _, noIndex := range []bool{false, true} {
		rep, err := l.Verify(topic, func(r logstore.RegionID) iterSeq {
			return rs.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, kafka.ReadOptions{NoIndex: noIndex})
		})
		require.NoError(t, err)
		t.Logf("replay (full scan %v): acked %d, failed %d (in the log %d), lost %d, duplicated %d, reordered %d, wrong ID %d",
			noIndex, rep.Acked, rep.Failed, rep.FailedPresent, rep.Lost, rep.Duplicated, rep.Reordered, rep.WrongID)
		require.NoError(t, rep.Err())
	}
	require.LessOrEqual(t, st.LongestCall, netTimeout+boundMargin,
		"an append call outlasted ProduceTimeout %v by more than %v", netTimeout, boundMargin)
}
