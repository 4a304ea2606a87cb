package logstore_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kwal/kwal/logstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTypedErrorsMatchSentinels protects the error contract: the typed
// errors match their sentinels through any wrapping, keep their fields
// reachable with errors.As, name what a reader needs (offset, first ID),
// and CorruptError exposes its cause.
func TestTypedErrorsMatchSentinels(t *testing.T) {
	pe := fmt.Errorf("replay: %w", &logstore.PrunedError{Namespace: "wal_1", Requested: 5, FirstAvailable: 42})
	require.ErrorIs(t, pe, logstore.ErrPruned)
	require.NotErrorIs(t, pe, logstore.ErrCorrupt)
	var p *logstore.PrunedError
	require.ErrorAs(t, pe, &p)
	require.Equal(t, logstore.EntryID(42), p.FirstAvailable)
	require.Contains(t, pe.Error(), "first ID still available is 42")
	zero := &logstore.PrunedError{Namespace: "wal_1", FirstAvailable: 42}
	require.NotContains(t, zero.Error(), "ID 0", "ID 0 means none: the read asked from the beginning")
	require.Contains(t, zero.Error(), "from the log's beginning")

	ce := fmt.Errorf("replay: %w", &logstore.CorruptError{Namespace: "wal_1", Offset: 1234, Err: io.ErrUnexpectedEOF})
	require.ErrorIs(t, ce, logstore.ErrCorrupt)
	require.ErrorIs(t, ce, io.ErrUnexpectedEOF)
	require.NotErrorIs(t, ce, logstore.ErrPruned)
	var c *logstore.CorruptError
	require.ErrorAs(t, ce, &c)
	require.Equal(t, int64(1234), c.Offset)
	require.Contains(t, ce.Error(), "offset 1234")

	require.False(t, errors.Is(logstore.ErrClosed, logstore.ErrCorrupt))
}
