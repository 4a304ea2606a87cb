package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/testutil"
)

func testFollower(t *testing.T, brokers []string, topic string, opts ...kgo.Opt) *claimsFollower {
	cfg := DefaultConfig()
	cfg.ClaimsTopic, cfg.RequestTimeout = topic, 20*time.Second
	f, err := newClaimsFollower(cfg, append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...), slog.New(slog.DiscardHandler),
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"kind"}), prometheus.NewCounterVec(prometheus.CounterOpts{Name: "y"}, []string{"cause"}))
	require.NoError(t, err)
	t.Cleanup(f.close)
	return f
}

// TestFoldUnderDeadlinesLosesNothing: a fold of records among which
// some do not decode, in the same batches and polls as good ones, reaches
// the state of folding every record in order; so do folds cut short by
// deadlines at any point (a poll that returns as its deadline passes, a
// fetch in flight) and resumed; and after every fold, whatever its
// outcome, the view the hot paths read is the state's.
func TestFoldUnderDeadlinesLosesNothing(t *testing.T) {
	brokers := testutil.Brokers(t)
	topic := testutil.Topic(t) + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(11, 12))
	var recs []*kgo.Record
	for i := range 3000 {
		r := uint64(rng.IntN(50))
		ev := claim.Event{Op: claim.OpPending, Namespace: "ns", Region: r, TopicID: "t", Epoch: uint64(1 + i), Token: fmt.Sprint(i), Owner: "o"}
		if i%2 == 1 {
			ev.Op, ev.Epoch, ev.Token, ev.At = claim.OpCommit, uint64(i), fmt.Sprint(i-1), int64(i)
			ev.Region = recsRegion(recs[len(recs)-1])
		}
		value := claim.Encode(ev)
		if rng.IntN(40) == 0 {
			value = []byte("{bad")
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: claim.Key(ev.Namespace, ev.Region), Value: value})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	require.NoError(t, err)
	for i := 0; i < len(recs); i += 100 {
		require.NoError(t, cl.ProduceSync(ctx, recs[i:min(i+100, len(recs))]...).FirstErr())
	}
	end := int64(len(recs))

	// What folding every record in offset order gives, without Kafka:
	// the bad records in the same polls as good ones skip nothing.
	local := claim.NewState()
	for off, r := range recs {
		_, _ = local.Fold(int64(off), r.Key, r.Value)
	}
	wantBytes, err := local.MarshalBinary()
	require.NoError(t, err)
	want := testFollower(t, brokers, topic)
	require.NoError(t, want.foldTo(ctx, end))
	oneFold, err := want.state.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, wantBytes, oneFold, "one uninterrupted fold")

	// Small fetches: a fold takes many polls, so deadlines fall between
	// them and within them.
	f := testFollower(t, brokers, topic, kgo.FetchMaxBytes(2048), kgo.FetchMaxPartitionBytes(2048))
	cut := 0
	for f.state.Next < end {
		fctx, fcancel := context.WithTimeout(ctx, time.Duration(rng.IntN(800))*time.Microsecond)
		if err := f.foldTo(fctx, end); err != nil {
			cut++
		}
		fcancel()
		require.Equal(t, f.state.Next, f.view.Load().next, "the view follows the state after every fold")
		require.Less(t, cut, 100000)
	}
	require.Positive(t, cut, "no fold was cut short: the test proves nothing")
	got, err := f.state.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, wantBytes, got, "folds cut %d times", cut)
	// A look that began before the last fold is answered after it: the
	// state already holds its end.
	require.NoError(t, f.foldTo(ctx, end-100))
	require.Equal(t, f.state.Next, f.view.Load().next)
	t.Logf("%d folds cut short", cut)
	for r := range uint64(50) {
		id := claim.ID{Namespace: "ns", TopicID: "t", Region: r}
		require.Equal(t, f.state.Region(id), f.view.Load().region(id))
	}
}

func recsRegion(r *kgo.Record) uint64 {
	_, region, _ := claim.ParseKey(r.Key)
	return region
}

// BenchmarkClaimsLook measures looks at the claims partition's end (what
// every strict append's check and every lease renewal costs the
// partition's leader): -cpu sets how many run at once, as if from that
// many stores. It reports looks/s.
func BenchmarkClaimsLook(b *testing.B) {
	brokers := testutil.Brokers(b)
	topic := testutil.Topic(b) + "-claims"
	cfg := DefaultConfig()
	cfg.ClaimsTopic, cfg.RequestTimeout = topic, 20*time.Second
	f, err := newClaimsFollower(cfg, []kgo.Opt{kgo.SeedBrokers(brokers...)}, slog.New(slog.DiscardHandler),
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"kind"}), prometheus.NewCounterVec(prometheus.CounterOpts{Name: "y"}, []string{"cause"}))
	require.NoError(b, err)
	defer f.close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(b, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	require.NoError(b, err)
	_, err = f.end(ctx)
	require.NoError(b, err)
	start := time.Now()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.end(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "looks/s")
}
