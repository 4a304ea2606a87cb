package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/internal/chaos"
)

// TestChaosRefusesWhatItCannotDrive protects kwal chaos's preconditions:
// it needs --brokers, known scenarios, the script, and a 3-node cluster,
// and says which is missing before it touches anything.
func TestChaosRefusesWhatItCannotDrive(t *testing.T) {
	r := kwal(t, nil, "chaos")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "chaos needs --brokers")

	addr := testutilCluster(t)
	r = kwal(t, nil, "chaos", "--brokers", addr, "--scenario", "meteor", "--script", "../../scripts/kafka.sh")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `--scenario: "meteor" is not one of leader-kill`)

	r = kwal(t, nil, "chaos", "--brokers", addr, "--script", "no/such/kafka.sh")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--script:")

	r = kwal(t, nil, "chaos", "--brokers", addr, "--script", "../../scripts/kafka.sh")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "chaos needs a 3-node cluster; the brokers list 1 node(s)")
}

// TestChaosOnCluster protects kwal chaos end to end on the 3-node cluster
// named in KWAL_KAFKA_CLUSTER3 (skipped without it; the script finds the
// cluster through KWAL_KAFKA_HOME and KWAL_KAFKA_PORT): the leader-pause
// scenario runs and the table reports it with nothing lost.
func TestChaosOnCluster(t *testing.T) {
	brokers, err := chaos.BrokersFromEnv()
	if err != nil {
		t.Skip(err)
	}
	r := kwal(t, nil, "chaos", "--brokers", strings.Join(brokers, ","), "--scenario", "leader-pause",
		"--produce-timeout", "5s", "--script", "../../scripts/kafka.sh", "--writers", "4")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "acknowledged")
	lines := strings.Split(r.stdout, "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	f := strings.Fields(lines[1])
	require.Equal(t, "leader-pause", f[0])
	require.Equal(t, []string{"0", "0", "0"}, f[5:8], "lost, duplicated, reordered: %s", lines[1])
}
