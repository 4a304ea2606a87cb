package embedded

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ping checks that a client reaches the brokers.
func ping(t *testing.T, addrs []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.Ping(ctx))
}

// TestStartInMemory protects the helper's promise: a broker to talk to,
// and a stop function that ends it (goleak checks that nothing is left).
func TestStartInMemory(t *testing.T) {
	addrs, stop, err := Start("")
	require.NoError(t, err)
	require.NotEmpty(t, addrs)
	ping(t, addrs)
	stop()
}

// TestDataDirIsOwnedByOneStart protects a data directory from a second
// broker: while one holds it, Start fails at once with an *InUseError
// naming the holder (this process, its owner text, its broker), and once
// it stops, the directory can be started again.
func TestDataDirIsOwnedByOneStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kafka")
	addrs, stop, err := Start(dir, WithOwner("kwal demo"))
	require.NoError(t, err)
	ping(t, addrs)

	_, _, err = Start(dir)
	require.ErrorIs(t, err, ErrInUse)
	var inUse *InUseError
	require.True(t, errors.As(err, &inUse))
	require.Equal(t, os.Getpid(), inUse.Holder.PID)
	require.Equal(t, "kwal demo", inUse.Holder.Owner)
	require.Equal(t, addrs, inUse.Holder.Brokers)
	require.Contains(t, err.Error(), "is in use by process")
	require.Contains(t, err.Error(), "whose embedded broker listens at "+addrs[0])

	stop()
	addrs2, stop2, err := Start(dir)
	require.NoError(t, err)
	ping(t, addrs2)
	stop2()
}

// TestInUseBeforeTheHolderIsRecorded protects the message while the
// holder is starting (the lock taken, its lock file not written yet).
func TestInUseBeforeTheHolderIsRecorded(t *testing.T) {
	dir := t.TempDir()
	// A lock on an empty lock file, as dirlock holds it for an instant.
	lock := flock.New(filepath.Join(dir, LockFile))
	ok, err := lock.TryLock()
	require.NoError(t, err)
	require.True(t, ok)
	defer func() { require.NoError(t, lock.Unlock()) }()
	_, _, err = Start(dir)
	require.ErrorIs(t, err, ErrInUse)
	require.Contains(t, err.Error(), "in use by another process (it is starting")
}

// TestRestartKeepsTheAddress: a data directory's broker listens where it
// listened last time, so that the address given to other programs stays
// valid across restarts; when that port is taken, it listens elsewhere.
func TestRestartKeepsTheAddress(t *testing.T) {
	dir := t.TempDir()
	addrs, stop, err := Start(dir)
	require.NoError(t, err)
	stop()
	again, stop, err := Start(dir)
	require.NoError(t, err)
	require.Equal(t, addrs, again)
	stop()

	ln, err := net.Listen("tcp", addrs[0])
	require.NoError(t, err)
	defer ln.Close()
	other, stop, err := Start(dir)
	require.NoError(t, err)
	require.NotEqual(t, addrs, other)
	ping(t, other)
	stop()
}
