package kafka_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestIndexedReadsEqualScansAfterRestart: over random workloads, every
// region replayed after a restart (all at once, each from a random point,
// as a datanode opening its regions does) with the index yields exactly
// what a full scan of the same range yields, and what was acknowledged.
// The store is reopened with few fetch connections and a small fetch
// budget, so that probes, landed responses waiting for the reader and the
// byte budget all shape the pipeline; the cost model starts from the
// latency seeds of Open's warming and of the reads' bounds lookups.
func TestIndexedReadsEqualScansAfterRestart(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 31))
			dir := t.TempDir()
			w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir; c.MaxBatchBytes = 2048 })
			topic := newTopic(t)
			regions := 4 + rng.IntN(12)
			m := appendRandom(t, w, brokers, topic, seed, 1+rng.IntN(8), 4+rng.IntN(12), regions, 1+rng.IntN(6000))
			require.NoError(t, w.Close())

			lanes, fetchMax := 1+rng.IntN(3), int32(4<<10+rng.IntN(64<<10))
			s := openStore(t, brokers, func(c *kafka.Config) {
				c.IndexDir = dir
				c.ProduceLanes = lanes
				c.FetchMaxBytes = fetchMax
				c.MaxBatchBytes = 2048
			})
			ctx := context.Background()
			from := map[logstore.RegionID]logstore.EntryID{}
			for region := logstore.RegionID(1); int(region) <= regions; region++ {
				if es := m[region]; len(es) > 0 && rng.IntN(3) > 0 {
					from[region] = es[rng.IntN(len(es))].ID
				}
			}
			type result struct {
				region logstore.RegionID
				got    []logstore.Entry
				err    error
			}
			read := func(noIndex bool) map[logstore.RegionID][]logstore.Entry {
				out := make(chan result, regions)
				for region := logstore.RegionID(1); int(region) <= regions; region++ {
					go func() {
						got, err := readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{region: from[region]}, kafka.ReadOptions{NoIndex: noIndex}))
						out <- result{region, got, err}
					}()
				}
				all := map[logstore.RegionID][]logstore.Entry{}
				for range regions {
					r := <-out
					require.NoError(t, r.err, "region %d noIndex=%v", r.region, noIndex)
					all[r.region] = r.got
				}
				return all
			}
			indexed, scanned := read(false), read(true)
			// Then with random fetch costs pinned: plans that read gaps
			// through, as well as all-indexed plans and scans.
			latency := time.Duration(math.Exp(rng.Float64()*math.Log(1e4))) * time.Microsecond
			rate := 1e7 * math.Exp(rng.Float64()*math.Log(200))
			kafka.PinReadCosts(s, latency, rate)
			priced := read(false)
			for region := logstore.RegionID(1); int(region) <= regions; region++ {
				what := fmt.Sprintf("region %d from %d (lanes %d, FetchMaxBytes %d)", region, from[region], lanes, fetchMax)
				requireEntries(t, scanned[region], indexed[region], what+": indexed vs scan")
				requireEntries(t, m.from(region, from[region]), indexed[region], what+": indexed vs acknowledged")
				requireEntries(t, scanned[region], priced[region], what+fmt.Sprintf(": priced at %v and %.0f B/s vs scan", latency, rate))
			}
		})
	}
}

// TestFirstReadFetchesItsOwnBytes: a store's first read knows neither what
// an offset of its topic weighs nor what a fetch costs (the store wrote the
// topic, and never read it), so it reads no gap through until it measured
// both. Region 1's few entries lie between megabytes of region 2's: the
// read must fetch about its own bytes, not the topic.
func TestFirstReadFetchesItsOwnBytes(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	w := openStore(t, brokers, nil)
	topic := newTopic(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	var own int64
	for run := range 4 {
		var es []logstore.Entry
		for range 5 {
			es = append(es, logstore.Entry{Namespace: topic, Region: 1, Data: payload(rng, 1000)})
			own += 1000
		}
		_, err := w.AppendBatch(ctx, es)
		require.NoError(t, err)
		if run == 3 {
			break
		}
		for range 8 { // 8 calls of 256 KiB of region 2 between region 1's runs
			es = es[:0]
			for range 4 {
				es = append(es, logstore.Entry{Namespace: topic, Region: 2, Data: payload(rng, 64<<10)})
			}
			_, err := w.AppendBatch(ctx, es)
			require.NoError(t, err)
		}
	}
	var st kafka.ReadStats
	got := collect(t, w.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &st}))
	require.Len(t, got, 20)
	require.Equal(t, "indexed", st.Plan)
	require.LessOrEqual(t, st.FetchedBytes, 2*own, "region 1 fetched about its own bytes, not the 6 MB topic")
}

// TestLandedFetchFreesItsConnection: a fetch whose response landed frees
// its connection before the reader takes the response, so a slow fetch at
// the head of the plan holds no other connection idle. With two fetch
// connections and the head's fetch held by the broker, the pass keeps
// fetching the ranges behind it on the other connection (before, it sent
// one, and waited for the head with both connections counted busy); it
// stops once two connections' worth of started fetches wait for the head.
// Region 1's ranges lie 3 MB apart, so that the plan stays indexed.
// (kfake only: the broker holds the head's fetch.)
func TestLandedFetchFreesItsConnection(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("holds a fetch in kfake")
	}
	c := testutil.NewCluster(t)
	brokers := c.ListenAddrs()
	// One lane: two fetch connections (the lane's and the admin client's).
	// The store that writes reads (its Open weighed no batch, so its
	// first fetches are one-batch probes).
	s := openStore(t, brokers, func(c *kafka.Config) { c.ProduceLanes = 1 })
	topic := newTopic(t)
	ctx := context.Background()
	const runs = 6
	appendSpacedRuns(t, s, topic, runs, payload(rand.New(rand.NewPCG(6, 6)), 64<<10))

	readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		others int // fetches of the topic above offset 0 seen while the head was held
		enough = make(chan struct{})
		held   atomic.Bool
	)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		for _, ft := range fr.Topics {
			for _, p := range ft.Partitions {
				if p.FetchOffset == 0 && held.CompareAndSwap(false, true) {
					c.SleepControl(func() {
						select {
						case <-enough:
						case <-readCtx.Done():
						}
					})
					return nil, nil, false
				}
				if p.FetchOffset > 0 {
					mu.Lock()
					others++
					if others == 3 { // up to two connections' worth wait for the reader
						close(enough)
					}
					mu.Unlock()
				}
			}
		}
		return nil, nil, false
	})
	got, err := readErr(s.ReadWith(readCtx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{}))
	require.NoError(t, err, "the pass fetched no further than the held head's neighbour: landed fetches kept their connections")
	require.Len(t, got, 5*runs)
	require.True(t, held.Load())
}

// TestFetcherFetchesWhileTheReaderIsBusy: while the reader is busy (here
// its read's consumer holds the first entries and does not ask for more),
// the fetcher goes on landing responses and starting the fetches behind
// them until the pass's limits stop it (twice as many started fetches as
// connections waiting for the reader), instead of waiting, with every
// connection idle, until the reader takes the next response (before, it
// sent no fetch after the two in flight when its hand-over blocked: six in
// all here, against eight). Region 1's ranges lie 3 MB apart, so that the
// plan stays indexed. (kfake only: it counts the fetches.)
func TestFetcherFetchesWhileTheReaderIsBusy(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("counts fetches in kfake")
	}
	c := testutil.NewCluster(t)
	// One lane: two fetch connections (the lane's and the admin client's).
	s := openStore(t, c.ListenAddrs(), func(c *kafka.Config) { c.ProduceLanes = 1 })
	topic := newTopic(t)
	ctx := context.Background()
	const runs = 12
	appendSpacedRuns(t, s, topic, runs, payload(rand.New(rand.NewPCG(7, 7)), 64<<10))

	const want = 8 // 2 handed to the reader and one waiting, one being handed, 4 started behind it
	var (
		fetches atomic.Int32
		resumed atomic.Bool // the consumer asked for more
		enough  = make(chan struct{})
		reached atomic.Bool // the want-th fetch came before the consumer resumed
	)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// The cluster is this test's, and the store's warming fetches were
		// sent at Open: every fetch now is the read's.
		if len(req.(*kmsg.FetchRequest).Topics) > 0 && fetches.Add(1) == want && !resumed.Load() {
			reached.Store(true)
			close(enough)
		}
		return nil, nil, false
	})
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got int
	var atResume int32
	for _, err := range s.ReadWith(readCtx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{}) {
		require.NoError(t, err)
		if got++; got == 1 {
			select { // hold the first entry: the reader's hand-overs back up
			case <-enough:
			case <-time.After(5 * time.Second):
			}
			atResume = fetches.Load()
			resumed.Store(true)
		}
	}
	require.Equal(t, 5*runs, got)
	require.True(t, reached.Load(), "while the consumer held its first entry the broker saw %d fetches, not %d: the fetcher stopped when its hand-over to the reader blocked", atResume, want)
}

// appendSpacedRuns writes runs runs of 5 entries of region 1, each of data,
// with 48 entries of region 2 between two runs (3 MB for 64 KiB entries):
// far enough apart that a plan of region 1 stays indexed.
func appendSpacedRuns(t *testing.T, s *kafka.LogStore, topic string, runs int, data []byte) {
	t.Helper()
	ctx := context.Background()
	for run := range runs {
		var es []logstore.Entry
		for range 5 {
			es = append(es, logstore.Entry{Namespace: topic, Region: 1, Data: data})
		}
		_, err := s.AppendBatch(ctx, es)
		require.NoError(t, err)
		if run == runs-1 {
			break
		}
		for range 3 {
			es = es[:0]
			for range 16 {
				es = append(es, logstore.Entry{Namespace: topic, Region: 2, Data: data})
			}
			_, err = s.AppendBatch(ctx, es)
			require.NoError(t, err)
		}
	}
}

// TestReadBoundsAskTheLeaderOnly: a read of a topic whose leader the store
// knows (Open's warming, or an earlier read) looks its log bounds up with
// ListOffsets sent to the leader, and no metadata request in its way, even
// when the client's own metadata cache expired (franz-go keeps it 100 ms;
// kadm's lookup then asks for metadata first, a second round trip). A
// failure there (here the leader answers NOT_LEADER_OR_FOLLOWER once) falls
// back to the full lookup, and the read returns every entry.
// (kfake only: it counts and fails requests.)
func TestReadBoundsAskTheLeaderOnly(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("counts requests in kfake")
	}
	c := testutil.NewCluster(t)
	ctx := context.Background()
	s, topic, want := restartedTwoRegions(t, c.ListenAddrs(), 10)

	var metadata, lists atomic.Int32
	var failNext atomic.Bool
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mr := req.(*kmsg.MetadataRequest)
		if len(mr.Topics) == 1 && mr.Topics[0].Topic != nil && *mr.Topics[0].Topic == kafka.DefaultConfig().ClaimsTopic {
			return nil, nil, false // the claims follower learning its topic's leader
		}
		metadata.Add(1)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if dataTopics(req.(*kmsg.ListOffsetsRequest)) == 0 {
			return nil, nil, false // a read's look at the claims topic
		}
		lists.Add(1)
		if !failNext.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		lr := req.(*kmsg.ListOffsetsRequest)
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lr.Topics {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewListOffsetsResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	ids := func() []logstore.EntryID {
		kafka.ForgetClientMetadata(s, topic)
		var out []logstore.EntryID
		for _, e := range collect(t, s.Read(ctx, topic, 1, 0)) {
			out = append(out, e.ID)
		}
		return out
	}
	require.Equal(t, want, ids())
	require.Zero(t, metadata.Load(), "a warmed topic's bounds need no metadata request")
	require.EqualValues(t, 2, lists.Load(), "the log start and end, at once")

	failNext.Store(true)
	require.Equal(t, want, ids(), "a failed lookup at the leader falls back to the full lookup")
	require.Positive(t, metadata.Load(), "the fallback asked for metadata")
}

// TestRestartedReadFetchesSizedRanges: a replay right after a restart
// does not know what an offset weighs: it probes its range with a
// one-batch fetch, and the rest of the range, sized from the probe, comes
// in one more fetch (not a fetch per batch).
func TestRestartedReadFetchesSizedRanges(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	topic := newTopic(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 8))
	call := func(region logstore.RegionID) {
		var es []logstore.Entry
		for range 3 {
			es = append(es, logstore.Entry{Namespace: topic, Region: region, Data: payload(rng, 1000)})
		}
		_, err := w.AppendBatch(ctx, es)
		require.NoError(t, err)
	}
	for range 5 { // region 1: one range of 5 batches
		call(1)
	}
	for range 3 { // then region 2's batches, of the same shape
		call(2)
	}
	require.NoError(t, w.Close())

	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	var st kafka.ReadStats
	got := collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &st}))
	require.Len(t, got, 15)
	require.Equal(t, 2, st.Fetches, "a probe of one batch, which sizes the rest, and the other 4 batches in one fetch")
}

// TestScanChunksEndInOneFetch: a full scan's chunks are cut by the bytes
// per offset, which need not make a whole number of batches; a chunk just
// over one (501 offsets of 10-offset batches, as a 1 MiB chunk of 2 KiB
// entries is) still ends in one fetch: its byte limit reaches the batch
// that holds its last offset. (Asking for the estimate exactly, every chunk
// took a second fetch for its last offset.)
func TestScanChunksEndInOneFetch(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	// 9 connections: a chunk is MaxBatchBytes (1 MiB), above 8 MiB / 9.
	s := openStore(t, brokers, func(c *kafka.Config) { c.FetchMaxBytes = 8 << 20 })
	topic := newTopic(t)
	ctx := context.Background()
	// Entries that do not compress: with the default lz4, a chunk's memory
	// is then its fetched bytes.
	rng := rand.New(rand.NewPCG(9, 9))
	const calls = 300 // 6 MB in batches of 10 entries
	for i := range calls {
		es := make([]logstore.Entry, 10)
		for j := range es {
			es[j] = logstore.Entry{Namespace: topic, Region: logstore.RegionID(1 + i%4), Data: payload(rng, 2048)}
		}
		_, err := s.AppendBatch(ctx, es)
		require.NoError(t, err)
	}
	var st kafka.ReadStats
	got := collect(t, s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true, Stats: &st}))
	require.Len(t, got, calls/4*10)
	chunks := int(st.FetchedBytes/(1<<20)) + 1
	require.LessOrEqual(t, st.Fetches, chunks+2, "about one fetch per 1 MiB chunk (%d bytes)", st.FetchedBytes)
}

// TestMixedPlanReadsEqualScan: where the planned ranges of a read lie
// dense (regions 1 and 3 written in turn, one entry of region 4 between
// them), the read scans that stretch whole; where they lie sparse (region
// 1 between big runs of region 2), it fetches its ranges alone. The read
// says so in ReadStats, fetches well below the topic, and yields exactly
// what a full scan and the acknowledgements hold.
func TestMixedPlanReadsEqualScan(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	dir := t.TempDir()
	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	topic := newTopic(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	want := map[logstore.RegionID][]logstore.Entry{}
	call := func(region logstore.RegionID, n int) {
		var es []logstore.Entry
		for range n {
			es = append(es, logstore.Entry{Namespace: topic, Region: region, Data: payload(rng, 1000)})
		}
		res, err := w.AppendBatch(ctx, es)
		require.NoError(t, err)
		last := res.LastEntryIDs[region]
		for i := range es {
			es[i].ID = last - logstore.EntryID(n-1-i)
		}
		want[region] = append(want[region], es...)
	}
	for range 4 { // sparse: 10 offsets of region 1, then 100 of region 2
		call(1, 10)
		for range 10 {
			call(2, 10)
		}
	}
	for range 20 { // dense: regions 1 and 3 in turn, one offset of region 4 between
		call(1, 10)
		call(4, 1)
		call(3, 10)
		call(4, 1)
	}
	require.NoError(t, w.Close())

	// The index merges no gap itself: the gap rule decides.
	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir; c.IndexMergeGap = -1 })
	// A first read teaches the store what an offset of the topic weighs
	// (before that, a pass probes each range with a fetch of its own).
	collect(t, s.Read(ctx, topic, 2, want[2][len(want[2])-1].ID))
	// A fetch's latency streams about 10 offsets.
	kafka.PinReadCosts(s, 100*time.Microsecond, 1e8)
	from := map[logstore.RegionID]logstore.EntryID{1: 0, 3: 0}
	var st kafka.ReadStats
	got, err := readErr(s.ReadWith(ctx, topic, from, kafka.ReadOptions{Stats: &st}))
	require.NoError(t, err)
	require.Equal(t, "mixed (gaps read through)", st.Plan)
	require.Equal(t, 1, st.Stretches, "the dense part is one stretch")
	require.Equal(t, int64(39), st.StretchExtra, "region 4's offsets between its ranges")
	require.Less(t, st.FetchedBytes, int64(600_000), "region 2's runs are not fetched (the topic holds over 1 MB)")
	scanned, err := readErr(s.ReadWith(ctx, topic, from, kafka.ReadOptions{NoIndex: true}))
	require.NoError(t, err)
	requireEntries(t, scanned, got, "mixed plan vs scan")
	byRegion := map[logstore.RegionID][]logstore.Entry{}
	for _, e := range got {
		byRegion[e.Region] = append(byRegion[e.Region], e)
	}
	for _, r := range []logstore.RegionID{1, 3} {
		requireEntries(t, want[r], byRegion[r], fmt.Sprintf("region %d vs acknowledged", r))
	}
}

// TestReadBoundsOnTwoConnections: a read's bounds lookup sends its two
// ListOffsets (the log start and end) on two connections. A broker serves a
// connection's requests one at a time (kfake as Kafka does), so on one
// connection the second waited for the first: here the broker holds the
// first until the second arrives, which only happens when they travel
// apart. (kfake only: it holds a request.)
func TestReadBoundsOnTwoConnections(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("holds a request in kfake")
	}
	c := testutil.NewCluster(t)
	ctx := context.Background()
	s, topic, want := restartedTwoRegions(t, c.ListenAddrs(), 6)

	readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var lists atomic.Int32
	second := make(chan struct{})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if dataTopics(req.(*kmsg.ListOffsetsRequest)) == 0 {
			return nil, nil, false // the read's look at the claims topic
		}
		switch lists.Add(1) {
		case 1:
			c.SleepControl(func() {
				select {
				case <-second:
				case <-readCtx.Done():
				}
			})
		case 2:
			close(second)
		}
		return nil, nil, false
	})
	got, err := readErr(s.ReadWith(readCtx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{}))
	require.NoError(t, err, "the second ListOffsets waited behind the first: both on one connection")
	var ids []logstore.EntryID
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	require.Equal(t, want, ids)
	require.EqualValues(t, 2, lists.Load())
}

// restartedTwoRegions writes n one-entry calls to a new topic, regions 1
// and 2 in turn, closes the store and opens another on the same index
// directory: a restarted datanode. It returns region 1's entry IDs.
func restartedTwoRegions(t *testing.T, brokers []string, n int) (*kafka.LogStore, string, []logstore.EntryID) {
	t.Helper()
	dir := t.TempDir()
	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	topic := newTopic(t)
	var want []logstore.EntryID
	for i := range n {
		res, err := w.AppendBatch(context.Background(), []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(1 + i%2), Data: []byte{byte(i)}}})
		require.NoError(t, err)
		if i%2 == 0 {
			want = append(want, res.LastEntryIDs[1])
		}
	}
	require.NoError(t, w.Close())
	return openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir }), topic, want
}
