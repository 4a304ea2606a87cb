package kafka_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// gate holds every write of the connections it dialed while it is shut:
// a store behind it can neither send a produce nor look at the claims
// topic, and nothing it sent is lost (unlike a proxy that drops bytes).
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c *gatedConn) Write(b []byte) (int, error) {
	c.g.mu.Lock()
	open := c.g.open
	c.g.mu.Unlock()
	<-open
	return c.Conn.Write(b)
}

// TestLeaseNeverAcknowledgesAboveAClaim protects lease fencing's promise,
// the same as strict fencing's: an owner that trusts a look for a lease is
// never told "acknowledged" for an entry that lands above a newer claim.
// A owns a region under a lease and is cut off (its writes held) with an
// append in flight; B, in strict mode and with no lease of its own,
// claims the region. B's Claim must wait out the lease A recorded with
// its own claim, so that when A's produce lands (above B's claim record)
// A's lease has run out and A's check finds B's claim: the append fails
// with ErrFenced and no replay returns it. Without the wait, or with a
// lease that never runs out, A acknowledges it.
func TestLeaseNeverAcknowledgesAboveAClaim(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lease = 1500 * time.Millisecond
	g := newGate()
	t.Cleanup(g.release)
	a := openStore(t, brokers, func(c *kafka.Config) {
		c.Owner, c.ClaimsTopic, c.AutoCreateTopics = "a", claims, true
		c.Fencing, c.Lease, c.Dialer = kafka.FencingLease, lease, g.dial
	})
	b := openStore(t, brokers, func(c *kafka.Config) {
		c.Owner, c.ClaimsTopic, c.AutoCreateTopics = "b", claims, true
	})
	const r = logstore.RegionID(4)
	require.NoError(t, a.CreateNamespace(ctx, topic))
	start := time.Now()
	_, err := a.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), lease, "A's claim waits its own lease")
	var acked []string
	for _, d := range []string{"a1", "a2", "a3"} {
		_, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte(d)}})
		require.NoError(t, err)
		acked = append(acked, d)
	}

	g.shut()
	zombie := make(chan error, 1)
	go func() {
		_, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte("zombie")}})
		zombie <- err
	}()
	start = time.Now()
	c, err := b.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), lease, "B's claim waits the lease A recorded")
	require.Equal(t, uint64(2), c.Epoch)
	g.release()

	err = <-zombie
	require.ErrorIs(t, err, kafka.ErrFenced, "A's lease ran out while it was cut off: its append is checked, not trusted")
	_, err = b.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte("b1")}})
	require.NoError(t, err)
	acked = append(acked, "b1")

	fresh := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic = claims })
	for _, s := range []*kafka.LogStore{a, b, fresh} {
		for _, noIndex := range []bool{false, true} {
			got, st := regionData(ctx, t, s, topic, r, noIndex)
			require.Equal(t, acked, got)
			require.Equal(t, int64(1), st.Fenced, "the zombie was written (its check follows its produce) and is skipped")
		}
	}
}
