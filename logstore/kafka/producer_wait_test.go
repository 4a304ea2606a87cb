package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestCreatorGivingUpFailsNoWaiter protects a call that waits for another
// call creating its namespace's producer: when the creating call gives up
// (its context ends while the topic is being created), the waiting call
// creates the producer with its own context and succeeds, instead of
// failing with the other call's cancellation. The broker holds the topic's
// CreateTopics until the creator has given up.
func TestCreatorGivingUpFailsNoWaiter(t *testing.T) {
	c := testutil.NewCluster(t)
	topic := newTopic(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var hold sync.Once
	c.ControlKey(int16(kmsg.CreateTopics), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req := kreq.(*kmsg.CreateTopicsRequest); len(req.Topics) == 1 && req.Topics[0].Topic == topic {
			hold.Do(func() { close(entered); <-release })
		}
		return nil, nil, false
	})
	s := openStore(t, c.ListenAddrs(), nil)
	waiting := make(chan struct{})
	var waited sync.Once
	kafka.SetProducerWaitHook(s, func(ns string) {
		if ns == topic {
			waited.Do(func() { close(waiting) })
		}
	})
	entry := func(data string) []logstore.Entry {
		return []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte(data)}}
	}

	creatorCtx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	creator := make(chan error, 1)
	go func() { _, err := s.AppendBatch(creatorCtx, entry("creator")); creator <- err }()
	<-entered // the creator is creating the topic
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waiter := make(chan error, 1)
	go func() { _, err := s.AppendBatch(ctx, entry("waiter")); waiter <- err }()
	<-waiting // the waiter waits for the creator's producer
	giveUp()
	require.ErrorIs(t, <-creator, context.Canceled)
	close(release)
	require.NoError(t, <-waiter, "the waiter creates the producer itself")
	got := collect(t, s.Read(ctx, topic, 1, 1))
	require.Len(t, got, 1)
	require.Equal(t, "waiter", string(got[0].Data))
}
