package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/testutil"
)

// TestGreptimeRecords protects the emulation's record format: GreptimeDB's
// JSON metadata key, a whole entry per record when it fits, and First,
// Middle(i), Last parts of at most max_batch_bytes - 256 otherwise.
func TestGreptimeRecords(t *testing.T) {
	big := make([]byte, 2*(1024-greptimeMetaSize)+10)
	c := Call{Topic: "t", Region: 77, Entries: [][]byte{[]byte("small"), big}}
	recs := GreptimeRecords(c, 1024)
	require.Len(t, recs, 1+3)
	var tps []any
	total := 0
	for _, r := range recs {
		var meta struct {
			Version int `json:"version"`
			Tp      any `json:"tp"`
			EntryID int `json:"entry_id"`
			NS      struct {
				RegionID uint64 `json:"region_id"`
				Topic    string `json:"topic"`
			} `json:"ns"`
		}
		require.NoError(t, json.Unmarshal(r.Key, &meta))
		require.EqualValues(t, 77, meta.NS.RegionID)
		region, ok := GreptimeRegion(r.Key)
		require.True(t, ok)
		require.EqualValues(t, 77, region)
		require.LessOrEqual(t, len(r.Value), 1024-greptimeMetaSize)
		tps = append(tps, meta.Tp)
		total += len(r.Value)
	}
	require.Equal(t, []any{"Full", "First", map[string]any{"Middle": float64(1)}, "Last"}, tps)
	require.Equal(t, 5+len(big), total)
	_, ok := GreptimeRegion([]byte("not a key"))
	require.False(t, ok)
}

// TestGreptimeProducerAndReplay protects the GreptimeDB-style emulation
// where it decides the figures: every region request is one produce
// request (its own client and connection per topic, nothing merged), each
// region's entries land in its order, and the window replay returns
// exactly the region's records whatever the window and the size estimate.
func TestGreptimeProducerAndReplay(t *testing.T) {
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topics := []string{testutil.Topic(t), testutil.Topic(t)}
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	_, err = adm.CreateTopics(ctx, 1, -1, nil, topics...)
	require.NoError(t, err)
	defer func() { _, _ = adm.DeleteTopics(context.Background(), topics...) }()
	// A real broker may refuse the first produce to a topic just created
	// (its leader not yet elected) and the retry would count as a second
	// request: one record each, written around the counting proxy, makes the
	// topics ready. The replay skips it (it is in no region's offsets).
	ready, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	for _, topic := range topics {
		require.NoError(t, ready.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("ready")}).FirstErr())
	}
	ready.Close()

	n := NewNet(0)
	defer n.Close()
	g, err := NewGreptime(topics, GreptimeOptions{Compression: kgo.Lz4Compression()}, kgo.SeedBrokers(brokers...), kgo.Dialer(n.Dial))
	require.NoError(t, err)
	defer g.Close()
	w := Workload{Topics: 2, Regions: 6, Writers: 6, EntrySize: 300, EntriesPerCall: 3, Calls: 5, Seed: 9}
	plan := w.Plan(topics)
	_, err = Run(ctx, plan, g.Appender(), nil)
	require.NoError(t, err)
	require.EqualValues(t, w.Writers*w.Calls, n.ProduceRequests(), "one produce request per region request")

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for r := range w.Regions {
		region := uint64(r + 1)
		topic := topics[r%len(topics)]
		var want [][]byte // the region's entries in call order (one writer owns it)
		for _, calls := range plan {
			for _, c := range calls {
				if uint64(c.Region) == region {
					want = append(want, c.Entries...)
				}
			}
		}
		offsets := g.RegionOffsets(topic, region)
		require.Len(t, offsets, len(want))
		var own int64
		for _, e := range want {
			own += int64(len(e))
		}
		for _, window := range []int{1, 1000, GreptimeWindow} {
			avg := 1 + rng.IntN(2000)
			res, err := GreptimeReplay(ctx, cl, topic, offsets, avg, window)
			require.NoError(t, err)
			require.EqualValues(t, len(want), res.Records, "window %d, avg %d", window, avg)
			require.Equal(t, own, res.OwnBytes)
			require.Positive(t, res.Fetches)
		}
		// An index offset at or past the log's end (appended after the
		// read began, in GreptimeDB) is not read: the end bounds the read.
		past := append(slices.Clone(offsets), offsets[len(offsets)-1]+1000)
		res, err := GreptimeReplay(ctx, cl, topic, past, 100, GreptimeWindow)
		require.NoError(t, err, "an offset past the end is not fetched")
		require.EqualValues(t, len(want), res.Records)
		// The region's records hold its entries in order.
		l, err := MeasureLayoutOf(ctx, topic, GreptimeRecordRegion, kgo.SeedBrokers(brokers...))
		require.NoError(t, err)
		require.Equal(t, own, l.PerRegion[region].OwnBytes)
		fetched := readRegion(t, brokers, topic, region)
		require.Equal(t, want, fetched)
	}
}

// readRegion consumes topic whole and returns region's record values.
func readRegion(t *testing.T, brokers []string, topic string, region uint64) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer c.Close()
	ends, err := kadm.NewClient(c).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	end, _ := ends.Lookup(topic, 0)
	var out [][]byte
	for read := int64(0); read < end.Offset; {
		fs := c.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if reg, ok := GreptimeRegion(r.Key); ok && reg == region {
				out = append(out, r.Value)
			}
		})
	}
	return out
}
