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
// plain franz-go consumer: the reported last ID of each region holds that
// call's last entry of the region, a call's entries are contiguous and in
// slice order, and the log holds exactly the acknowledged entries.
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
		topic string
		id    logstore.EntryID
	}
	logged := map[pos]logstore.Entry{}
	total := 0
	for _, topic := range topics {
		for region, es := range decodeEntries(t, scanRaw(t, brokers, topic)) {
			for _, e := range es {
				e.Region = region
				logged[pos{topic, e.ID}] = e
				total++
			}
		}
	}
	acknowledged := 0
	for _, a := range all {
		acknowledged += len(a.entries)
		// Each topic's part of the call sits at consecutive IDs ending at
		// the reported last IDs: walk the call backwards per topic.
		byTopic := map[string][]logstore.Entry{}
		for _, e := range a.entries {
			byTopic[e.Namespace] = append(byTopic[e.Namespace], e)
		}
		for topic, es := range byTopic {
			lastRegion := es[len(es)-1].Region
			id := a.res.LastEntryIDs[lastRegion]
			for i := len(es) - 1; i >= 0; i-- {
				got, ok := logged[pos{topic, id}]
				require.True(t, ok, "no entry at ID %d of %s", id, topic)
				require.Equal(t, es[i].Region, got.Region)
				require.Equal(t, es[i].Data, got.Data)
				if lastOf(es, es[i].Region) == i { // the reported last ID of a region is its last entry's
					require.Equal(t, a.res.LastEntryIDs[es[i].Region], id)
				}
				id--
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
