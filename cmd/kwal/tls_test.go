package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwal/kwal/testutil"
)

func TestTLS(t *testing.T) {
	srv, ca := testutil.SelfSignedTLS(t)
	c := testutil.NewCluster(t, kfake.TLS(srv))
	// 5s, not less: on a loaded runner a TLS handshake that fails verification once took longer than 2s to
	// come back, and the command then reported the timeout instead of the certificate.
	base := []string{"--brokers", strings.Join(c.ListenAddrs(), ","), "--index-dir", t.TempDir(), "--request-timeout", "5s"}

	r := kwal(t, nil, append([]string{"namespaces", "create", "tls-ns", "--tls-ca", ca}, base...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = kwal(t, map[string]string{"KWAL_TLS_CA": ca}, append([]string{"dump", "-n", "tls-ns"}, base...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "0 records")
	r = kwal(t, nil, append([]string{"namespaces", "list", "--tls-insecure"}, base...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "tls-ns")

	// Without trusting the certificate, or without TLS, it fails clearly.
	r = kwal(t, nil, append([]string{"namespaces", "list", "--tls"}, base...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "certificate")
	r = kwal(t, nil, append([]string{"namespaces", "list"}, base...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no broker")
}
