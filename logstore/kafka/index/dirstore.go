package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// tempPrefix begins the names of dirStore's temporary files. Names given to
// a Store never begin with '.', so no blob name collides with them.
const tempPrefix = ".tmp-"

// dirStore is the Store of NewDirStore: each blob a file in one directory.
type dirStore struct {
	dir      string
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
	return &dirStore{dir: dir, readOnly: true}
}

func newDirStore(dir string) (*dirStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("index: creating store directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("index: reading store directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("index: removing a stale temporary file: %w", err)
			}
		}
	}
	return &dirStore{dir: dir}, nil
}

func checkName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("index: invalid blob name %q", name)
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
	data, err := os.ReadFile(filepath.Join(d.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotExist, name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("index: reading %s: %w", name, err)
	}
	return data, nil
}

// Put implements Store.
func (d *dirStore) Put(ctx context.Context, name string, data []byte) (err error) {
	if err := checkName(name); err != nil {
		return err
	}
	if d.readOnly {
		return fmt.Errorf("index: writing %s: %w", name, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.CreateTemp(d.dir, tempPrefix+name+"-*")
	if err != nil {
		return fmt.Errorf("index: writing %s: %w", name, err)
	}
	tmp := f.Name()
	keep := false // the temporary file was renamed, or a simulated crash leaves it
	defer func() {
		if !keep {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("index: writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("index: syncing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("index: closing %s: %w", name, err)
	}
	if hook := d.beforeRenameForTesting; hook != nil {
		if err := hook(tmp); err != nil {
			keep = true
			return err
		}
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, name)); err != nil {
		return fmt.Errorf("index: renaming %s: %w", name, err)
	}
	keep = true
	return d.syncDir()
}

func (d *dirStore) syncDir() error {
	df, err := os.Open(d.dir)
	if err != nil {
		return fmt.Errorf("index: opening store directory: %w", err)
	}
	defer df.Close()
	if err := df.Sync(); err != nil {
		return fmt.Errorf("index: syncing store directory: %w", err)
	}
	return nil
}

// List implements Store.
func (d *dirStore) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d.dir)
	if d.readOnly && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("index: listing store directory: %w", err)
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
		return fmt.Errorf("index: deleting %s: %w", name, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(d.dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("index: deleting %s: %w", name, err)
	}
	if err == nil {
		return d.syncDir()
	}
	return nil
}
