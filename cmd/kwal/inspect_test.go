package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// produceRaw writes records with a plain franz-go client.
func produceRaw(t *testing.T, flags []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(flagValue(flags, "--brokers"), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

func TestDump(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "dumped", []logstore.RegionID{1, 2}, 2, 100) // offsets 0..3
	// A foreign record (no key) and a kwal record whose checksum fails.
	parts, err := record.Split(9, []byte("hello"), 1<<20)
	require.NoError(t, err)
	produceRaw(t, flags,
		&kgo.Record{Topic: "dumped", Value: []byte("not kwal")},
		&kgo.Record{Topic: "dumped", Key: parts[0].Key(), Value: []byte("HELLO")},
	)
	populate(t, flags, "dumped", []logstore.RegionID{3}, 1, 50) // offset 6

	// Every record is dumped, and the one failing its checksum makes the
	// dump exit 2, naming its offset.
	r := kwal(t, nil, append([]string{"dump", "--namespace", "dumped"}, flags...)...)
	require.Equal(t, exitMismatch, r.code, r.stderr)
	require.Contains(t, r.stderr, "the log is damaged")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1+7+1+1, r.stdout)
	require.Regexp(t, `^\s+0\s+1\s+1\s+whole\s+0\s+100\s+100\s+ok$`, lines[1])
	require.Regexp(t, `^\s+1\s+2\s+2\s+whole\s+0\s+100\s+100\s+ok$`, lines[2])
	require.Regexp(t, `^\s+4\s+5\s+-\s+-\s+-\s+-\s+8\s+FOREIGN`, lines[5])
	require.Regexp(t, `^\s+5\s+6\s+9\s+whole\s+0\s+5\s+5\s+BAD: record: checksum mismatch`, lines[6])
	require.Regexp(t, `^\s+6\s+7\s+3\s+whole\s+0\s+50\s+50\s+ok$`, lines[7])
	require.Equal(t, "7 records (5 kwal, 1 foreign, 1 undecodable); log offsets [0, 7)", lines[8])
	require.Equal(t, "DAMAGED: 1 kwal record(s) fail their checksum or do not decode, at offset(s) 5: the entries they held are lost", lines[9])

	// --from and --limit, as JSON lines.
	r = kwal(t, nil, append([]string{"dump", "--namespace", "dumped", "--from", "5", "--limit", "2", "--json"}, flags...)...)
	require.Equal(t, exitMismatch, r.code, r.stderr)
	require.Contains(t, r.stderr, "DAMAGED: 1 kwal record(s) fail their checksum or do not decode, at offset(s) 5")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	var recs []dumpRecord
	for _, l := range lines {
		var d dumpRecord
		require.NoError(t, json.Unmarshal([]byte(l), &d))
		recs = append(recs, d)
	}
	require.Equal(t, int64(4), recs[0].Offset)
	require.Equal(t, uint64(5), recs[0].ID)
	require.True(t, recs[0].Foreign)
	require.False(t, recs[0].ChecksumOK)
	require.Nil(t, recs[0].Region)
	require.Contains(t, recs[0].Error, "not a kwal record")
	require.Equal(t, int64(5), recs[1].Offset)
	require.False(t, recs[1].Foreign)
	require.False(t, recs[1].ChecksumOK)
	require.Equal(t, uint64(9), *recs[1].Region)
	require.Contains(t, recs[1].Error, "checksum")

	// A replay stops at the foreign record, or skips it when asked to. (The
	// second populating store's background catch-up of its index may have
	// accounted the foreign record as holding no entry, before it stopped
	// at the damaged one: then the replay stops there.)
	r = kwal(t, nil, append([]string{"replay", "-n", "dumped", "-r", "3"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Regexp(t, "corrupt record at offset [45]", r.stderr)
	r = kwal(t, nil, append([]string{"replay", "-n", "dumped", "-r", "3", "--skip-corrupt", "--log-level", "error"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 entry, 50 B")
	require.Regexp(t, `SKIPPED \(--skip-corrupt\): 1 kwal record\(s\) failing their checksum, [01] record\(s\) not kwal's, 0 offset\(s\) missing`, r.stdout, "what was skipped is said")
	// Region 1's entries lie before the damage, but the damaged record may
	// have been any region's (its key fails the checksum with its value):
	// the replay before did not index it as anyone's, so this one meets it
	// too, and says it skipped it.
	r = kwal(t, nil, append([]string{"replay", "-n", "dumped", "-r", "1", "--skip-corrupt", "--log-level", "error"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 entries, 200 B")
	require.Regexp(t, `SKIPPED \(--skip-corrupt\): 1 kwal record\(s\) failing their checksum`, r.stdout, "the damaged record was met again")
	// The index matches the log, but the log lost what offset 5 held.
	r = kwal(t, nil, append([]string{"index", "verify", "-n", "dumped", "--log-level", "error"}, flags...)...)
	require.Equal(t, exitMismatch, r.code, r.stderr)
	require.Contains(t, r.stdout, "3 regions, 1 foreign and 1 undecodable records")
	require.Contains(t, r.stdout, "OK: for every region")
	require.Contains(t, r.stdout, "DAMAGED: 1 kwal record(s) fail their checksum or do not decode, at offset(s) 5")

	// Records before the damaged one: nothing to report.
	r = kwal(t, nil, append([]string{"dump", "--namespace", "dumped", "--limit", "4"}, flags...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.NotContains(t, r.stdout, "DAMAGED")

	r = kwal(t, nil, append([]string{"dump", "--namespace", "no-such-topic"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "unknown namespace")
	r = kwal(t, nil, append([]string{"dump"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--namespace is required")
}

func TestReplay(t *testing.T) {
	flags := cluster(t)
	ids := populate(t, flags, "replayed", []logstore.RegionID{1, 2, 3}, 5, 40)

	r := kwal(t, nil, append([]string{"replay", "--namespace", "replayed", "--region", "2"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1+5+1, r.stdout)
	for i, id := range ids[2] {
		require.Regexp(t, fmt.Sprintf(`^\s+%d\s+40\s+"r2-e%d;" 0%d0%d`, id, i, i, i), lines[1+i])
	}
	require.Equal(t, "5 entries, 200 B", lines[6])

	// From an ID, and a summary.
	r = kwal(t, nil, append([]string{"replay", "-n", "replayed", "-r", "2", "--from", fmt.Sprint(ids[2][3]), "--summary"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`entries\s+2 \(IDs %d\.\.%d\)`, ids[2][3], ids[2][4]), r.stdout)
	require.Regexp(t, `bytes\s+80 `, r.stdout)
	require.Regexp(t, `region\s+2 \(from ID \d+, indexed\)`, r.stdout)
	require.Regexp(t, `fetches\s+[1-9]`, r.stdout)
	require.Regexp(t, `fetched\s+[1-9]\d* bytes`, r.stdout)

	r = kwal(t, nil, append([]string{"replay", "-n", "replayed", "-r", "3", "--no-index", "--summary"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `entries\s+5 `, r.stdout)
	require.Contains(t, r.stdout, "full scan")

	r = kwal(t, nil, append([]string{"replay", "-n", "replayed"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--region is required")
}

func TestIndexShowAndVerify(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "indexed", []logstore.RegionID{1, 2}, 4, 30)
	populate(t, flags, "other", []logstore.RegionID{7}, 3, 30)

	r := kwal(t, nil, append([]string{"index", "show"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "namespace indexed\n")
	require.Contains(t, r.stdout, "namespace other\n")
	require.Contains(t, r.stdout, "accounted offsets [0, 8), log end 8")
	require.Contains(t, r.stdout, "regions           2, 8 records indexed")
	require.Regexp(t, `\s1\s+4\s+4\s+0\s+6\s+-\s+4\n`, r.stdout) // region 1: offsets 0, 2, 4, 6
	require.Regexp(t, `\s7\s+3\s+1\s+0\s+2\s+-\s+3\n`, r.stdout) // region 7: one run 0..2

	r = kwal(t, nil, append([]string{"index", "show", "-n", "indexed", "--no-scan", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var ti topicIndex
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ti))
	require.Equal(t, "indexed", ti.Namespace)
	require.Equal(t, int64(8), ti.Watermark)
	require.Positive(t, ti.Bytes)
	require.Len(t, ti.Regions, 2, "regions come from the index, no scan needed")

	r = kwal(t, nil, append([]string{"index", "show", "-n", "indexed", "--regions", "2", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ti))
	require.Len(t, ti.Regions, 1)
	require.Equal(t, regionIndex{Region: 2, Records: 4, Ranges: 4, FirstOffset: 1, LastOffset: 7}, ti.Regions[0])

	r = kwal(t, nil, append([]string{"index", "verify", "-n", "indexed", "-v"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "region 1: 4 entries, same")
	require.Contains(t, r.stdout, "OK: for every region, the indexed read equals the full scan (8 entries)")
}

func TestCompareSigs(t *testing.T) {
	a := []entrySig{{1, 10, 0xaa}, {3, 10, 0xbb}}
	require.Empty(t, compareSigs(a, a))
	require.Contains(t, compareSigs(a[:1], a), "indexed read returned 1 entries, full scan 2: missing from ID 3")
	require.Contains(t, compareSigs(a, a[:1]), "extra from ID 3")
	b := []entrySig{{1, 10, 0xaa}, {3, 10, 0xcc}}
	require.Contains(t, compareSigs(b, a), "entry 1 of the region: indexed read has ID 3 (10 bytes, crc32c 000000cc), full scan has ID 3 (10 bytes, crc32c 000000bb)")
}

// TestNamespacesPrune: `namespaces prune` deletes what the persisted index
// proves no region needs, reading the index without writing it.
func TestNamespacesPrune(t *testing.T) {
	flags := cluster(t)
	ids := populate(t, flags, "pruned", []logstore.RegionID{1, 2}, 5, 10)
	// Both regions flushed their first three entries.
	brokers := markFlushed(t, flags, "pruned", map[logstore.RegionID]logstore.EntryID{1: ids[1][2], 2: ids[2][2]})

	r := kwal(t, nil, append([]string{"namespaces", "prune", "--dry-run", "pruned"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("pruned: would delete IDs 1..%d", ids[1][3]-1))
	require.Contains(t, r.stdout, fmt.Sprintf("pruned: prune point ID %d", ids[1][3]))
	require.Regexp(t, fmt.Sprintf(`\s1\s+%d\s+%d\s`, ids[1][3], ids[1][2]), r.stdout, "region 1 holds the point back")

	r = kwal(t, nil, append([]string{"namespaces", "prune", "pruned"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("pruned: deleted IDs 1..%d", ids[1][3]-1))
	require.Contains(t, r.stdout, fmt.Sprintf("the first entry ID available is %d", ids[1][3]))

	// -n names a namespace as in the other commands; nothing named is an error.
	r = kwal(t, nil, append([]string{"namespaces", "prune", "-n", "pruned"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "pruned: nothing to delete: region 1 still needs its entries from ID")
	r = kwal(t, nil, append([]string{"namespaces", "prune"}, flags...)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "name at least one namespace")

	// After the prune, the default replay (without --from: from the first
	// entry the log holds) and verify read what the log holds; asking for
	// a pruned entry, --from 0 included (as Read takes it), names the
	// first ID still available.
	r = kwal(t, nil, append([]string{"replay", "-n", "pruned", "-r", "1", "--summary"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `entries\s+2 \(IDs `+fmt.Sprint(ids[1][3]), r.stdout)
	r = kwal(t, nil, append([]string{"index", "verify", "-n", "pruned"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "OK")
	r = kwal(t, nil, append([]string{"replay", "-n", "pruned", "-r", "1", "--from", "1"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, fmt.Sprintf("entries from ID 1 were pruned; the first ID still available is %d", ids[1][3]))
	r = kwal(t, nil, append([]string{"replay", "-n", "pruned", "-r", "1", "--from", "0"}, flags...)...)
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stderr, fmt.Sprintf("entries from the log's beginning were pruned; the first ID still available is %d", ids[1][3]))

	// dump: the prune mark vouches for the log start; once retention
	// moves it past the prune point, nothing does, which dump reports
	// (not as damage).
	r = kwal(t, nil, append([]string{"dump", "-n", "pruned"}, flags...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.NotContains(t, r.stdout, "UNVOUCHED")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "pruned", Partition: 0, At: int64(ids[1][3])})
	resp, err := kadm.NewClient(cl).DeleteRecords(t.Context(), os)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	r = kwal(t, nil, append([]string{"dump", "-n", "pruned"}, flags...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("UNVOUCHED: the log starts at offset %d and the prune marks speak for offsets below %d only", ids[1][3], ids[1][3]-1))
}

// rawRecord is a record of another program: no kwal key.
func rawRecord(topic, value string) *kgo.Record {
	return &kgo.Record{Topic: topic, Value: []byte(value)}
}

// TestDamagedCheckpoint: a checkpoint file that fails its CRC is a
// finding: index show and index verify name the file and exit 2 (though
// verify's reads, which scan what the index lost, agree), show counts the
// file's bytes on disk, and prune --dry-run does not claim a log of 0 B.
func TestDamagedCheckpoint(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "damaged", []logstore.RegionID{1, 2}, 200, 16000) // 6.4 MB: more than a catch-up scan keeps as coverage
	dir := flagValue(flags, "--index-dir")
	files, err := filepath.Glob(filepath.Join(dir, "idx-damaged.*"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(files[0], b, 0o600))

	r := kwal(t, nil, append([]string{"index", "verify", "-n", "damaged", "--log-level", "error"}, flags...)...)
	require.Equal(t, exitMismatch, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "OK: for every region, the indexed read equals the full scan (400 entries)")
	require.Contains(t, r.stdout, "DAMAGED INDEX: unusable checkpoint file(s) "+files[0]+" (corrupt: index: checkpoint corrupt: CRC-32C")
	require.Contains(t, r.stderr, "kwal: index verify damaged: the index is damaged (unusable checkpoint files)\n")

	r = kwal(t, nil, append([]string{"index", "show", "-n", "damaged", "--no-scan", "--log-level", "error"}, flags...)...)
	require.Equal(t, exitMismatch, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("checkpoint files  1 (1 base, 0 delta, last seq 1), %s on disk\n", humanBytes(int64(len(b)))))
	require.Contains(t, r.stdout, "DAMAGED: unusable checkpoint file(s) "+files[0]+" (corrupt: ")
	require.Contains(t, r.stderr, "the index of 1 of 1 namespaces is damaged")

	// Prune scans what the damaged index lost, so it knows the log.
	r = kwal(t, nil, append([]string{"namespaces", "prune", "--dry-run", "damaged", "--log-level", "error"}, flags...)...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "damaged: prune point ID 1, latest ID 400, log 6.4 MB\n")
}

// TestPruneWithoutLogSize: a prune result without the log's size (the
// index does not account for the log, so Prune did not ask the broker)
// leaves the size out rather than print "log 0 B" for a log with entries;
// an empty log is 0 B.
func TestPruneWithoutLogSize(t *testing.T) {
	var out strings.Builder
	a := newApp(&out, io.Discard, nil)
	a.printPrune(kafka.PruneResult{PruneStatus: kafka.PruneStatus{Namespace: "ns", FirstID: 1, LatestID: 400, PrunePoint: 1,
		Reason: "the index does not account for the log from its start (offset 0)"}}, true)
	require.Equal(t, "ns: nothing to delete: the index does not account for the log from its start (offset 0); the first entry ID available is 1\n"+
		"ns: prune point ID 1, latest ID 400\n", out.String())
	out.Reset()
	a.printPrune(kafka.PruneResult{PruneStatus: kafka.PruneStatus{Namespace: "ns", FirstID: 1, LatestID: 0, PrunePoint: 1, Reason: "the log is empty"}}, true)
	require.Contains(t, out.String(), "ns: prune point ID 1, latest ID 0, log 0 B\n")
}

// markFlushed declares each region's entries up to its ID obsolete, as a
// datanode does after a flush, through a store on the test's brokers and
// index dir, and returns the brokers.
func markFlushed(t *testing.T, flags []string, ns string, upTo map[logstore.RegionID]logstore.EntryID) []string {
	t.Helper()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = strings.Split(flagValue(flags, "--brokers"), ",")
	cfg.IndexDir = flagValue(flags, "--index-dir")
	cfg.Logger = slog.New(slog.DiscardHandler)
	st, err := kafka.Open(t.Context(), cfg)
	require.NoError(t, err)
	for r, id := range upTo {
		require.NoError(t, st.Obsolete(t.Context(), ns, r, id))
	}
	require.NoError(t, st.Close())
	return cfg.Brokers
}
