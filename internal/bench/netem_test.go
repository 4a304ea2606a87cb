package bench

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// frame is a Kafka request frame: length, API key, then the rest.
func frame(key uint16, body int) []byte {
	b := make([]byte, 6+body)
	binary.BigEndian.PutUint32(b, uint32(2+body))
	binary.BigEndian.PutUint16(b[4:], key)
	return b
}

// TestCountingConnCountsProduceRequests protects the matrix's "produce
// requests per MB": the count follows the request framing whatever the
// write boundaries (headers split across writes included).
func TestCountingConnCountsProduceRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	want, wantBytes := 0, 0
	for range 200 {
		key := uint16(rng.IntN(4)) // 0 is Produce
		f := frame(key, rng.IntN(3000))
		if key == 0 {
			want++
			wantBytes += len(f)
		}
		stream = append(stream, f...)
	}
	var n, nb atomic.Int64
	c := &countingConn{produces: &n, produceBytes: &nb}
	for len(stream) > 0 {
		k := min(len(stream), 1+rng.IntN(7000))
		if rng.IntN(4) == 0 {
			k = min(len(stream), 1+rng.IntN(5)) // tiny writes split headers
		}
		c.observe(stream[:k])
		stream = stream[k:]
	}
	require.EqualValues(t, want, n.Load())
	require.EqualValues(t, wantBytes, nb.Load(), "the produce requests' bytes, framing included")
}

// TestLinkSerializesBytes protects the bandwidth cap: bytes given to the
// link while it is busy leave after those before them, at its rate.
func TestLinkSerializesBytes(t *testing.T) {
	l := &link{rate: 1000} // bytes a second: each 1000-byte send takes a second
	first := l.send(1000)
	second := l.send(500)
	third := l.send(1000)
	require.Equal(t, 500*time.Millisecond, second.Sub(first))
	require.Equal(t, time.Second, third.Sub(second))
}

// TestNetProxyDelaysAndDelivers protects the latency proxy: bytes arrive
// intact and in order both ways, a round trip takes at least twice the
// added latency, and Close ends every proxy goroutine (goleak).
func TestNetProxyDelaysAndDelivers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() { // echo server
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	const latency = 20 * time.Millisecond
	n := NewNet(latency)
	defer n.Close()
	c, err := n.Dial(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	msg := frame(0, 100<<10)
	for i := range msg[6:] {
		msg[6+i] = byte(i)
	}
	start := time.Now()
	_, err = c.Write(msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 2*latency, "a round trip crosses the proxy twice")
	require.Equal(t, msg, got)
	require.EqualValues(t, 1, n.ProduceRequests())
}
