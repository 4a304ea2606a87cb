package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// endOffset returns the high watermark of the topic's partition 0.
func endOffset(t testing.TB, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	o, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}
