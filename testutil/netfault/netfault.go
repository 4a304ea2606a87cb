// Package netfault puts an in-process TCP proxy in front of every broker of
// a Kafka cluster and injects network faults on it: added latency, a
// bandwidth limit, connections reset mid-request, a blackhole (the
// connection stays open and nothing gets through).
//
// The proxies are Toxiproxy's (github.com/Shopify/toxiproxy/v2, used as a
// library: a well-kept proxy whose toxics are exactly these faults), one per
// broker. A client reaches the brokers through them with Dial as its dialer
// (kafka.Config.Dialer): Kafka's metadata names the brokers' own addresses,
// so a proxy only in front of the seed broker would be bypassed after the
// first metadata request; Dial maps every broker address to its proxy and
// refuses any address it does not know, so nothing bypasses them.
package netfault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxies are one proxy per broker.
type Proxies struct {
	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy // by upstream broker address
	toxics  []string
}

// New starts a proxy on 127.0.0.1 (a free port) in front of every broker.
// brokers must be the addresses the cluster advertises (host:port as its
// metadata gives them).
//
// Toxiproxy's toxics log through zerolog's global logger, at trace level
// per chunk: New turns zerolog's global level to disabled.
func New(brokers []string) (*Proxies, error) {
	zerolog.SetGlobalLevel(zerolog.Disabled)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := &Proxies{proxies: map[string]*toxiproxy.Proxy{}}
	for i, b := range brokers {
		px := toxiproxy.NewProxy(srv, fmt.Sprintf("broker-%d", i), "127.0.0.1:0", b)
		if err := px.Start(); err != nil {
			p.Close()
			return nil, fmt.Errorf("netfault: proxy for %s: %w", b, err)
		}
		p.proxies[b] = px
	}
	return p, nil
}

// Dial opens a connection to a broker through its proxy; an address with
// no proxy is refused.
func (p *Proxies) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	p.mu.Lock()
	px, ok := p.proxies[address]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("netfault: no proxy for %s", address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, px.Listen)
}

// Toxic is one fault: a Toxiproxy toxic type ("latency", "bandwidth",
// "reset_peer", "timeout", ...) with its attributes, on the stream
// "downstream" (broker to client, the default) or "upstream".
type Toxic struct {
	Type       string
	Stream     string
	Attributes map[string]any
}

// Latency delays data by ms milliseconds (± jitter) in both directions.
func Latency(ms, jitter int) []Toxic {
	a := map[string]any{"latency": ms, "jitter": jitter}
	return []Toxic{{Type: "latency", Stream: "upstream", Attributes: a}, {Type: "latency", Attributes: a}}
}

// Bandwidth limits both directions to kbps KB/s per connection.
func Bandwidth(kbps int) []Toxic {
	a := map[string]any{"rate": kbps}
	return []Toxic{{Type: "bandwidth", Stream: "upstream", Attributes: a}, {Type: "bandwidth", Attributes: a}}
}

// ResetPeer resets every connection (TCP RST) afterMs milliseconds after
// it carries data, so requests in flight are cut off.
func ResetPeer(afterMs int) []Toxic {
	return []Toxic{{Type: "reset_peer", Stream: "upstream", Attributes: map[string]any{"timeout": afterMs}}}
}

// Blackhole lets nothing through in either direction and never closes the
// connection: requests get no answer.
func Blackhole() []Toxic {
	a := map[string]any{"timeout": 0}
	return []Toxic{{Type: "timeout", Stream: "upstream", Attributes: a}, {Type: "timeout", Attributes: a}}
}

// Add adds toxics to every proxy, on every connection (new and open).
func (p *Proxies) Add(toxics []Toxic) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, t := range toxics {
		name := fmt.Sprintf("%s-%s-%d-%d", t.Type, t.Stream, len(p.toxics), i)
		stream := t.Stream
		if stream == "" {
			stream = "downstream"
		}
		body, err := json.Marshal(map[string]any{"name": name, "type": t.Type, "stream": stream, "toxicity": 1.0, "attributes": t.Attributes})
		if err != nil {
			return fmt.Errorf("netfault: %w", err)
		}
		for b, px := range p.proxies {
			if _, err := px.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
				return fmt.Errorf("netfault: toxic %s on the proxy for %s: %w", name, b, err)
			}
		}
		p.toxics = append(p.toxics, name)
	}
	return nil
}

// Clear removes every toxic: the proxies pass data through again.
func (p *Proxies) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.proxies {
		px.Toxics.ResetToxics(context.Background())
	}
	p.toxics = nil
}

// Close stops the proxies and closes their connections.
func (p *Proxies) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.proxies {
		px.Stop()
	}
}
