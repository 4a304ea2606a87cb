package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDamagedDataDir protects the CLI against silent loss: in a copy of
// the embedded broker's data directory, 4 KiB garbled in the middle of the
// segment would make the broker cut its log there. Any command, even
// namespaces list, refuses to start the broker, naming the partition and
// the offsets it would drop, until --accept-data-loss. Once the loss is
// accepted, index show names the missing offsets and the regions whose
// counts disagree, index verify reports records missing from the log,
// replay of an affected region fails naming the offsets, and dump reports
// the lost tail; each exits non-zero, while the undamaged original still
// verifies and dumps cleanly.
func TestDamagedDataDir(t *testing.T) {
	dir := t.TempDir()
	r := kwal(t, nil, "demo", "--data-dir", dir, "--entries", "2000", "--regions", "4", "--topics", "1", "--writers", "4",
		"--entry-size", "1000", "--entries-per-call", "10", "--quiet")
	require.Equal(t, 0, r.code, r.stderr)
	l := kwal(t, nil, "namespaces", "list", "--data-dir", dir)
	require.Equal(t, 0, l.code, l.stderr)
	ns := listed(l.stdout)[0]

	damaged := t.TempDir()
	require.NoError(t, os.CopyFS(damaged, os.DirFS(dir)))
	segs, err := filepath.Glob(filepath.Join(damaged, "kafka", "partitions", ns+"-0", "*.dat"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(strings.Repeat("garbled!", 512)), fi.Size()/2)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	n := kwal(t, nil, "namespaces", "list", "--data-dir", damaged)
	require.Equal(t, exitError, n.code, n.stdout+n.stderr)
	require.Empty(t, n.stdout)
	require.Regexp(t, `^kwal: the embedded broker's data in \S+ is damaged: partition `+ns+`/0 loses offsets \d+\.\.1999 \(\d+ records\): `+
		`segment 0\.dat is damaged at byte \d+, and \d+ intact records follow the damage in the segment; `+
		`the broker did not start and nothing was changed: to start without these records, run the command again with --accept-data-loss \(copy \S+ aside first to keep them\)\n$`, n.stderr)

	s := kwal(t, nil, "index", "show", "--data-dir", damaged, "-n", ns, "--accept-data-loss")
	require.Contains(t, s.stderr, "the loss is accepted: dropping records of a damaged segment")
	require.Equal(t, exitMismatch, s.code, s.stdout+s.stderr)
	require.Regexp(t, `MISSING: the log ends at offset \d+, below the watermark 2000`, s.stdout)
	require.Regexp(t, `MISMATCH region 1: the index holds \d+ records in \[0, 2000\), the log \d+`, s.stdout)

	v := kwal(t, nil, "index", "verify", "--data-dir", damaged, "-n", ns)
	require.Equal(t, exitMismatch, v.code, v.stdout+v.stderr)
	require.Contains(t, v.stdout, "MISSING: offsets that should hold records are missing from the log")

	p := kwal(t, nil, "replay", "--data-dir", damaged, "-n", ns, "-r", "1")
	require.Equal(t, 1, p.code, p.stdout+p.stderr)
	require.Regexp(t, `offsets \[\d+, 2000\) are missing from the log`, p.stderr)

	// dump, which reads the log with a plain consumer, compares its end
	// with the index and reports the lost tail.
	d := kwal(t, nil, "dump", "--data-dir", damaged, "-n", ns)
	require.Equal(t, exitMismatch, d.code, d.stderr)
	require.Regexp(t, `MISSING: the log ends at offset \d+, below the offsets the index accounted for \(up to 2000\): records \[\d+, 2000\) were lost`, d.stdout)

	v = kwal(t, nil, "index", "verify", "--data-dir", dir, "-n", ns)
	require.Equal(t, 0, v.code, v.stdout+v.stderr)
	d = kwal(t, nil, "dump", "--data-dir", dir, "-n", ns)
	require.Equal(t, 0, d.code, d.stderr)
	require.NotContains(t, d.stdout, "MISSING")
}
