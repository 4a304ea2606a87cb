package worker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recMem is the memory of one request's records: the copy of its entries'
// data that the record values point into, the record structs and keys, and
// the request's per-record slices. It is recycled once nothing can read it:
// when the dispatch that carried the request came back from its lane
// (franz-go calls a record's promise last, and the lane's Flush returns
// after every promise), or when the request leaves the queue unsent. The
// data copy is what lets a caller reuse its buffers at once (Submit); the
// pool keeps that copy from being a fresh allocation per call, which would
// be a large part of kwal's CPU per MB over raw franz-go's (allocation and
// the garbage collector's work on it).
type recMem struct {
	data       []byte
	structs    []kgo.Record
	keys       []byte
	recs       []*kgo.Record
	recRegion  []uint64
	entryFirst []int
}

// maxPooledData is the largest data copy kept for reuse: a rare huge call
// should not leave a huge buffer in the pool.
const maxPooledData = 1 << 20

var recMemPool = sync.Pool{New: func() any { return new(recMem) }}

// getRecMem returns memory for a request of the given data bytes and
// entries; its slices are empty with at least that capacity.
func getRecMem(dataBytes, entries, keySize int) *recMem {
	m := recMemPool.Get().(*recMem)
	m.data = grow(m.data, dataBytes)
	m.structs = grow(m.structs, entries)
	m.keys = grow(m.keys, entries*keySize)
	m.recs = grow(m.recs, entries)
	m.recRegion = grow(m.recRegion, entries)
	m.entryFirst = grow(m.entryFirst, entries)
	return m
}

// grow returns s emptied with capacity n at least (a new array when s's is
// smaller), never nil: an empty entry's value must stay empty, not null.
func grow[T any](s []T, n int) []T {
	if s == nil || cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// putRecMem recycles m; nothing may read it afterwards.
func putRecMem(m *recMem) {
	if cap(m.data) > maxPooledData {
		return
	}
	// Drop what the structs point to (franz-go set contexts and headers).
	clear(m.structs[:cap(m.structs)])
	clear(m.recs[:cap(m.recs)])
	recMemPool.Put(m)
}
