package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryEvery protects the store's retry loop: it retries while attempt
// says the failure is retriable, returns a final result as it is (not
// ended), and when the context ends returns ended with an error matching
// both the context's error and the last cause.
func TestRetryEvery(t *testing.T) {
	errBusy := errors.New("busy")
	errFinal := errors.New("final")

	var calls []int
	ended, err := Every(t.Context(), 0, func(n int) (bool, error) {
		calls = append(calls, n)
		if n < 3 {
			return false, errBusy
		}
		return true, nil
	})
	require.False(t, ended)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 3}, calls)

	ended, err = Every(t.Context(), 0, func(n int) (bool, error) {
		if n == 0 {
			return false, errBusy
		}
		return true, errFinal
	})
	require.False(t, ended)
	require.ErrorIs(t, err, errFinal)
	require.NotErrorIs(t, err, errBusy)

	// The context ends during the pause (an hour: only the cancellation
	// can end it).
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	ended, err = Every(ctx, time.Hour, func(int) (bool, error) {
		n++
		cancel()
		return false, errBusy
	})
	require.True(t, ended)
	require.Equal(t, 1, n, "no attempt after the context ended")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errBusy)
	require.Contains(t, err.Error(), "last error: busy")

	// The context ends during an attempt, which then fails with the
	// context's own error: the error still names the cause before it
	// (TestFetchErrorsAreRetriedOrReported failed under load without this).
	dctx, dcancel := context.WithCancel(t.Context())
	ended, err = Every(dctx, 0, func(n int) (bool, error) {
		if n == 0 {
			return false, errBusy
		}
		dcancel()
		return false, dctx.Err()
	})
	require.True(t, ended)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errBusy)

	// No cause: the context's error alone.
	ended, err = Every(ctx, time.Hour, func(int) (bool, error) { return false, nil })
	require.True(t, ended)
	require.Equal(t, context.Canceled, err)
}
