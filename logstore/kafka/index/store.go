package index

import "context"

// Store keeps the index's checkpoint files as named blobs. Names are flat:
// they contain no '/' and never begin with '.'. The index writes each name
// through Put and never appends to a blob.
//
// One Collector writes to a Store (or to a prefix of a shared bucket); other
// processes may read it, for example with a Collector opened with
// Options.ReadOnly while a region moves between nodes.
//
// All methods must be safe for concurrent use.
type Store interface {
	// Get returns the blob's whole content, or an error matching
	// ErrNotExist when there is no blob of that name.
	Get(ctx context.Context, name string) ([]byte, error)

	// Put stores data under name atomically: a reader sees either the
	// previous blob (or none) or all of data, never a part, and once Put
	// returns nil the blob survives a crash of this process or machine.
	Put(ctx context.Context, name string, data []byte) error

	// List returns the names beginning with prefix, in ascending order.
	List(ctx context.Context, prefix string) ([]string, error)

	// Delete removes the blob. Deleting a name that does not exist is not an
	// error.
	Delete(ctx context.Context, name string) error
}
