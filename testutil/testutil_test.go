package testutil

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRealBrokersParsesTheEnvironment protects how tests find real
// brokers: comma-separated, spaces and empty items ignored, none when unset.
func TestRealBrokersParsesTheEnvironment(t *testing.T) {
	t.Setenv(BrokersEnv, "")
	require.Nil(t, RealBrokers())
	t.Setenv(BrokersEnv, " 127.0.0.1:9092, ,127.0.0.1:9094 ,")
	require.Equal(t, []string{"127.0.0.1:9092", "127.0.0.1:9094"}, RealBrokers())
	require.Equal(t, []string{"127.0.0.1:9092", "127.0.0.1:9094"}, Brokers(t))
}

// TestBrokersStartsAClusterPerTest protects the default: without the
// variable, each test gets its own in-process cluster, closed at its end
// (goleak would catch one left running).
func TestBrokersStartsAClusterPerTest(t *testing.T) {
	t.Setenv(BrokersEnv, "")
	var a, b []string
	t.Run("a", func(t *testing.T) { a = Brokers(t); require.NotEmpty(t, a) })
	t.Run("b", func(t *testing.T) { b = Brokers(t); require.NotEmpty(t, b) })
	require.NotEqual(t, a, b)
}

// TestTopicIsUniqueAndValid protects test isolation on a shared broker:
// names are unique per call and use only Kafka's topic characters.
func TestTopicIsUniqueAndValid(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := Topic(t)
		require.False(t, seen[n])
		seen[n] = true
		require.Regexp(t, `^[a-zA-Z0-9._-]{1,249}$`, n)
	}
	t.Run("odd name/with spaces & symbols", func(t *testing.T) {
		require.Regexp(t, `^[a-zA-Z0-9._-]{1,249}$`, Topic(t))
	})
}
