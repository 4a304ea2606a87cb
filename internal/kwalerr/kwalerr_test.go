package kwalerr

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errUnknown = errors.New("kwal: unknown namespace")
	errFenced  = errors.New("kwal: fenced")
)

type typedError struct{ N int }

func (e *typedError) Error() string { return "kwal: typed" }

// TestErrorfSaysThePrefixOnce: wrapping errors that carry the prefix, at
// any depth, shows it once, at the start, and the chain is fmt.Errorf's.
func TestErrorfSaysThePrefixOnce(t *testing.T) {
	inner := Errorf("namespace %q: %w", "x", errUnknown)
	require.Equal(t, `kwal: namespace "x": unknown namespace`, inner.Error())
	outer := Errorf("kwal: claim %q region %d: %w", "x", 5, inner)
	require.Equal(t, `kwal: claim "x" region 5: namespace "x": unknown namespace`, outer.Error())
	require.ErrorIs(t, outer, errUnknown)
	require.Equal(t, inner, errors.Unwrap(outer), "one %w unwraps to one error, as fmt.Errorf's")

	two := Errorf("%w (last error: %w)", context.DeadlineExceeded, outer)
	require.Equal(t, `kwal: context deadline exceeded (last error: claim "x" region 5: namespace "x": unknown namespace)`, two.Error())
	require.ErrorIs(t, two, context.DeadlineExceeded)
	require.ErrorIs(t, two, errUnknown)

	typed := Errorf("append: %w", &typedError{N: 7})
	var te *typedError
	require.ErrorAs(t, typed, &te)
	require.Equal(t, 7, te.N)
	require.Equal(t, "kwal: append: typed", typed.Error())

	// %v shows an error without wrapping it.
	shown := Errorf("no answer: %v", errFenced)
	require.Equal(t, "kwal: no answer: fenced", shown.Error())
	require.NotErrorIs(t, shown, errFenced)
	require.Nil(t, errors.Unwrap(shown))

	// A foreign error keeps its words; line breaks become "; ".
	_, err := os.Open("/nonexistent/kwalerr")
	require.Equal(t, "kwal: IndexDir: open /nonexistent/kwalerr: no such file or directory", Errorf("IndexDir: %w", err).Error())
	require.ErrorIs(t, Errorf("IndexDir: %w", err), fs.ErrNotExist)
	require.Equal(t, "kwal: read: a; b", Errorf("read: %w", errors.Join(errors.New("a"), errors.New("  b\n"))).Error())

	args := []any{"x", errUnknown}
	_ = Errorf("%s: %w", args...)
	require.Equal(t, errUnknown, args[1], "the caller's arguments are left as they were")
}

// TestJoinIsOneLine: Join reads as its parts on one line, the prefix
// once, and unwraps to each of them.
func TestJoinIsOneLine(t *testing.T) {
	require.NoError(t, Join(nil, nil))
	j := Join(Errorf("delete %q: %w", "x", errFenced), nil, errors.New("UNKNOWN_TOPIC_OR_PARTITION: no"), errUnknown)
	require.Equal(t, `kwal: delete "x": fenced; UNKNOWN_TOPIC_OR_PARTITION: no; unknown namespace`, j.Error())
	require.ErrorIs(t, j, errFenced)
	require.ErrorIs(t, j, errUnknown)
	require.Equal(t, `kwal: close: delete "x": fenced; UNKNOWN_TOPIC_OR_PARTITION: no; unknown namespace`, Errorf("close: %w", j).Error())
}

// TestCauseIsKeptButNotPrinted: the foreign cause is in the chain, not in
// the text.
func TestCauseIsKeptButNotPrinted(t *testing.T) {
	kafkaErr := errors.New("UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.")
	c := Cause(errUnknown, kafkaErr)
	require.Equal(t, "kwal: unknown namespace", c.Error())
	require.ErrorIs(t, c, errUnknown)
	require.ErrorIs(t, c, kafkaErr)
	require.Equal(t, `kwal: read "x": unknown namespace`, Errorf("read %q: %w", "x", c).Error())
	require.Equal(t, errUnknown, Cause(errUnknown, nil))
	require.NoError(t, Cause(nil, kafkaErr))
}

func TestBare(t *testing.T) {
	require.Equal(t, "", Bare(nil))
	require.Equal(t, "fenced", Bare(errFenced))
	require.Equal(t, "a; b", Bare(errors.New("kwal: a\nkwal: b")))
	require.Equal(t, "UNKNOWN: x", Bare(errors.New("UNKNOWN: x")))
}
