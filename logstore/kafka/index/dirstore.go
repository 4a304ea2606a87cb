package index

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kwal/kwal/internal/kwalerr"
)

// tempPrefix begins the names of dirStore's temporary files. Names given to
// a Store never begin with '.', so no blob name collides with them.
const tempPrefix = ".tmp-"

// dirStore is the Store of NewDirStore: each blob a file in one directory.
type dirStore struct {
	dir      string
	fs       fileSystem
	readOnly bool // OpenDirStoreReadOnly: Put and Delete fail with ErrReadOnly
	// beforeRenameForTesting, when set, runs after a temporary file is
	// written and synced and before it is renamed; an error from it makes
	// Put return without renaming (simulating a crash at that point).
	beforeRenameForTesting func(tmp string) error
}

var _ Store = (*dirStore)(nil)

// NewDirStore returns a Store over dir, creating it if needed. Temporary
// files left by a crash in the middle of a Put are removed: the blob they
// were meant to replace is still intact.
//
// Put writes a temporary file in dir, syncs it, renames it over the blob and
// syncs the directory, so that a blob is either the old or the new content
// after a crash, and is durable once Put returns.
func NewDirStore(dir string) (Store, error) {
	return newDirStore(dir)
}

// OpenDirStoreReadOnly returns a Store over dir that never changes it: it
// neither creates the directory nor removes temporary files, a missing
// directory lists as empty, and Put and Delete fail with ErrReadOnly. For
// inspecting another process's index (with Options.ReadOnly, which never
// writes) without disturbing it.
func OpenDirStoreReadOnly(dir string) Store {
	return &dirStore{dir: dir, fs: osFS{}, readOnly: true}
}

func newDirStore(dir string) (*dirStore, error) {
	return newDirStoreOn(osFS{}, dir)
}

func newDirStoreOn(fsys fileSystem, dir string) (*dirStore, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, kwalerr.Errorf("index: creating store directory: %w", err)
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, kwalerr.Errorf("index: reading store directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, kwalerr.Errorf("index: removing a stale temporary file: %w", err)
			}
		}
	}
	return &dirStore{dir: dir, fs: fsys}, nil
}

func checkName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, 0) {
		return kwalerr.Errorf("index: invalid blob name %q", name)
	}
	return nil
}

// Get implements Store.
func (d *dirStore) Get(ctx context.Context, name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := d.fs.ReadFile(filepath.Join(d.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, kwalerr.Errorf("%w: %s: %w", ErrNotExist, name, err)
	}
	if err != nil {
		return nil, kwalerr.Errorf("index: reading %s: %w", name, err)
	}
	return data, nil
}

// Put implements Store.
func (d *dirStore) Put(ctx context.Context, name string, data []byte) (err error) {
	if err := checkName(name); err != nil {
		return err
	}
	if d.readOnly {
		return kwalerr.Errorf("index: writing %s: %w", name, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := d.fs.CreateTemp(d.dir, tempPrefix+name+"-*")
	if err != nil {
		return kwalerr.Errorf("index: writing %s: %w", name, err)
	}
	tmp := f.Name()
	keep := false // the temporary file was renamed, or a simulated crash leaves it
	defer func() {
		if !keep {
			_ = d.fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return kwalerr.Errorf("index: writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return kwalerr.Errorf("index: syncing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return kwalerr.Errorf("index: closing %s: %w", name, err)
	}
	if hook := d.beforeRenameForTesting; hook != nil {
		if err := hook(tmp); err != nil {
			keep = true
			return err
		}
	}
	if err := d.fs.Rename(tmp, filepath.Join(d.dir, name)); err != nil {
		return kwalerr.Errorf("index: renaming %s: %w", name, err)
	}
	keep = true
	return d.syncDir()
}

func (d *dirStore) syncDir() error {
	df, err := d.fs.Open(d.dir)
	if err != nil {
		return kwalerr.Errorf("index: opening store directory: %w", err)
	}
	defer df.Close()
	if err := df.Sync(); err != nil {
		return kwalerr.Errorf("index: syncing store directory: %w", err)
	}
	return nil
}

// List implements Store.
func (d *dirStore) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := d.fs.ReadDir(d.dir)
	if d.readOnly && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, kwalerr.Errorf("index: listing store directory: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && !strings.HasPrefix(n, ".") && strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Delete implements Store.
func (d *dirStore) Delete(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if d.readOnly {
		return kwalerr.Errorf("index: deleting %s: %w", name, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := d.fs.Remove(filepath.Join(d.dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return kwalerr.Errorf("index: deleting %s: %w", name, err)
	}
	if err == nil {
		return d.syncDir()
	}
	return nil
}

// fileSystem is what dirStore does to the disk: the os package (osFS), or
// in tests a wrapper that fails chosen calls, so that every I/O failure
// path is exercised.
type fileSystem interface {
	MkdirAll(dir string, perm fs.FileMode) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	ReadFile(name string) ([]byte, error)
	CreateTemp(dir, pattern string) (file, error)
	Open(name string) (file, error)
	Rename(from, to string) error
	Remove(name string) error
}

// file is what dirStore does with an open file (a temporary file it
// writes, or the directory it syncs); *os.File has it.
type file interface {
	Name() string
	Write(p []byte) (int, error)
	Sync() error
	Close() error
}

// osFS is the fileSystem of the os package.
type osFS struct{}

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) ReadFile(name string) ([]byte, error)        { return os.ReadFile(name) }
func (osFS) Rename(from, to string) error                { return os.Rename(from, to) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }

func (osFS) CreateTemp(dir, pattern string) (file, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Open(name string) (file, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}
