package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// model is what the test acknowledged, per region, in log order.
type model map[logstore.RegionID][]logstore.Entry

func (m model) from(region logstore.RegionID, from logstore.EntryID) []logstore.Entry {
	var out []logstore.Entry
	for _, e := range m[region] {
		if e.ID >= from {
			out = append(out, e)
		}
	}
	return out
}

// appendRandom runs writers that append random calls (entries of random
// sizes, some split into parts) and returns what was acknowledged. Entry
// IDs of all but a call's last entry per region are recovered from the
// log by position, so the model holds every entry's ID.
func appendRandom(t *testing.T, s *kafka.LogStore, brokers []string, topic string, seed uint64, writers, calls, regions, maxSize int) model {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	type call struct {
		entries []logstore.Entry
		res     logstore.AppendResult
	}
	var acked []call
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range calls {
				var batch []logstore.Entry
				for range 1 + rng.IntN(3) {
					size := rng.IntN(maxSize)
					if rng.IntN(10) == 0 {
						size = 0
					}
					batch = append(batch, logstore.Entry{Namespace: topic, Region: logstore.RegionID(1 + rng.IntN(regions)), Data: payload(rng, size)})
				}
				res, err := s.AppendBatch(ctx, batch)
				if !assertNoErr(t, err) {
					return
				}
				mu.Lock()
				acked = append(acked, call{batch, res})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// The log, decoded independently, gives every entry's ID; check each
	// call's reported last IDs against it and build the model from it.
	logged := decodeEntries(t, scanRaw(t, brokers, topic))
	m := model{}
	total := 0
	for region, es := range logged {
		for _, e := range es {
			e.Namespace = topic
			m[region] = append(m[region], e)
			total++
		}
	}
	n := 0
	byID := map[logstore.EntryID][]byte{}
	for _, es := range m {
		for _, e := range es {
			byID[e.ID] = e.Data
		}
	}
	for _, c := range acked {
		n += len(c.entries)
		for region, id := range c.res.LastEntryIDs {
			last := c.entries[lastOf(c.entries, region)]
			require.Equal(t, last.Data, byID[id], "reported ID %d of region %d", id, region)
		}
	}
	require.Equal(t, n, total, "the log holds exactly the acknowledged entries")
	return m
}

// TestReadEqualsAcknowledged is the read path's property test: random
// interleavings of many regions' appends, with split entries, replayed by
// Read (indexed and full scan) and ReadRegions from random starts, equal
// exactly what was acknowledged, in order, byte for byte.
func TestReadEqualsAcknowledged(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := openStore(t, brokers, func(c *kafka.Config) { c.MaxBatchBytes = 2048; c.FetchMaxBytes = 64 << 10 })
			topic := newTopic(t)
			const regions = 12
			m := appendRandom(t, s, brokers, topic, seed, 8, 12, regions, 6000)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 99))
			for region := logstore.RegionID(1); region <= regions; region++ {
				var from logstore.EntryID
				if es := m[region]; len(es) > 0 && rng.IntN(2) == 0 {
					from = es[rng.IntN(len(es))].ID
				}
				want := m.from(region, from)
				for _, noIndex := range []bool{false, true} {
					got := collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{region: from}, kafka.ReadOptions{NoIndex: noIndex}))
					requireEntries(t, want, got, fmt.Sprintf("region %d from %d noIndex=%v", region, from, noIndex))
				}
			}
			// ReadRegions: a random subset, each from its own start.
			from := map[logstore.RegionID]logstore.EntryID{}
			var want []logstore.Entry
			for region := logstore.RegionID(1); region <= regions; region++ {
				if rng.IntN(2) == 0 {
					continue
				}
				var f logstore.EntryID
				if es := m[region]; len(es) > 0 {
					f = es[rng.IntN(len(es))].ID
				}
				from[region] = f
				want = append(want, m.from(region, f)...)
			}
			got := collect(t, s.ReadRegions(ctx, topic, from))
			require.Len(t, got, len(want))
			for i := 1; i < len(got); i++ {
				require.Greater(t, got[i].ID, got[i-1].ID, "log order")
			}
			perRegion := map[logstore.RegionID][]logstore.Entry{}
			for _, e := range got {
				perRegion[e.Region] = append(perRegion[e.Region], e)
			}
			for region, f := range from {
				requireEntries(t, m.from(region, f), perRegion[region], fmt.Sprintf("ReadRegions region %d", region))
			}
		})
	}
}

func requireEntries(t *testing.T, want, got []logstore.Entry, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Equal(t, want[i].ID, got[i].ID, "%s: entry %d", what, i)
		require.Equal(t, want[i].Region, got[i].Region, "%s: entry %d", what, i)
		require.Equal(t, want[i].Data, got[i].Data, "%s: entry %d ID %d", what, i, want[i].ID)
	}
}

// rawProduce writes records with a plain franz-go producer, as another
// program (or a retrying writer) would.
func rawProduce(t *testing.T, brokers []string, recs ...*kgo.Record) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var offs []int64
	for _, r := range recs {
		res := cl.ProduceSync(ctx, r)
		require.NoError(t, res.FirstErr())
		offs = append(offs, res[0].Record.Offset)
	}
	return offs
}

func partRecords(t *testing.T, topic string, region uint64, data []byte, limit int) []*kgo.Record {
	t.Helper()
	parts, err := record.Split(region, data, limit)
	require.NoError(t, err)
	var out []*kgo.Record
	for i := range parts {
		out = append(out, &kgo.Record{Topic: topic, Key: parts[i].Key(), Value: parts[i].Data})
	}
	return out
}

// TestReadDropsDuplicateAndIncompleteParts protects reassembly against
// what retries and failed writers leave behind (GreptimeDB #8506, #3108):
// duplicated parts are dropped, an entry whose writer died midway is never
// yielded, and another region's records in between do not matter.
func TestReadDropsDuplicateAndIncompleteParts(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := newTopic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	const limit = 756 // parts of 500 bytes
	rng := rand.New(rand.NewPCG(5, 5))
	full := payload(rng, 1500)
	dup := partRecords(t, topic, 1, full, limit)
	require.Len(t, dup, 3)
	cut := partRecords(t, topic, 1, payload(rng, 1200), limit)
	other := partRecords(t, topic, 2, payload(rng, 100), limit)
	// An incomplete entry (its first two parts only), then the full entry
	// with its first and middle parts repeated, another region in between.
	seq := []*kgo.Record{cut[0], cut[1], dup[0], dup[0], other[0], dup[1], dup[1], dup[2]}
	offs := rawProduce(t, brokers, seq...)
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 1)
	require.Equal(t, full, got[0].Data)
	// The first part was written twice: the entry's ID is that of the
	// later copy, the offset its (retrying) writer was told.
	require.Equal(t, logstore.EntryID(offs[3]+1), got[0].ID)
	got = collect(t, s.Read(ctx, topic, 2, 0))
	require.Len(t, got, 1)

	// Reading from the middle of the split entry's offsets: the entry began
	// before from, so it is not yielded; nothing else of region 1 follows.
	got = collect(t, s.Read(ctx, topic, 1, logstore.EntryID(offs[5]+1)))
	require.Empty(t, got)
	// Reading from the entry's own ID yields it.
	got = collect(t, s.Read(ctx, topic, 1, logstore.EntryID(offs[3]+1)))
	require.Len(t, got, 1)
}

// TestReadForeignAndCorruptRecords protects honest errors (GreptimeDB
// #9132): a record that is not kwal's, or a kwal record that fails its
// checksum, fails the read with ErrCorrupt naming its offset; with
// SkipCorrupt the read skips it and yields everything else.
func TestReadForeignAndCorruptRecords(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, brokers, nil)
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("before")}})
	require.NoError(t, err)
	good := partRecords(t, topic, 1, []byte("payload"), 1<<20)[0]
	bad := &kgo.Record{Topic: topic, Key: append([]byte(nil), good.Key...), Value: []byte("pAyload")}
	offs := rawProduce(t, brokers,
		&kgo.Record{Topic: topic, Value: []byte("no key at all")},
		bad,
	)
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("after")}})
	require.NoError(t, err)

	got, err := readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}))
	require.ErrorIs(t, err, logstore.ErrCorrupt)
	var ce *logstore.CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, offs[0], ce.Offset)
	require.ErrorIs(t, err, record.ErrNotKwal)
	require.Contains(t, err.Error(), fmt.Sprintf("offset %d", offs[0]))
	require.Len(t, got, 1, "entries before the bad record were yielded")

	got, err = readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: logstore.EntryID(offs[1] + 1)}, kafka.ReadOptions{NoIndex: true}))
	require.ErrorIs(t, err, logstore.ErrCorrupt)
	require.ErrorIs(t, err, record.ErrChecksum)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, offs[1], ce.Offset)
	require.Empty(t, got)

	skip := openStore(t, brokers, func(c *kafka.Config) { c.SkipCorrupt = true })
	got = collect(t, skip.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}))
	require.Len(t, got, 2)
	require.Equal(t, "before", string(got[0].Data))
	require.Equal(t, "after", string(got[1].Data))
}

// TestReadBelowLogStartIsPruned protects against silently starting later
// (GreptimeDB #4934): after DeleteRecords, a read from below the new log
// start fails with ErrPruned naming the first ID still available, and a
// read from that ID works.
func TestReadBelowLogStartIsPruned(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := newTopic(t)
	var ids []logstore.EntryID
	for i := range 10 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: fmt.Appendf(nil, "e%d", i)}})
		require.NoError(t, err)
		ids = append(ids, res.LastEntryIDs[1])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: int64(ids[5]) - 1})
	resp, err := kadm.NewClient(cl).DeleteRecords(ctx, os)
	require.NoError(t, err)
	require.NoError(t, resp.Error())

	for _, from := range []logstore.EntryID{0, ids[0], ids[4]} {
		_, err = readErr(s.Read(ctx, topic, 1, from))
		require.ErrorIs(t, err, logstore.ErrPruned, "from %d", from)
		var pe *logstore.PrunedError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, ids[5], pe.FirstAvailable)
		require.Contains(t, err.Error(), fmt.Sprint(ids[5]))
	}
	got := collect(t, s.Read(ctx, topic, 1, ids[5]))
	require.Len(t, got, 5)
	require.Equal(t, "e5", string(got[0].Data))
}

// TestReadStopsEarlyAndOnCancel protects resource release: breaking out of
// the loop and cancelling the context both end the read promptly (goleak
// in TestMain checks that nothing is left running).
func TestReadStopsEarlyAndOnCancel(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.FetchMaxBytes = 1 << 20; c.MaxBatchBytes = 64 << 10 })
	ctx := context.Background()
	topic := newTopic(t)
	var batch []logstore.Entry
	for i := range 200 {
		batch = append(batch, logstore.Entry{Namespace: topic, Region: logstore.RegionID(i%4 + 1), Data: make([]byte, 1000)})
	}
	for range 5 {
		_, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
	}
	n := 0
	for _, err := range s.Read(ctx, topic, 1, 0) {
		require.NoError(t, err)
		if n++; n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)

	cctx, cancel := context.WithCancel(ctx)
	n = 0
	var last error
	for _, err := range s.ReadWith(cctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0, 2: 0}, kafka.ReadOptions{NoIndex: true}) {
		if err != nil {
			last = err
			break
		}
		if n++; n == 10 {
			cancel()
		}
	}
	cancel()
	if last != nil { // the read may also have finished before noticing
		require.ErrorIs(t, last, context.Canceled)
	}
}

// TestNamespacesAndLatestEntryID protects the namespace calls: an empty
// namespace's latest ID is 0, it grows with appends and bounds every ID,
// listing shows created namespaces, and deleting removes them.
func TestNamespacesAndLatestEntryID(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.AutoCreateTopics = false })
	ctx := context.Background()
	topic := newTopic(t)

	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("x")}})
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace, "no auto-create")
	_, err = readErr(s.Read(ctx, topic, 1, 0))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	require.NoError(t, s.CreateNamespace(ctx, topic))
	require.NoError(t, s.CreateNamespace(ctx, topic), "creating an existing namespace is fine")

	id, err := s.LatestEntryID(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, logstore.EntryID(0), id)
	require.Empty(t, collect(t, s.Read(ctx, topic, 1, 0)))

	// A call whose second namespace is missing fails; the first
	// namespace's entries were already queued, so the call waits for them
	// and they are written.
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 5, Data: []byte("queued")}, {Namespace: topic + "-missing", Region: 6, Data: []byte("x")}})
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	got := collect(t, s.Read(ctx, topic, 5, 0))
	require.Len(t, got, 1)
	require.Equal(t, "queued", string(got[0].Data))

	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("a")}, {Namespace: topic, Region: 2, Data: []byte("b")}})
	require.NoError(t, err)
	id, err = s.LatestEntryID(ctx, topic)
	require.NoError(t, err)
	require.GreaterOrEqual(t, id, res.LastEntryIDs[1])
	require.GreaterOrEqual(t, id, res.LastEntryIDs[2])

	names, err := s.ListNamespaces(ctx)
	require.NoError(t, err)
	require.Contains(t, names, topic)
	require.NoError(t, s.DeleteNamespace(ctx, topic))
	require.Eventually(t, func() bool {
		names, err := s.ListNamespaces(ctx)
		require.NoError(t, err)
		for _, n := range names {
			if n == topic {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond)

	require.Error(t, s.CreateNamespace(ctx, "bad name!"))
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: "", Region: 1}})
	require.Error(t, err)
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic + "a", Region: 1}, {Namespace: topic + "b", Region: 1}})
	require.Error(t, err, "one region under two namespaces in one call")
}

// TestReadFromUnreachableBrokerTimesOut protects reads against hanging when
// the broker goes away: the read ends with an error within RequestTimeout.
func TestReadFromUnreachableBrokerTimesOut(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.RequestTimeout = time.Second; cfg.DialTimeout = 200 * time.Millisecond })
	ctx := context.Background()
	topic := newTopic(t)
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
	c.Close()
	start := time.Now()
	_, err = readErr(s.Read(ctx, topic, 1, 0))
	require.Error(t, err)
	require.Less(t, time.Since(start), 15*time.Second)
	require.False(t, errors.Is(err, logstore.ErrCorrupt))
}

// TestPrunedDuringReadIsReported protects the read that retention or
// pruning overtakes: records deleted after the read started make it fail
// with ErrPruned naming the first ID still available, not skip ahead.
func TestPrunedDuringReadIsReported(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.MaxBatchBytes = 1024; c.FetchMaxBytes = 1024 })
	ctx := context.Background()
	topic := newTopic(t)
	for i := range 100 {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: fmt.Appendf(make([]byte, 0, 600), "%d%590d", i, 0)}})
		require.NoError(t, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var got int
	var failure error
	for _, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true}) {
		if err != nil {
			failure = err
			break
		}
		if got++; got == 1 {
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 90})
			resp, err := kadm.NewClient(cl).DeleteRecords(ctx, os)
			require.NoError(t, err)
			require.NoError(t, resp.Error())
		}
	}
	require.ErrorIs(t, failure, logstore.ErrPruned)
	var pe *logstore.PrunedError
	require.ErrorAs(t, failure, &pe)
	require.Equal(t, logstore.EntryID(91), pe.FirstAvailable)
	require.Less(t, got, 90, "the read stopped instead of skipping ahead")
}
