package kafka_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestReadHoldBound protects the read's memory bound (Config.ReadMemoryBound):
// an abandoned split entry (its first part only, its writer died) followed
// by much traffic of another region that the same ReadRegions replays. The
// read gives the open entry up once it holds ReadHoldBytes, yields every
// entry of the other region, and its live heap, measured in the loop body,
// stays under the bound (holding every entry behind the open one until the
// read ends would take the whole 16 MiB). Not parallel: it measures the
// process's heap. With kfake, what kfake allocates to serve the fetches
// (it runs in this process) is left out, by the allocation sites of the
// memory profile.
func TestReadHoldBound(t *testing.T) {
	brokers := heapTestBrokers(t)
	var bound int64
	const fetchMax = 256 << 10
	s := openStore(t, brokers, func(cfg *kafka.Config) {
		cfg.MaxBatchBytes = 64 << 10
		cfg.FetchMaxBytes = fetchMax
		cfg.ReadHoldBytes = 1 << 20
		cfg.MaxEntryBytes = cfg.ReadHoldBytes
		bound = cfg.ReadMemoryBound()
	})
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	rng := rand.New(rand.NewPCG(14, 4))
	abandoned := partRecords(t, topic, 1, payload(rng, 200<<10), 64<<10)
	rawProduce(t, brokers, abandoned[0])
	const entries, size = 512, 32 << 10
	var sum int64
	for call := range entries / 8 {
		batch := make([]logstore.Entry, 8)
		for i := range batch {
			d := payload(rng, size)
			d[0] = byte(call*8 + i)
			sum += int64(d[0])
			batch[i] = logstore.Entry{Namespace: topic, Region: 2, Data: d}
		}
		_, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
	}

	base := liveClientHeap()
	var peak, got, gotSum int64
	for e, err := range s.ReadRegions(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0, 2: 0}) {
		require.NoError(t, err)
		require.EqualValues(t, 2, e.Region, "the abandoned entry is never yielded")
		require.Len(t, e.Data, size)
		gotSum += int64(e.Data[0])
		if got%32 == 0 {
			peak = max(peak, liveClientHeap()-base)
		}
		got++
	}
	require.EqualValues(t, entries, got)
	require.Equal(t, sum, gotSum)
	t.Logf("read of %d MiB: peak live heap growth %.2f MiB, bound %.2f MiB", entries*size>>20, float64(peak)/(1<<20), float64(bound)/(1<<20))
	// Slack: 1 MiB for the runtime, the race detector and the test.
	require.Less(t, peak, bound+1<<20, "live heap growth over ReadMemoryBound")
}

// TestCompressedReadWithinBound protects the read's memory bound on a
// compressed log: a batch's records take its decompressed size, many times
// the bytes fetched (here a log of text compressing about 100 to 1 with
// lz4), and a read that charged fetched bytes held 10 times the bound. The
// read charges each response the memory it takes and sizes its fetches by
// what it measured, so an indexed read and a scan of the log stay under
// ReadMemoryBound. Not parallel: it measures the process's heap.
func TestCompressedReadWithinBound(t *testing.T) {
	brokers := heapTestBrokers(t)
	var bound int64
	s := openStore(t, brokers, func(cfg *kafka.Config) {
		cfg.Compression = "lz4"
		cfg.MaxBatchBytes = 64 << 10
		cfg.FetchMaxBytes = 256 << 10
		cfg.ReadHoldBytes = 1 << 20
		cfg.MaxEntryBytes = cfg.ReadHoldBytes
		bound = cfg.ReadMemoryBound()
	})
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	const entries, size = 1024, 32 << 10 // 32 MiB, about 320 KiB on the broker
	line := []byte("ts=1733212800000 host=h07 dc=eu-1 service=api cpu=12.25 mem=40.50\n")
	for call := range entries / 8 {
		batch := make([]logstore.Entry, 8)
		for i := range batch {
			d := bytes.Repeat(line, size/len(line)+1)[:size]
			d[0] = byte(call*8 + i)
			batch[i] = logstore.Entry{Namespace: topic, Region: 2, Data: d}
		}
		_, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
	}
	for _, opts := range []kafka.ReadOptions{{}, {NoIndex: true}} {
		base := liveClientHeap()
		var peak, got int64
		for e, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{2: 0}, opts) {
			require.NoError(t, err)
			require.Equal(t, byte(got), e.Data[0], "entry %d", got)
			if got%16 == 0 {
				peak = max(peak, liveClientHeap()-base)
			}
			got++
		}
		require.EqualValues(t, entries, got)
		t.Logf("NoIndex %v: read of %d MiB compressed: peak live heap growth %.2f MiB, bound %.2f MiB", opts.NoIndex, entries*size>>20, float64(peak)/(1<<20), float64(bound)/(1<<20))
		require.Less(t, peak, bound+1<<20, "live heap growth over ReadMemoryBound")
	}
}

// liveHeapOutside sums the bytes in use (as of the last GC) that were
// allocated by no function whose name contains skip.
func liveHeapOutside(skip string) int64 {
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+1024)
	n, _ = runtime.MemProfile(recs, false)
	var total int64
	for _, r := range recs[:n] {
		frames := runtime.CallersFrames(r.Stack())
		skipped := false
		for {
			f, more := frames.Next()
			if strings.Contains(f.Function, skip) {
				skipped = true
				break
			}
			if !more {
				break
			}
		}
		if !skipped {
			total += r.InUseBytes()
		}
	}
	return total
}

// TestReadHoldExceededFails protects against silent loss by the bound: an
// entry larger than the reader's ReadHoldBytes (written by a store whose
// MaxEntryBytes allowed it; the reader's own would refuse it) fails the
// read with ErrHoldExceeded naming it, never skipping it silently; with a
// larger bound the same entry reads.
func TestReadHoldExceededFails(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	large := openStore(t, brokers, func(cfg *kafka.Config) { cfg.MaxBatchBytes = 64 << 10 })
	small := openStore(t, brokers, func(cfg *kafka.Config) {
		cfg.MaxBatchBytes = 64 << 10
		cfg.FetchMaxBytes = 256 << 10
		cfg.ReadHoldBytes = 256 << 10
		cfg.MaxEntryBytes = cfg.ReadHoldBytes
	})
	ctx := context.Background()
	topic := newTopic(t)
	big := payload(rand.New(rand.NewPCG(1, 2)), 1<<20)
	_, err := small.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 3, Data: big}})
	require.ErrorIs(t, err, kafka.ErrEntryTooLarge, "a store refuses what its reads could not hold")
	res, err := large.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 3, Data: big}})
	require.NoError(t, err)
	got, err := readErr(small.Read(ctx, topic, 3, 0))
	require.ErrorIs(t, err, kafka.ErrHoldExceeded)
	require.Empty(t, got)
	require.Contains(t, err.Error(), "region 3 at offset 0")

	got = collect(t, large.Read(ctx, topic, 3, 0))
	require.Len(t, got, 1)
	require.True(t, bytes.Equal(big, got[0].Data))
	require.Equal(t, res.LastEntryIDs[3], got[0].ID)
}

// TestPassHoldsNoHandedOverResponses protects a pass's memory: the
// fetcher's queue of chunks drops each response once the reader has it.
// A slice advanced past its head keeps its array, and before, the array
// kept the handed-over slots and their responses: about another
// FetchMaxBytes of responses nobody needed (after a restart, 64 regions
// replayed at once held the whole 40 MB topic). A read of a topic many
// times FetchMaxBytes, measured in its loop body, holds FetchMaxBytes of
// fetches and the few responses being decoded, under twice FetchMaxBytes
// (measured: 3.2 MiB for 2 MiB; 5.6 MiB before). Not parallel: it measures the process's heap (kfake's
// allocations left out, as in TestReadHoldBound).
func TestPassHoldsNoHandedOverResponses(t *testing.T) {
	brokers := heapTestBrokers(t)
	const fetchMax = 2 << 20
	s := openStore(t, brokers, func(cfg *kafka.Config) {
		cfg.MaxBatchBytes = 64 << 10
		cfg.FetchMaxBytes = fetchMax
		cfg.ReadHoldBytes = 1 << 20
		cfg.MaxEntryBytes = cfg.ReadHoldBytes
		cfg.ProduceLanes = 32
	})
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	rng := rand.New(rand.NewPCG(15, 4))
	const entries, size = 768, 32 << 10 // 24 MiB
	for range entries / 8 {
		batch := make([]logstore.Entry, 8)
		for i := range batch {
			batch[i] = logstore.Entry{Namespace: topic, Region: 1, Data: payload(rng, size)}
		}
		_, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
	}
	base := liveClientHeap()
	var peak, got int64
	for _, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}) {
		require.NoError(t, err)
		if got%16 == 0 {
			peak = max(peak, liveClientHeap()-base)
		}
		got++
	}
	require.EqualValues(t, entries, got)
	t.Logf("read of %d MiB: peak live heap growth %.2f MiB, FetchMaxBytes %.2f MiB", entries*size>>20, float64(peak)/(1<<20), float64(fetchMax)/(1<<20))
	require.Less(t, peak, int64(2*fetchMax), "live heap growth over twice FetchMaxBytes: handed-over responses kept")
}

// liveClientHeap is the live heap outside kfake's own allocations. The
// profile is as of the last completed GC cycle; two make it current.
func liveClientHeap() int64 {
	runtime.GC()
	runtime.GC()
	return liveHeapOutside("/kfake.")
}

// heapTestBrokers profiles every allocation for the rest of the test, so
// that liveHeapOutside is exact, and returns the brokers to measure on:
// the real ones, or a kfake cluster without the client telemetry APIs.
// kfake takes franz-go's telemetry pushes (KIP-714), whose 8 MiB lz4
// buffers would show in the heap at random moments; a broker without those
// APIs gets none (as Kafka without a metrics reporter).
func heapTestBrokers(t *testing.T) []string {
	t.Helper()
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	t.Cleanup(func() { runtime.MemProfileRate = rate })
	if brokers := testutil.RealBrokers(); brokers != nil {
		return brokers
	}
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.GetTelemetrySubscriptions), -1)
	v.SetMaxKeyVersion(int16(kmsg.PushTelemetry), -1)
	return testutil.NewCluster(t, kfake.MaxVersions(v)).ListenAddrs()
}
