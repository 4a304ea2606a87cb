package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// writeRegions observes n runs of size k round robin over ids, from the
// topic's current W, and returns the new W.
func writeRegions(g *Collector, topic string, w int64, ids []uint64, n int, k int64) int64 {
	runs := make([]Run, 0, n)
	for i := range n {
		runs = append(runs, reg(ids[i%len(ids)], w, k))
		w += k
	}
	g.Observe(topic, runs)
	return w
}

func planOf(g *Collector, topic string, id uint64, end int64) []Range {
	return g.Plan(topic, map[uint64]int64{id: 0}, end).Ranges
}

func TestCheckpointRestartRestoresIndex(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st, MergeGap: -1})
	g.Start("a", 0, 0)
	g.Start("b.c/d", 0, 5)
	w := writeRegions(g, "a", 0, []uint64{1, 2, 3}, 300, 4)
	g.Observe("a", []Run{foreign(w, 3)})
	w += 3
	g.Obsolete("a", 2, 100)
	wb := writeRegions(g, "b.c/d", 5, []uint64{7}, 10, 1)
	require.NoError(t, g.Checkpoint(bg))

	before := map[uint64][]Range{}
	for id := uint64(1); id <= 3; id++ {
		before[id] = g.Plan("a", map[uint64]int64{id: 50}, w+10).Ranges
	}
	beforeB := g.Plan("b.c/d", map[uint64]int64{7: 5}, wb).Ranges
	require.Len(t, st.names(), 2)

	g2 := newCollector(t, Options{Store: st, MergeGap: -1})
	for id := uint64(1); id <= 3; id++ {
		require.Equal(t, before[id], g2.Plan("a", map[uint64]int64{id: 50}, w+10).Ranges, "region %d", id)
	}
	require.Equal(t, beforeB, g2.Plan("b.c/d", map[uint64]int64{7: 5}, wb).Ranges)
	require.Equal(t, []Range{{5, 15, false}}, beforeB)
}

// GreptimeDB #8487: the index was not loaded at restart, so the next dump
// overwrote the history of regions not written since.
func TestRestartKeepsRegionsNotWrittenSince(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st, MergeGap: -1})
	g.Start("t", 0, 0)
	w := writeRegions(g, "t", 0, []uint64{1, 2}, 20, 5)
	require.NoError(t, g.Checkpoint(bg))
	old1 := planOf(g, "t", 1, w)
	require.NoError(t, g.Close(bg))

	g2 := newCollector(t, Options{Store: st, MergeGap: -1})
	g2.Start("t", 0, w)
	// Only region 3 is written now, enough for several deltas and a new base.
	for range 40 {
		for range 300 {
			g2.Observe("t", []Run{reg(3, w, 1), foreign(w+1, 1)})
			w += 2
		}
		require.NoError(t, g2.Checkpoint(bg))
	}
	files := st.names()
	require.NotContains(t, files, fileName("t", 1, kindBase), "a new base replaced the first")
	require.NoError(t, g2.Close(bg))

	g3 := newCollector(t, Options{Store: st, MergeGap: -1})
	g3.Start("t", 0, w)
	require.Equal(t, old1, planOf(g3, "t", 1, 100), "region 1 is still indexed")
	require.NotEmpty(t, regionRuns(g3, "t", 2))
	require.NotEmpty(t, regionRuns(g3, "t", 3))
}

func TestCheckpointCostsWhatChanged(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st})
	ids := make([]uint64, 64)
	for i := range ids {
		ids[i] = uint64(i)
	}
	g.Start("t", 0, 0)
	g.Start("idle", 0, 0)
	g.Observe("idle", []Run{reg(1, 0, 100)})
	w := writeRegions(g, "t", 0, ids, 64*1000, 1)
	require.NoError(t, g.Checkpoint(bg))
	base := st.size("idx-t.")
	require.Greater(t, base, 60000)
	puts := st.puts

	// Nothing changed: nothing written.
	require.NoError(t, g.Checkpoint(bg))
	require.Equal(t, puts, st.puts)

	// A little changed: a small delta for that topic only.
	w = writeRegions(g, "t", w, ids[:3], 3, 10)
	require.NoError(t, g.Checkpoint(bg))
	require.Equal(t, puts+1, st.puts)
	delta, err := st.Get(bg, fileName("t", 2, kindDelta))
	require.NoError(t, err)
	require.Less(t, len(delta), 60, "a delta of 3 runs")

	// An Obsolete alone is a delta too.
	g.Obsolete("t", 5, w-100)
	require.NoError(t, g.Checkpoint(bg))
	require.Equal(t, puts+2, st.puts)
}

func TestCompaction(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st, MergeGap: -1})
	g.Start("t", 0, 0)
	w := int64(0)
	var sawDeltas bool
	for i := range 300 {
		w = writeRegions(g, "t", w, []uint64{uint64(i % 5), 9}, 40, 1)
		require.NoError(t, g.Checkpoint(bg))
		n := len(st.names())
		sawDeltas = sawDeltas || n > 3
		require.LessOrEqual(t, n, maxDeltas+1)
	}
	require.True(t, sawDeltas)
	ps := g.topic("t", false).persist
	require.Greater(t, ps.baseSeq, uint64(1), "compacted")
	require.LessOrEqual(t, ps.deltaBytes, max(ps.baseBytes, compactFloor))
	want := planOf(g, "t", 3, w)
	require.NoError(t, g.Close(bg))
	g2 := newCollector(t, Options{Store: st, MergeGap: -1})
	require.Equal(t, want, planOf(g2, "t", 3, w))
}

// damage changes a file of the store.
func damage(t *testing.T, st *memStore, name string, how string) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	b, ok := st.blobs[name]
	require.True(t, ok, name)
	if len(b) < headerLen {
		how = "delete"
	}
	switch how {
	case "truncate":
		st.blobs[name] = b[:len(b)/2]
	case "flip":
		b[len(b)-1] ^= 1
	case "version":
		b[4] = formatVersion + 1
	case "delete":
		delete(st.blobs, name)
	case "empty":
		st.blobs[name] = nil
	default:
		t.Fatalf("unknown damage %s", how)
	}
}

func TestLoadFailuresFallBack(t *testing.T) {
	t.Parallel()
	// Three checkpoints: base 1 (W=100), delta 2 (W=200), delta 3 (W=300).
	build := func() (*memStore, []Range) {
		st := newMemStore()
		g := newCollector(t, Options{Store: st, MergeGap: -1})
		g.Start("t", 0, 0)
		w := int64(0)
		for range 3 {
			w = writeRegions(g, "t", w, []uint64{1, 2}, 10, 10)
			require.NoError(t, g.Checkpoint(bg))
		}
		full := planOf(g, "t", 1, 300)
		require.NoError(t, g.Close(bg))
		require.Equal(t, []string{"idx-t.0000000000000001.base", "idx-t.0000000000000002.delta", "idx-t.0000000000000003.delta"}, st.names())
		return st, full
	}
	cases := []struct {
		file, how, reason string
		wantW             int64 // 0: no coverage
	}{
		{"idx-t.0000000000000001.base", "truncate", reasonTruncated, 0},
		{"idx-t.0000000000000001.base", "empty", reasonTruncated, 0},
		{"idx-t.0000000000000001.base", "flip", reasonCorrupt, 0},
		{"idx-t.0000000000000001.base", "version", reasonVersion, 0},
		{"idx-t.0000000000000001.base", "delete", reasonMissing, 0},
		{"idx-t.0000000000000002.delta", "flip", reasonCorrupt, 100},
		{"idx-t.0000000000000002.delta", "delete", reasonMissing, 100},
		{"idx-t.0000000000000003.delta", "truncate", reasonTruncated, 200},
		{"idx-t.0000000000000003.delta", "version", reasonVersion, 200},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.how, func(t *testing.T) {
			t.Parallel()
			st, full := build()
			damage(t, st, c.file, c.how)
			g := newCollector(t, Options{Store: st, MergeGap: -1})
			require.Equal(t, 1.0, metricValue(g.m.loadFailures.WithLabelValues(c.reason)))
			g.Start("t", 0, 300)
			got := planOf(g, "t", 1, 300)
			if c.wantW == 0 {
				require.Equal(t, []Range{{0, 300, true}}, got)
			} else {
				_, w := span2(g.topic("t", false))
				require.Equal(t, c.wantW, w)
				require.Equal(t, Range{c.wantW, 300, true}, got[len(got)-1])
				// The indexed part is what the full index said below wantW.
				var want []Range
				for _, r := range full {
					if r.End <= c.wantW {
						want = append(want, r)
					}
				}
				require.Equal(t, want, got[:len(got)-1])
			}
			// The next checkpoint writes a base above every file, and the
			// broken chain is gone.
			g.Observe("t", []Run{reg(1, 300, 5)})
			require.NoError(t, g.Checkpoint(bg))
			require.Equal(t, []string{"idx-t.0000000000000004.base"}, st.names())
			require.NoError(t, g.Close(bg))
			g2 := newCollector(t, Options{Store: st, MergeGap: -1})
			require.Equal(t, 0.0, metricValue(g2.m.loadFailures))
			require.Equal(t, planOf(g, "t", 1, 305), planOf(g2, "t", 1, 305))
		})
	}
}

func TestLoadFallsBackToOlderBase(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st, MergeGap: -1})
	g.Start("t", 0, 0)
	w := writeRegions(g, "t", 0, []uint64{1}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	w = writeRegions(g, "t", w, []uint64{1}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	require.NoError(t, g.Close(bg))
	// A crash after a new base was written and before the old files were
	// deleted, with the new base then damaged.
	data, err := st.Get(bg, fileName("t", 1, kindBase))
	require.NoError(t, err)
	oldFiles := map[string][]byte{fileName("t", 1, kindBase): data}
	data, err = st.Get(bg, fileName("t", 2, kindDelta))
	require.NoError(t, err)
	oldFiles[fileName("t", 2, kindDelta)] = data
	g = newCollector(t, Options{Store: st, MergeGap: -1})
	g.topic("t", false).mu.Lock()
	g.topic("t", false).needBase = true
	g.topic("t", false).mu.Unlock()
	g.Observe("t", []Run{reg(1, w, 10)})
	require.NoError(t, g.Checkpoint(bg))
	require.NoError(t, g.Close(bg))
	for n, b := range oldFiles {
		require.NoError(t, st.Put(bg, n, b))
	}
	damage(t, st, fileName("t", 3, kindBase), "flip")

	g2 := newCollector(t, Options{Store: st, MergeGap: -1})
	g2.Start("t", 0, w+10)
	require.Equal(t, 1.0, metricValue(g2.m.loadFailures.WithLabelValues(reasonCorrupt)))
	_, w2 := span2(g2.topic("t", false))
	require.Equal(t, w, w2)
	require.Equal(t, []span{{0, 200}}, regionRuns(g2, "t", 1))
}

func TestPutFailureIsRetried(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st, MergeGap: -1})
	g.Start("t", 0, 0)
	w := writeRegions(g, "t", 0, []uint64{1, 2}, 10, 3)
	require.NoError(t, g.Checkpoint(bg))
	w = writeRegions(g, "t", w, []uint64{1, 3}, 10, 3)
	fail := true
	st.failPut = func(string) error {
		if fail {
			return errInjected
		}
		return nil
	}
	require.ErrorIs(t, g.Checkpoint(bg), errInjected)
	require.Equal(t, 1.0, metricValue(g.m.checkpointErrors))
	fail = false
	w = writeRegions(g, "t", w, []uint64{4}, 1, 3)
	require.NoError(t, g.Checkpoint(bg))
	require.NoError(t, g.Close(bg))
	g2 := newCollector(t, Options{Store: st, MergeGap: -1})
	for id := uint64(1); id <= 4; id++ {
		require.Equal(t, planOf(g, "t", id, w), planOf(g2, "t", id, w), "region %d", id)
	}
}

func TestDirStoreCrashKeepsPreviousCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ds, err := newDirStore(dir)
	require.NoError(t, err)
	g := newCollector(t, Options{Store: ds, MergeGap: -1})
	g.Start("t", 0, 0)
	w := writeRegions(g, "t", 0, []uint64{1, 2}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	want := planOf(g, "t", 1, w)

	// The next Put "crashes" after its temporary file is written and synced,
	// before the rename; a torn temporary file of another write lies beside.
	var tmps []string
	ds.beforeRenameForTesting = func(tmp string) error {
		tmps = append(tmps, tmp)
		return errInjected
	}
	writeRegions(g, "t", w, []uint64{1}, 10, 10)
	require.ErrorIs(t, g.Checkpoint(bg), errInjected)
	require.Len(t, tmps, 1)
	good, err := os.ReadFile(tmps[0])
	require.NoError(t, err)
	torn := filepath.Join(dir, tempPrefix+fileName("t", 2, kindDelta)+"-torn")
	require.NoError(t, os.WriteFile(torn, good[:len(good)/2], 0o644))
	// Stop without Close (a crash).

	// Reading the directory as it is already ignores the temporary files.
	ds2 := &dirStore{dir: dir, fs: osFS{}}
	g2 := newCollector(t, Options{Store: ds2, MergeGap: -1})
	g2.Start("t", 0, w+100)
	require.Equal(t, append(want, Range{w, w + 100, true}), planOf(g2, "t", 1, w+100))
	require.Equal(t, 0.0, metricValue(g2.m.loadFailures))

	// NewDirStore removes them.
	ds3, err := NewDirStore(dir)
	require.NoError(t, err)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		require.False(t, strings.HasPrefix(e.Name(), tempPrefix), e.Name())
	}
	g3 := newCollector(t, Options{Store: ds3, MergeGap: -1})
	g3.Start("t", 0, w+100)
	require.Equal(t, append(want, Range{w, w + 100, true}), planOf(g3, "t", 1, w+100))
}

func TestTornFinalFileKeepsPreviousState(t *testing.T) {
	t.Parallel()
	// A store without atomic rename could leave the newest delta torn: the
	// loader stops before it.
	dir := t.TempDir()
	ds, err := NewDirStore(dir)
	require.NoError(t, err)
	g := newCollector(t, Options{Store: ds, MergeGap: -1})
	g.Start("t", 0, 0)
	w1 := writeRegions(g, "t", 0, []uint64{1, 2}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	w2 := writeRegions(g, "t", w1, []uint64{1, 2}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	name := filepath.Join(dir, fileName("t", 2, kindDelta))
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(name, b[:len(b)-2], 0o644))
	g2 := newCollector(t, Options{Store: ds, MergeGap: -1})
	g2.Start("t", 0, w2)
	_, w := span2(g2.topic("t", false))
	require.Equal(t, w1, w)
	require.Equal(t, 1.0, metricValue(g2.m.loadFailures.WithLabelValues(reasonTruncated)))
}

func TestDropDeletesMemoryAndFiles(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st})
	g.Start("t", 0, 0)
	g.Start("u", 0, 0)
	writeRegions(g, "t", 0, []uint64{1}, 10, 10)
	writeRegions(g, "u", 0, []uint64{1}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	require.NoError(t, g.Drop(bg, "t"))
	require.Equal(t, []string{fileName("u", 1, kindBase)}, st.names())
	require.Nil(t, g.topic("t", false))
	require.Equal(t, []Range{{0, 100, true}}, planOf(g, "t", 1, 100))
	// The topic can come back.
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 5)})
	require.NoError(t, g.Checkpoint(bg))
	require.Contains(t, st.names(), fileName("t", 1, kindBase))
	// Dropping a topic only on the store.
	require.NoError(t, g.Close(bg))
	g2 := newCollector(t, Options{Store: st})
	require.NoError(t, g2.Drop(bg, "u"))
	require.Equal(t, []string{fileName("t", 1, kindBase)}, st.names())
}

func TestReadOnlyNeverWrites(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st})
	g.Start("t", 0, 0)
	w := writeRegions(g, "t", 0, []uint64{1, 2}, 10, 10)
	require.NoError(t, g.Close(bg))
	puts := st.puts

	ro := newCollector(t, Options{Store: st, ReadOnly: true, CheckpointInterval: time.Millisecond})
	require.Equal(t, planOf(g, "t", 2, w), planOf(ro, "t", 2, w))
	ro.Observe("t", []Run{reg(1, w, 10)})
	require.NoError(t, ro.Checkpoint(bg))
	require.NoError(t, ro.Drop(bg, "t"))
	require.NoError(t, ro.Close(bg))
	require.Equal(t, puts, st.puts)
	require.Len(t, st.names(), 1)
}

func TestBackgroundCheckpoint(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	wrote := make(chan string, 100)
	st.failPut = func(name string) error {
		select {
		case wrote <- name:
		default:
		}
		return nil
	}
	g, err := New(Options{Store: st, CheckpointInterval: time.Millisecond})
	require.NoError(t, err)
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 10)})
	require.Equal(t, fileName("t", 1, kindBase), <-wrote)
	require.NoError(t, g.Close(bg))
}

// listFailStore fails List while failList is set.
type listFailStore struct {
	*memStore
	failList bool
}

func (s *listFailStore) List(ctx context.Context, prefix string) ([]string, error) {
	if s.failList {
		return nil, errInjected
	}
	return s.memStore.List(ctx, prefix)
}

func TestListFailureAtLoad(t *testing.T) {
	t.Parallel()
	ms := newMemStore()
	g := newCollector(t, Options{Store: ms})
	g.Start("t", 0, 0)
	writeRegions(g, "t", 0, []uint64{1}, 3, 10)
	require.NoError(t, g.Checkpoint(bg))
	writeRegions(g, "t", 30, []uint64{1}, 3, 10)
	require.NoError(t, g.Close(bg))
	require.Len(t, ms.names(), 2)

	st := &listFailStore{memStore: ms, failList: true}
	g2 := newCollector(t, Options{Store: st})
	require.Equal(t, 1.0, metricValue(g2.m.loadFailures.WithLabelValues(reasonIO)))
	g2.Start("t", 0, 100)
	g2.Observe("t", []Run{reg(2, 100, 5)})
	require.Error(t, g2.Checkpoint(bg), "a topic lists its files before writing")
	st.failList = false
	require.NoError(t, g2.Checkpoint(bg))
	// A base above the files it found, which are deleted.
	require.Equal(t, []string{fileName("t", 3, kindBase)}, ms.names())
}

func TestFileNames(t *testing.T) {
	t.Parallel()
	for _, topic := range []string{"", "wal_1", "a.b", "%41", "x/y\x00", "é", "idx-t.0001.base"} {
		for _, k := range []fileKind{kindBase, kindDelta} {
			n := fileName(topic, 42, k)
			require.NoError(t, checkName(n))
			tp, seq, kind, ok := parseFileName(n)
			require.True(t, ok, n)
			require.Equal(t, topic, tp)
			require.Equal(t, uint64(42), seq)
			require.Equal(t, k, kind)
			require.True(t, strings.HasPrefix(n, topicPrefix(topic)))
		}
	}
	for _, bad := range []string{"t.0000000000000001.base", "idx-t.1.base", "idx-t.000000000000000A.base",
		"idx-t.0000000000000001.full", "idx-%41.0000000000000001.base", "idx-%4.0000000000000001.base",
		"idx-%zz.0000000000000001.base", "idx-%2e.0000000000000001.base", "idx-a.b.0000000000000001.base"} {
		_, _, _, ok := parseFileName(bad)
		require.False(t, ok, bad)
	}
	// Topic prefixes do not collide.
	require.False(t, strings.HasPrefix(fileName("ab", 1, kindBase), topicPrefix("a")))
}

func TestManyTopicsConcurrently(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st})
	done := make(chan error)
	for i := range 8 {
		go func() {
			topic := fmt.Sprintf("t%d", i%4)
			g.Start(topic, 0, 0)
			for j := range 200 {
				g.Observe(topic, []Run{reg(uint64(i), int64(j*8+i), 1)})
				g.Plan(topic, map[uint64]int64{uint64(i): 0}, int64(j*8))
				if j%50 == 0 {
					if err := g.Checkpoint(bg); err != nil {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	var errs []error
	for range 8 {
		errs = append(errs, <-done)
	}
	require.NoError(t, errors.Join(errs...))
}

func TestLoadStopsAtADeltaOfAnotherChain(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	g := newCollector(t, Options{Store: st})
	g.Start("t", 0, 0)
	writeRegions(g, "t", 0, []uint64{1}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	writeRegions(g, "t", 100, []uint64{1}, 10, 10)
	require.NoError(t, g.Checkpoint(bg))
	require.NoError(t, g.Close(bg))
	// Replace the base by a valid base of another history (W=50): delta 2
	// starts at 100 and does not continue it.
	other := newMemStore()
	g2 := newCollector(t, Options{Store: other})
	g2.Start("t", 0, 0)
	writeRegions(g2, "t", 0, []uint64{2}, 5, 10)
	require.NoError(t, g2.Checkpoint(bg))
	data, err := other.Get(bg, fileName("t", 1, kindBase))
	require.NoError(t, err)
	require.NoError(t, st.Put(bg, fileName("t", 1, kindBase), data))

	g3 := newCollector(t, Options{Store: st})
	require.Equal(t, 1.0, metricValue(g3.m.loadFailures.WithLabelValues(reasonCorrupt)))
	_, w := span2(g3.topic("t", false))
	require.Equal(t, int64(50), w)
	require.Nil(t, regionRuns(g3, "t", 1))
	require.Equal(t, []span{{0, 50}}, regionRuns(g3, "t", 2))
}

// blockingStore blocks its first Put until the Put's context is done.
type blockingStore struct {
	*memStore
	entered chan struct{}
	once    sync.Once
}

func (s *blockingStore) Put(ctx context.Context, name string, data []byte) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.memStore.Put(ctx, name, data)
}

func TestCloseCancelsABackgroundCheckpoint(t *testing.T) {
	t.Parallel()
	st := &blockingStore{memStore: newMemStore(), entered: make(chan struct{})}
	g, err := New(Options{Store: st, CheckpointInterval: time.Millisecond})
	require.NoError(t, err)
	g.Start("t", 0, 0)
	g.Observe("t", []Run{reg(1, 0, 10)})
	<-st.entered
	require.NoError(t, g.Close(bg), "Close cancels the stuck write and writes the final checkpoint")
	require.Equal(t, []string{fileName("t", 1, kindBase)}, st.names())
}
