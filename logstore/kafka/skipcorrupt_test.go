package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// TestSkipCorruptLeavesNoSilentGap protects reads without SkipCorrupt from
// what reads with it taught the index: a record skipped because it fails
// to decode may be any region's entry, so it must never be indexed as
// anyone's or as no one's. Over random logs of 4 regions with corrupt
// records (kwal records whose value no longer matches their checksum)
// between the appends, a store with SkipCorrupt reads random regions from
// random IDs (each read yields every intact entry) and persists its index;
// a store without SkipCorrupt then opens that index and reads every region
// from a random ID: each read yields the region's entries up to the first
// corrupt record at or after its start and fails there with a
// CorruptError naming it, exactly as a scan of the log does. (The index
// used to account for a skipped record as holding no entry, and the second
// read passed it by without an error.)
func TestSkipCorruptLeavesNoSilentGap(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	w := openStore(t, brokers, nil)
	const regions = 4
	seeds := 6
	if testutil.RealBrokers() != nil {
		seeds = 3 // each seed creates a topic
	}
	indexed := 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 11))
		topic := fmt.Sprintf("%s-%d", newTopic(t), seed)
		require.NoError(t, w.CreateNamespace(ctx, topic))
		var corrupt []int64 // offsets of the corrupt records, ascending
		for call := range 30 + rng.IntN(30) {
			if rng.IntN(6) == 0 {
				region := uint64(1 + rng.IntN(regions))
				rec := partRecords(t, topic, region, []byte(fmt.Sprintf("lost-%d-%d", seed, call)), 1<<20)[0]
				rec.Value[0] ^= 0x20 // fails the record checksum
				corrupt = append(corrupt, rawProduce(t, brokers, rec)[0])
				continue
			}
			var batch []logstore.Entry
			for range 1 + rng.IntN(4) {
				batch = append(batch, logstore.Entry{Namespace: topic, Region: logstore.RegionID(1 + rng.IntN(regions)),
					Data: []byte(fmt.Sprintf("e-%d-%d-%d", seed, call, rng.Uint32()))})
			}
			_, err := w.AppendBatch(ctx, batch)
			require.NoError(t, err)
		}
		if len(corrupt) == 0 { // every seed has at least one
			rec := partRecords(t, topic, 1, []byte("lost"), 1<<20)[0]
			rec.Value[0] ^= 0x20
			corrupt = append(corrupt, rawProduce(t, brokers, rec)[0])
		}
		// One more append after the last corrupt record, so that no read
		// ends at it.
		_, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: []byte("tail")}})
		require.NoError(t, err)
		end, err := w.LatestEntryID(ctx, topic)
		require.NoError(t, err)
		model := intactEntries(t, scanRaw(t, brokers, topic), corrupt)

		dir := t.TempDir()
		skip := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir; c.SkipCorrupt = true })
		for range 3 {
			from := map[logstore.RegionID]logstore.EntryID{}
			for r := range logstore.RegionID(regions) {
				if rng.IntN(2) == 0 {
					from[r+1] = logstore.EntryID(rng.Int64N(int64(end) + 1))
				}
			}
			if len(from) == 0 {
				from[1] = 0
			}
			got := collect(t, skip.ReadRegions(ctx, topic, from))
			var want []logstore.Entry
			for _, e := range model {
				if f, ok := from[e.Region]; ok && e.ID >= f {
					want = append(want, e)
				}
			}
			requireEntries(t, want, got, fmt.Sprintf("seed %d: with SkipCorrupt, from %v", seed, from))
		}
		require.NoError(t, skip.Close()) // checkpoints the index

		strict := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = dir })
		for r := range logstore.RegionID(regions) {
			region := r + 1
			// From the start, from a random ID, and from past the last
			// corrupt record (read through the index).
			past := logstore.EntryID(corrupt[len(corrupt)-1] + 2)
			for _, id := range []logstore.EntryID{0, logstore.EntryID(rng.Int64N(int64(end) + 1)), past} {
				what := fmt.Sprintf("seed %d: region %d from ID %d without SkipCorrupt (corrupt at %v)", seed, region, id, corrupt)
				var st kafka.ReadStats
				got, err := readErr(strict.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{region: id}, kafka.ReadOptions{Stats: &st}))
				indexed += st.IndexRanges
				first := int64(-1) // the first corrupt record the read must meet
				for _, o := range corrupt {
					if o >= int64(id)-1 {
						first = o
						break
					}
				}
				var want []logstore.Entry
				for _, e := range model {
					if e.Region == region && e.ID >= id && (first < 0 || int64(e.ID)-1 < first) {
						want = append(want, e)
					}
				}
				requireEntries(t, want, got, what)
				if first < 0 {
					require.NoError(t, err, what)
					continue
				}
				var ce *logstore.CorruptError
				require.ErrorAs(t, err, &ce, "%s: a corrupt record was passed by silently", what)
				require.Equal(t, first, ce.Offset, what)
				require.ErrorIs(t, err, record.ErrChecksum, what)
			}
		}
	}
	require.Positive(t, indexed, "no read used the index: the test shows nothing about it")
}

// intactEntries decodes the log's entries (every entry one record here),
// leaving out the corrupt records, in log order.
func intactEntries(t *testing.T, recs []rawRecord, corrupt []int64) []logstore.Entry {
	t.Helper()
	var out []logstore.Entry
	bad := map[int64]bool{}
	for _, o := range corrupt {
		bad[o] = true
	}
	for _, r := range recs {
		p, err := record.Decode(r.Key, r.Value)
		if bad[r.Offset] {
			require.True(t, errors.Is(err, record.ErrChecksum), "offset %d: %v", r.Offset, err)
			continue
		}
		require.NoError(t, err, "offset %d", r.Offset)
		if p.Kind == record.KindMark {
			continue
		}
		require.Equal(t, record.KindWhole, p.Kind, "offset %d", r.Offset)
		out = append(out, logstore.Entry{Region: logstore.RegionID(p.Region), ID: logstore.EntryID(r.Offset + 1), Data: p.Data})
	}
	return out
}
