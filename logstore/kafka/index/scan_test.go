package index

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestObserveScanLowersC protects the rebuild of an index that starts late
// (not persisted, or older than the log): a complete scan reaching the
// accounted span from below lowers C, so the next plan of any region is
// indexed down to the scan's start; a scan that does not reach C changes
// nothing below C; and a topic with no coverage starts it at the scan.
func TestObserveScanLowersC(t *testing.T) {
	g, err := New(Options{})
	require.NoError(t, err)
	defer g.Close(t.Context())

	// The producer opened the topic at offset 100 and appended 100..109.
	g.Start("t", 0, 100)
	g.Observe("t", []Run{{Start: 100, Count: 10, Region: 1}})
	p := g.Plan("t", map[uint64]int64{2: 0}, 110)
	require.Equal(t, []Range{{Start: 0, End: 100, Scan: true}}, p.Ranges, "history below C is scanned")

	// A scan of [40, 60) does not reach C: nothing below C is learned.
	g.ObserveScan("t", 40, 60, []Run{{Start: 40, Count: 20, Region: 2}})
	p = g.Plan("t", map[uint64]int64{2: 50}, 110)
	require.Equal(t, []Range{{Start: 50, End: 100, Scan: true}}, p.Ranges)

	// A scan of [0, 110) reaches C: C drops to 0.
	g.ObserveScan("t", 0, 110, []Run{
		{Start: 0, Count: 30, Region: 2},
		{Start: 30, Count: 10, Foreign: true},
		{Start: 40, Count: 60, Region: 3},
		{Start: 100, Count: 10, Region: 1},
	})
	p = g.Plan("t", map[uint64]int64{2: 0}, 110)
	require.Equal(t, []Range{{Start: 0, End: 30}}, p.Ranges)
	p = g.Plan("t", map[uint64]int64{1: 0}, 110)
	require.Equal(t, []Range{{Start: 100, End: 110}}, p.Ranges)
	p = g.Plan("t", map[uint64]int64{4: 0}, 110)
	require.Empty(t, p.Ranges, "an idle region reads nothing")

	// A topic the index never saw: coverage starts at the scan.
	g.ObserveScan("u", 5, 8, []Run{{Start: 5, Count: 3, Region: 9}})
	p = g.Plan("u", map[uint64]int64{9: 0}, 8)
	require.Equal(t, []Range{{Start: 0, End: 8, Scan: true}}, p.Ranges, "[0, 5) is unaccounted; adjacent ranges merge into a scan")
	p = g.Plan("u", map[uint64]int64{9: 5}, 8)
	require.Equal(t, []Range{{Start: 5, End: 8}}, p.Ranges)
}

// TestObserveScanInPiecesLowersC protects the rebuild of a lost index on a
// topic of any size: a reader reports a long scan in consecutive pieces
// (it holds a bounded number of runs), and the pieces below C are kept
// until one reaches C; then the whole scan is accounted for, not only its
// last piece. A piece that does not continue them starts them over.
func TestObserveScanInPiecesLowersC(t *testing.T) {
	g, err := New(Options{})
	require.NoError(t, err)
	defer g.Close(t.Context())
	g.Start("t", 0, 300) // a producer opened the topic at 300
	g.Observe("t", []Run{{Start: 300, Count: 10, Region: 1}})

	g.ObserveScan("t", 0, 100, []Run{{Start: 0, Count: 50, Region: 1}, {Start: 50, Count: 50, Region: 2}})
	g.ObserveScan("t", 100, 200, []Run{{Start: 100, Count: 100, Region: 1}})
	p := g.Plan("t", map[uint64]int64{2: 0}, 310)
	require.Equal(t, []Range{{Start: 0, End: 300, Scan: true}}, p.Ranges, "nothing is accounted for until the scan reaches C")
	g.ObserveScan("t", 200, 310, []Run{{Start: 200, Count: 100, Region: 2}, {Start: 300, Count: 10, Region: 1}})
	p = g.Plan("t", map[uint64]int64{2: 0}, 310)
	require.Equal(t, []Range{{Start: 50, End: 100}, {Start: 200, End: 300}}, p.Ranges)
	p = g.Plan("t", map[uint64]int64{1: 0}, 310)
	require.Equal(t, []Range{{Start: 0, End: 50}, {Start: 100, End: 200}, {Start: 300, End: 310}}, p.Ranges)

	// Pieces with a hole between them: the second starts over, and only
	// what it covers up to C is accounted for.
	g.Start("u", 0, 300)
	g.ObserveScan("u", 0, 100, []Run{{Start: 0, Count: 100, Region: 1}})
	g.ObserveScan("u", 150, 300, []Run{{Start: 150, Count: 150, Region: 2}})
	p = g.Plan("u", map[uint64]int64{1: 0}, 300)
	require.Equal(t, []Range{{Start: 0, End: 150, Scan: true}}, p.Ranges)
	p = g.Plan("u", map[uint64]int64{2: 150}, 300)
	require.Equal(t, []Range{{Start: 150, End: 300}}, p.Ranges)
}

// TestObserveScanRespectsObsolete: lowering C does not bring back offsets
// a region declared obsolete above the old C.
func TestObserveScanRespectsObsolete(t *testing.T) {
	g, err := New(Options{})
	require.NoError(t, err)
	defer g.Close(t.Context())
	g.Start("t", 0, 30)
	g.Observe("t", []Run{{Start: 30, Count: 20, Region: 1}})
	g.Obsolete("t", 1, 40)
	g.ObserveScan("t", 0, 50, []Run{{Start: 0, Count: 50, Region: 1}})
	p := g.Plan("t", map[uint64]int64{1: 40}, 50)
	require.Equal(t, []Range{{Start: 40, End: 50}}, p.Ranges)
	p = g.Plan("t", map[uint64]int64{1: 0}, 50)
	require.Equal(t, []Range{{Start: 0, End: 50, Scan: true}}, p.Ranges, "below its Obsolete point the region is scanned")
}

// TestAppendRun protects run building: adjacent offsets of one region, or
// of foreign records, extend the last run; anything else starts a new one.
func TestAppendRun(t *testing.T) {
	var runs []Run
	for _, r := range []Run{
		{Start: 0, Count: 1, Region: 1},
		{Start: 1, Count: 2, Region: 1}, // extends
		{Start: 3, Count: 1, Region: 2}, // other region
		{Start: 4, Count: 1, Foreign: true},
		{Start: 5, Count: 3, Foreign: true}, // extends
		{Start: 9, Count: 1, Foreign: true}, // gap
		{Start: 10, Count: 1, Region: 2},
	} {
		runs = AppendRun(runs, r)
	}
	require.Equal(t, []Run{
		{Start: 0, Count: 3, Region: 1},
		{Start: 3, Count: 1, Region: 2},
		{Start: 4, Count: 4, Foreign: true},
		{Start: 9, Count: 1, Foreign: true},
		{Start: 10, Count: 1, Region: 2},
	}, runs)
}
