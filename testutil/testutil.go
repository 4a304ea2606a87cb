// Package testutil gives kwal's tests a Kafka to talk to: the brokers named
// in KWAL_KAFKA_BROKERS (a real cluster, as CI runs it), or else a fresh
// in-process kfake cluster per test.
package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/kwal/kwal/embedded"
	"github.com/twmb/franz-go/pkg/kfake"
)

// BrokersEnv names the environment variable that points tests at real
// brokers (comma-separated host:port).
const BrokersEnv = "KWAL_KAFKA_BROKERS"

// RealBrokers returns the brokers in KWAL_KAFKA_BROKERS, or nil.
func RealBrokers() []string {
	env := strings.TrimSpace(os.Getenv(BrokersEnv))
	if env == "" {
		return nil
	}
	var out []string
	for _, b := range strings.Split(env, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Brokers returns seed brokers for a test: those in KWAL_KAFKA_BROKERS
// (comma-separated) when set, else a fresh in-process cluster that is
// closed when the test ends.
func Brokers(t testing.TB) []string {
	t.Helper()
	if b := RealBrokers(); len(b) > 0 {
		return b
	}
	return NewCluster(t).ListenAddrs()
}

// NewCluster starts an in-process kfake cluster of one broker (closed when
// the test ends; configured as embedded.Start's), for tests that need kfake's hooks (ControlKey, fault
// injection) whatever KWAL_KAFKA_BROKERS says. Extra options are appended.
func NewCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append(embedded.ClusterOptions(), opts...)...)
	if err != nil {
		t.Fatalf("testutil: start kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Topic returns a topic name unique to this test and run, so tests sharing
// a real broker never see each other's records.
func Topic(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testutil: random topic suffix: %v", err)
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 180 {
		name = name[:180]
	}
	return "kwal-test-" + name + "-" + hex.EncodeToString(b[:])
}
