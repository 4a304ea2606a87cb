package kafka_test

import (
	"context"
	"sync"
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

// holdProduceOf makes kfake hold every produce request that writes topic
// until the returned release is called (or the cluster closes); held is
// closed once the first is held. Other topics' produces pass: franz-go
// sends each lane's produces on that lane's own connection, so a held one
// stalls only its lane.
func holdProduceOf(t *testing.T, c *kfake.Cluster, topic string) (held <-chan struct{}, release func()) {
	t.Helper()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	td, err := adm.ListTopics(context.Background(), topic)
	adm.Close()
	require.NoError(t, err)
	require.NoError(t, td[topic].Err)
	id := td[topic].ID
	heldc, releasec := make(chan struct{}), make(chan struct{})
	var heldOnce sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-releasec:
			return nil, nil, false
		default:
		}
		for _, rt := range kreq.(*kmsg.ProduceRequest).Topics {
			if rt.Topic == topic || rt.TopicID == id {
				heldOnce.Do(func() { close(heldc) })
				c.SleepControl(func() { <-releasec })
				break
			}
		}
		return nil, nil, false
	})
	release = sync.OnceFunc(func() { close(releasec) })
	t.Cleanup(release)
	return heldc, release
}

// releaseAfterHeldAppend opens a store on a cluster of its own, writes
// region 1 of namespace a once, then holds a's produces at the broker and
// starts an append of region 1 of a ("in flight") with ctx, and a Release
// of it with releaseCtx. It returns once the Release waits for that append, with the
// function ending the hold, the append's and the Release's outcomes, and
// the namespaces a and b (b written once, never held).
func releaseAfterHeldAppend(t *testing.T, ctx, releaseCtx context.Context) (s *kafka.LogStore, a, b string, unhold func(), appended <-chan appendOutcome, released <-chan releaseOutcome) {
	t.Helper()
	c := testutil.NewCluster(t)
	s = openStore(t, c.ListenAddrs(), nil)
	a, b = newTopic(t), newTopic(t)
	for _, ns := range []string{a, b} {
		_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("before")}})
		require.NoError(t, err)
	}
	held, unhold := holdProduceOf(t, c, a)
	appendc := make(chan appendOutcome, 1)
	go func() {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: a, Region: 1, Data: []byte("in flight")}})
		appendc <- appendOutcome{res.LastEntryIDs[1], err}
	}()
	<-held
	waiting := make(chan struct{})
	var once sync.Once
	kafka.SetReleaseWaitHook(s, func(ns string, region uint64) {
		if ns == a && region == 1 {
			once.Do(func() { close(waiting) })
		}
	})
	releasec := make(chan releaseOutcome, 1)
	go func() {
		last, err := s.Release(releaseCtx, a, 1)
		releasec <- releaseOutcome{last, err}
	}()
	<-waiting
	return s, a, b, unhold, appendc, releasec
}

type appendOutcome struct {
	id  logstore.EntryID
	err error
}

type releaseOutcome struct {
	last logstore.EntryID
	err  error
}

// TestReleaseWaitsOnlyForItsRegion protects every other region's appends
// from a Release: while Release of region 1 of namespace a waits for an
// append of it that the broker holds, a new append of it fails at once
// (released), and appends of other regions, of a region with the same ID
// in another namespace and of several namespaces in one call, are
// acknowledged. Release returns only once the held append has ended, with
// its ID as the last this store acknowledged.
func TestReleaseWaitsOnlyForItsRegion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, a, b, unhold, appended, released := releaseAfterHeldAppend(t, ctx, ctx)

	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: a, Region: 1, Data: []byte("after")}})
	require.ErrorIs(t, err, kafka.ErrFenced)
	var fe *kafka.FencedError
	require.ErrorAs(t, err, &fe)
	require.True(t, fe.Released, "refused because this store released the region")

	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: b, Region: 1, Data: []byte("same region ID, other namespace")}})
	require.NoError(t, err)
	c := newTopic(t)
	_, err = s.AppendBatch(ctx, []logstore.Entry{
		{Namespace: b, Region: 2, Data: []byte("b2")}, {Namespace: c, Region: 3, Data: []byte("c3")}, {Namespace: b, Region: 2, Data: []byte("b2 again")},
	})
	require.NoError(t, err, "an append of other regions and namespaces does not wait for the Release")
	select {
	case r := <-released:
		t.Fatalf("Release returned (%v, %v) while an append of its region was in flight", r.last, r.err)
	default:
	}

	unhold()
	app := <-appended
	require.NoError(t, app.err, "the append in flight began before the Release: it is acknowledged")
	rel := <-released
	require.NoError(t, rel.err)
	require.Equal(t, app.id, rel.last, "Release returned after the append in flight, with its ID")
}

// TestReleaseGivesUpWithItsContext protects Release's caller: when ctx
// ends while Release waits for an append of its region in flight, it
// returns ctx's error at once, and the region stays released (appends of
// it still fail), while the append goes on. A later Release returns that
// append's ID as the last acknowledged.
func TestReleaseGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	s, a, _, unhold, appended, released := releaseAfterHeldAppend(t, ctx, rctx)
	rcancel()
	rel := <-released
	require.ErrorIs(t, rel.err, context.Canceled)

	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: a, Region: 1, Data: []byte("after")}})
	require.ErrorIs(t, err, kafka.ErrFenced, "the region stays released")

	unhold()
	app := <-appended
	require.NoError(t, app.err)
	last, err := s.Release(ctx, a, 1)
	require.NoError(t, err)
	require.Equal(t, app.id, last)
}
