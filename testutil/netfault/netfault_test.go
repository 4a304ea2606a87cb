package netfault_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kwal/kwal/testutil/netfault"
)

// Toxiproxy's toxic pipes can stay blocked on a send to a link closed with its connection (its
// NoopToxic.Pipe has no exit for that): the library's goroutines, not ours to stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// TestProxiesPassBlackholeAndReset protects the faults the network tests
// rely on: data passes through a proxy; unknown addresses are refused
// (nothing bypasses the proxies); a blackhole answers nothing; a reset
// cuts the connection; Clear lets new connections through again.
func TestProxiesPassBlackholeAndReset(t *testing.T) {
	up := echoServer(t)
	p, err := netfault.New([]string{up})
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	_, err = p.Dial(ctx, "tcp", "127.0.0.1:1")
	require.ErrorContains(t, err, "no proxy for 127.0.0.1:1")

	c, err := p.Dial(ctx, "tcp", up)
	require.NoError(t, err)
	got, err := roundTrip(c, "hello", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello", got)
	require.NoError(t, c.Close())

	require.NoError(t, p.Add(netfault.Blackhole()))
	c, err = p.Dial(ctx, "tcp", up)
	require.NoError(t, err)
	_, err = roundTrip(c, "anyone?", 300*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing comes back through a blackhole")
	require.NoError(t, c.Close())
	p.Clear()

	require.NoError(t, p.Add(netfault.ResetPeer(0)))
	c, err = p.Dial(ctx, "tcp", up)
	require.NoError(t, err)
	_, err = roundTrip(c, "reset me", 10*time.Second)
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the connection is reset, not left hanging: %v", err)
	_ = c.Close()
	p.Clear()

	c, err = p.Dial(ctx, "tcp", up)
	require.NoError(t, err)
	got, err = roundTrip(c, "again", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "again", got)
	require.NoError(t, c.Close())
}
