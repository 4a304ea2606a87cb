package main

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

// TestDemoEmbedded protects the demo's job and its story: it says up front
// what it writes, where and how much (full namespace names), reports its
// phases, checks every entry, explains the replay speedup, and ends with
// commands that work when pasted.
func TestDemoEmbedded(t *testing.T) {
	dir := t.TempDir()
	args := []string{"demo", "--data-dir", dir, "--size", "60kB", "--regions", "6", "--topics", "2", "--writers", "3",
		"--entry-size", "200", "--entries-per-call", "4", "--replay-runs", "1", "--metrics-addr", "127.0.0.1:0"}
	r := kwal(t, nil, args...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^kwal demo: 3 writers append 4-entry calls of 200-B entries to 6 regions until 60.0 kB are written or 10s passed, whichever comes first \(--size, --duration\)
namespaces (kwal-demo-\d{8}-\d{6}-[0-9a-f]{4}-0), (kwal-demo-\d{8}-\d{6}-[0-9a-f]{4}-1)
broker: embedded kfake broker, data in `+regexp.QuoteMeta(filepath.Join(dir, "kafka"))+`
index: `+regexp.QuoteMeta(filepath.Join(dir, "index"))+`
`, r.stdout)
	for _, want := range []string{
		"entries appended             300 ", // 60 kB of 200-B entries
		"append throughput", "append latency", "p50", "p99",
		"replay, every region         300 entries",
		"replay, region 1, indexed", "replay, region 1, full scan", "replay speedup",
		"index on disk",
		"check                        OK",
		"Next, try:",
	} {
		require.Contains(t, r.stdout, want)
	}
	// A log this small may leave the index nothing to skip: then the
	// summary says so instead of a speedup, and explains none.
	require.Regexp(t, `replay speedup\s+(\d+\.\dx \(full-scan time ÷ indexed time, one run each\)\nbytes fetched\s+\d+\.\dx fewer|not measured: )`, r.stdout)
	measured := !strings.Contains(r.stdout, "not measured:")
	require.Equal(t, measured, strings.Contains(r.stdout, "What the replay speedup measures: region 1 shares namespace kwal-demo-"))
	require.Equal(t, measured, strings.Contains(r.stdout, "On this embedded broker a fetch is an in-process copy"))
	for _, want := range []string{
		"metrics: http://127.0.0.1:",
		"demo: restarting the store",
		"demo: replaying every region with the index and checking it: 300 entries in 2 namespace(s)",
		"demo: timing region 1's replay",
	} {
		require.Contains(t, r.stderr, want)
	}

	// The suggested commands work as printed.
	next := regexp.MustCompile(`(?m)^  kwal (.*?)   # `).FindAllStringSubmatch(r.stdout, -1)
	require.Len(t, next, 3)
	for _, m := range next {
		c := kwal(t, nil, strings.Fields(m[1])...)
		require.Equal(t, exitOK, c.code, "kwal %s: %s", m[1], c.stderr)
	}
	require.Regexp(t, `entries    [1-9]\d* \(IDs `, kwal(t, nil, strings.Fields(next[0][1])...).stdout)

	// The data persisted: a second run on the same data dir sees the first
	// run's namespaces, and deletes them.
	l := kwal(t, nil, "namespaces", "list", "--data-dir", dir)
	require.Equal(t, 0, l.code, l.stderr)
	first := listed(l.stdout)
	require.Len(t, first, 2)
	require.True(t, strings.HasPrefix(first[0], demoPrefix))

	r = kwal(t, nil, append(args, "--entries", "300", "--quiet")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "deleted 2 namespace(s) of earlier demo runs")
	require.Contains(t, r.stdout, "until 300 entries (60.0 kB) are written")
	require.NotContains(t, r.stderr, "demo: replaying", "--quiet")
	l = kwal(t, nil, "namespaces", "list", "--data-dir", dir)
	require.Equal(t, 0, l.code, l.stderr)
	second := listed(l.stdout)
	require.Len(t, second, 2)
	require.NotContains(t, second, first[0])

	// The demo's namespaces can be inspected afterwards.
	s := kwal(t, nil, "index", "show", "--data-dir", dir, "-n", second[0])
	require.Equal(t, 0, s.code, s.stderr)
	require.Regexp(t, `regions\s+3, [1-9]\d* records indexed`, s.stdout)
	v := kwal(t, nil, "index", "verify", "--data-dir", dir, "-n", second[1])
	require.Equal(t, 0, v.code, v.stderr)
	require.Contains(t, v.stdout, "OK: for every region")
}

// TestDemoChecksTheDiskFirst protects the embedded broker's disk: a run
// that cannot fit is refused before anything is written or deleted.
func TestDemoChecksTheDiskFirst(t *testing.T) {
	dir := t.TempDir()
	free, ok := diskFree(dir)
	if !ok {
		t.Skip("this OS does not tell the free disk space")
	}
	err := checkDisk(filepath.Join(dir, "not", "yet", "made"), int64(free))
	require.ErrorContains(t, err, "which needs about")
	require.ErrorContains(t, err, "is free: lower --size (or --entries)")
	require.NoError(t, checkDisk(dir, 1<<20))
	require.NoError(t, checkDisk(dir, 0)) // --duration alone: nothing to check
}

// acked builds a region's expectation of calls of the given sizes, with
// IDs 10, 20, ... for consecutive entries, and returns the entries a
// correct replay yields.
func acked(x *expectation, ns string, r logstore.RegionID, calls ...int) []logstore.Entry {
	rl := x.addRegion(ns, r)
	var out []logstore.Entry
	id := logstore.EntryID(0)
	for _, n := range calls {
		for range n {
			id += 10
			out = append(out, logstore.Entry{Namespace: ns, Region: r, ID: id, Data: x.data(r, rl.entries)})
			rl.entries++
		}
		rl.calls = append(rl.calls, ackedCall{n: n, lastID: id})
	}
	return out
}

// replayCheck feeds entries to a check of region r and returns the
// problems found.
func replayCheck(x *expectation, r logstore.RegionID, entries []logstore.Entry) *problemList {
	p := &problemList{max: 100, regions: map[logstore.RegionID]bool{}}
	c := x.check(r, p)
	for _, e := range entries {
		c.add(e)
	}
	c.finish()
	return p
}

func whats(p *problemList) string {
	var b strings.Builder
	p.print(&b)
	return b.String()
}

func TestRegionCheck(t *testing.T) {
	x := newExpectation(7, 64)
	good := acked(x, "ns", 3, 2, 3, 1)
	clone := func() []logstore.Entry {
		out := make([]logstore.Entry, len(good))
		for i, e := range good {
			e.Data = append([]byte(nil), e.Data...)
			out[i] = e
		}
		return out
	}

	t.Run("intact", func(t *testing.T) {
		p := replayCheck(x, 3, clone())
		require.Zero(t, p.total, whats(p))
	})
	t.Run("corrupted byte", func(t *testing.T) {
		es := clone()
		es[2].Data[40] ^= 0xff
		p := replayCheck(x, 3, es)
		require.Equal(t, 1, p.total)
		out := whats(p)
		require.Contains(t, out, "MISMATCH namespace ns region 3 ID 30: entry #2 of the region: data differs: first difference at byte 40")
	})
	t.Run("truncated", func(t *testing.T) {
		es := clone()
		es[1].Data = es[1].Data[:10]
		p := replayCheck(x, 3, es)
		require.Equal(t, 1, p.total)
		require.Contains(t, whats(p), "10 bytes, 64 expected")
	})
	t.Run("missing in the middle", func(t *testing.T) {
		es := clone()
		es = append(es[:2], es[3:]...)
		p := replayCheck(x, 3, es)
		require.Equal(t, 1, p.total, whats(p))
		require.Contains(t, whats(p), "1 acknowledged entries missing before it (entries #2..#2 of the region)")
	})
	t.Run("missing at the end", func(t *testing.T) {
		p := replayCheck(x, 3, clone()[:4])
		require.Equal(t, 1, p.total, whats(p))
		require.Contains(t, whats(p), "2 acknowledged entries missing at the end (entries #4..#5 of the region, the last acknowledged with ID 60)")
	})
	t.Run("duplicate", func(t *testing.T) {
		es := clone()
		dup := es[1]
		dup.ID = 25
		es = append(es[:2], append([]logstore.Entry{dup}, es[2:]...)...)
		p := replayCheck(x, 3, es)
		require.Equal(t, 1, p.total, whats(p))
		require.Contains(t, whats(p), "entry #1 of the region came back again")
	})
	t.Run("wrong ID", func(t *testing.T) {
		es := clone()
		es[4].ID = 55 // last of the second call, acknowledged as 50
		p := replayCheck(x, 3, es)
		require.Equal(t, 1, p.total, whats(p))
		require.Contains(t, whats(p), "ends an append call acknowledged with ID 50, but came back with ID 55")
	})
	t.Run("out of order", func(t *testing.T) {
		es := clone()
		es[1].ID, es[2].ID = es[2].ID, es[1].ID
		p := replayCheck(x, 3, es)
		require.NotZero(t, p.total)
		require.Contains(t, whats(p), "out of order")
	})
	t.Run("extra", func(t *testing.T) {
		es := append(clone(), logstore.Entry{Region: 3, ID: 70, Data: []byte("surprise")})
		p := replayCheck(x, 3, es)
		require.Equal(t, 1, p.total, whats(p))
		require.Contains(t, whats(p), `unexpected entry after the last acknowledged one (8 bytes, "surprise")`)
	})
}

// TestDemoOfTheSmallestSizes: a demo of one entry says "1 entry", "1
// call", "1 region", and gives no replay speedup (nor bytes ratio), saying
// in one line why; two regions of one entry each give no speedup either.
func TestDemoOfTheSmallestSizes(t *testing.T) {
	dir := t.TempDir()
	r := kwal(t, nil, "demo", "--data-dir", dir, "--quiet", "--entries", "1", "--regions", "1", "--topics", "1", "--writers", "1",
		"--entries-per-call", "1", "--entry-size", fmt.Sprint(minDemoEntry))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `^kwal demo: 1 writer appends 1-entry calls of 32-B entries to 1 region until 1 entry \(32 B\) is written\n`, r.stdout)
	for _, want := range []string{
		"entries appended             1 (32 B) in ",
		"(per call of 1 entry, 1 call)\n",
		"replay, every region         1 entry (32 B) in ",
		"replay speedup               not measured: region 1 has its namespace to itself, so both replays read the same records\n",
		"index on disk                ",
		"check                        OK",
	} {
		require.Contains(t, r.stdout, want)
	}
	require.Regexp(t, `replay, region 1, indexed    \S+: 1 entry, 1 fetch, \d+ B fetched\n`, r.stdout)
	require.NotRegexp(t, `\b1 (writers|regions|entries|calls|fetches|files|ranges|gaps)\b`, r.stdout)
	require.NotContains(t, r.stdout, "bytes fetched")
	require.NotContains(t, r.stdout, "What the replay speedup measures")

	r = kwal(t, nil, "demo", "--data-dir", dir, "--quiet", "--entries", "2", "--regions", "2", "--topics", "1", "--writers", "2",
		"--entries-per-call", "1", "--entry-size", fmt.Sprint(minDemoEntry))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "until 2 entries (64 B) are written\n")
	require.Regexp(t, `\nreplay speedup +not measured: (region 1 got no entry|the log is too small|the index skipped only \d+ B of the full scan's \d+ B, too little to time\n)`, r.stdout)
	require.NotContains(t, r.stdout, "bytes fetched")
	require.NotContains(t, r.stdout, "What the replay speedup measures")
}

// TestDemoSpeedupNeedsSomethingSkipped: the summary gives the replay
// speedup and the bytes ratio only when region 1 shares its namespace,
// got entries, and the index saved its replay at least minSkipped bytes
// fetched, in times that are not zero; otherwise one line says why, and
// neither figure nor their explanation is printed.
func TestDemoSpeedupNeedsSomethingSkipped(t *testing.T) {
	measured := demoResult{
		entries: 300, bytes: 60000, elapsed: time.Second, latencies: []time.Duration{time.Millisecond},
		oneRegion: 1, oneNamespace: "ns", sharing: 3,
		indexed: 2 * time.Millisecond, scanned: 6 * time.Millisecond,
		indexedStats: kafka.ReadStats{Entries: 100, Fetches: 1, FetchedBytes: 1e6},
		scannedStats: kafka.ReadStats{Entries: 100, Fetches: 3, FetchedBytes: 3e6},
	}
	cases := map[string]struct {
		change func(*demoResult)
		why    string // "" when measured
	}{
		"measured":          {func(*demoResult) {}, ""},
		"alone":             {func(r *demoResult) { r.sharing = 1 }, "region 1 has its namespace to itself, so both replays read the same records"},
		"no entry":          {func(r *demoResult) { r.indexedStats = kafka.ReadStats{} }, "region 1 got no entry to replay (too few were appended)"},
		"nothing skipped":   {func(r *demoResult) { r.scannedStats.FetchedBytes = 1e6 }, "the log is too small for the index to skip any of it (the full scan fetched 1.0 MB, the indexed replay 1.0 MB)"},
		"scan fetched less": {func(r *demoResult) { r.scannedStats.FetchedBytes = 100 }, "the log is too small for the index to skip any of it (the full scan fetched 100 B, the indexed replay 1.0 MB)"},
		"little skipped": {func(r *demoResult) { r.indexedStats.FetchedBytes, r.scannedStats.FetchedBytes = 129, 258 },
			"the index skipped only 129 B of the full scan's 258 B, too little to time"},
		"just too little": {func(r *demoResult) { r.scannedStats.FetchedBytes = 1e6 + minSkipped - 1 },
			"the index skipped only 1.0 MB of the full scan's 2.0 MB, too little to time"},
		"just enough": {func(r *demoResult) { r.scannedStats.FetchedBytes = 1e6 + minSkipped }, ""},
		"no time":     {func(r *demoResult) { r.indexed = 0 }, "a replay took no measurable time"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res := measured
			c.change(&res)
			var out strings.Builder
			a := newApp(&out, io.Discard, nil)
			a.printDemo(demoOpts{workloadFlags: workloadFlags{perCall: 10, replayRuns: 1}}, &session{embedded: true}, []string{"ns"}, &res,
				&problemList{regions: map[logstore.RegionID]bool{}})
			if c.why != "" {
				require.Regexp(t, `\nreplay speedup +not measured: `+regexp.QuoteMeta(c.why)+`\n`, out.String())
				require.NotContains(t, out.String(), "bytes fetched")
				require.NotContains(t, out.String(), "What the replay speedup measures")
				return
			}
			require.Regexp(t, `\nreplay speedup +3\.0x \(full-scan time ÷ indexed time, one run each\)\n`, out.String())
			require.Regexp(t, `\nbytes fetched +\d\.\dx fewer with the index \(full scan \d\.\d MB ÷ indexed 1\.0 MB\)\n`, out.String())
			require.Contains(t, out.String(), "What the replay speedup measures: region 1 shares namespace ns with 2 other regions.\n")
		})
	}
}
