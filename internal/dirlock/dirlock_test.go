package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A directory belongs to one holder at a time; the second is refused at once
// with an error naming the first, and may take it once the first let go.
func TestSecondHolderIsRefusedNamingTheFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	first, err := Acquire(dir, "kwal.lock", Holder{Owner: "datanode-a"})
	require.NoError(t, err)

	_, err = Acquire(dir, "kwal.lock", Holder{Owner: "datanode-b"})
	require.ErrorIs(t, err, ErrInUse)
	var iu *InUseError
	require.True(t, errors.As(err, &iu))
	require.Equal(t, os.Getpid(), iu.Holder.PID)
	require.Equal(t, "datanode-a", iu.Holder.Owner)
	require.Contains(t, err.Error(), "datanode-a")
	require.True(t, strings.HasPrefix(err.Error(), dir), err.Error())

	require.NoError(t, first.Release())
	second, err := Acquire(dir, "kwal.lock", Holder{Owner: "datanode-b"})
	require.NoError(t, err)
	require.NoError(t, second.Release())
	require.NoError(t, second.Release(), "Release is idempotent")
}
