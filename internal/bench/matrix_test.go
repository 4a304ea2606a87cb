package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

func matrixOptions(t *testing.T, brokers []string) MatrixOptions {
	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers
	return MatrixOptions{
		Config: cfg, Raw: RawOptions{MaxBatchBytes: cfg.MaxBatchBytes, Compression: kgo.NoCompression()},
		Prefix: "kwal-bench-" + strings.ReplaceAll(testutil.Topic(t), "_", "-"), EntrySize: 256, EntriesPerCall: 2, Payload: PayloadRandom,
		Warmup: 20 * time.Millisecond, Duration: 100 * time.Millisecond, Layouts: []MatrixLayout{{Regions: 8, Topics: 2, Writers: 8}},
		Peers: true, ReplayRuns: 1, ReplayBytes: 256 << 10, Seed: 1,
	}
}

// leftTopics lists the topics of the broker that start with prefix.
func leftTopics(t *testing.T, brokers []string, prefix string) []string {
	t.Helper()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	td, err := adm.ListTopics(context.Background())
	require.NoError(t, err)
	var out []string
	for _, name := range td.Names() {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// TestMatrixPeers protects the peer rows: every producer is measured, the
// GreptimeDB-style one sends exactly one produce request per region
// request (the design: a call's records leave in their own request, never
// merged with another topic's or call's), kwal's batches are region-pure,
// the replays return the region's bytes, and the layout's namespaces are
// deleted.
func TestMatrixPeers(t *testing.T) {
	brokers := testutil.Brokers(t)
	o := matrixOptions(t, brokers)
	rep, err := RunMatrix(context.Background(), o, false)
	require.NoError(t, err)
	require.Len(t, rep.Rows, 1)
	row := rep.Rows[0]
	require.NotNil(t, row.Peers)
	for name, s := range map[string]MatrixSide{"kwal": row.Kwal, "raw": row.Raw, "greptime": row.Peers.Greptime, "mimir": row.Peers.Mimir} {
		require.Positive(t, s.MBps, name)
		require.Positive(t, s.ProduceRequestsPerMB, name)
		require.Greater(t, s.ProduceBytesPerMB, 1e6, "%s: every appended byte crosses the wire", name)
	}
	callMB := float64(o.EntrySize*o.EntriesPerCall) / 1e6
	require.InDelta(t, 1, row.Peers.Greptime.ProduceRequestsPerMB*callMB, 1e-9, "one produce request per call")
	require.InDelta(t, 1, row.Kwal.RegionsPerBatch, 1e-9)
	require.InDelta(t, 1, row.Peers.Greptime.RegionsPerBatch, 1e-9, "one region per GreptimeDB-style batch")
	rp := row.Peers.Replay
	require.Positive(t, rp.Kwal.OwnBytes)
	require.Equal(t, rp.Kwal.OwnBytes, rp.FullScan.OwnBytes)
	require.Equal(t, rp.Kwal.OwnBytes, rp.Greptime.OwnBytes, "both logs hold the same entries")
	require.Positive(t, rp.KwalVsGreptime)
	require.Empty(t, leftTopics(t, brokers, o.Prefix))
}

// TestMatrixCleansUpWhenInterrupted protects a matrix that ends early
// (Ctrl-C, here mid-layout): the layout's namespaces are deleted on the
// user's cluster all the same, and the error says so.
func TestMatrixCleansUpWhenInterrupted(t *testing.T) {
	brokers := testutil.Brokers(t)
	o := matrixOptions(t, brokers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Progress = func(format string, args ...any) {
		if strings.Contains(fmt.Sprintf(format, args...), "greptime measured") {
			cancel()
		}
	}
	_, err := RunMatrix(ctx, o, false)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "the layout's 12 namespaces were deleted") // 2 topics × (4 producers + 2 replay logs)
	require.Empty(t, leftTopics(t, brokers, o.Prefix))
}
