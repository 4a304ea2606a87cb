package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
)

// The tests of this file protect messages that must say what happened,
// and only that.

// TestCreateSaysWhenANamespaceExists: a second create of a name does not
// claim to have created it.
func TestCreateSaysWhenANamespaceExists(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"namespaces", "create", "twice"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "created twice\n", r.stdout)
	r = kwal(t, nil, append([]string{"namespaces", "create", "twice", "fresh"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "exists twice (left as it is)\ncreated fresh\n", r.stdout)
}

// TestDeleteOfWhatDoesNotExistIsAnError: deleting a name that is neither
// a topic nor an index fails, and deletes nothing else named with it.
func TestDeleteOfWhatDoesNotExistIsAnError(t *testing.T) {
	flags := cluster(t)
	require.Equal(t, exitOK, kwal(t, nil, append([]string{"namespaces", "create", "keep-me"}, flags...)...).code)
	r := kwal(t, nil, append([]string{"namespaces", "delete", "keep-me", "nosuch"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "no namespace nosuch: no such topic, and no index of it in")
	require.Contains(t, r.stderr, "nothing was deleted")
	require.Empty(t, r.stdout)
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, "keep-me\n", l.stdout)
}

// TestDeleteTakesPatternsWithAConfirmation: a glob (a prefix is PREFIX*)
// lists what it matches and deletes it only with --yes (or a yes on the
// terminal); a name whose topic is gone but whose index is left is
// deleted and reported as such.
func TestDeleteTakesPatternsWithAConfirmation(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "kwal-bench-1-a", []logstore.RegionID{1}, 1, 10)
	populate(t, flags, "kwal-bench-1-b", []logstore.RegionID{1}, 1, 10)
	populate(t, flags, "other", []logstore.RegionID{1}, 1, 10)

	r := kwal(t, nil, append([]string{"namespaces", "delete", "kwal-bench-*"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "the patterns match 2 namespace(s):\n  kwal-bench-1-a\n  kwal-bench-1-b\npass --yes to delete them (nothing was deleted)")
	require.Equal(t, "kwal-bench-1-a\nkwal-bench-1-b\nother\n", kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...).stdout)

	r = kwal(t, nil, append([]string{"namespaces", "delete", "nomatch-*", "--yes"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `no namespace matches "nomatch-*" (nothing was deleted)`)

	r = kwal(t, nil, append([]string{"namespaces", "delete", "kwal-bench-*", "--yes"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "deleted kwal-bench-1-a\ndeleted kwal-bench-1-b\n", r.stdout)
	require.Equal(t, "other\n", kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...).stdout)

	// Its topic deleted behind kwal's back, "other" keeps only its index.
	fresh := []string{"--brokers", testutilCluster(t), "--index-dir", flagValue(flags, "--index-dir")}
	r = kwal(t, nil, append([]string{"namespaces", "delete", "other"}, fresh...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "deleted the index of other (it had no topic)\n", r.stdout)
	r = kwal(t, nil, append([]string{"index", "show", "--no-scan"}, fresh...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "no index checkpoints in")
}

// TestConfirmAsksOnTheTerminal protects the interactive path of a
// pattern's confirmation: only a yes deletes.
func TestConfirmAsksOnTheTerminal(t *testing.T) {
	for answer, ok := range map[string]bool{"y\n": true, "yes\n": true, "YES\n": true, "\n": false, "n\n": false, "": false} {
		a := newApp(io.Discard, io.Discard, nil)
		a.stdin = strings.NewReader(answer)
		a.canAsk = func() bool { return true }
		err := a.confirm([]string{"a", "b"})
		if ok {
			require.NoError(t, err, "%q", answer)
		} else {
			require.ErrorIs(t, err, errNotConfirmed, "%q", answer)
		}
	}
}

// TestIndexShowOfAMissingNamespace: index show tells apart a namespace
// with neither topic nor index (an error), one with a topic but no index
// yet, and one with an index but no topic.
func TestIndexShowOfAMissingNamespace(t *testing.T) {
	flags := cluster(t)
	r := kwal(t, nil, append([]string{"index", "show", "-n", "nosuch"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "no namespace nosuch: no such topic, and no index of it in "+flagValue(flags, "--index-dir"))
	r = kwal(t, nil, append([]string{"index", "show", "-n", "nosuch", "--no-scan"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "namespace nosuch has no index in")

	// A topic created and written by other programs: no index of it yet.
	r = kwal(t, nil, "namespaces", "create", "unindexed", "--brokers", flagValue(flags, "--brokers"), "--index-dir", t.TempDir())
	require.Equal(t, exitOK, r.code, r.stderr)
	produceRaw(t, flags, rawRecord("unindexed", "x"), rawRecord("unindexed", "y"))
	r = kwal(t, nil, append([]string{"index", "show", "-n", "unindexed"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "no index in "+flagValue(flags, "--index-dir")+" yet: its log holds offsets [0, 2), with records of 0 region(s)")

	// An index whose topic is gone (another cluster, same index dir).
	populate(t, flags, "indexed", []logstore.RegionID{1, 2}, 3, 10)
	other := []string{"--brokers", testutilCluster(t), "--index-dir", flagValue(flags, "--index-dir")}
	r = kwal(t, nil, append([]string{"index", "show", "-n", "indexed"}, other...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "namespace indexed has an index in")
	require.Contains(t, r.stderr, "but no topic")
	require.Contains(t, r.stdout, "regions           2, 6 records indexed")
}

// TestReplayOfARegionThatNeverWrote: a replay that returns nothing says
// whether the namespace is empty or which regions it holds.
func TestReplayOfARegionThatNeverWrote(t *testing.T) {
	flags := cluster(t)
	require.Equal(t, exitOK, kwal(t, nil, append([]string{"namespaces", "create", "empty"}, flags...)...).code)
	r := kwal(t, nil, append([]string{"replay", "-n", "empty", "-r", "2"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "0 entries, 0 B\nnamespace empty is empty\n")

	populate(t, flags, "busy", []logstore.RegionID{1, 3}, 4, 10)
	r = kwal(t, nil, append([]string{"replay", "-n", "busy", "-r", "2", "--summary"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "entries    0: region 2 has no entries in busy from ID 0; the namespace holds entries up to ID 8, of region(s) 1, 3 as far as the index has seen")
	// An ID the log never held is an error, not an empty replay: the
	// caller learned it somewhere, so the log lost entries or is another.
	r = kwal(t, nil, append([]string{"replay", "-n", "busy", "-r", "1", "--from", "100"}, flags...)...)
	require.NotEqual(t, exitOK, r.code, r.stdout)
	require.Contains(t, r.stderr, "the namespace's latest entry ID is 8")
}

// TestIndexDirWithBrokersIsKeptApart: with --brokers, the default index
// dir is the cluster's own, not the embedded broker's <data-dir>/index.
func TestIndexDirWithBrokersIsKeptApart(t *testing.T) {
	dir := t.TempDir()
	a := newApp(io.Discard, io.Discard, nil)
	a.g.dataDir = dir
	require.Equal(t, filepath.Join(dir, "index"), a.indexDir())
	a.g.brokers = []string{"kafka-2:9092,kafka-1:9092"}
	require.Equal(t, filepath.Join(dir, "index-kafka-1_9092_kafka-2_9092"), a.indexDir())
	a.g.indexDir = "/elsewhere"
	require.Equal(t, "/elsewhere", a.indexDir())

	addr := testutilCluster(t)
	r := kwal(t, nil, "namespaces", "create", "apart", "--brokers", addr, "--data-dir", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = kwal(t, nil, "replay", "-n", "apart", "-r", "1", "--brokers", addr, "--data-dir", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoDirExists(t, filepath.Join(dir, "index"))
	require.DirExists(t, filepath.Join(dir, "index-"+strings.ReplaceAll(addr, ":", "_")))
}
