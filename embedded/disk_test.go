package embedded

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tests of this file protect the promise that the embedded broker
// never drops records silently: loading a damaged data directory either
// keeps every record, or cuts only the torn end of a write (and says so),
// or is refused naming every record it would drop, unless the loss is
// accepted.

const (
	diskTopic   = "t"
	diskRecords = 1500
	segBytes    = 16 << 10 // ~16 segments of one-record batches
)

// smallSegments makes the broker roll a segment every segBytes.
func smallSegments() Option {
	return WithKfakeOptions(kfake.BrokerConfigs(map[string]string{"log.segment.bytes": fmt.Sprint(segBytes)}))
}

// testLog is a logger that keeps what it logs.
type testLog struct{ buf bytes.Buffer }

func (l *testLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// produceLog starts a broker in dir, writes diskRecords records to
// diskTopic one batch each (offset i holds "record-i") and stops it
// cleanly.
func produceLog(t *testing.T, dir string) {
	t.Helper()
	addrs, stop, err := Start(dir, smallSegments())
	require.NoError(t, err)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(diskTopic))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, diskTopic)
	require.NoError(t, err)
	for i := range diskRecords {
		require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("record-%d", i))).FirstErr())
	}
}

// readLog returns the offsets diskTopic holds, checking each record's value.
func readLog(t *testing.T, addrs []string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(diskTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, diskTopic)
	require.NoError(t, err)
	end, ok := ends.Lookup(diskTopic, 0)
	require.True(t, ok)
	require.NoError(t, end.Err)
	var offs []int64
	for len(offs) == 0 || offs[len(offs)-1] < end.Offset-1 {
		if end.Offset == 0 {
			break
		}
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, fmt.Sprintf("record-%d", r.Offset), string(r.Value))
			if len(offs) > 0 && r.Offset <= offs[len(offs)-1] {
				t.Fatalf("offset %d after %d (end %d)", r.Offset, offs[len(offs)-1], end.Offset)
			}
			offs = append(offs, r.Offset)
		})
	}
	return offs
}

// segments returns the partition's segment files, in offset order.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "partitions", diskTopic+"-0", "*.dat"))
	require.NoError(t, err)
	slices.SortFunc(segs, func(a, b string) int {
		var x, y int64
		fmt.Sscanf(filepath.Base(a), "%d.dat", &x)
		fmt.Sscanf(filepath.Base(b), "%d.dat", &y)
		return int(x - y)
	})
	return segs
}

// damage overwrites n bytes of file at off with garbage that differs from
// every byte it replaces.
func damage(t *testing.T, file string, off int64, n int) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	for i := off; i < off+int64(n) && i < int64(len(b)); i++ {
		b[i] ^= 0x5a
	}
	require.NoError(t, os.WriteFile(file, b, 0o644))
}

// crash makes dir look as a crash leaves it: no shutdown manifest.
func crash(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(dir, ManifestFile)))
}

// snapshot returns every file of dir with its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == LockFile {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	}))
	return out
}

// TestDamageInTheMiddleIsRefused: 16 bytes flipped in the middle of a
// segment, after a clean stop or after a crash, make Start refuse, naming
// the partition and the offsets the broker would drop (from the damaged
// record to the end of the segment), and leave the directory as it was.
func TestDamageInTheMiddleIsRefused(t *testing.T) {
	pristine := t.TempDir()
	produceLog(t, pristine)
	segs := segments(t, pristine)
	require.Greater(t, len(segs), 3)
	last := segs[len(segs)-1]
	fi, err := os.Stat(last)
	require.NoError(t, err)

	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crashed=%v", crashed), func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(pristine)))
			if crashed {
				crash(t, dir)
			}
			seg := filepath.Join(dir, "partitions", diskTopic+"-0", filepath.Base(last))
			damage(t, seg, fi.Size()/2, 16)
			before := snapshot(t, dir)

			_, _, err := Start(dir, smallSegments())
			require.ErrorIs(t, err, ErrDamaged)
			de, ok := err.(*DamagedError)
			require.True(t, ok)
			require.Len(t, de.Losses, 1)
			l := de.Losses[0]
			require.Equal(t, diskTopic, l.Topic)
			require.Equal(t, int32(0), l.Partition)
			require.Equal(t, int64(diskRecords), l.To)
			require.Less(t, l.From, l.To)
			require.Contains(t, err.Error(), fmt.Sprintf("partition t/0 loses offsets %d..%d (%d records): segment %s is damaged at byte",
				l.From, diskRecords-1, diskRecords-l.From, filepath.Base(last)))
			require.Contains(t, err.Error(), "intact records follow the damage")
			require.Equal(t, before, snapshot(t, dir), "a refused start changes nothing")

			// Accepted, the broker drops exactly what the error named.
			var lg testLog
			addrs, stop, err := Start(dir, smallSegments(), AcceptLoss(), WithLogger(lg.logger()))
			require.NoError(t, err)
			offs := readLog(t, addrs)
			stop()
			require.Equal(t, l.From, int64(len(offs)))
			require.Contains(t, lg.buf.String(), "the loss is accepted: dropping records of a damaged segment")
			require.Contains(t, lg.buf.String(), fmt.Sprintf("partition t/0 loses offsets %d..%d", l.From, diskRecords-1))

			// The loss accepted, later starts need no acceptance.
			addrs, stop, err = Start(dir, smallSegments())
			require.NoError(t, err)
			require.Equal(t, offs, readLog(t, addrs))
			stop()
		})
	}
}

// TestMisnumberedBatchIsRefused: a batch's first offset, which its CRC
// does not cover, damaged (here the first batch of a middle segment, which
// the broker would load and serve at a wrong offset), is a loss of the
// batch and the rest of its segment; accepted, it is cut and no record is
// served at a wrong offset.
func TestMisnumberedBatchIsRefused(t *testing.T) {
	dir := t.TempDir()
	produceLog(t, dir)
	segs := segments(t, dir)
	require.Greater(t, len(segs), 2)
	var base, next int64
	fmt.Sscanf(filepath.Base(segs[1]), "%d.dat", &base)
	fmt.Sscanf(filepath.Base(segs[2]), "%d.dat", &next)
	damage(t, segs[1], 0, 8)
	_, _, err := Start(dir, smallSegments())
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, []Loss{{Topic: diskTopic, Partition: 0, From: base, To: next, Segment: segs[1], At: 0,
		Why: fmt.Sprintf("%d intact records follow the damage in the segment", next-base-1), cut: cut{segment: segs[1], at: 0, self: true}}},
		err.(*DamagedError).Losses)

	addrs, stop, err := Start(dir, smallSegments(), AcceptLoss(), WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	offs := readLog(t, addrs) // checks that offset i holds record-i
	stop()
	require.Len(t, offs, diskRecords-int(next-base))
}

// TestTornTailIsCut: the last record's write cut short, as by a crash,
// is cut by the broker and the cut is logged; the same file after a clean
// stop (whose manifest says that record existed) is a loss, refused.
func TestTornTailIsCut(t *testing.T) {
	pristine := t.TempDir()
	produceLog(t, pristine)
	segs := segments(t, pristine)
	last := filepath.Join("partitions", diskTopic+"-0", filepath.Base(segs[len(segs)-1]))
	tear := func(dir string) {
		fi, err := os.Stat(filepath.Join(dir, last))
		require.NoError(t, err)
		require.NoError(t, os.Truncate(filepath.Join(dir, last), fi.Size()-20))
	}

	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(pristine)))
	crash(t, dir)
	tear(dir)
	var lg testLog
	addrs, stop, err := Start(dir, smallSegments(), WithLogger(lg.logger()))
	require.NoError(t, err)
	offs := readLog(t, addrs)
	stop()
	require.Len(t, offs, diskRecords-1, "only the torn record is cut")
	require.Contains(t, lg.buf.String(), "cutting the torn end of a segment")
	require.Contains(t, lg.buf.String(), "topic=t partition=0")
	require.Contains(t, lg.buf.String(), fmt.Sprintf("next_offset=%d", diskRecords-1))

	clean := t.TempDir()
	require.NoError(t, os.CopyFS(clean, os.DirFS(pristine)))
	tear(clean)
	_, _, err = Start(clean, smallSegments())
	require.ErrorIs(t, err, ErrDamaged)
	require.Contains(t, err.Error(), fmt.Sprintf("partition t/0 loses offsets %d..%d (1 records)", diskRecords-1, diskRecords-1))
	require.Contains(t, err.Error(), fmt.Sprintf("the last clean shutdown recorded the partition's end at offset %d", diskRecords))
}

// TestMissingPartitionIsALoss: a partition's last segment, or its whole
// directory, gone from the disk after a clean stop is a loss, refused.
func TestMissingPartitionIsALoss(t *testing.T) {
	dir := t.TempDir()
	produceLog(t, dir)
	segs := segments(t, dir)
	require.NoError(t, os.Remove(segs[len(segs)-1]))
	_, _, err := Start(dir, smallSegments())
	require.ErrorIs(t, err, ErrDamaged)
	var base int64
	fmt.Sscanf(filepath.Base(segs[len(segs)-1]), "%d.dat", &base)
	require.Contains(t, err.Error(), fmt.Sprintf("partition t/0 loses offsets %d..%d (%d records): its segments end at offset %d, below the end the last clean shutdown recorded (offset %d)",
		base, diskRecords-1, diskRecords-base, base, diskRecords))

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "partitions", diskTopic+"-0")))
	_, _, err = Start(dir, smallSegments())
	require.ErrorIs(t, err, ErrDamaged)
	require.Contains(t, err.Error(), fmt.Sprintf("partition t/0 loses offsets 0..%d (%d records): its directory is missing, though the last clean shutdown recorded offsets 0..%d",
		diskRecords-1, diskRecords, diskRecords-1))
}

// TestRandomDamage is the property over damage anywhere: 16 bytes flipped
// at a random place of a random segment, after a clean stop or after a
// crash. What the broker drops when the loss is accepted is the truth:
// without AcceptLoss, Start refuses exactly when that is not empty (after
// a crash: when it is more than the last two records, which a torn write
// may take), and the offsets its error names are exactly those dropped.
func TestRandomDamage(t *testing.T) {
	pristine := t.TempDir()
	produceLog(t, pristine)
	segs := segments(t, pristine)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 32 {
		crashed := trial%2 == 1
		seg := filepath.Join("partitions", diskTopic+"-0", filepath.Base(segs[rng.IntN(len(segs))]))
		if trial%4 >= 2 { // the end of the log, where torn writes are
			seg = filepath.Join("partitions", diskTopic+"-0", filepath.Base(segs[len(segs)-1]))
		}
		fi, err := os.Stat(filepath.Join(pristine, seg))
		require.NoError(t, err)
		at := rng.Int64N(fi.Size())
		if trial%4 >= 2 {
			at = fi.Size() - 1 - rng.Int64N(min(fi.Size(), 200))
		}
		name := fmt.Sprintf("trial %d: %s byte %d, crashed %v", trial, seg, at, crashed)

		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(pristine)))
		if crashed {
			crash(t, dir)
		}
		damage(t, filepath.Join(dir, seg), at, 16)
		before := snapshot(t, dir)
		addrs, stop, refusal := Start(dir, smallSegments(), WithLogger(slog.New(slog.DiscardHandler)))
		if refusal == nil {
			stop()
		} else {
			require.ErrorIs(t, refusal, ErrDamaged, name)
			require.Equal(t, before, snapshot(t, dir), name)
		}

		addrs, stop, err = Start(dir, smallSegments(), AcceptLoss(), WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err, name)
		kept := readLog(t, addrs)
		stop()
		var lost []int64
		for o := range int64(diskRecords) {
			if _, found := slices.BinarySearch(kept, o); !found {
				lost = append(lost, o)
			}
		}
		if refusal == nil {
			if crashed {
				require.Subset(t, []int64{diskRecords - 2, diskRecords - 1}, lost, name)
			} else {
				require.Empty(t, lost, name)
			}
			continue
		}
		var named []int64
		for _, l := range refusal.(*DamagedError).Losses {
			require.LessOrEqual(t, l.To, int64(diskRecords), "%s: %v", name, refusal)
			for o := l.From; o < l.To; o++ {
				named = append(named, o)
			}
		}
		require.Equal(t, lost, named, "%s: %v", name, refusal)
	}
}
