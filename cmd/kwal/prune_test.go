package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
)

// TestNamespacesPruneRetention: `namespaces prune --dry-run` prints the
// retention line of every namespace: none on kwal's own topics, and on a
// topic with retention.ms=1h the headroom of the oldest entry needed,
// flagged AT RISK with what to do under a 2h --retention-warn-margin (and
// warned about on stderr). `--prune-mode mark-only` marks what no region
// needs without deleting it; a --prune-mode that is neither mode is
// refused before anything connects.
func TestNamespacesPruneRetention(t *testing.T) {
	flags := cluster(t)
	ids := populate(t, flags, "held", []logstore.RegionID{1, 2}, 5, 10)
	populate(t, flags, "kept", []logstore.RegionID{1}, 2, 10)
	brokers := markFlushed(t, flags, "held", map[logstore.RegionID]logstore.EntryID{1: ids[1][2], 2: ids[2][2]})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	hour := "3600000"
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "retention.ms", Value: &hour}}, "held")
	require.NoError(t, err)
	require.NoError(t, resp[0].Err)

	r := kwal(t, nil, append([]string{"namespaces", "prune", "--dry-run", "--retention-warn-margin", "2h", "held", "kept"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`held: retention\.ms=3600000: headroom (59m\d+s|1h0m0s) \(retention\.ms\) for the oldest entry needed, ID %d, written \d+s ago; AT RISK, under the margin of 2h0m0s: flush region 1 \(Obsolete\) or raise retention\.ms\n`, ids[1][3]), r.stdout)
	require.Contains(t, r.stdout, "kept: retention none (only Prune deletes): no headroom to watch\n")
	require.Contains(t, r.stderr, "retention will soon delete entries a region still needs")

	r = kwal(t, nil, append([]string{"namespaces", "prune", "--dry-run", "--prune-mode", "mark-only", "held"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("held: would mark obsolete IDs 1..%d", ids[1][3]-1))
	require.Contains(t, r.stdout, "AT RISK, under the margin of 6h0m0s", "the default margin")
	r = kwal(t, nil, append([]string{"namespaces", "prune", "--prune-mode", "mark-only", "held"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("held: marked IDs 1..%d obsolete", ids[1][3]-1))
	require.Contains(t, r.stdout, "the first entry ID available is 1\n")

	r = kwal(t, nil, append([]string{"namespaces", "prune", "--prune-mode", "logical", "held"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `PruneMode: "logical" is not "delete" or "mark-only"`)
}
