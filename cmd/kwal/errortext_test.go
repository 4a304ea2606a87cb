package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLibraryErrorsArePrintedOnce: a command that fails on a library
// error prints it as the library says it, on one line with "kwal: " once:
// no Kafka error-code text, no second line, no prefix of the command's.
func TestLibraryErrorsArePrintedOnce(t *testing.T) {
	flags := cluster(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"namespaces", "prune", "nope"}, `kwal: prune "nope": unknown namespace`},
		{[]string{"namespaces", "prune", "--dry-run", "-n", "nope"}, `kwal: prune "nope": unknown namespace`},
		{[]string{"namespaces", "prune", "no spaces"}, `kwal: invalid namespace: "no spaces" is not a valid topic name: ' ' is not one of [a-zA-Z0-9._-]`},
		{[]string{"regions", "show", "-n", "nope"}, `kwal: namespace "nope": unknown namespace`},
		{[]string{"regions", "claim", "-n", "nope", "-r", "5"}, `kwal: namespace "nope": unknown namespace`},
	} {
		r := kwal(t, nil, append(c.args, flags...)...)
		require.Equal(t, exitError, r.code, "%v: %s", c.args, r.stderr)
		require.Equal(t, c.want+"\n", r.stderr, "%v", c.args)
		require.Empty(t, r.stdout, "%v", c.args)
	}
	// A command's own error, too: "regions show" is named once, after
	// the one "kwal: ".
	r := kwal(t, nil, "regions", "show", "--data-dir", filepath.Join(t.TempDir(), "data"), "--brokers", "127.0.0.1:1")
	require.Equal(t, exitError, r.code)
	require.Equal(t, "kwal: regions show: -n/--namespace is required\n", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "kwal"))
}
