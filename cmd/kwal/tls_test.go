package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwal/kwal/testutil"
)

// selfSigned returns a TLS server config for 127.0.0.1 and the path of its
// certificate (PEM), to trust with --tls-ca.
func selfSigned(t *testing.T) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kwal-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"kwal-test"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, path
}

func TestTLS(t *testing.T) {
	srv, ca := selfSigned(t)
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
