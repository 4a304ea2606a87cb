package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
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

// TestDeleteOfTheClaimsTopicIsRefused: the claims topic and Kafka's
// internal topics are no namespaces; deleting one says so (deleting the
// claims topic would forget every region's claims) and deletes nothing.
func TestDeleteOfTheClaimsTopicIsRefused(t *testing.T) {
	flags := cluster(t)
	for _, name := range []string{"kwal-claims", "__consumer_offsets"} {
		r := kwal(t, nil, append([]string{"namespaces", "delete", name}, flags...)...)
		require.Equal(t, exitError, r.code)
		require.Contains(t, r.stderr, "invalid namespace")
		require.Contains(t, r.stderr, name)
		require.Empty(t, r.stdout)
	}
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
	require.Equal(t, []string{"keep-me"}, listed(l.stdout))
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
	require.Equal(t, []string{"kwal-bench-1-a", "kwal-bench-1-b", "other"}, listed(kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...).stdout))

	r = kwal(t, nil, append([]string{"namespaces", "delete", "nomatch-*", "--yes"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `no namespace matches "nomatch-*" (nothing was deleted)`)

	r = kwal(t, nil, append([]string{"namespaces", "delete", "kwal-bench-*", "--yes"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "deleted kwal-bench-1-a\ndeleted kwal-bench-1-b\n", r.stdout)
	require.Equal(t, []string{"other"}, listed(kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...).stdout))

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
	require.Contains(t, r.stdout, "region     2 (from ID 1, indexed)\n")
	require.Contains(t, r.stdout, "entries    0: region 2 has no entries in busy from ID 1; the namespace holds entries up to ID 8, of region(s) 1, 3 as far as the index has seen")
	// An ID the log never held is an error, not an empty replay: the
	// caller learned it somewhere, so the log lost entries or is another.
	for _, extra := range [][]string{nil, {"--summary"}, {"--no-index"}} {
		r = kwal(t, nil, append(append([]string{"replay", "-n", "busy", "-r", "1", "--from", "100"}, extra...), flags...)...)
		require.Equal(t, exitError, r.code, r.stdout)
		require.Empty(t, r.stdout)
		require.Equal(t, "kwal: --from 100 is past the end of namespace busy: its latest entry ID is 8, so it never held ID 100 (replay from 9 or below)\n", r.stderr)
	}
	// From the ID the next append gets, there is nothing yet: not an error.
	r = kwal(t, nil, append([]string{"replay", "-n", "busy", "-r", "1", "--from", "9"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "region 1 has no entries in busy from ID 9; the namespace holds entries up to ID 8 (ID 9 is the one its next entry gets)")
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

// TestReplayOfAnUnknownNamespace: replay says "unknown namespace" like the
// other commands, before printing anything.
func TestReplayOfAnUnknownNamespace(t *testing.T) {
	flags := cluster(t)
	for _, extra := range [][]string{nil, {"--summary"}, {"--from", "5"}} {
		r := kwal(t, nil, append(append([]string{"replay", "-n", "nosuch", "-r", "1"}, extra...), flags...)...)
		require.Equal(t, exitError, r.code, r.stderr)
		require.Empty(t, r.stdout)
		require.Equal(t, "kwal: namespace \"nosuch\": unknown namespace\n", r.stderr)
	}
	r := kwal(t, nil, append([]string{"dump", "-n", "nosuch"}, flags...)...)
	require.Equal(t, "kwal: namespace \"nosuch\": unknown namespace\n", r.stderr)
}

// TestErrorText: the command's error is one line with "kwal: " once;
// only a list keeps its lines.
func TestErrorText(t *testing.T) {
	joined := fmt.Errorf("kwal: namespace %q: %w", "x", errors.Join(errors.New("kwal: unknown namespace"), errors.New("UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.")))
	require.Equal(t, `kwal: namespace "x": unknown namespace; UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.`, errorText(joined))
	require.Equal(t, "kwal: demo interrupted", errorText(interruptedError("kwal: demo interrupted")))
	require.Equal(t, "kwal: a\n  b", errorText(linesError{errors.New("a\n  b")}))
	require.Equal(t, "kwal: a\n  b", errorText(&exitErr{code: exitMismatch, err: linesError{errors.New("a\n  b")}}))
}

// TestFlagValuesInTheirOwnWords: a value that is not of the flag's kind
// is named with the kind, not with strconv's error, from the command line
// and from the environment.
func TestFlagValuesInTheirOwnWords(t *testing.T) {
	r := kwal(t, nil, "demo", "--entries", "1e3")
	require.Equal(t, exitError, r.code)
	require.Equal(t, "kwal: --entries: \"1e3\" is not a whole number (see 'kwal demo --help')\n", r.stderr)
	r = kwal(t, map[string]string{"KWAL_REQUEST_TIMEOUT": "10"}, "namespaces", "list")
	require.Equal(t, exitError, r.code)
	require.Equal(t, "kwal: environment variable KWAL_REQUEST_TIMEOUT: --request-timeout: \"10\" is not a duration (write it like 500ms, 30s or 2m)\n", r.stderr)
	r = kwal(t, nil, "replay", "-n", "x", "-r", "99999999999999999999999")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "kwal: --region: \"99999999999999999999999\" is too large or too small")
	require.NotContains(t, r.stderr, "strconv")
}

// TestEmptyDataDirIsRefused: --data-dir ” would keep the embedded
// broker's data in memory and lose it at the end of the command.
func TestEmptyDataDirIsRefused(t *testing.T) {
	r := kwal(t, nil, "namespaces", "list", "--data-dir", "")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "kwal: --data-dir is empty")
	// With --brokers and --index-dir, it is not used.
	flags := cluster(t)
	r = kwal(t, nil, "namespaces", "list", "--brokers", flagValue(flags, "--brokers"), "--index-dir", t.TempDir(), "--data-dir", "")
	require.Equal(t, exitOK, r.code, r.stderr)
}

// TestOneMeaningOfSize: chaos calls the size of an entry --entry-size, as
// demo and bench do (demo's --size is the total); --size stays, deprecated.
func TestOneMeaningOfSize(t *testing.T) {
	root := newApp(io.Discard, io.Discard, nil).rootCmd()
	chaos, _, err := root.Find([]string{"chaos"})
	require.NoError(t, err)
	require.NotNil(t, chaos.Flags().Lookup("entry-size"))
	require.Contains(t, chaos.Flags().Lookup("size").Deprecated, "use --entry-size")
	demo, _, err := root.Find([]string{"demo"})
	require.NoError(t, err)
	require.Contains(t, demo.Flags().Lookup("entry-size").Usage, "bytes of each entry's data")
	require.Contains(t, chaos.Flags().Lookup("entry-size").Usage, "bytes of each entry's data")
	require.Contains(t, demo.Flags().Lookup("size").Usage, "append at most this much entry data")
	// The old name still sets the entry size; KWAL_SIZE, demo's total,
	// does not reach it.
	env := map[string]string{"KWAL_SIZE": "64MB"}
	require.NoError(t, applyEnv(chaos.Flags(), func(k string) string { return env[k] }))
	require.Equal(t, "1024", chaos.Flags().Lookup("entry-size").Value.String())
	require.NoError(t, chaos.Flags().Set("size", "2048"))
	require.Equal(t, "2048", chaos.Flags().Lookup("entry-size").Value.String())
	require.NoError(t, applyEnv(demo.Flags(), func(k string) string { return env[k] }))
	require.Equal(t, "64 MB", demo.Flags().Lookup("size").Value.String())
}

// TestBrokerOutage: the broker gone in the middle of the demo's appends,
// each kind of warning is printed once (and how many more were held back
// at the end), and the last line says what was acknowledged before the
// failure.
func TestBrokerOutage(t *testing.T) {
	c := testutil.NewCluster(t)
	// The broker goes once it has answered some produce requests: control
	// functions run one request at a time, so when the 21st arrives the
	// first 20 were handled.
	produced := make(chan struct{})
	var n int
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if n++; n == 21 {
			close(produced)
		}
		return nil, nil, false
	})
	var out, errb lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-produced:
			c.Close()
		case <-ctx.Done():
		}
	}()
	code := run(ctx, []string{"demo", "--brokers", strings.Join(c.ListenAddrs(), ","), "--index-dir", t.TempDir(), "--data-dir", t.TempDir(),
		"--duration", "1m", "--size", "0", "--quiet", "--writers", "8", "--regions", "8", "--topics", "2",
		"--produce-timeout", "1s", "--request-timeout", "1s", "--dial-timeout", "200ms"}, nil, &out, &errb, func(string) string { return "" })
	require.Equal(t, exitError, code, errb.String())
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	require.Regexp(t, `^kwal: demo failed while appending: append to region \d+ of kwal-demo-\S+: .*; [1-9]\d* entries \(.*\) acknowledged in \S+ to namespaces kwal-demo-\S+, kwal-demo-\S+; nothing was checked$`,
		lines[len(lines)-1])
	kinds := map[string]int{}
	msg := regexp.MustCompile(` msg="([^"]*)"`)
	for _, l := range lines[:len(lines)-1] {
		m := msg.FindStringSubmatch(l)
		require.NotNil(t, m, "every other line is a log record: %s", l)
		kinds[m[1]]++
	}
	for k, n := range kinds {
		require.LessOrEqual(t, n, 2, "%q: printed once, then its count of repeats", k)
	}
}

// TestRetentionIsShown: namespaces list and index show say what each
// namespace's topic lets the broker delete on its own, and flag a topic
// whose retention deletes entries by age or size, or that is compacted.
func TestRetentionIsShown(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "kept", []logstore.RegionID{1}, 2, 10)
	populate(t, flags, "aged", []logstore.RegionID{1}, 2, 10)
	r := kwal(t, nil, append([]string{"namespaces", "create", "squashed"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(flagValue(flags, "--brokers"), ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for topic, c := range map[string]kadm.AlterConfig{
		"aged":     {Name: "retention.ms", Value: kadm.StringPtr("3600000")},
		"squashed": {Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	} {
		resp, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{c}, topic)
		require.NoError(t, err)
		require.NoError(t, resp[0].Err)
	}

	r = kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, strings.Join([]string{
		"NAMESPACE  RETENTION",
		"aged       retention.ms=3600000: DELETES entries whatever the regions still need",
		"kept       none (only Prune deletes)",
		"squashed   cleanup.policy=compact: DELETES entries whatever the regions still need",
	}, "\n")+"\n", r.stdout)

	for ns, want := range map[string]string{
		"aged": "retention.ms=3600000: DELETES entries whatever the regions still need",
		"kept": "none (only Prune deletes)",
	} {
		r = kwal(t, nil, append([]string{"index", "show", "-n", ns}, flags...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "\n  retention         "+want+"\n")
		r = kwal(t, nil, append([]string{"index", "show", "-n", ns, "--json"}, flags...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, `"retention":"`+want+`"`)
	}
}

// TestRequiredFlagsAreNamedOnce: a required flag or argument left out is
// one line naming the command once, after the one "kwal: " every error
// starts with, and the flag as it is typed; a required flag's default
// (never used) does not fail its range check first. Every command whose
// help marks a flag "(required)" is among the cases.
func TestRequiredFlagsAreNamedOnce(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"dump"}, "dump: -n/--namespace is required"},
		{[]string{"replay"}, "replay: -n/--namespace is required"},
		{[]string{"replay", "-n", "ns"}, "replay: -r/--region is required"},
		{[]string{"index", "verify"}, "index verify: -n/--namespace is required"},
		{[]string{"regions", "show"}, "regions show: -n/--namespace is required"},
		{[]string{"regions", "claim"}, "regions claim: -n/--namespace is required"},
		{[]string{"regions", "claim", "-n", "ns"}, "regions claim: -r/--region is required"},
		{[]string{"regions", "release"}, "regions release: -n/--namespace is required"},
		{[]string{"regions", "release", "-n", "ns"}, "regions release: -r/--region is required"},
		{[]string{"regions", "repair"}, "regions repair: -n/--namespace is required"},
		{[]string{"regions", "repair", "-n", "ns"}, "regions repair: -r/--region is required"},
		{[]string{"regions", "repair", "-n", "ns", "-r", "1"}, "regions repair: --skip is required"},
		{[]string{"namespaces", "prune"}, "namespaces prune: name at least one namespace (NAME or -n NAME)"},
		{[]string{"namespaces", "delete"}, "namespaces delete: name at least one namespace or pattern"},
		{[]string{"namespaces", "create"}, "namespaces create: name the namespaces to create, or give --pool"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			r := kwal(t, nil, append(c.args, "--data-dir", dir, "--brokers", "127.0.0.1:1")...)
			require.Equal(t, exitError, r.code, r.stderr)
			require.Equal(t, "kwal: "+c.want+"\n", r.stderr)
			require.Empty(t, r.stdout)
		})
		covered[c.want] = true
	}
	// Every flag whose help says "(required)" has its case.
	var walk func(cmd *cobra.Command)
	found := 0
	walk = func(cmd *cobra.Command) {
		cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "(required)") {
				found++
				want := commandName(cmd) + ": " + flagSpelling(f) + " is required"
				require.True(t, covered[want], "no case for %q", want)
			}
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(newApp(io.Discard, io.Discard, nil).rootCmd())
	require.Equal(t, 12, found, "the walk found the required flags")
}

// TestIndexShowSaysItsColumnsAreOffsets: index show's positions are
// Kafka offsets, headed as such, and the line above its table gives the
// mapping to the IDs replay prints (an entry's first offset + 1).
func TestIndexShowSaysItsColumnsAreOffsets(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "units", []logstore.RegionID{1, 2}, 3, 30) // region 2 at offsets 1, 3, 5

	r := kwal(t, nil, append([]string{"index", "show", "-n", "units"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "(Kafka offsets, as kwal dump prints them; an entry's ID, as replay prints it, is its first record's offset + 1)\n")
	require.Regexp(t, `\sregion\s+records\s+ranges\s+first offset\s+last offset\s+obsolete below offset\s+records in log\n`, r.stdout)
	require.Regexp(t, `\s2\s+3\s+3\s+1\s+5\s+-\s+3\n`, r.stdout)

	r = kwal(t, nil, append([]string{"replay", "-n", "units", "-r", "2"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	var ids []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(\d+)\s+30\s+"r2-`).FindAllStringSubmatch(r.stdout, -1) {
		ids = append(ids, m[1])
	}
	require.Equal(t, []string{"2", "4", "6"}, ids, "offsets 1, 3, 5 + 1")
}

// TestFlagHelpSaysWhatTheCodeDoes protects help texts that once said less
// than the code does, or pointed at a source file.
func TestFlagHelpSaysWhatTheCodeDoes(t *testing.T) {
	usage := func(args ...string) map[string]string {
		t.Helper()
		r := kwal(t, nil, append(args, "--help")...)
		require.Equal(t, exitOK, r.code, r.stderr)
		out := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([\w-]+)(?: \w+)?\s+(.*)$`).FindAllStringSubmatch(r.stdout, -1) {
			out[m[1]] = m[2]
		}
		return out
	}
	root := usage()
	require.Contains(t, root["produce-timeout"], "each append call as a whole")
	require.Contains(t, root["produce-timeout"], "entries already sent may still be written")
	bench := usage("bench")
	require.Contains(t, bench["peers"], "--peers=false skips them")
	require.NotContains(t, bench["recovery-runs"], ".go")
	require.Contains(t, bench["recovery-runs"], "0 skips it")
	require.NotContains(t, usage("index", "show")["regions"], "(default [])")

	// No flag of any command sends its reader to the source.
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			require.NotRegexp(t, `\w\.go\b`, f.Usage, "kwal %s --%s", commandName(cmd), f.Name)
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(newApp(io.Discard, io.Discard, nil).rootCmd())
}

// TestClaimOwnerDefaultsToTheIndexDirsName: regions claim without
// --owner claims under the name the first store opened on --index-dir
// kept there (as its help says), not under a name of its own.
func TestClaimOwnerDefaultsToTheIndexDirsName(t *testing.T) {
	flags := cluster(t)
	cfg := kafka.DefaultConfig()
	cfg.Brokers = strings.Split(flagValue(flags, "--brokers"), ",")
	cfg.IndexDir = flagValue(flags, "--index-dir")
	cfg.Owner = "first-store"
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, st.CreateNamespace(ctx, "owned"))
	require.NoError(t, st.Close())

	r := kwal(t, nil, append([]string{"regions", "claim", "-n", "owned", "-r", "1"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "claimed region 1 of owned: epoch 1, owner first-store\n")
	r = kwal(t, nil, append([]string{"regions", "claim", "-n", "owned", "-r", "1", "--owner", "by-hand"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "claimed region 1 of owned: epoch 2, owner by-hand\n")
}

// TestObsoleteMarkTakesAnID protects what the README and Obsolete's doc
// say of IDs: the Obsolete mark is a record of the log with an ID of its
// own that no entry gets, so LatestEntryID moves past it and the next
// entry's ID skips it (replay shows the gap, dump the mark at its place).
func TestObsoleteMarkTakesAnID(t *testing.T) {
	flags := cluster(t)
	ids := populate(t, flags, "marked", []logstore.RegionID{1}, 2, 10)
	require.Equal(t, []logstore.EntryID{1, 2}, ids[1])

	cfg := kafka.DefaultConfig()
	cfg.Brokers = strings.Split(flagValue(flags, "--brokers"), ",")
	cfg.IndexDir = flagValue(flags, "--index-dir")
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, st.Obsolete(ctx, "marked", 1, 1))
	latest, err := st.LatestEntryID(ctx, "marked")
	require.NoError(t, err)
	require.Equal(t, logstore.EntryID(3), latest, "the mark took ID 3")
	res, err := st.AppendBatch(ctx, []logstore.Entry{{Namespace: "marked", Region: 1, Data: []byte("after the mark")}})
	require.NoError(t, err)
	require.Equal(t, logstore.EntryID(4), res.LastEntryIDs[1])
	require.NoError(t, st.Close())

	r := kwal(t, nil, append([]string{"replay", "-n", "marked", "-r", "1", "--from", "1"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^\s+1\s+10\s.*\n\s+2\s+10\s.*\n\s+4\s+14\s+"after the mark"\n3 entries`, r.stdout)
	r = kwal(t, nil, append([]string{"dump", "-n", "marked"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^\s+2\s+3\s+0\s+mark\s`, r.stdout, "offset 2, ID 3: the mark")
}
