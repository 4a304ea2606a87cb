package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestEarlyFetchesEqualScans: a read right after a restart sends its first
// expected fetches while its log bounds are looked up (early fetches), and
// its pass adopts them. Over random workloads, some with the log start
// raised by retention after the index was checkpointed (so that early
// fetches below it are answered OFFSET_OUT_OF_RANGE, and the bounds they
// carry are not the plan's), each region read alone on a freshly opened
// store yields what it yields without early fetches and by a full scan:
// the same entries, or the same ErrPruned, and what was acknowledged when
// nothing it needs was deleted.
func TestEarlyFetchesEqualScans(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 41))
			dir := t.TempDir()
			w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir; c.MaxBatchBytes = 2048 })
			topic := newTopic(t)
			regions := 3 + rng.IntN(6)
			m := appendRandom(t, w, brokers, topic, seed, 1+rng.IntN(6), 4+rng.IntN(10), regions, 1+rng.IntN(4000))
			end, err := w.LatestEntryID(context.Background(), topic)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			ctx := context.Background()
			var logStart int64
			if seed != 1 {
				cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
				require.NoError(t, err)
				logStart = 1 + rng.Int64N(int64(end)/2)
				var os kadm.Offsets
				os.Add(kadm.Offset{Topic: topic, Partition: 0, At: logStart})
				resp, err := kadm.NewClient(cl).DeleteRecords(ctx, os)
				cl.Close()
				require.NoError(t, err)
				require.NoError(t, resp.Error())
			}
			lanes, fetchMax := 1+rng.IntN(3), int32(4<<10+rng.IntN(64<<10))
			read := func(region logstore.RegionID, from logstore.EntryID, noEarly, noIndex bool) ([]logstore.Entry, kafka.ReadStats, error) {
				s := openStore(t, brokers, func(c *kafka.Config) {
					c.IndexDir = dir
					c.IndexReadOnly = true // every read starts from the same checkpoint
					c.ProduceLanes = lanes
					c.FetchMaxBytes = fetchMax
					c.MaxBatchBytes = 2048
				})
				defer func() { require.NoError(t, s.Close()) }()
				if noEarly {
					kafka.SetNoEarlyFetches(s)
				}
				var st kafka.ReadStats
				got, err := readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{region: from}, kafka.ReadOptions{Stats: &st, NoIndex: noIndex}))
				return got, st, err
			}
			for region := logstore.RegionID(1); int(region) <= regions; region++ {
				es := m[region]
				if len(es) == 0 {
					continue
				}
				from := logstore.EntryID(0)
				if rng.IntN(2) == 0 {
					from = es[rng.IntN(len(es))].ID
				}
				what := fmt.Sprintf("region %d from %d (log start %d, lanes %d, FetchMaxBytes %d)", region, from, logStart, lanes, fetchMax)
				early, st, errEarly := read(region, from, false, false)
				plain, _, errPlain := read(region, from, true, false)
				scanned, _, errScan := read(region, from, true, true)
				require.Equal(t, errors.Is(errPlain, logstore.ErrPruned), errors.Is(errEarly, logstore.ErrPruned), "%s: %v / %v", what, errEarly, errPlain)
				require.Equal(t, errPlain == nil, errEarly == nil, "%s: %v / %v", what, errEarly, errPlain)
				requireEntries(t, plain, early, what+": early vs not")
				if errScan == nil && errEarly == nil {
					requireEntries(t, scanned, early, what+": early vs scan")
				}
				if errEarly == nil && int64(from) > logStart {
					requireEntries(t, m.from(region, from), early, what+": early vs acknowledged")
				}
				require.LessOrEqual(t, st.Fetches, len(es)+st.IndexRanges+st.ScanRanges+lanes+1, what+": early fetches are adopted, not fetched twice")
			}
		})
	}
}

// TestEarlyFetchAnswersTheBounds: a replay right after a restart takes its
// log bounds from its early fetches' response (a fetch response carries
// the high watermark and the log start) when that comes first: here the
// broker holds every ListOffsets until the read ended, and the read
// returns every entry of the region. Its pass adopts the early fetches:
// the broker serves exactly the read's fetches, once each. (kfake only: it
// holds and counts requests.)
func TestEarlyFetchAnswersTheBounds(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("holds requests in kfake")
	}
	c := testutil.NewCluster(t)
	brokers := c.ListenAddrs()
	dir := t.TempDir()
	w := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
	topic := newTopic(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 8))
	var want []logstore.EntryID
	for run := range 4 {
		// Region 1's runs lie 2 MiB of region 2's apart: each is a range
		// of its own, and the plan stays indexed. (Every entry weighs the
		// same: Open's size sample, one batch, prices the plan right.)
		var es []logstore.Entry
		for range 5 {
			es = append(es, logstore.Entry{Namespace: topic, Region: 1, Data: payload(rng, 64<<10)})
		}
		res, err := w.AppendBatch(ctx, es)
		require.NoError(t, err)
		for id := res.LastEntryIDs[1] - 4; id <= res.LastEntryIDs[1]; id++ {
			want = append(want, id)
		}
		if run == 3 {
			break
		}
		for range 8 {
			es = es[:0]
			for range 4 {
				es = append(es, logstore.Entry{Namespace: topic, Region: 2, Data: payload(rng, 64<<10)})
			}
			_, err := w.AppendBatch(ctx, es)
			require.NoError(t, err)
		}
	}
	require.NoError(t, w.Close())
	s := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })

	readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	readDone := make(chan struct{})
	var fetches atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() {
			select {
			case <-readDone:
			case <-readCtx.Done():
			}
		})
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if len(req.(*kmsg.FetchRequest).Topics) > 0 {
			fetches.Add(1)
		}
		return nil, nil, false
	})
	var st kafka.ReadStats
	got, err := readErr(s.ReadWith(readCtx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &st}))
	close(readDone)
	require.NoError(t, err, "the read waited for its ListOffsets")
	var ids []logstore.EntryID
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	require.Equal(t, want, ids)
	require.Equal(t, "indexed", st.Plan)
	require.EqualValues(t, st.Fetches, fetches.Load(), "every fetch the broker served counts in the read's stats")
	require.Equal(t, st.IndexRanges, st.Fetches, "one fetch per range: the early fetches were adopted, not fetched again")
}
