package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Net is the network between a benchmark's client and the brokers: its
// Dial opens connections that count the produce requests (and their bytes)
// written on them, and, with a latency or a bandwidth, go through an
// in-process TCP proxy that delays every byte by the latency in each
// direction (bytes in flight are buffered) and, with a bandwidth, sends
// each direction's bytes of all connections through one link of that many
// bytes a second, as a network interface would. Close stops the proxies.
type Net struct {
	latency      time.Duration
	up, down     *link // nil: no bandwidth limit
	produces     atomic.Int64
	produceBytes atomic.Int64

	mu      sync.Mutex
	proxies map[string]*proxy // by upstream address
	closed  bool
	dialer  net.Dialer
}

// NewNet returns a network that adds latency each way (0: direct).
func NewNet(latency time.Duration) *Net { return NewNetWith(latency, 0) }

// NewNetWith returns a network that adds latency each way and carries at
// most bytesPerSec each way (0: unlimited).
func NewNetWith(latency time.Duration, bytesPerSec float64) *Net {
	n := &Net{latency: latency, proxies: map[string]*proxy{}, dialer: net.Dialer{Timeout: 10 * time.Second}}
	if bytesPerSec > 0 {
		n.up, n.down = &link{rate: bytesPerSec}, &link{rate: bytesPerSec}
	}
	return n
}

// ProduceRequests is the number of produce requests written so far.
func (n *Net) ProduceRequests() int64 { return n.produces.Load() }

// ProduceBytes is the bytes of the produce requests written so far, their
// framing included: about what the broker stores of them.
func (n *Net) ProduceBytes() int64 { return n.produceBytes.Load() }

// link is one direction of a bandwidth-limited network: bytes leave one
// after another at rate bytes a second.
type link struct {
	rate float64
	mu   sync.Mutex
	free time.Time // when the bytes sent so far have left
}

// send reserves the link for n bytes read now and returns when they have
// left it.
func (l *link) send(n int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := time.Now()
	if l.free.After(start) {
		start = l.free
	}
	l.free = start.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	return l.free
}

// Dial opens a connection to address, through the proxy when there is a
// latency.
func (n *Net) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	target := address
	if n.latency > 0 || n.up != nil {
		p, err := n.proxyFor(address)
		if err != nil {
			return nil, err
		}
		target = p.ln.Addr().String()
	}
	c, err := n.dialer.DialContext(ctx, network, target)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, produces: &n.produces, produceBytes: &n.produceBytes}, nil
}

func (n *Net) proxyFor(address string) (*proxy, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, net.ErrClosed
	}
	if p := n.proxies[address]; p != nil {
		return p, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: address, delay: n.latency, up: n.up, down: n.down, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	// The proxy's goroutines carry their own label, not the dialing
	// client's: the matrix counts them apart from the clients' CPU.
	WithLabel(context.Background(), LabelNet, func(context.Context) { go p.serve() })
	n.proxies[address] = p
	return p, nil
}

// Close stops every proxy and the connections through them.
func (n *Net) Close() {
	n.mu.Lock()
	n.closed = true
	ps := n.proxies
	n.proxies = nil
	n.mu.Unlock()
	for _, p := range ps {
		p.close()
	}
}

// countingConn counts the produce requests (API key 0) written on a Kafka
// connection by following the request framing: a 4-byte length, then the
// request, whose first two bytes are its API key.
type countingConn struct {
	net.Conn
	produces     *atomic.Int64
	produceBytes *atomic.Int64
	left         int64   // bytes of the current request still to come
	hdr          [6]byte // a partial frame header
	nhdr         int
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.observe(b)
	return c.Conn.Write(b)
}

func (c *countingConn) observe(b []byte) {
	for len(b) > 0 {
		if c.left > 0 {
			k := min(int64(len(b)), c.left)
			c.left -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.nhdr:], b)
		c.nhdr += k
		b = b[k:]
		if c.nhdr < len(c.hdr) {
			return
		}
		size := int64(binary.BigEndian.Uint32(c.hdr[:4]))
		if binary.BigEndian.Uint16(c.hdr[4:6]) == 0 {
			c.produces.Add(1)
			c.produceBytes.Add(size + 4)
		}
		c.left = size - 2 // the key's two bytes are read
		c.nhdr = 0
	}
}

// proxy forwards connections to upstream, delaying each direction.
type proxy struct {
	ln       net.Listener
	upstream string
	delay    time.Duration
	up, down *link // client to broker, broker to client; nil: unlimited
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c, p.up)
		go p.pipe(c, up, p.down)
	}
}

type chunk struct {
	at time.Time
	b  []byte
}

// pipe copies src to dst, each chunk delivered delay after it was read,
// or, through a link, delay after it has left the link.
func (p *proxy) pipe(dst, src net.Conn, l *link) {
	defer p.wg.Done()
	ch := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() { // the writer: owned by this pipe, ends when ch closes or a write fails
		defer close(done)
		for c := range ch {
			if wait := time.Until(c.at); wait > 0 {
				time.Sleep(wait) // the simulated network latency itself
			}
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close() // ends the reader
				for range ch {  // drain so the reader never blocks
				}
				return
			}
		}
	}()
	for {
		buf := make([]byte, 64<<10)
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now()
			if l != nil {
				at = l.send(n)
			}
			ch <- chunk{at: at.Add(p.delay), b: buf[:n]}
		}
		if err != nil {
			close(ch)
			<-done
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			_ = dst.Close()
			return
		}
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
