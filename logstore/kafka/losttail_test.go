package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/testutil"
)

// recordingHandler keeps every log record at or above its level.
type recordingHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of each record whose message is msg.
func (h *recordingHandler) find(msg string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]any{"level": r.Level}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// TestLostTailNoReadNeeded pins down what a read reports when the log ends
// below offsets the index accounted for (gaps.go, lostTail) but the read's
// regions had no record there. The index, checkpointed when the log held
// region 1's 10 entries and then region 2's 10, is opened on a log that
// holds only the first 10 (as a truncated log, or a topic recreated and
// rewritten, leaves it). Each read of region 1 yields all its entries and
// no error: it lost nothing, and the index proves it. Each such read also
// logs the loss at error level, saying that its own regions were not
// affected, because records were lost all the same. A read of region 2
// fails with a MissingError naming [10, 20), on every read, since the index
// keeps what it knew. Once the store opens a producer on the topic, the
// index's coverage is discarded (counted in
// kwal_index_coverage_discarded_total): new records reuse the offsets.
func TestLostTailNoReadNeeded(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	topic := newTopic(t)
	w := openStore(t, brokers, func(c *kafka.Config) { c.DisableIndex = true })
	var want []logstore.Entry
	for i := range 10 {
		res, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: fmt.Appendf(nil, "kept-%d", i)}})
		require.NoError(t, err)
		want = append(want, logstore.Entry{Region: 1, ID: res.LastEntryIDs[1], Data: fmt.Appendf(nil, "kept-%d", i)})
	}
	require.NoError(t, w.Close())
	require.EqualValues(t, 10, want[9].ID, "one record per entry from offset 0")

	// The index as the store that wrote 20 records left it.
	dir := t.TempDir()
	st, err := index.NewDirStore(dir)
	require.NoError(t, err)
	g, err := index.New(index.Options{Store: st, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	g.Start(topic, 0, 0)
	g.Observe(topic, []index.Run{{Start: 0, Count: 10, Region: 1}, {Start: 10, Count: 10, Region: 2}})
	require.NoError(t, g.Close(ctx))

	logs := &recordingHandler{}
	reg := prometheus.NewRegistry()
	s := openStore(t, brokers, func(c *kafka.Config) {
		c.IndexDir = dir
		c.Logger = slog.New(logs)
		c.Registerer = reg
	})
	const lostMsg = "kwal: the log ends below offsets the index accounted for: records were lost (a truncated or damaged log, or a recreated topic)"
	for i := range 2 {
		var stats kafka.ReadStats
		got, err := readErr(s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{Stats: &stats}))
		require.NoError(t, err, "read %d of region 1, which lost nothing", i)
		requireEntries(t, want, got, "region 1")
		require.Zero(t, stats.Missing)
		reports := logs.find(lostMsg)
		require.Len(t, reports, i+1, "every read reports the lost tail")
		r := reports[i]
		require.Equal(t, slog.LevelError, r["level"])
		require.Equal(t, topic, r["topic"])
		require.EqualValues(t, 10, r["log_end"])
		require.EqualValues(t, 20, r["index_watermark"])
		require.Equal(t, false, r["read_regions_affected"])
	}
	for i := range 2 {
		got, err := readErr(s.Read(ctx, topic, 2, 0))
		var me *logstore.MissingError
		require.ErrorAs(t, err, &me, "read %d of region 2, whose records were lost", i)
		require.Equal(t, [2]int64{10, 20}, [2]int64{me.From, me.To})
		require.Empty(t, got)
		r := logs.find(lostMsg)[2+i]
		require.Equal(t, true, r["read_regions_affected"])
	}

	// A producer starts the topic over.
	discarded, _ := metricSum(t, reg, "kwal_index_coverage_discarded_total", "reason", "end_below_watermark")
	require.Zero(t, discarded)
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("new")}})
	require.NoError(t, err)
	discarded, _ = metricSum(t, reg, "kwal_index_coverage_discarded_total", "reason", "end_below_watermark")
	require.EqualValues(t, 1, discarded)
	got := collect(t, s.Read(ctx, topic, 1, 0))
	require.Len(t, got, 11)
	require.Len(t, logs.find(lostMsg), 4, "no more loss to report once the topic starts over")
}
