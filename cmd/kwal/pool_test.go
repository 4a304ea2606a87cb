package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNamespacesCreatePool protects `kwal namespaces create --pool N
// --prefix P`: it creates P_0 … P_{N-1}, and create without names or a
// pool is an error.
func TestNamespacesCreatePool(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"namespaces", "create", "--pool", "3", "--prefix", "walpool"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, l.code, l.stderr)
	require.Equal(t, []string{"walpool_0", "walpool_1", "walpool_2"}, listed(l.stdout))
	r = kwal(t, nil, append([]string{"namespaces", "create"}, flags...)...)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "--pool")
}

// TestBenchMatrixJSON protects `kwal bench --matrix --json` (two small
// layouts chosen with --matrix-layouts): every layout is measured for kwal and raw under new keys (matrix, matrix_latency),
// kwal's batches are region-pure, produce requests were counted, and the
// namespaces are deleted afterwards.
func TestBenchMatrixJSON(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"bench", "--matrix", "--json", "-q", "--entry-size", "256", "--entries-per-call", "2",
		"--matrix-warmup", "50ms", "--matrix-duration", "100ms", "--matrix-latency", "1ms", "--matrix-layouts", "4/1/4,8/2/8"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		Matrix struct {
			LatencyMS float64 `json:"latency_ms_each_way"`
			Rows      []matrixRowJSON
		} `json:"matrix"`
		MatrixLatency struct {
			LatencyMS float64 `json:"latency_ms_each_way"`
			Rows      []matrixRowJSON
		} `json:"matrix_latency"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Len(t, rep.Matrix.Rows, 2)
	require.Len(t, rep.MatrixLatency.Rows, 2)
	require.InDelta(t, 1.0, rep.MatrixLatency.LatencyMS, 1e-9)
	for _, row := range append(rep.Matrix.Rows, rep.MatrixLatency.Rows...) {
		require.Positive(t, row.AppendVsRaw)
		require.Positive(t, row.Kwal.Requests)
		require.Positive(t, row.Raw.Requests)
		require.InDelta(t, 1.0, row.Kwal.RegionsPerBatch, 1e-9, "kwal's batches are region-pure in %+v", row.Layout)
		require.Positive(t, row.Kwal.Selectivity)
		require.NotNil(t, row.Peers, "the peers are measured by default")
		require.Positive(t, row.Peers.Greptime.MBps)
		require.Positive(t, row.Peers.Mimir.MBps)
		require.Positive(t, row.Peers.Greptime.Requests)
		require.Positive(t, row.Peers.AppendVsGreptime)
		require.Positive(t, row.Peers.Replay.Greptime.OwnBytes)
		require.Equal(t, row.Peers.Replay.Kwal.OwnBytes, row.Peers.Replay.Greptime.OwnBytes)
	}
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, l.code, l.stderr)
	require.NotContains(t, l.stdout, benchPrefix)
}

type matrixSideJSON struct {
	MBps            float64 `json:"mb_per_s"`
	Selectivity     float64 `json:"selectivity"`
	RegionsPerBatch float64 `json:"regions_per_batch"`
	Requests        float64 `json:"produce_requests_per_mb"`
}

type matrixRowJSON struct {
	Layout      struct{ Regions, Topics, Writers int }
	AppendVsRaw float64 `json:"append_vs_raw"`
	Kwal, Raw   matrixSideJSON
	Peers       *struct {
		Greptime         matrixSideJSON `json:"greptime"`
		Mimir            matrixSideJSON `json:"mimir"`
		AppendVsGreptime float64        `json:"append_vs_greptime"`
		Replay           struct {
			Kwal, Greptime struct {
				OwnBytes int64 `json:"own_bytes"`
			}
		} `json:"replay"`
	} `json:"peers"`
}
