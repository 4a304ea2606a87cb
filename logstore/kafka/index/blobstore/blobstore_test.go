package blobstore

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file://
	_ "gocloud.dev/blob/memblob"  // mem://

	"github.com/kwal/kwal/logstore/kafka/index"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// buckets opens the same kind of bucket twice (two nodes seeing the same
// storage) for each backend under test.
func buckets(t *testing.T) map[string]func() *blob.Bucket {
	t.Helper()
	dir := t.TempDir()
	// Every mem:// URL opens a new empty bucket: both nodes share one.
	mem, err := blob.OpenBucket(bg, "mem://")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	return map[string]func() *blob.Bucket{
		"file": func() *blob.Bucket {
			b, err := blob.OpenBucket(bg, "file://"+filepath.ToSlash(dir)+"?metadata=skip")
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		"mem": func() *blob.Bucket { return mem },
	}
}

func TestStoreContract(t *testing.T) {
	t.Parallel()
	for name, open := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			st := New(open(), "node-1/index/")
			other := New(open(), "node-2/index/")
			_, err := st.Get(bg, "idx-a.0000000000000001.base")
			require.ErrorIs(t, err, index.ErrNotExist)
			require.NoError(t, st.Put(bg, "idx-a.0000000000000001.base", []byte("one")))
			require.NoError(t, st.Put(bg, "idx-a.0000000000000002.delta", []byte("two")))
			require.NoError(t, st.Put(bg, "idx-ab.0000000000000001.base", nil))
			require.NoError(t, other.Put(bg, "idx-a.0000000000000001.base", []byte("other")))
			require.NoError(t, st.Put(bg, "idx-a.0000000000000001.base", []byte("uno")))
			got, err := st.Get(bg, "idx-a.0000000000000001.base")
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
			require.Len(t, names, 3, "the other node's prefix is not listed")

			require.NoError(t, st.Delete(bg, "idx-a.0000000000000001.base"))
			require.NoError(t, st.Delete(bg, "idx-a.0000000000000001.base"), "deleting twice")
			_, err = st.Get(bg, "idx-a.0000000000000001.base")
			require.ErrorIs(t, err, index.ErrNotExist)
			got, err = other.Get(bg, "idx-a.0000000000000001.base")
			require.NoError(t, err)
			require.Equal(t, []byte("other"), got)
		})
	}
}

// TestRegionMove: node 1 writes its index to the bucket; node 2 reads it
// (read-only) and plans the same reads.
func TestRegionMove(t *testing.T) {
	t.Parallel()
	for name, open := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			st1 := New(open(), "node-1/")
			g1, err := index.New(index.Options{Store: st1})
			require.NoError(t, err)
			g1.Start("wal_3", 0, 0)
			w := int64(0)
			for i := range 500 {
				n := int64(1 + i%7)
				g1.Observe("wal_3", []index.Run{{Start: w, Count: n, Region: uint64(i % 9)}})
				w += n
				if i%100 == 0 {
					require.NoError(t, g1.Checkpoint(bg))
				}
			}
			g1.Obsolete("wal_3", 4, w/2)
			require.NoError(t, g1.Close(bg))

			g2, err := index.New(index.Options{Store: New(open(), "node-1/"), ReadOnly: true})
			require.NoError(t, err)
			defer func() { require.NoError(t, g2.Close(bg)) }()
			g2.Start("wal_3", 0, w)
			for id := range uint64(9) {
				from := map[uint64]int64{id: int64(id) * 100}
				require.Equal(t, g1.Plan("wal_3", from, w), g2.Plan("wal_3", from, w), "region %d", id)
				require.NotEmpty(t, g2.Plan("wal_3", from, w).Ranges)
			}
		})
	}
}

func TestFileURLWithAttributes(t *testing.T) {
	t.Parallel()
	// With the default metadata sidecar files, List still returns only blobs.
	dir := t.TempDir()
	u := &url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}
	b, err := blob.OpenBucket(bg, u.String())
	require.NoError(t, err)
	defer b.Close()
	st := New(b, "")
	require.NoError(t, st.Put(bg, "idx-a.0000000000000001.base", []byte("x")))
	names, err := st.List(bg, "")
	require.NoError(t, err)
	require.Equal(t, []string{"idx-a.0000000000000001.base"}, names)
}
