package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// process is the kwal command running as a child process.
type process struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	stderr *lockedBuffer
}

// startKwal starts the test binary as kwal with args.
func startKwal(t *testing.T, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asKwal+"=1")
	p := &process{cmd: cmd, lines: make(chan string, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return p
}

// waitLine returns the first stdout line that starts with prefix.
func (p *process) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	for l := range p.lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("the process ended without printing %q; stderr:\n%s", prefix, p.stderr.String())
	return ""
}

// runKwal runs the test binary as kwal with args to its end.
func runKwal(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asKwal+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// TestDataDirBelongsToOneProcess protects the embedded broker's data from
// a second process: while one kwal command runs on a data dir, another on
// the same dir fails at once, naming the first process, its command and
// its broker's address, and changes nothing; with --brokers at that
// address it works, with an index dir of its own. Ctrl-C (a real SIGINT)
// then ends the first with one line saying what it did, and the data dir
// is free again.
func TestDataDirBelongsToOneProcess(t *testing.T) {
	dir := t.TempDir()
	demo := startKwal(t, "demo", "--data-dir", dir, "--size", "0", "--duration", "5m", "--quiet",
		"--regions", "2", "--topics", "1", "--writers", "1", "--entry-size", "64", "--entries-per-call", "1")
	demo.waitLine(t, "kwal demo:")
	ns := strings.TrimPrefix(demo.waitLine(t, "namespace "), "namespace ")

	second := runKwal(t, "namespaces", "create", "concurrent-ns", "--data-dir", dir)
	require.Equal(t, exitError, second.code, second.stderr)
	require.Contains(t, second.stderr, fmt.Sprintf("is in use by process %d (kwal demo", demo.cmd.Process.Pid))
	m := regexp.MustCompile(`pass --brokers (127\.0\.0\.1:\d+) to talk to its broker`).FindStringSubmatch(second.stderr)
	require.NotNil(t, m, second.stderr)

	viaBroker := runKwal(t, "namespaces", "list", "--data-dir", dir, "--brokers", m[1])
	require.Equal(t, exitOK, viaBroker.code, viaBroker.stderr)
	require.Equal(t, []string{ns}, listed(viaBroker.stdout))

	start := time.Now()
	require.NoError(t, demo.cmd.Process.Signal(syscall.SIGINT))
	err := demo.cmd.Wait()
	stopped := time.Since(start)
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v", err)
	require.Equal(t, exitInterrupted, ee.ExitCode(), demo.stderr.String())
	lines := strings.Split(strings.TrimSpace(demo.stderr.String()), "\n")
	require.Len(t, lines, 1, "one line on Ctrl-C, not one per writer")
	require.Regexp(t, `^kwal: demo interrupted while appending: \d+ entries \(.*\) acknowledged in .* to namespace `+ns+`; nothing was checked$`, lines[0])
	require.Less(t, stopped, 10*time.Second) // measured: well under a second
	t.Logf("the demo stopped %v after SIGINT", stopped)

	// The first process's namespaces survived, the refused create left
	// nothing, and the directory is free again.
	after := runKwal(t, "namespaces", "list", "--data-dir", dir)
	require.Equal(t, exitOK, after.code, after.stderr)
	require.Equal(t, []string{ns}, listed(after.stdout))
	created := runKwal(t, "namespaces", "create", "concurrent-ns", "--data-dir", dir)
	require.Equal(t, exitOK, created.code, created.stderr)
}
