package index

import (
	"encoding/binary"
	"errors"
	"sort"
)

// span is the offsets [start, end).
type span struct{ start, end int64 }

// runChunkBytes is the encoded size at which a chunk of a runList is sealed
// and a new one started. Smaller chunks make seeking finer; each chunk costs
// about 64 bytes of bookkeeping.
const runChunkBytes = 512

// runList is one region's offsets: sorted, disjoint, non-touching runs.
//
// Runs are only ever appended at the end (the accounted span grows upwards,
// so a region's offsets arrive in ascending order) and removed from the front
// (Obsolete, the log start moving up). That lets the list be stored the way
// a checkpoint stores it: as chunks of varint-encoded runs (see appendRunRec)
// with the last run kept open, unencoded, so that a run continued by the next
// append costs nothing. In memory that is about 1 byte per isolated offset
// and 2-3 bytes per run of consecutive offsets, against 16 bytes per run for
// a slice of spans (BenchmarkRegionSetMemory measures it against roaring64).
//
// The zero value is an empty list.
type runList struct {
	chunks  []runChunk
	open    span // the last run, not in chunks; empty when start == end
	runs    int  // runs in chunks plus the open one
	entries int64
}

// runChunk is a sealed piece of a runList: runs encoded by appendRunRec, the
// first relative to first, each next one to the end of the previous one.
type runChunk struct {
	first   int64 // start of the first run
	last    int64 // end of the last run
	entries int64
	runs    int32
	data    []byte
}

func (l *runList) empty() bool { return l.runs == 0 }

// lastEnd returns the end of the last run, or -1 when the list is empty.
func (l *runList) lastEnd() int64 {
	if l.open.end > l.open.start {
		return l.open.end
	}
	if n := len(l.chunks); n > 0 {
		return l.chunks[n-1].last
	}
	return -1
}

// appendRun adds [s, e). The part below the list's current end is ignored,
// so s is normally >= lastEnd().
func (l *runList) appendRun(s, e int64) {
	if le := l.lastEnd(); s < le {
		s = le
	}
	if e <= s {
		return
	}
	l.entries += e - s
	if l.open.end > l.open.start {
		if s == l.open.end {
			l.open.end = e
			return
		}
		l.seal()
	}
	l.open = span{s, e}
	l.runs++
}

// seal encodes the open run into the last chunk, starting a new chunk when
// the last one is full.
func (l *runList) seal() {
	n := len(l.chunks)
	if n == 0 || len(l.chunks[n-1].data) >= runChunkBytes {
		if n > 0 {
			// Give back the spare capacity of the full chunk.
			c := &l.chunks[n-1]
			c.data = append(make([]byte, 0, len(c.data)), c.data...)
		}
		l.chunks = append(l.chunks, runChunk{first: l.open.start, last: l.open.start})
		n++
	}
	c := &l.chunks[n-1]
	gap := l.open.start - c.last
	if c.runs > 0 {
		gap-- // runs never touch: encode the gap minus one
	}
	c.data = appendRunRec(c.data, gap, l.open.end-l.open.start)
	c.last = l.open.end
	c.entries += l.open.end - l.open.start
	c.runs++
	l.open = span{}
}

// each calls fn for every run, clipped to [from, to), in ascending order,
// until fn returns false.
func (l *runList) each(from, to int64, fn func(s, e int64) bool) {
	if from >= to {
		return
	}
	i := sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i].last > from })
	for ; i < len(l.chunks); i++ {
		c := &l.chunks[i]
		if c.first >= to {
			return
		}
		if !c.each(from, to, fn) {
			return
		}
	}
	if s, e := max(l.open.start, from), min(l.open.end, to); s < e {
		fn(s, e)
	}
}

// each is runList.each for one chunk; it returns false when iteration must
// stop.
func (c *runChunk) each(from, to int64, fn func(s, e int64) bool) bool {
	prev := c.first
	b := c.data
	for k := 0; len(b) > 0; k++ {
		gap, count, n := readRunRecTrusted(b)
		b = b[n:]
		s := prev + gap
		if k > 0 {
			s++
		}
		e := s + count
		prev = e
		if e <= from {
			continue
		}
		if s >= to {
			return false
		}
		if !fn(max(s, from), min(e, to)) {
			return false
		}
	}
	return true
}

// dropBelow removes every offset < x.
func (l *runList) dropBelow(x int64) {
	i := sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i].last > x })
	for _, c := range l.chunks[:i] {
		l.entries -= c.entries
		l.runs -= int(c.runs)
	}
	if i > 0 {
		l.chunks = append(l.chunks[:0], l.chunks[i:]...)
	}
	if len(l.chunks) > 0 && l.chunks[0].first < x {
		old := l.chunks[0]
		l.entries -= old.entries
		l.runs -= int(old.runs)
		var nc runChunk
		old.each(x, old.last, func(s, e int64) bool {
			gap := s - nc.last
			if nc.runs == 0 {
				nc.first, gap = s, 0
			} else {
				gap--
			}
			nc.data = appendRunRec(nc.data, gap, e-s)
			nc.last = e
			nc.entries += e - s
			nc.runs++
			return true
		})
		l.entries += nc.entries
		l.runs += int(nc.runs)
		if nc.runs > 0 {
			l.chunks[0] = nc
		} else {
			l.chunks = l.chunks[1:]
		}
	}
	if l.open.end > l.open.start && l.open.start < x {
		if l.open.end <= x {
			l.entries -= l.open.end - l.open.start
			l.runs--
			l.open = span{}
		} else {
			l.entries -= x - l.open.start
			l.open.start = x
		}
	}
	if len(l.chunks) == 0 {
		l.chunks = nil
	}
}

// ---- run records --------------------------------------------------------

// appendRunRec encodes one run as the checkpoint format and runList chunks
// store it:
//
//	head uvarint = gap<<1 | (count == 1)
//	[count-2 uvarint]      only when count >= 2
//
// gap is the distance from a base point to the run's start, defined by the
// caller (the previous run's end plus one, or a lower bound for the first
// run). An isolated offset within 63 offsets of the previous run costs one
// byte; a run of 2-129 offsets with a gap under 8192 costs three.
func appendRunRec(dst []byte, gap, count int64) []byte {
	if count == 1 {
		return binary.AppendUvarint(dst, uint64(gap)<<1|1)
	}
	dst = binary.AppendUvarint(dst, uint64(gap)<<1)
	return binary.AppendUvarint(dst, uint64(count-2))
}

// readRunRecTrusted decodes what appendRunRec wrote into memory; it does no
// validation (use readRunRec for bytes from outside).
func readRunRecTrusted(b []byte) (gap, count int64, n int) {
	h, n := binary.Uvarint(b)
	if h&1 == 1 {
		return int64(h >> 1), 1, n
	}
	c, m := binary.Uvarint(b[n:])
	return int64(h >> 1), int64(c) + 2, n + m
}

var errVarint = errors.New("bad varint")

// readUvarint decodes a canonical (shortest form) uvarint.
func readUvarint(b []byte) (uint64, int, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, errVarint
	}
	if n > 1 && b[n-1] == 0 {
		return 0, 0, errVarint // not the shortest form: would not re-encode the same
	}
	return v, n, nil
}
