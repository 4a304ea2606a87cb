package index

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// StoreContract checks the behaviour every Store must have.
func storeContract(t *testing.T, st Store) {
	t.Helper()
	_, err := st.Get(bg, "idx-a.0000000000000001.base")
	require.ErrorIs(t, err, ErrNotExist)
	require.NoError(t, st.Put(bg, "idx-a.0000000000000001.base", []byte("one")))
	require.NoError(t, st.Put(bg, "idx-a.0000000000000002.delta", []byte("two")))
	require.NoError(t, st.Put(bg, "idx-ab.0000000000000001.base", nil))
	got, err := st.Get(bg, "idx-a.0000000000000001.base")
	require.NoError(t, err)
	require.Equal(t, []byte("one"), got)
	require.NoError(t, st.Put(bg, "idx-a.0000000000000001.base", []byte("uno")))
	got, err = st.Get(bg, "idx-a.0000000000000001.base")
	require.NoError(t, err)
	require.Equal(t, []byte("uno"), got)
	got, err = st.Get(bg, "idx-ab.0000000000000001.base")
	require.NoError(t, err)
	require.Empty(t, got)

	names, err := st.List(bg, "idx-a.")
	require.NoError(t, err)
	require.Equal(t, []string{"idx-a.0000000000000001.base", "idx-a.0000000000000002.delta"}, names)
	names, err = st.List(bg, "")
	require.NoError(t, err)
	require.Len(t, names, 3)

	require.NoError(t, st.Delete(bg, "idx-a.0000000000000001.base"))
	require.NoError(t, st.Delete(bg, "idx-a.0000000000000001.base"), "deleting twice")
	_, err = st.Get(bg, "idx-a.0000000000000001.base")
	require.ErrorIs(t, err, ErrNotExist)
	names, err = st.List(bg, "idx-a.")
	require.NoError(t, err)
	require.Equal(t, []string{"idx-a.0000000000000002.delta"}, names)
}

func TestDirStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sub", "dir")
	st, err := NewDirStore(dir)
	require.NoError(t, err)
	storeContract(t, st)
	for _, bad := range []string{"", ".hidden", "a/b", `a\b`, tempPrefix + "x"} {
		require.Error(t, st.Put(bg, bad, nil), bad)
		_, err := st.Get(bg, bad)
		require.Error(t, err, bad)
	}
	// A subdirectory and temporary files are not listed.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "idx-a.sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, tempPrefix+"idx-a.0000000000000009.base-1"), []byte("x"), 0o644))
	names, err := st.List(bg, "")
	require.NoError(t, err)
	require.Len(t, names, 2)
	// No temporary file is left behind by Put.
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 4)
}

func TestMemStoreContract(t *testing.T) {
	t.Parallel()
	storeContract(t, newMemStore())
}

// TestReadOnlyDirStore protects OpenDirStoreReadOnly: it reads what a
// writable store wrote, lists a missing directory as empty without
// creating it, and refuses every write, leaving temporary files alone.
func TestReadOnlyDirStore(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	w, err := NewDirStore(dir)
	require.NoError(t, err)
	require.NoError(t, w.Put(ctx, "a", []byte("x")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, tempPrefix+"left"), nil, 0o644))

	r := OpenDirStoreReadOnly(dir)
	got, err := r.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got)
	names, err := r.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, names)
	require.ErrorIs(t, r.Put(ctx, "b", nil), ErrReadOnly)
	require.ErrorIs(t, r.Delete(ctx, "a"), ErrReadOnly)
	_, err = os.Stat(filepath.Join(dir, tempPrefix+"left"))
	require.NoError(t, err, "temporary files are left alone")

	missing := filepath.Join(dir, "missing")
	names, err = OpenDirStoreReadOnly(missing).List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, names)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "the directory was not created")
}
