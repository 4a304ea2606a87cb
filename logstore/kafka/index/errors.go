package index

import "errors"

// ErrClosed is returned by Checkpoint and Drop after Close.
var ErrClosed = errors.New("kwal: index: collector closed")

// ErrReadOnly is returned (wrapped) by the writes of a read-only Store.
var ErrReadOnly = errors.New("kwal: index: store is read-only")

// ErrNotExist is returned (wrapped) by a Store's Get when the named blob does
// not exist. Match it with errors.Is.
var ErrNotExist = errors.New("kwal: index: blob does not exist")

// Checkpoint decoding errors. Every error from the decoder matches exactly one
// of them with errors.Is; the loader uses them as the reason label of the
// kwal_index_load_failures_total metric.
var (
	// ErrTruncated: the file is shorter than its header says (a torn write).
	ErrTruncated = errors.New("kwal: index: checkpoint truncated")
	// ErrCorrupt: bad magic, checksum mismatch or an invalid field.
	ErrCorrupt = errors.New("kwal: index: checkpoint corrupt")
	// ErrVersion: the file was written by a newer format version.
	ErrVersion = errors.New("kwal: index: checkpoint format version not supported")
)
