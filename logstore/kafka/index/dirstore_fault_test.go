package index

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// faultFS is the os file system with chosen calls failing: fail(op, name)
// returns the error for one call (op is the method, or "Write", "Sync",
// "Close" on a file), nil to let it through.
type faultFS struct {
	mu   sync.Mutex
	fail func(op, name string) error
}

func (f *faultFS) check(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		return nil
	}
	return f.fail(op, name)
}

func (f *faultFS) set(fail func(op, name string) error) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *faultFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.check("MkdirAll", dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, perm)
}

func (f *faultFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.check("ReadDir", dir); err != nil {
		return nil, err
	}
	return os.ReadDir(dir)
}

func (f *faultFS) ReadFile(name string) ([]byte, error) {
	if err := f.check("ReadFile", name); err != nil {
		return nil, err
	}
	return os.ReadFile(name)
}

func (f *faultFS) Rename(from, to string) error {
	if err := f.check("Rename", to); err != nil {
		return err
	}
	return os.Rename(from, to)
}

func (f *faultFS) Remove(name string) error {
	if err := f.check("Remove", name); err != nil {
		return err
	}
	return os.Remove(name)
}

func (f *faultFS) CreateTemp(dir, pattern string) (file, error) {
	if err := f.check("CreateTemp", dir); err != nil {
		return nil, err
	}
	of, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: of, fs: f}, nil
}

func (f *faultFS) Open(name string) (file, error) {
	if err := f.check("Open", name); err != nil {
		return nil, err
	}
	of, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: of, fs: f}, nil
}

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check("Write", f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check("Sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Close() error {
	err := f.File.Close() // always release the descriptor
	if ferr := f.fs.check("Close", f.Name()); ferr != nil {
		return ferr
	}
	return err
}

// failOn fails every call of op on a name that contains part.
func failOn(op, part string, err error) func(string, string) error {
	return func(o, name string) error {
		if o == op && strings.Contains(name, part) {
			return err
		}
		return nil
	}
}

// TestDirStorePutFailures protects Put at each step that can fail: the
// error wraps the file system's and names the blob; a failure before the
// rename leaves the previous content and no temporary file; a failure to
// sync the directory after the rename is reported (the new content is in
// place but not proven durable).
func TestDirStorePutFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	for _, tc := range []struct {
		op, part string
		renamed  bool // the new content is in place despite the error
	}{
		{"CreateTemp", "", false},
		{"Write", tempPrefix, false},
		{"Sync", tempPrefix, false},
		{"Close", tempPrefix, false},
		{"Rename", "blob", false},
		{"Open", "", true}, // syncDir opens the directory
		{"Sync", "dir", true},
	} {
		t.Run(tc.op+"/"+tc.part, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dir")
			ffs := &faultFS{}
			st, err := newDirStoreOn(ffs, dir)
			require.NoError(t, err)
			require.NoError(t, st.Put(bg, "blob", []byte("old")))
			ffs.set(func(op, name string) error {
				if op == tc.op && strings.Contains(name, tc.part) && (tc.op != "Sync" || tc.part != "dir" || name == dir) {
					return boom
				}
				return nil
			})
			err = st.Put(bg, "blob", []byte("new"))
			require.ErrorIs(t, err, boom)
			require.Contains(t, err.Error(), "index: ")
			ffs.set(nil)
			got, gerr := st.Get(bg, "blob")
			require.NoError(t, gerr)
			if tc.renamed {
				require.Equal(t, []byte("new"), got)
				require.Contains(t, err.Error(), "store directory")
			} else {
				require.Equal(t, []byte("old"), got, "a failed Put leaves the previous content")
				require.Contains(t, err.Error(), "blob")
			}
			ents, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			require.Len(t, ents, 1, "no temporary file is left behind")
		})
	}
}

// TestDirStoreOtherFailures protects the other I/O failure paths of the
// directory store: opening (creating the directory, listing it, removing
// a stale temporary file), Get, List and Delete (the removal, and the
// directory sync after it) each return an error wrapping the file
// system's; a missing blob stays ErrNotExist.
func TestDirStoreOtherFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	dir := filepath.Join(t.TempDir(), "dir")

	for _, op := range []string{"MkdirAll", "ReadDir"} {
		_, err := newDirStoreOn(&faultFS{fail: failOn(op, "", boom)}, dir)
		require.ErrorIs(t, err, boom, op)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, tempPrefix+"left"), nil, 0o644))
	_, err := newDirStoreOn(&faultFS{fail: failOn("Remove", tempPrefix, boom)}, dir)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "stale temporary file")

	ffs := &faultFS{}
	st, err := newDirStoreOn(ffs, dir)
	require.NoError(t, err)
	require.NoError(t, st.Put(bg, "a", []byte("x")))

	ffs.set(failOn("ReadFile", "a", boom))
	_, err = st.Get(bg, "a")
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrNotExist)
	require.ErrorContains(t, err, "reading a")

	ffs.set(failOn("ReadDir", "", boom))
	_, err = st.List(bg, "")
	require.ErrorIs(t, err, boom)

	ffs.set(failOn("Remove", "a", boom))
	require.ErrorIs(t, st.Delete(bg, "a"), boom)
	ffs.set(failOn("Remove", "a", fs.ErrNotExist))
	require.NoError(t, st.Delete(bg, "a"), "a blob already gone is deleted")
	ffs.set(failOn("Open", dir, boom)) // the directory sync after the removal
	require.ErrorIs(t, st.Delete(bg, "a"), boom)
	ffs.set(nil)
	_, err = st.Get(bg, "a")
	require.ErrorIs(t, err, ErrNotExist, "the blob was removed before the sync failed")
}

// TestDropReportsDeleteFailures protects deleteTopicFiles (Collector.Drop
// on a store): a failed listing fails Drop; a failed deletion of one file
// is reported, joined with any other, while the other files are still
// deleted, and the topic is forgotten in memory either way.
func TestDropReportsDeleteFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	ffs := &faultFS{}
	st, err := newDirStoreOn(ffs, t.TempDir())
	require.NoError(t, err)
	g := newCollector(t, Options{Store: st, MergeGap: -1})
	for _, topic := range []string{"t", "u"} {
		g.Start(topic, 0, 0)
		w := writeRegions(g, topic, 0, []uint64{1, 2}, 10, 10)
		require.NoError(t, g.Checkpoint(bg))
		g.Observe(topic, []Run{reg(1, w, 5)})
		require.NoError(t, g.Checkpoint(bg)) // a base and a delta
	}
	names, err := st.List(bg, topicPrefix("t"))
	require.NoError(t, err)
	require.Len(t, names, 2)

	ffs.set(failOn("ReadDir", "", boom))
	err = g.Drop(bg, "t")
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, `dropping topic "t"`)
	require.Nil(t, g.topic("t", false), "forgotten in memory")
	ffs.set(nil)
	left, err := st.List(bg, topicPrefix("t"))
	require.NoError(t, err)
	require.Equal(t, names, left, "the listing failed: nothing was deleted")

	g.Start("t", 0, 0) // back, to drop it again
	ffs.set(failOn("Remove", names[0], boom))
	err = g.Drop(bg, "t")
	require.ErrorIs(t, err, boom)
	ffs.set(nil)
	left, err = st.List(bg, topicPrefix("t"))
	require.NoError(t, err)
	require.Equal(t, names[:1], left, "the other file was deleted")
	others, err := st.List(bg, topicPrefix("u"))
	require.NoError(t, err)
	require.Len(t, others, 2, "another topic's files are untouched")
}
