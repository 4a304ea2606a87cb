package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore/kafka"
)

// flagCase is one numeric flag of one runnable command.
type flagCase struct {
	path []string // the command's words after "kwal", and an argument when it needs one
	flag *pflag.Flag
	lim  limit
}

// numericFlags lists every numeric flag of every runnable command of a,
// its own and inherited, failing the test for one without a range.
func numericFlags(t *testing.T, a *app) []flagCase {
	out := numericFlagsOf(a)
	for _, c := range out {
		if c.flag == nil {
			continue
		}
		if _, ok := a.limits[c.flag]; !ok {
			t.Errorf("--%s of kwal %s holds numbers but declares no range: give it one with a.bound", c.flag.Name, strings.Join(c.path, " "))
		}
	}
	return slices.DeleteFunc(out, func(c flagCase) bool {
		_, ok := a.limits[c.flag]
		return c.flag == nil || !ok
	})
}

// numericFlagsOf lists every numeric flag of every runnable command of a
// (a command without one is listed once with a nil flag).
func numericFlagsOf(a *app) []flagCase {
	var out []flagCase
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Runnable() {
			if c.Args != nil && c.Args(c, nil) != nil {
				path = append(append([]string(nil), path...), "some-name")
			}
			out = append(out, flagCase{path: path})
			visit := func(f *pflag.Flag) {
				if numericFlag(f) {
					out = append(out, flagCase{path: path, flag: f, lim: a.limits[f]})
				}
			}
			c.LocalFlags().VisitAll(visit)
			c.InheritedFlags().VisitAll(visit)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(a.rootCmd(), nil)
	return out
}

// format writes n as the flag's values are written.
func format(f *pflag.Flag, n uint64) string {
	switch f.Value.Type() {
	case "duration":
		return time.Duration(n).String()
	}
	return fmt.Sprint(n)
}

// typeMax is the largest value the flag's type holds.
func typeMax(f *pflag.Flag) uint64 {
	switch f.Value.Type() {
	case "int", "int64", "duration":
		return math.MaxInt64
	case "int32":
		return math.MaxInt32
	}
	return math.MaxUint64
}

// TestEveryNumericFlagIsBounded protects the rule that every numeric flag
// of every command has a declared range, checked before the command does
// anything: a value below or above it (or not a number) ends the command
// with status 1 and a message naming the flag, its range and, above it,
// the reason; nothing is created on disk or contacted. A new numeric flag
// without a range fails this test.
func TestEveryNumericFlagIsBounded(t *testing.T) {
	cases := numericFlags(t, newApp(io.Discard, io.Discard, nil))
	require.Greater(t, len(cases), 40, "the walk found the commands' flags")
	seen := map[string]bool{}
	for _, c := range cases {
		seen[strings.Join(c.path, " ")+" --"+c.flag.Name] = true
		dur := c.flag.Value.Type() == "duration"
		kind := kindOf(c.flag)
		bad := map[string]string{"not a number": "x"} // what -> value
		if c.lim.min > 0 {
			bad["below the minimum"] = format(c.flag, c.lim.min-1)
		}
		switch typ := c.flag.Value.Type(); {
		case dur:
			bad["negative"] = "-1s"
		case !strings.HasPrefix(typ, "uint") && typ != "bytes":
			bad["negative"] = "-1"
		}
		if c.lim.max < typeMax(c.flag) {
			bad["above the maximum"] = format(c.flag, c.lim.max+1)
		}
		for what, v := range bad {
			name := strings.Join(c.path, "_") + "/" + c.flag.Name + "/" + strings.ReplaceAll(what, " ", "_")
			t.Run(name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "data")
				args := append(append([]string(nil), c.path...), "--"+c.flag.Name, v, "--data-dir", dir, "--brokers", "127.0.0.1:1")
				r := kwal(t, nil, args...)
				require.Equal(t, exitError, r.code, r.stderr)
				require.Contains(t, r.stderr, "--"+c.flag.Name)
				require.NotContains(t, r.stderr, "panic")
				if what != "not a number" {
					require.Contains(t, r.stderr, c.lim.rangeText(kind))
				}
				if what == "above the maximum" && c.lim.why != "" {
					require.Contains(t, r.stderr, c.lim.why)
				}
				_, err := os.Stat(dir)
				require.True(t, os.IsNotExist(err), "the command touched its data dir before rejecting the flag")
			})
		}
		// The bounds themselves are allowed.
		for _, n := range []uint64{c.lim.min, c.lim.max} {
			if n > typeMax(c.flag) {
				continue
			}
			require.NoError(t, c.flag.Value.Set(format(c.flag, n)), "--%s %d", c.flag.Name, n)
			require.NoError(t, c.lim.check(c.flag), "--%s %d", c.flag.Name, n)
		}
	}
	// The flags of the issue that found the gap are among them.
	for _, k := range []string{"namespaces prune --request-timeout", "replay --bytes", "demo --entry-size", "demo --regions", "demo --size", "bench --calls", "dump --from", "namespaces list --request-timeout"} {
		require.True(t, seen[k], k)
	}
}

// TestEveryNumericDefaultIsInRange: a flag left out holds its default,
// which every command checks like a given value; a default outside the
// range would fail a command that never named the flag.
func TestEveryNumericDefaultIsInRange(t *testing.T) {
	for _, c := range numericFlags(t, newApp(io.Discard, io.Discard, nil)) {
		require.NoError(t, c.lim.check(c.flag), "the default of --%s of kwal %s", c.flag.Name, strings.Join(c.path, " "))
	}
}

// TestReplayNegativeBytesIsAnError protects the case that once panicked
// in preview: --bytes -1 is refused, naming the flag and its range.
func TestReplayNegativeBytesIsAnError(t *testing.T) {
	r := kwal(t, nil, "replay", "-n", "ns", "-r", "1", "--bytes", "-1", "--brokers", "127.0.0.1:1")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "kwal: --bytes: -1 is outside the allowed range [0, 65536]")
	require.Equal(t, "", preview([]byte("abc"), -1)[:0]) // and preview itself does not panic
}

// TestWorkloadProductsAreBounded protects the checks that span flags: the
// memory a run's data would take, and more namespaces than regions.
func TestWorkloadProductsAreBounded(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--entry-size", "33554432", "--writers", "100", "--entries-per-call", "100"},
		{"bench", "--entry-size", "1048576", "--writers", "64", "--calls", "100"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		r := kwal(t, nil, append(args, "--data-dir", dir)...)
		require.Equal(t, exitError, r.code)
		require.Contains(t, r.stderr, "--entry-size is")
		require.Contains(t, r.stderr, "more than the 1.07 GB a run may hold in memory")
		_, err := os.Stat(dir)
		require.True(t, os.IsNotExist(err))
	}
	r := kwal(t, nil, "demo", "--regions", "2", "--topics", "3")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--topics 3 is more than --regions 2")
}

// TestRejectedDemoDeletesNothing protects the order the issue found
// reversed: a demo whose flags are refused has not deleted the earlier
// runs' namespaces.
func TestRejectedDemoDeletesNothing(t *testing.T) {
	dir := t.TempDir()
	r := kwal(t, nil, "namespaces", "create", demoPrefix+"earlier-0", "--data-dir", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, bad := range [][]string{{"--entry-size", "1000000000"}, {"--regions", "100000000"}, {"--topics", "65"}} {
		r = kwal(t, nil, append([]string{"demo", "--data-dir", dir}, bad...)...)
		require.Equal(t, exitError, r.code, r.stderr)
		require.Contains(t, r.stderr, bad[0])
	}
	r = kwal(t, nil, "namespaces", "list", "--data-dir", dir)
	require.Equal(t, []string{demoPrefix + "earlier-0"}, listed(r.stdout))
}

// TestEntrySizeIsBoundedByMaxEntryBytes: demo, bench and chaos refuse, before
// connecting, an entry size that kwal's AppendBatch would refuse
// (ErrEntryTooLarge), and say the limit in --help; an entry of exactly
// the limit is appended and checked.
func TestEntrySizeIsBoundedByMaxEntryBytes(t *testing.T) {
	maxEntry := kafka.DefaultConfig().MaxEntryBytes
	dir := filepath.Join(t.TempDir(), "data")
	r := kwal(t, nil, "demo", "--entry-size", strconv.FormatInt(maxEntry+1, 10), "--data-dir", dir)
	require.Equal(t, exitError, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("kwal: --entry-size: %d is outside the allowed range [32, %d (%d MiB)]: kwal refuses entries larger than its Config.MaxEntryBytes (ErrEntryTooLarge)\n", maxEntry+1, maxEntry, maxEntry/miB), r.stderr)
	require.NoDirExists(t, dir)
	r = kwal(t, nil, "demo", "--help")
	require.Regexp(t, fmt.Sprintf(`--entry-size int +bytes of each entry's data \(at most kwal's MaxEntryBytes\) \[32, %d \(%d MiB\)\]`, maxEntry, maxEntry/miB), r.stdout)

	a := newApp(io.Discard, io.Discard, nil)
	root := a.rootCmd()
	chaos, _, err := root.Find([]string{"chaos"})
	require.NoError(t, err)
	require.LessOrEqual(t, a.limits[chaos.Flags().Lookup("entry-size")].max, uint64(maxEntry))
	bench, _, err := root.Find([]string{"bench"})
	require.NoError(t, err)
	require.LessOrEqual(t, a.limits[bench.Flags().Lookup("entry-size")].max, uint64(maxEntry), "bench allowed entries its store would refuse")

	flags := cluster(t)
	r = kwal(t, nil, append([]string{"demo", "--entries", "1", "--entry-size", strconv.FormatInt(maxEntry, 10), "--writers", "1", "--regions", "1",
		"--topics", "1", "--entries-per-call", "1", "--quiet"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "every acknowledged entry came back")
}
