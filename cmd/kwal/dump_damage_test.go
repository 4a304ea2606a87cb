package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// TestDumpChecksFindGaps protects dump's account of offsets: every offset
// from where the dump starts to the log's end must hold a record or a
// transaction marker; a jump between records, a first record above the
// start, and a log that ends before its listed end are each reported with
// the offsets, while control records fill their offsets and a dump cut
// short by --limit claims nothing about the rest.
func TestDumpChecksFindGaps(t *testing.T) {
	ok := dumpRecord{ChecksumOK: true}
	c := newDumpChecks()
	for _, off := range []int64{3, 4, 7} {
		c.record(&kgo.Record{Offset: off}, ok)
	}
	c.controlRecord(&kgo.Record{Offset: 8}) // a transaction marker
	c.record(&kgo.Record{Offset: 9}, ok)
	c.finish(1, 12, true)
	damage, notes := c.report(1, 12, true, true, 0, false)
	require.Equal(t, []string{"MISSING: 6 offset(s) hold no record, at [1, 3), [5, 7), [10, 12): records were cut from the log"}, damage)
	require.Len(t, notes, 1, "no prune mark vouches for start 1")
	require.Contains(t, notes[0], "UNVOUCHED: the log starts at offset 1 and no prune mark is in the log")

	c = newDumpChecks()
	c.record(&kgo.Record{Offset: 0}, ok)
	c.record(&kgo.Record{Offset: 1}, dumpRecord{}) // fails its checksum
	c.record(&kgo.Record{Offset: 2}, dumpRecord{Foreign: true})
	c.finish(0, 10, false) // --limit: the rest was not read
	damage, notes = c.report(0, 10, false, true, 0, false)
	require.Equal(t, []string{"DAMAGED: 1 kwal record(s) fail their checksum or do not decode, at offset(s) 1: the entries they held are lost"}, damage)
	require.Empty(t, notes)

	// A prune mark whose point reaches the log start vouches for it; the
	// index's watermark above the log end is a lost tail.
	mark := record.MarkPart(record.Mark{Prune: true, From: 0, Point: 5})
	c = newDumpChecks()
	c.record(&kgo.Record{Offset: 5, Key: mark.Key(), Value: mark.Data}, ok)
	c.finish(5, 6, true)
	damage, notes = c.report(5, 6, true, true, 9, true)
	require.Equal(t, []string{"MISSING: the log ends at offset 6, below the offsets the index accounted for (up to 9): records [6, 9) were lost"}, damage)
	require.Empty(t, notes)

	// A prune mark whose point lies below the log start vouches for less
	// than was deleted: noted, not damage.
	mark = record.MarkPart(record.Mark{Prune: true, From: 0, Point: 3})
	c = newDumpChecks()
	c.record(&kgo.Record{Offset: 5, Key: mark.Key(), Value: mark.Data}, ok)
	c.finish(5, 6, true)
	damage, notes = c.report(5, 6, true, true, 0, false)
	require.Empty(t, damage)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "UNVOUCHED: the log starts at offset 5 and the prune marks speak for offsets below 3 only")

	// More gaps than are named.
	c = newDumpChecks()
	for i := range int64(2 * maxNamed) {
		c.record(&kgo.Record{Offset: 2*i + 1}, ok)
	}
	c.finish(0, 2*2*maxNamed, true)
	damage, _ = c.report(0, 2*2*maxNamed, true, true, 0, false)
	require.Len(t, damage, 1)
	require.Contains(t, damage[0], "MISSING: 20 offset(s) hold no record, at [0, 1), [2, 3)")
	require.Contains(t, damage[0], "and 10 more ranges")
}

// TestDumpTransactionMarkers protects dump from calling a transaction
// marker's offset missing: markers hold an offset and no record a plain
// consumer shows, and dump keeps them to account for every offset.
func TestDumpTransactionMarkers(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "tx", []logstore.RegionID{1}, 1, 10) // offset 0
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(flagValue(flags, "--brokers"), ",")...),
		kgo.TransactionalID("kwal-dump-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "tx", Value: []byte("in a transaction")}).FirstErr())
	require.NoError(t, cl.EndTransaction(t.Context(), kgo.TryCommit)) // offset 1, its marker 2
	populate(t, flags, "tx", []logstore.RegionID{1}, 1, 10)           // offset 3

	r := kwal(t, nil, append([]string{"dump", "-n", "tx"}, flags...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.NotContains(t, r.stdout, "MISSING")
	require.Contains(t, r.stdout, "3 records (2 kwal, 1 foreign, 0 undecodable, 1 transaction markers); log offsets [0, 4)")
}
