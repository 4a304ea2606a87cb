package kafka_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestPartialResponsesReadToTheEnd protects a read whose chunks come back
// partial (eight regions' small entries interleaved in one topic, so a
// region's range spans batches of several sizes): the rest of a partial
// response goes back to the head of the pass's queue, and it must start
// even when the chunks behind it already fill the pass's cap of started
// fetches. It hung on its first read before the head was exempted from
// the cap. Each read has a deadline, so a hang fails instead of stalling
// the suite.
func TestPartialResponsesReadToTheEnd(t *testing.T) {
	brokers := testutil.Brokers(t)
	s := openStore(t, brokers, nil)
	ctx := context.Background()
	topic := testutil.Topic(t)
	require.NoError(t, s.CreateNamespace(ctx, topic))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 64 {
				_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: logstore.RegionID(w + 1), Data: payload(rng, 256)}, {Namespace: topic, Region: logstore.RegionID(w + 1), Data: payload(rng, 256)}})
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	for i := range 10 {
		for _, noIndex := range []bool{false, true} {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var st kafka.ReadStats
			n := 0
			for _, err := range s.ReadWith(rctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}) {
				require.NoError(t, err, "run %d noIndex %v", i, noIndex)
				n++
			}
			cancel()
			require.Equal(t, 128, n, "region 1's entries, run %d noIndex %v", i, noIndex)
		}
	}
}
