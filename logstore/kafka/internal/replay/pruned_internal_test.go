package replay

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/logstore"
)

// TestStartMovedErrorMatches protects the error a fetch returns when the
// log start overtook it: a caller that does not check further (the search
// for a prune mark) still sees ErrPruned and Kafka's cause, and the
// message names both.
func TestStartMovedErrorMatches(t *testing.T) {
	var err error = &startMovedError{
		pruned: &logstore.PrunedError{Namespace: "ns", Requested: 5, FirstAvailable: 10},
		start:  9, end: 20, cause: kerr.OffsetOutOfRange,
	}
	require.ErrorIs(t, err, logstore.ErrPruned)
	require.ErrorIs(t, err, kerr.OffsetOutOfRange)
	var pe *logstore.PrunedError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, logstore.EntryID(10), pe.FirstAvailable)
	require.Contains(t, err.Error(), "OFFSET_OUT_OF_RANGE")
	require.Contains(t, err.Error(), pe.Error())
}
