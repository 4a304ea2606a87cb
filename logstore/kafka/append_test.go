package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestAppendReadRoundTrip protects the basic promise: what AppendBatch
// acknowledged comes back from Read and ReadRegions byte for byte, in order,
// with the IDs the append reported, including entries split into parts.
func TestAppendReadRoundTrip(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.MaxBatchBytes = 4096 })
	ctx := context.Background()
	topic := newTopic(t)
	rng := rand.New(rand.NewPCG(1, 2))

	want := map[logstore.RegionID][]logstore.Entry{}
	type reported struct {
		region logstore.RegionID
		index  int // of the call's last entry of the region, in want[region]
		id     logstore.EntryID
	}
	var ids []reported
	for call := 0; call < 20; call++ {
		var batch []logstore.Entry
		for i := 0; i < 1+rng.IntN(5); i++ {
			region := logstore.RegionID(rng.IntN(4) + 1)
			size := []int{0, 1, 100, 3840, 3841, 4096, 20000}[rng.IntN(7)]
			batch = append(batch, logstore.Entry{Namespace: topic, Region: region, Data: payload(rng, size)})
		}
		res, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
		for _, e := range batch {
			want[e.Region] = append(want[e.Region], e)
		}
		require.Len(t, res.LastEntryIDs, len(distinctRegions(batch)))
		for region, id := range res.LastEntryIDs {
			ids = append(ids, reported{region, len(want[region]) - 1, id})
		}
	}

	from := map[logstore.RegionID]logstore.EntryID{}
	for region, entries := range want {
		got := collect(t, s.Read(ctx, topic, region, 0))
		require.Len(t, got, len(entries), "region %d", region)
		var last logstore.EntryID
		for i := range got {
			require.Equal(t, entries[i].Data, got[i].Data, "region %d entry %d", region, i)
			require.Equal(t, region, got[i].Region)
			require.Equal(t, topic, got[i].Namespace)
			require.Greater(t, got[i].ID, last, "IDs increase")
			last = got[i].ID
		}
		from[region] = 0
		for _, r := range ids {
			if r.region == region {
				require.Equal(t, r.id, got[r.index].ID, "the ID AppendBatch reported for region %d is its last entry's", region)
			}
		}
	}
	all := collect(t, s.ReadRegions(ctx, topic, from))
	n := 0
	for _, es := range want {
		n += len(es)
	}
	require.Len(t, all, n)
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i].ID, all[i-1].ID, "ReadRegions yields in log order")
	}
}

// TestConcurrentWriters runs 64 writers over 16 regions and 4 topics and
// checks every acknowledged call against what the log holds, read by a
// plain franz-go consumer: each entry is in the log exactly once, a call's
// entries of one namespace sit in slice order (the contract's promise; not
// at consecutive IDs: a group larger than MaxBatchBytes leaves as several
// batches, and another lane's batch may land between them), and the
// reported last ID of each region is that call's last entry of the region.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, func(c *kafka.Config) { c.MaxBatchBytes = 64 << 10 })
	ctx := context.Background()
	topics := make([]string, 4)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s-%d", newTopic(t), i)
	}
	const writers, calls = 64, 15
	type acked struct {
		entries []logstore.Entry
		res     logstore.AppendResult
	}
	var mu sync.Mutex
	var all []acked
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for c := range calls {
				var batch []logstore.Entry
				for i := range 1 + rng.IntN(4) {
					region := logstore.RegionID(rng.IntN(16) + 1)
					topic := topics[int(region)%len(topics)]
					batch = append(batch, logstore.Entry{Namespace: topic, Region: region,
						Data: []byte(fmt.Sprintf("w%d-c%d-i%d-%s", w, c, i, payload(rng, rng.IntN(300))))})
				}
				res, err := s.AppendBatch(ctx, batch)
				if !assertNoErr(t, err) {
					return
				}
				mu.Lock()
				all = append(all, acked{batch, res})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, all, writers*calls)

	type pos struct {
		topic  string
		region logstore.RegionID
		id     logstore.EntryID
	}
	// Every entry's data is unique (writer, call and slot are in it), so
	// the log is indexed by data.
	logged := map[string]pos{}
	total := 0
	for _, topic := range topics {
		for region, es := range decodeEntries(t, scanRaw(t, brokers, topic)) {
			for _, e := range es {
				_, dup := logged[string(e.Data)]
				require.False(t, dup, "entry %q of region %d is in the log twice", e.Data, region)
				logged[string(e.Data)] = pos{topic, region, e.ID}
				total++
			}
		}
	}
	acknowledged := 0
	for _, a := range all {
		acknowledged += len(a.entries)
		lastID := map[string]logstore.EntryID{} // per topic, the ID of the call's previous entry
		for i, e := range a.entries {
			at, ok := logged[string(e.Data)]
			require.True(t, ok, "acknowledged entry %q is not in the log", e.Data)
			require.Equal(t, e.Namespace, at.topic)
			require.Equal(t, e.Region, at.region)
			require.Greater(t, at.id, lastID[e.Namespace], "a call's entries of %s keep slice order", e.Namespace)
			lastID[e.Namespace] = at.id
			if lastOf(a.entries, e.Region) == i { // the reported last ID of a region is its last entry's
				require.Equal(t, a.res.LastEntryIDs[e.Region], at.id)
			}
		}
	}
	require.Equal(t, acknowledged, total, "the log holds exactly the acknowledged entries")
}

func lastOf(es []logstore.Entry, region logstore.RegionID) int {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Region == region {
			return i
		}
	}
	return -1
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// TestLargeEntryRoundTrip protects entries far larger than a batch: a
// 24 MiB entry is split into 1 MiB parts, written among other regions'
// entries, and read back byte-identical with the reported ID.
func TestLargeEntryRoundTrip(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil) // MaxBatchBytes 1 MiB
	ctx := context.Background()
	topic := newTopic(t)
	big := payload(rand.New(rand.NewPCG(9, 9)), 24<<20)
	var wg sync.WaitGroup
	for r := range 4 { // other regions write meanwhile
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(r + 2), Data: fmt.Appendf(nil, "%d", i)}})
				assertNoErr(t, err)
			}
		}()
	}
	res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: big}, {Namespace: topic, Region: 1, Data: []byte("after")}})
	require.NoError(t, err)
	wg.Wait()
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 2)
	require.True(t, bytes.Equal(big, got[0].Data), "the 24 MiB entry reads back byte-identical")
	require.Equal(t, "after", string(got[1].Data))
	require.Equal(t, res.LastEntryIDs[1], got[1].ID)
}

func distinctRegions(es []logstore.Entry) map[logstore.RegionID]bool {
	out := map[logstore.RegionID]bool{}
	for _, e := range es {
		out[e.Region] = true
	}
	return out
}
