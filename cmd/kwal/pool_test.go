package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNamespacesCreatePool protects `kwal namespaces create --pool N
// --prefix P`: it creates P_0 … P_{N-1}, and create without names or a
// pool is an error.
func TestNamespacesCreatePool(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"namespaces", "create", "--pool", "3", "--prefix", "walpool"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, l.code, l.stderr)
	require.Equal(t, "walpool_0\nwalpool_1\nwalpool_2\n", l.stdout)
	r = kwal(t, nil, append([]string{"namespaces", "create"}, flags...)...)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "--pool")
}
