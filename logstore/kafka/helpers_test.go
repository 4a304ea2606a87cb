package kafka_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/rawlog"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// openStore opens a store on brokers with test-friendly settings; mutate
// may change the config. The store is closed when the test ends.
func openStore(t testing.TB, brokers []string, mutate func(*kafka.Config)) *kafka.LogStore {
	t.Helper()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers
	cfg.ProduceTimeout = 20 * time.Second
	cfg.RequestTimeout = 20 * time.Second
	cfg.ProduceLanes = 8
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// collect drains a read, failing the test on error.
func collect(t testing.TB, seq func(func(logstore.Entry, error) bool)) []logstore.Entry {
	t.Helper()
	var out []logstore.Entry
	for e, err := range seq {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// readErr drains a read and returns its error.
func readErr(seq func(func(logstore.Entry, error) bool)) ([]logstore.Entry, error) {
	var out []logstore.Entry
	for e, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// payload returns n deterministic pseudo-random bytes.
func payload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// rawRecord is a record of the log as a plain franz-go consumer sees it.
type rawRecord struct {
	Offset int64
	Key    []byte
	Value  []byte
}

// scanRaw reads every record of the topic's partition 0 with a plain
// franz-go consumer, independent of kwal's read path.
func scanRaw(t testing.TB, brokers []string, topic string) []rawRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var out []rawRecord
	_, _, err = rawlog.Consume(ctx, cl, topic, 0, 20*time.Second, func(r *kgo.Record) bool {
		out = append(out, rawRecord{Offset: r.Offset, Key: r.Key, Value: r.Value})
		return true
	})
	require.NoError(t, err)
	return out
}

// decodeEntries reassembles every region's entries from raw records, the
// way the contract defines them, independently of the store's read path.
func decodeEntries(t testing.TB, recs []rawRecord) map[logstore.RegionID][]logstore.Entry {
	t.Helper()
	asm := record.NewAssembler()
	out := make(map[logstore.RegionID][]logstore.Entry)
	for _, r := range recs {
		p, err := record.Decode(r.Key, r.Value)
		require.NoError(t, err, "offset %d", r.Offset)
		if p.Kind == record.KindMark {
			continue // holds no entry
		}
		st, err := asm.Add(r.Offset, p)
		require.NoError(t, err)
		if st.Complete {
			reg := logstore.RegionID(st.Entry.Region)
			out[reg] = append(out[reg], logstore.Entry{Region: reg, ID: logstore.EntryID(st.Entry.First + 1), Data: st.Entry.Data})
		}
	}
	return out
}

// newTopic returns a unique topic for the test and its brokers.
func newTopic(t testing.TB) string { return testutil.Topic(t) }

func removeAll(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// metricSum gathers reg and sums the samples of the family name whose label
// key has value (every sample when key is ""): counters and gauges by
// value, histograms by sample count. found reports whether any sample
// matched.
func metricSum(t testing.TB, reg prometheus.Gatherer, name, key, value string) (sum float64, found bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err, "no duplicate or inconsistent series")
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if key != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == key && l.GetValue() == value }) {
				continue
			}
			found = true
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, found
}

// dataTopics counts the topics of a ListOffsets request other than the
// claims topic (every read and strict append also looks at its end).
func dataTopics(req *kmsg.ListOffsetsRequest) int {
	n := 0
	for _, t := range req.Topics {
		if t.Topic != kafka.DefaultConfig().ClaimsTopic {
			n++
		}
	}
	return n
}

// regionData replays region r of topic on s from its first entry, through
// the index or by full scan, and returns the entries' data and the read's
// stats.
func regionData(ctx context.Context, t testing.TB, s *kafka.LogStore, topic string, r logstore.RegionID, noIndex bool) ([]string, kafka.ReadStats) {
	t.Helper()
	var st kafka.ReadStats
	var got []string
	for e, err := range s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}) {
		require.NoError(t, err)
		got = append(got, string(e.Data))
	}
	return got, st
}
