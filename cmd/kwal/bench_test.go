package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

func TestBenchJSON(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"bench", "--json", "--quiet", "--regions", "4", "--writers", "4", "--calls", "3",
		"--entries-per-call", "3", "--entry-size", "512", "--replay-runs", "2", "--rounds", "2"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stdout), "\n")+1, "one JSON object on one line")

	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	for _, k := range []string{"append_vs_raw", "replay_speedup", "index_bytes_per_entry", "append_vs_raw_async"} {
		v, ok := rep[k].(float64)
		require.True(t, ok, k)
		require.Positive(t, v, k)
	}
	require.Equal(t, "kafka", rep["broker"])
	kw := rep["kwal"].(map[string]any)
	require.EqualValues(t, 2*36, kw["entries"]) // two rounds
	require.EqualValues(t, 2, rep["rounds"])
	require.Positive(t, kw["mb_per_s"])
	require.Positive(t, kw["p99_ms"])
	raw := rep["raw"].(map[string]any)
	require.EqualValues(t, 2*36, raw["entries"])
	layout := rep["layout"].(map[string]any)
	require.Positive(t, layout["kwal"].(map[string]any)["selectivity"])
	require.Positive(t, layout["raw"].(map[string]any)["regions_per_batch"])
	replay := rep["replay"].(map[string]any)
	require.EqualValues(t, 9, replay["indexed"].(map[string]any)["entries"])
	require.EqualValues(t, 9, replay["full_scan"].(map[string]any)["entries"])
	require.Positive(t, replay["full_scan"].(map[string]any)["fetched_bytes"])
	rec := rep["recovery"].(map[string]any) // the recovery benchmark: every region replays the same entries each way
	entries := rec["concurrent_reads"].(map[string]any)["entries"]
	require.Positive(t, entries)
	require.Equal(t, entries, rec["read_regions"].(map[string]any)["entries"])
	require.Equal(t, entries, rec["full_scans"].(map[string]any)["entries"])
	require.EqualValues(t, 9, rec["one_region"].(map[string]any)["indexed"].(map[string]any)["entries"])
	require.Positive(t, rec["one_region_speedup"])
	// The broker floors fetched exactly what they say: the region's
	// batches (which its indexed read fetched too), every batch of the
	// topic, and the needed batches with at most 20% more.
	one := rec["one_region"].(map[string]any)
	floor := one["floor"].(map[string]any)
	require.Positive(t, floor["fetches"])
	require.Positive(t, floor["fetched_bytes"])
	require.LessOrEqual(t, floor["fetched_bytes"], one["indexed"].(map[string]any)["fetched_bytes"])
	require.Equal(t, rec["topic_bytes"], rec["scan_floor"].(map[string]any)["fetched_bytes"])
	need := rec["needed_bytes"].(float64)
	cf := rec["concurrent_floor"].(map[string]any)["fetched_bytes"].(float64)
	require.GreaterOrEqual(t, cf, need)
	require.LessOrEqual(t, cf, 1.2*need)
	require.Positive(t, rec["one_region_floor_speedup"])
	require.Positive(t, rec["concurrent_floor_vs_scan"])
	// The peers append the same calls (round by round) and the
	// GreptimeDB-style replay finds region 1's entries.
	peers := rep["peers"].(map[string]any)
	for _, k := range []string{"greptime", "mimir"} {
		require.EqualValues(t, 2*36, peers[k].(map[string]any)["entries"], k)
	}
	require.Positive(t, peers["append_vs_greptime"])
	require.Positive(t, peers["append_vs_mimir"])
	require.EqualValues(t, 9, peers["replay_greptime"].(map[string]any)["records"])
	require.Equal(t, replay["indexed"].(map[string]any)["entry_bytes"], peers["replay_greptime"].(map[string]any)["entry_bytes"])
	require.Positive(t, peers["replay_vs_greptime"])
	idx := rep["index"].(map[string]any)
	require.EqualValues(t, 36, idx["entries"]) // the first round's topic
	require.EqualValues(t, 36, idx["appended_entries"])
	require.Positive(t, idx["bytes"])

	// The benchmark cleans up after itself (and says so, after the JSON
	// only in the human format).
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, l.code, l.stderr)
	require.NotContains(t, l.stdout, benchPrefix)
}

func TestBenchHuman(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"bench", "--regions", "2", "--writers", "2", "--calls", "2", "--entries-per-call", "2",
		"--entry-size", "256", "--replay-runs", "1", "--duration", "100ms", "--rounds", "1", "--keep"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{"append_vs_raw", "replay_speedup", "index_bytes_per_entry", "raw async", "selectivity"} {
		require.Contains(t, r.stdout, want)
	}
	require.Contains(t, r.stderr, "bench: round 1/1: kwal")
	require.Regexp(t, `\n\n9 namespace\(s\) of the run \(kwal-bench-\S+\*\) kept\n$`, r.stdout) // kwal, raw, async and the two peers, and the four producers' warm-ups
	require.Contains(t, r.stdout, "GreptimeDB-style")
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Contains(t, l.stdout, benchPrefix)
}

// TestBenchLatencyRoutesEveryClient protects --latency: the stores and the
// raw clients the bench builds from its session all connect through the
// latency proxy (the proxy counts each one's produce requests), so that
// every side of a comparison sees the same network.
func TestBenchLatencyRoutesEveryClient(t *testing.T) {
	flags := cluster(t)
	s := &session{cfg: kafka.DefaultConfig()}
	s.cfg.Brokers = strings.Split(flagValue(flags, "--brokers"), ",")
	s.cfg.IndexDir = flagValue(flags, "--index-dir")
	s.cfg.Logger = slog.New(slog.DiscardHandler)
	proxy := addLatency(s, time.Millisecond)
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st, err := s.openStore(ctx, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	const ns = "latency"
	require.NoError(t, st.CreateNamespace(ctx, ns))
	before := proxy.ProduceRequests()
	_, err = st.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("through the proxy")}})
	require.NoError(t, err)
	require.Greater(t, proxy.ProduceRequests(), before, "the store's produce request went through the proxy")

	opts, err := s.clientOpts()
	require.NoError(t, err)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	before = proxy.ProduceRequests()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: ns, Value: []byte("raw")}).FirstErr())
	require.Greater(t, proxy.ProduceRequests(), before, "the raw client's produce request went through the proxy")
}

// TestBenchLatencyReport checks that a run with --latency reports the
// latency it added and the produce requests its proxy carried, and refuses
// --latency with --matrix (which has --matrix-latency).
func TestBenchLatencyReport(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"bench", "--json", "--quiet", "--regions", "2", "--writers", "2", "--calls", "2",
		"--entries-per-call", "2", "--entry-size", "256", "--replay-runs", "1", "--rounds", "1", "--recovery-runs", "1", "--latency", "1ms"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		Net *benchNet `json:"net"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.NotNil(t, rep.Net)
	require.InDelta(t, 1.0, rep.Net.LatencyMSEachWay, 1e-9)
	require.Positive(t, rep.Net.ProduceRequests)

	m := kwal(t, nil, append([]string{"bench", "--matrix", "--latency", "1ms"}, flags...)...)
	require.NotEqual(t, 0, m.code)
	require.Contains(t, m.stderr, "--matrix-latency")
}
