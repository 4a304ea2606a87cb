package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEveryCommandReportsAnInterruptionInOneLine protects Ctrl-C's
// contract for every runnable command: interrupted (here before it could
// do anything), it ends with status 130 and one line on stderr naming the
// command, never a trail of per-call errors or a success.
func TestEveryCommandReportsAnInterruptionInOneLine(t *testing.T) {
	flags := cluster(t)
	for _, c := range runnableCommands(newApp(io.Discard, io.Discard, nil)) {
		args := append(append([]string(nil), c...), flags...)
		switch c[0] {
		case "replay":
			args = append(args, "-n", "ns", "-r", "1")
		case "regions":
			args = append(args, "-n", "ns", "-r", "1")
		case "dump", "index":
			args = append(args, "-n", "ns")
		}
		t.Run(strings.Join(c, "_"), func(t *testing.T) {
			r := kwalUntil(t, nil, "-", args...)
			require.Equal(t, exitInterrupted, r.code, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			require.Len(t, lines, 1, r.stderr)
			require.Contains(t, lines[0], "interrupted")
		})
	}
}

// runnableCommands lists the words of every runnable command, with an
// argument for those that need one.
func runnableCommands(a *app) [][]string {
	var out [][]string
	seen := map[string]bool{}
	for _, c := range numericFlagsOf(a) {
		k := strings.Join(c.path, " ")
		if !seen[k] {
			seen[k] = true
			out = append(out, c.path)
		}
	}
	return out
}

// TestBenchCleansUpWhenInterrupted protects the data dir from runs cut
// short: Ctrl-C in the middle of the appends ends the benchmark at once
// with one line, and the namespaces it had created are deleted.
func TestBenchCleansUpWhenInterrupted(t *testing.T) {
	flags := cluster(t)
	start := time.Now()
	r := kwalUntil(t, nil, "bench: round 1/2: kwal", append([]string{"bench", "--regions", "4", "--writers", "4",
		"--entry-size", "256", "--calls", "5", "--duration", "1m", "--rounds", "2"}, flags...)...)
	require.Equal(t, exitInterrupted, r.code, r.stderr)
	require.Less(t, time.Since(start), 30*time.Second) // not the minute of --duration
	last := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.Regexp(t, `^kwal: bench interrupted while round 1/2: kwal, .*; 14 namespace\(s\) of the run \(kwal-bench-\S+\*\) deleted \(--keep keeps them\)$`, last[len(last)-1])
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, exitOK, l.code, l.stderr)
	require.NotContains(t, l.stdout, benchPrefix)
}

// TestBenchMatrixCleansUpWhenInterrupted protects the user's cluster from
// a matrix cut short: Ctrl-C in a layout ends it, the layout's namespaces
// are deleted (as plain bench's are), and the last line says so.
func TestBenchMatrixCleansUpWhenInterrupted(t *testing.T) {
	flags := cluster(t)
	r := kwalUntil(t, nil, "raw measured", append([]string{"bench", "--matrix", "--entry-size", "256", "--entries-per-call", "2",
		"--matrix-warmup", "50ms", "--matrix-duration", "1m", "--matrix-layouts", "8/2/8"}, flags...)...)
	require.Equal(t, exitInterrupted, r.code, r.stderr)
	last := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.Regexp(t, `^kwal: bench --matrix interrupted: .*; the layout's 12 namespaces were deleted$`, last[len(last)-1])
	l := kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, exitOK, l.code, l.stderr)
	require.NotContains(t, l.stdout, benchPrefix)
}

// TestDemoInterruptedWhileReplayingSaysWhatWasDone protects the demo's
// one line when Ctrl-C comes after the appends: it names what was
// appended and that the check did not finish.
func TestDemoInterruptedWhileReplayingSaysWhatWasDone(t *testing.T) {
	r := kwalUntil(t, nil, "demo: replaying every region", "demo", "--data-dir", t.TempDir(), "--entries", "2000",
		"--regions", "4", "--topics", "2", "--writers", "4", "--entry-size", "64")
	require.Equal(t, exitInterrupted, r.code, r.stderr)
	last := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.Regexp(t, `^kwal: demo interrupted while replaying: 2000 entries \(128\.0 kB\) appended to namespaces kwal-demo-\S+-0, kwal-demo-\S+-1; the check did not finish$`, last[len(last)-1])
}
