package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveMetrics serves the session's registry (kwal's metrics plus Go and
// process collectors) at http://addr/metrics until Close.
func (s *session) serveMetrics(addr string) error {
	if addr == "" {
		return nil
	}
	_ = s.reg.Register(collectors.NewGoCollector())
	_ = s.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.srvDone = make(chan struct{})
	go func() {
		defer close(s.srvDone)
		_ = s.srv.Serve(ln)
	}()
	fmt.Fprintf(s.a.stderr, "metrics: http://%s/metrics\n", ln.Addr())
	return nil
}
