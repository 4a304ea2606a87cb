package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestDamagedSegmentIsReported protects against silent loss when the
// broker loses records: a copy of an embedded broker's data
// directory with 4 KiB garbled in the middle of its segment comes back
// with its log cut at the damage. Every read of a region that had records
// past the cut fails with an error matching ErrCorrupt that names the
// missing offsets (the index still knows of them), again on a second read;
// with SkipCorrupt the read yields what survived and counts the loss.
func TestDamagedSegmentIsReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(filepath.Join(dir, "kafka")))
	require.NoError(t, err)
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.IndexDir = filepath.Join(dir, "index") })
	want := map[logstore.RegionID][]logstore.Entry{}
	for call := range 100 {
		var batch []logstore.Entry
		for i := range 20 {
			region := logstore.RegionID(call%4 + 1)
			batch = append(batch, logstore.Entry{Namespace: topic, Region: region, Data: []byte(fmt.Sprintf("%d-%d-%01000d", call, i, 0))})
		}
		res, err := s.AppendBatch(ctx, batch)
		require.NoError(t, err)
		region := batch[0].Region
		for i, e := range batch {
			e.ID = res.LastEntryIDs[region] - logstore.EntryID(len(batch)-1-i)
			want[region] = append(want[region], e)
		}
	}
	end, err := s.LatestEntryID(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	c.Close()

	damaged := t.TempDir()
	require.NoError(t, os.CopyFS(damaged, os.DirFS(dir)))
	segs, err := filepath.Glob(filepath.Join(damaged, "kafka", "partitions", topic+"-0", "*.dat"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	seg, size := "", int64(0)
	for _, p := range segs {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			seg, size = p, fi.Size()
		}
	}
	garble(t, seg, 4096)

	c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(filepath.Join(damaged, "kafka")))
	require.NoError(t, err)
	t.Cleanup(c.Close) // after the stores' Close (cleanups run last first)
	s = openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.IndexDir = filepath.Join(damaged, "index") })
	cut, err := s.LatestEntryID(ctx, topic)
	require.NoError(t, err)
	require.Less(t, cut, end, "the broker kept records past the damage; the test needs the cut it makes")

	for range 2 { // the store keeps knowing: a second read fails as well
		got, err := readErr(s.Read(ctx, topic, 1, 0))
		require.ErrorIs(t, err, logstore.ErrCorrupt)
		var me *logstore.MissingError
		require.ErrorAs(t, err, &me)
		require.Equal(t, int64(cut), me.From)
		require.Equal(t, int64(end), me.To)
		require.Contains(t, err.Error(), fmt.Sprintf("offsets [%d, %d) are missing", cut, end))
		requireEntries(t, before(want[1], cut), got, "entries before the cut")
	}

	skip := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) {
		cfg.IndexDir = filepath.Join(damaged, "index")
		cfg.IndexReadOnly = true
		cfg.SkipCorrupt = true
	})
	var stats kafka.ReadStats
	got, err := readErr(skip.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{2: 0}, kafka.ReadOptions{Stats: &stats}))
	require.NoError(t, err)
	requireEntries(t, before(want[2], cut), got, "entries before the cut, skipping")
	require.Positive(t, stats.Missing)
}

// before returns the entries whose IDs are <= cut (their offsets are
// below the log's end cut).
func before(es []logstore.Entry, cut logstore.EntryID) []logstore.Entry {
	var out []logstore.Entry
	for _, e := range es {
		if e.ID <= cut {
			out = append(out, e)
		}
	}
	return out
}

// garble overwrites n bytes in the middle of the file.
func garble(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	junk := make([]byte, n)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	_, err = f.WriteAt(junk, fi.Size()/2)
	require.NoError(t, err)
}

// TestGapInLogIsReported protects reads against records missing from the
// middle of the log: kfake answers every fetch with the topic's record
// batches minus one (as compaction or damage would leave them). The read
// yields the entries before the gap, then fails with an error matching
// ErrCorrupt naming the missing offset; with SkipCorrupt it yields the
// rest and counts the one missing offset.
func TestGapInLogIsReported(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, c.ListenAddrs(), nil)
	for i := range 30 {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte(fmt.Sprintf("e%d", i))}})
		require.NoError(t, err)
	}
	resp := fetchAll(t, c.ListenAddrs(), topic)
	rp := &resp.Topics[0].Partitions[0]
	rp.RecordBatches = dropBatch(t, rp.RecordBatches, 10)
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		out := *resp
		out.SetVersion(kreq.GetVersion())
		return &out, nil, true
	})

	got, err := readErr(s.Read(ctx, topic, 1, 0))
	var me *logstore.MissingError
	require.ErrorAs(t, err, &me)
	require.ErrorIs(t, err, logstore.ErrCorrupt)
	require.Equal(t, int64(10), me.From)
	require.Equal(t, int64(11), me.To)
	require.Len(t, got, 10)

	skip := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.SkipCorrupt = true })
	var stats kafka.ReadStats
	got, err = readErr(skip.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &stats}))
	require.NoError(t, err)
	require.Len(t, got, 29)
	require.EqualValues(t, 1, stats.Missing)
}

// TestSkippedGapStaysUnindexed protects reads without SkipCorrupt from an
// index that a read with it updated: offsets missing from the log may have
// held any region's entry, so the read that skips them must not index them
// as holding no entry. Region 1's records lie before and after 20 large
// records of region 2, one of which is missing (kfake serves the log minus
// that batch). After a store with SkipCorrupt read both regions and
// checkpointed its index, a store without it reads region 1 through that
// index: it must meet the gap and fail with a MissingError, as a scan of
// the log would, rather than fetch region 1's two runs and pass the
// missing offset by.
func TestSkippedGapStaysUnindexed(t *testing.T) {
	t.Parallel()
	c := testutil.NewCluster(t)
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, c.ListenAddrs(), nil)
	appendOne := func(region logstore.RegionID, data []byte) {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: region, Data: data}})
		require.NoError(t, err)
	}
	for i := range 5 {
		appendOne(1, []byte(fmt.Sprintf("a%d", i)))
	}
	for i := range 20 {
		appendOne(2, append([]byte(fmt.Sprintf("b%d-", i)), make([]byte, 50<<10)...))
	}
	for i := range 5 {
		appendOne(1, []byte(fmt.Sprintf("c%d", i)))
	}
	resp := fetchAll(t, c.ListenAddrs(), topic)
	rp := &resp.Topics[0].Partitions[0]
	rp.RecordBatches = dropBatch(t, rp.RecordBatches, 10) // region 2's
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		out := *resp
		out.SetVersion(kreq.GetVersion())
		return &out, nil, true
	})

	dir := t.TempDir()
	skip := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.SkipCorrupt = true; cfg.IndexDir = dir })
	var stats kafka.ReadStats
	got, err := readErr(skip.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0, 2: 0}, kafka.ReadOptions{Stats: &stats}))
	require.NoError(t, err)
	require.Len(t, got, 29)
	require.EqualValues(t, 1, stats.Missing)
	require.NoError(t, skip.Close()) // checkpoints the index

	strict := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.IndexDir = dir })
	for range 2 {
		got, err = readErr(strict.Read(ctx, topic, 1, 0))
		var me *logstore.MissingError
		require.ErrorAs(t, err, &me, "the missing offset was passed by silently")
		require.Equal(t, int64(10), me.From)
		require.Len(t, got, 5, "region 1's entries before the gap")
	}
	// Past the gap, region 1 is read through the index.
	got, err = readErr(strict.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 12}, kafka.ReadOptions{Stats: &stats}))
	require.NoError(t, err)
	require.Len(t, got, 5)
	require.Positive(t, stats.IndexRanges)
}

// fetchAll fetches the topic's partition 0 from offset 0 in one response.
func fetchAll(t *testing.T, brokers []string, topic string) *kmsg.FetchResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	require.NoError(t, err)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 16<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, td[topic].ID
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes, p.LogStartOffset, p.CurrentLeaderEpoch = 16<<20, -1, -1
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp
}

// dropBatch removes the record batch whose base offset is base.
func dropBatch(t *testing.T, raw []byte, base int64) []byte {
	t.Helper()
	var out []byte
	dropped := false
	for len(raw) >= 12 {
		n := 12 + int(binary.BigEndian.Uint32(raw[8:12]))
		if int64(binary.BigEndian.Uint64(raw[0:8])) == base {
			dropped = true
		} else {
			out = append(out, raw[:n]...)
		}
		raw = raw[n:]
	}
	require.True(t, dropped, "no batch at offset %d", base)
	return out
}

// TestTransactionMarkersAreNoGap protects against false alarms: offsets
// taken by transaction markers (another program's transactional writes,
// here of kwal-format records) hold no record and are no gap; the read
// yields every entry.
func TestTransactionMarkersAreNoGap(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	s := openStore(t, brokers, nil)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	for i := range 3 {
		require.NoError(t, cl.BeginTransaction())
		for _, r := range partRecords(t, topic, 1, []byte(fmt.Sprintf("tx%d", i)), 1<<20) {
			require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		}
		require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte(fmt.Sprintf("kwal%d", i))}})
		require.NoError(t, err)
	}
	got := collect(t, s.Read(ctx, topic, 1, 0))
	var datas []string
	for _, e := range got {
		datas = append(datas, string(e.Data))
	}
	require.Equal(t, []string{"tx0", "kwal0", "tx1", "kwal1", "tx2", "kwal2"}, datas)
	// The markers took offsets: IDs are not consecutive.
	require.Greater(t, got[len(got)-1].ID, logstore.EntryID(len(got)))
}

// TestCorruptBatchIsReported protects reads against a record batch that
// fails its CRC (damage on the broker's disk or on the wire): kfake answers
// every fetch with the topic's batches, one of them with a byte flipped.
// The read yields the entries before it, then fails with a CorruptError
// naming the batch's first offset, whether the batch is compressed or not,
// and whether a fetch goroutine or the decoder decoded it.
func TestCorruptBatchIsReported(t *testing.T) {
	t.Parallel()
	for _, codec := range []string{"none", "lz4"} {
		t.Run(codec, func(t *testing.T) {
			t.Parallel()
			c := testutil.NewCluster(t)
			ctx := context.Background()
			topic := newTopic(t)
			s := openStore(t, c.ListenAddrs(), func(cfg *kafka.Config) { cfg.Compression = codec })
			for i := range 30 {
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: bytes.Repeat([]byte{byte(i)}, 100)}})
				require.NoError(t, err)
			}
			resp := fetchAll(t, c.ListenAddrs(), topic)
			raw := resp.Topics[0].Partitions[0].RecordBatches
			for off := 0; off+12 <= len(raw); {
				n := 12 + int(binary.BigEndian.Uint32(raw[off+8:off+12]))
				if binary.BigEndian.Uint64(raw[off:off+8]) == 10 {
					raw[off+n-1] ^= 0xff // inside the bytes its CRC covers
				}
				off += n
			}
			c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				out := *resp
				out.SetVersion(kreq.GetVersion())
				return &out, nil, true
			})
			for _, noIndex := range []bool{false, true} {
				got, err := readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: noIndex}))
				var ce *logstore.CorruptError
				require.ErrorAs(t, err, &ce, "noIndex=%v", noIndex)
				require.ErrorIs(t, err, logstore.ErrCorrupt)
				require.EqualValues(t, 10, ce.Offset, "noIndex=%v: %v", noIndex, err)
				require.Len(t, got, 10, "noIndex=%v", noIndex)
			}
		})
	}
}
