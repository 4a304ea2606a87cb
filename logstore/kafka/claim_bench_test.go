package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// BenchmarkClaim measures a hand-over of one region between two stores:
// the new owner's Claim (two events in the claims topic, a claim record in
// the log, the read of the region's last entries below it) after the old
// owner's Release, with 10 entries of 2 KiB appended by the owner between
// hand-overs. It reports claim_ms and release_ms per hand-over.
func BenchmarkClaim(b *testing.B) {
	brokers := testutil.Brokers(b)
	topic := newTopic(b)
	stores := []*kafka.LogStore{openStore(b, brokers, nil), openStore(b, brokers, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(b, stores[0].CreateNamespace(ctx, topic))
	const r = logstore.RegionID(1)
	data := make([]byte, 2048)
	entries := make([]logstore.Entry, 10)
	for i := range entries {
		entries[i] = logstore.Entry{Namespace: topic, Region: r, Data: data}
	}
	_, err := stores[0].Claim(ctx, topic, r)
	require.NoError(b, err)
	var claimT, releaseT time.Duration
	b.ResetTimer()
	for i := range b.N {
		owner, next := stores[i%2], stores[(i+1)%2]
		_, err := owner.AppendBatch(ctx, entries)
		require.NoError(b, err)
		t0 := time.Now()
		_, err = owner.Release(ctx, topic, r)
		require.NoError(b, err)
		t1 := time.Now()
		_, err = next.Claim(ctx, topic, r)
		require.NoError(b, err)
		releaseT += t1.Sub(t0)
		claimT += time.Since(t1)
	}
	b.ReportMetric(float64(claimT.Microseconds())/1000/float64(b.N), "claim_ms")
	b.ReportMetric(float64(releaseT.Microseconds())/1000/float64(b.N), "release_ms")
}
