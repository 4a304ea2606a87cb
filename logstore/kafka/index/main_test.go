package index

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memStore is an in-memory Store for tests, with failure injection.
type memStore struct {
	mu    sync.Mutex
	blobs map[string][]byte
	// failPut, when set, is called by Put; an error from it fails the Put
	// without storing anything.
	failPut func(name string) error
	puts    int
}

func newMemStore() *memStore { return &memStore{blobs: make(map[string][]byte)} }

func (s *memStore) Get(_ context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[name]
	if !ok {
		return nil, ErrNotExist
	}
	return slices.Clone(b), nil
}

func (s *memStore) Put(_ context.Context, name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPut != nil {
		if err := s.failPut(name); err != nil {
			return err
		}
	}
	s.puts++
	s.blobs[name] = slices.Clone(data)
	return nil
}

func (s *memStore) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.blobs {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *memStore) Delete(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blobs, name)
	return nil
}

func (s *memStore) names() []string {
	n, _ := s.List(context.Background(), "")
	return n
}

func (s *memStore) size(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, b := range s.blobs {
		if strings.HasPrefix(k, prefix) {
			n += len(b)
		}
	}
	return n
}

var errInjected = errors.New("injected failure")

// newCollector returns a Collector over st closed at the end of the test.
func newCollector(tb testing.TB, opts Options) *Collector {
	tb.Helper()
	g, err := New(opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// regionRuns returns the topic's runs of a region in [C, W).
func regionRuns(g *Collector, topic string, id uint64) []span {
	t := g.topic(topic, false)
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	r := t.regions[id]
	if r == nil {
		return nil
	}
	var out []span
	r.runs.each(0, t.w, func(s, e int64) bool {
		out = append(out, span{s, e})
		return true
	})
	return out
}

func span2(t *topic) (c, w int64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.c, t.w
}
