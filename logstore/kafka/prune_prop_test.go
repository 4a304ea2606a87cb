package kafka_test

import (
	"context"
	"errors"
	"fmt"

	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// modelEntry is an acknowledged entry as the model keeps it.
type modelEntry struct {
	id     logstore.EntryID
	region logstore.RegionID
	data   []byte
}

// modelNS is the model of one namespace: every entry acknowledged, each
// region's flushed point (its last Obsolete), and what was deleted.
type modelNS struct {
	name    string
	regions []logstore.RegionID
	entries []modelEntry
	flushed map[logstore.RegionID]logstore.EntryID
	// start is the log start offset: records below it were deleted.
	start int64
	// prunePoint is the highest offset Prune deleted below: the prune
	// marks speak for the records below it.
	prunePoint int64
	// unvouched is the highest log start a retention set beyond every
	// prune point: what it deleted no mark speaks for, so regions asking
	// from below it may be told ErrPruned although they lost nothing.
	unvouched int64
}

// neededGone reports whether region r lost an entry it still needs (ID
// above its flushed point, deleted).
func (m *modelNS) neededGone(r logstore.RegionID) bool {
	for _, e := range m.entries {
		if e.region == r && e.id > m.flushed[r] && int64(e.id)-1 < m.start {
			return true
		}
	}
	return false
}

// want returns region r's entries with ID >= from.
func (m *modelNS) want(r logstore.RegionID, from logstore.EntryID) []modelEntry {
	var out []modelEntry
	for _, e := range m.entries {
		if e.region == r && e.id >= from {
			out = append(out, e)
		}
	}
	return out
}

// TestDatanodeLives is a property test of the whole API as datanodes use
// it, and misuse it: random appends of every size up to MaxEntryBytes (some
// split into parts) and over it (refused, nothing written), over regions
// of two namespaces; Obsolete with valid, future (refused), stale and zero
// IDs; Prune; DeleteNamespace and re-creation of the same name, sometimes
// with a read running across the delete; restarts with the index
// directory, without it and with a stale copy of it; a finite retention
// set on the broker; and retention deleting a prefix of the log
// (DeleteRecords as its stand-in). After every step, every region's replay
// from its flushed ID + 1 equals the model; it fails with ErrPruned
// whenever the model says an entry the region still needs was deleted, and
// otherwise only where what was deleted is not vouched for by any prune
// mark (a retention past every prune point, from below its start). Prune
// never deletes an entry a region still needs, and every error a call
// returns is one the contract allows for what the call did.
func TestDatanodeLives(t *testing.T) {
	t.Parallel()
	steps, seeds := 160, 4
	if testutil.RealBrokers() != nil {
		steps, seeds = 160, 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runDatanodeLives(t, uint64(seed), steps)
		})
	}
}

func runDatanodeLives(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 14))
	brokers := testutil.Brokers(t)
	const maxEntry = 16 << 10
	ctx := context.Background()
	cfgFn := func(dir string) func(*kafka.Config) {
		return func(c *kafka.Config) {
			c.IndexDir = dir
			c.MaxBatchBytes = 2048
			c.MaxEntryBytes = maxEntry
			c.ReadHoldBytes = 64 << 10
			c.ProduceLanes = 2
		}
	}
	dir := t.TempDir()
	var stale string // a copy of the index directory taken earlier
	s := openStore(t, brokers, cfgFn(dir))
	base := newTopic(t)
	nss := []*modelNS{
		{name: base + "-a", regions: []logstore.RegionID{1, 2, 3, 4}},
		{name: base + "-b", regions: []logstore.RegionID{5, 6, 7}},
	}
	for _, m := range nss {
		m.flushed = map[logstore.RegionID]logstore.EntryID{}
		require.NoError(t, s.CreateNamespace(ctx, m.name))
	}
	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer raw.Close()
	adm := kadm.NewClient(raw)
	seq := 0
	// What the run exercised, so that it cannot pass vacuously.
	var deletedByPrune, proved, provedUnvouched, prunedNeeded, prunedUnvouched, racedOK, raceFailed int
	var refusedLarge, refusedFuture, stalePoints, recreated, deleteRaceOK, deleteRaceFailed int

	check := func(step int, what string) {
		t.Helper()
		defer func() {
			// Every read of the step ended: nothing of the reads' budgets
			// is still held.
			require.Zero(t, kafka.ReadPoolUsed(s), "step %d (%s): fetch budget still held after every read ended", step, what)
			require.Zero(t, kafka.ReadHoldUsed(s), "step %d (%s): hold budget still held after every read ended", step, what)
		}()
		for _, m := range nss {
			must := map[logstore.RegionID]logstore.EntryID{}
			for _, r := range m.regions {
				from := m.flushed[r] + 1
				got, err := readErr(s.Read(ctx, m.name, r, from))
				gone := m.neededGone(r)
				allowed := gone || (int64(from)-1 < m.start && int64(from)-1 < m.unvouched)
				where := fmt.Sprintf("step %d (%s): %s region %d from %d (log start %d, prune point %d, unvouched %d)",
					step, what, m.name, r, from, m.start, m.prunePoint, m.unvouched)
				if err != nil && gone {
					prunedNeeded++
				} else if err != nil {
					prunedUnvouched++
				} else if int64(from)-1 < m.start {
					proved++ // read from below the log start, proven complete
					if int64(from)-1 < m.unvouched {
						provedUnvouched++ // by the index: no prune mark speaks for it
					}
				}
				switch {
				case gone:
					require.ErrorIs(t, err, logstore.ErrPruned, "%s: a needed entry was deleted", where)
				case err != nil:
					require.True(t, allowed && errors.Is(err, logstore.ErrPruned), "%s: %v", where, err)
				default:
					want := m.want(r, from)
					require.Len(t, got, len(want), where)
					for i, e := range want {
						require.Equal(t, e.id, got[i].ID, "%s: entry %d", where, i)
						require.Equal(t, e.data, got[i].Data, "%s: entry %d", where, i)
					}
					if !allowed {
						must[r] = from
					}
				}
			}
			if len(must) < 2 {
				continue
			}
			// The regions that must replay, in one pass.
			got := collect(t, s.ReadRegions(ctx, m.name, must))
			var want []modelEntry
			for _, e := range m.entries {
				if f, ok := must[e.region]; ok && e.id >= f {
					want = append(want, e)
				}
			}
			require.Len(t, got, len(want), "step %d (%s): ReadRegions of %v", step, what, must)
			for i, e := range want {
				require.Equal(t, e.id, got[i].ID, "step %d: ReadRegions entry %d", step, i)
			}
		}
	}

	// prune runs Prune and takes what it deleted into the model.
	prune := func(step int, m *modelNS) string {
		t.Helper()
		first, err := s.Prune(ctx, m.name)
		require.NoError(t, err, "step %d: prune", step)
		for _, e := range m.entries {
			if e.id > m.flushed[e.region] && int64(e.id)-1 >= m.start { // not deleted before
				require.GreaterOrEqual(t, e.id, first, "step %d: Prune deleted entry %d, which region %d still needs (flushed %d)", step, e.id, e.region, m.flushed[e.region])
			}
		}
		if p := int64(first) - 1; p > m.start {
			m.start, m.prunePoint = p, p
			deletedByPrune++
		}
		return fmt.Sprintf("prune to %d", first)
	}

	// raceRead replays the namespace's regions in one read, one of them
	// from an entry below its flushed point (asking for entries Prune may
	// delete), and prunes in the loop body at the first entry, racing the
	// rest of the read. (Here the pass has mostly fetched what the prune
	// deletes already; TestPruneRacingARead makes the start overtake a
	// fetch. This checks that the outcome stays exact either way.) A read that succeeds must return exactly every
	// entry asked for, deleted since or not (it got them before they
	// went); one that fails must fail with ErrPruned, and only when an
	// entry it asked for and did not get was deleted, or it asked from
	// below a region's Obsolete point (the proof keeps points, not
	// records: index/doc.go, "Limits").
	raceRead := func(step int, m *modelNS) string {
		t.Helper()
		from := map[logstore.RegionID]logstore.EntryID{}
		for _, r := range m.regions {
			from[r] = m.flushed[r] + 1
		}
		low := m.regions[rng.IntN(len(m.regions))]
		var below []logstore.EntryID
		for _, e := range m.entries {
			if e.region == low && e.id <= m.flushed[low] && int64(e.id)-1 >= m.start {
				below = append(below, e.id)
			}
		}
		if len(below) > 0 {
			from[low] = below[rng.IntN(len(below))]
		}
		for r, f := range from {
			if m.neededGone(r) || int64(f)-1 < m.start {
				delete(from, r) // check covers those
			}
		}
		if len(from) == 0 {
			return ""
		}
		noIndex := rng.IntN(2) == 0
		got := map[logstore.RegionID][]logstore.Entry{}
		var readErr error
		var what string
		for e, err := range s.ReadWith(ctx, m.name, from, kafka.ReadOptions{NoIndex: noIndex}) {
			if err != nil {
				readErr = err
				break
			}
			got[e.Region] = append(got[e.Region], e)
			if what == "" {
				what = prune(step, m)
			}
		}
		what = fmt.Sprintf("read of %v (NoIndex %v) racing a %s", from, noIndex, what)
		lostUnread, askedBelow := false, false
		for r, f := range from {
			want := m.want(r, f)
			askedBelow = askedBelow || f <= m.flushed[r]
			if readErr == nil {
				require.Len(t, got[r], len(want), "step %d: %s: region %d", step, what, r)
				for i, e := range want {
					require.Equal(t, e.id, got[r][i].ID, "step %d: %s: region %d entry %d", step, what, r, i)
					require.Equal(t, e.data, got[r][i].Data, "step %d: %s: region %d entry %d", step, what, r, i)
				}
				continue
			}
			for _, e := range want[len(got[r]):] {
				lostUnread = lostUnread || int64(e.id)-1 < m.start
			}
		}
		if readErr != nil {
			require.ErrorIs(t, readErr, logstore.ErrPruned, "step %d: %s", step, what)
			require.True(t, lostUnread || askedBelow, "step %d: %s: ErrPruned though nothing it asked for went: %v", step, what, readErr)
			raceFailed++
		} else {
			racedOK++
		}
		return what
	}

	// deleteAndRecreate deletes the namespace, optionally with a read of
	// all its regions running across the delete, and creates it again: a
	// new log under the same name, which the model starts afresh.
	deleteAndRecreate := func(step int, m *modelNS, racing bool) string {
		t.Helper()
		what := "delete and re-create the namespace"
		type outcome struct {
			got []logstore.Entry
			err error
		}
		var done chan outcome
		from := map[logstore.RegionID]logstore.EntryID{}
		if racing {
			what = "delete and re-create the namespace, a read running across the delete"
			for _, r := range m.regions {
				if !m.neededGone(r) && int64(m.flushed[r]) >= m.start {
					from[r] = m.flushed[r] + 1
				}
			}
			done = make(chan outcome, 1)
			go func() {
				got, err := readErr(s.ReadRegions(ctx, m.name, from))
				done <- outcome{got, err}
			}()
		}
		require.NoError(t, s.DeleteNamespace(ctx, m.name), "step %d: delete", step)
		if racing {
			o := <-done
			if o.err == nil {
				// It read before the topic went: every entry asked for.
				var want []modelEntry
				for _, e := range m.entries {
					if f, ok := from[e.region]; ok && e.id >= f {
						want = append(want, e)
					}
				}
				require.Len(t, o.got, len(want), "step %d: a read across the delete that succeeded", step)
				for i, e := range want {
					require.Equal(t, e.id, o.got[i].ID, "step %d: read across the delete, entry %d", step, i)
				}
				deleteRaceOK++
			} else {
				// The topic went under it: it says so, never returns a
				// part as if it were everything.
				require.ErrorIs(t, o.err, kafka.ErrUnknownNamespace, "step %d: a read across the delete", step)
				t.Logf("step %d: the read across the delete failed: %v", step, o.err)
				deleteRaceFailed++
			}
		}
		require.NoError(t, s.CreateNamespace(ctx, m.name), "step %d: re-create", step)
		m.entries, m.flushed = nil, map[logstore.RegionID]logstore.EntryID{}
		m.start, m.prunePoint, m.unvouched = 0, 0, 0
		stale = "" // an index copied before the delete describes the old log
		recreated++
		return what
	}

	for step := range steps {
		m := nss[rng.IntN(len(nss))]
		var what string
		switch op := rng.IntN(100); {
		case op < 5:
			if what = raceRead(step, m); what == "" {
				continue
			}
		case op < 8:
			what = deleteAndRecreate(step, m, rng.IntN(2) == 0)
		case op < 42:
			what = "append"
			var batch []logstore.Entry
			tooLarge := rng.IntN(20) == 0
			for _, r := range m.regions {
				if rng.IntN(2) == 0 {
					continue
				}
				n := 10 + rng.IntN(200)
				switch rng.IntN(10) {
				case 0:
					n = 3000 + rng.IntN(3000) // split into parts
				case 1:
					n = rng.IntN(maxEntry + 1) // any size up to the limit
				}
				seq++
				data := append(fmt.Appendf(nil, "%s/%d/%d:", m.name, r, seq), payload(rng, n)...)
				if rng.IntN(20) == 0 {
					data = data[:0:0]
					data = append(data, payload(rng, maxEntry)...) // exactly the limit
				}
				batch = append(batch, logstore.Entry{Namespace: m.name, Region: r, Data: data})
			}
			if len(batch) == 0 {
				continue
			}
			if tooLarge {
				what = "append with an entry over MaxEntryBytes"
				batch[rng.IntN(len(batch))].Data = payload(rng, maxEntry+1+rng.IntN(100))
				_, err := s.AppendBatch(ctx, batch)
				require.ErrorIs(t, err, kafka.ErrEntryTooLarge, "step %d", step)
				refusedLarge++
				break // nothing of the call was written: check says so
			}
			res, err := s.AppendBatch(ctx, batch)
			require.NoError(t, err, "step %d", step)
			for _, e := range batch {
				m.entries = append(m.entries, modelEntry{id: res.LastEntryIDs[e.Region], region: e.Region, data: e.Data})
			}
			slices.SortFunc(m.entries, func(a, b modelEntry) int { return int(a.id) - int(b.id) })
		case op < 50:
			// Obsolete misused: an ID beyond the log (a datanode's own
			// sequence number) is refused and changes nothing; a point
			// below the region's current one, or 0, changes nothing.
			r := m.regions[rng.IntN(len(m.regions))]
			latest, err := s.LatestEntryID(ctx, m.name)
			require.NoError(t, err)
			var upTo logstore.EntryID
			switch k := rng.IntN(3); {
			case k == 0:
				upTo = latest + 1 + logstore.EntryID(rng.IntN(1<<20))
				what = fmt.Sprintf("obsolete region %d up to %d, beyond the latest ID %d", r, upTo, latest)
				require.ErrorIs(t, s.Obsolete(ctx, m.name, r, upTo), kafka.ErrFutureID, "step %d", step)
				refusedFuture++
			case k == 1 && m.flushed[r] > 1:
				upTo = 1 + logstore.EntryID(rng.IntN(int(m.flushed[r])))
				what = fmt.Sprintf("obsolete region %d up to %d, below its point %d", r, upTo, m.flushed[r])
				require.NoError(t, s.Obsolete(ctx, m.name, r, upTo), "step %d", step)
				stalePoints++
			default:
				what = fmt.Sprintf("obsolete region %d up to 0", r)
				require.NoError(t, s.Obsolete(ctx, m.name, r, 0), "step %d", step)
			}
		case op < 65:
			r := m.regions[rng.IntN(len(m.regions))]
			var ids []logstore.EntryID
			for _, e := range m.entries {
				if e.region == r && e.id > m.flushed[r] {
					ids = append(ids, e.id)
				}
			}
			if len(ids) == 0 {
				continue
			}
			upTo := ids[len(ids)-1] // a flush catches up
			if rng.IntN(2) == 0 {
				upTo = ids[rng.IntN(len(ids))]
			}
			what = fmt.Sprintf("obsolete region %d up to %d", r, upTo)
			require.NoError(t, s.Obsolete(ctx, m.name, r, upTo))
			m.flushed[r] = upTo
		case op < 80:
			what = prune(step, m)
		case op < 82:
			// An operator sets a finite retention on the topic: reported at
			// the next first use, deletes nothing yet.
			what = "a finite retention set on the broker"
			resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("604800000")}}, m.name)
			require.NoError(t, err)
			require.NoError(t, resp[0].Err)
			ret, err := s.TopicRetention(ctx, m.name)
			require.NoError(t, err)
			require.True(t, ret.Finite(), "step %d: %v", step, ret)
		case op < 88:
			mode := rng.IntN(3)
			what = []string{"restart", "restart without the index directory", "restart with a stale index"}[mode]
			require.NoError(t, s.Close())
			switch mode {
			case 1:
				dir = t.TempDir()
			case 2:
				if stale == "" {
					what = "restart"
					break
				}
				dir = t.TempDir()
				copyDir(t, stale, dir)
			}
			s = openStore(t, brokers, cfgFn(dir))
		case op < 93:
			what = "snapshot of the index directory"
			require.NoError(t, s.Close()) // Close checkpoints
			stale = t.TempDir()
			copyDir(t, dir, stale)
			s = openStore(t, brokers, cfgFn(dir))
		default:
			latest, err := s.LatestEntryID(ctx, m.name)
			require.NoError(t, err)
			end := int64(latest)
			if end <= m.start {
				continue
			}
			// Mostly a retention that deletes only what no region needs
			// (below the prune point a dry run reports), sometimes one
			// that deletes needed entries too.
			x := m.start + 1 + rng.Int64N(end-m.start)
			if rng.IntN(4) != 0 {
				st, err := s.PruneWith(ctx, m.name, kafka.PruneOptions{DryRun: true})
				require.NoError(t, err)
				if p := int64(st.PrunePoint) - 1; p > m.start {
					x = m.start + 1 + rng.Int64N(p-m.start)
				} else {
					continue
				}
			}
			what = fmt.Sprintf("retention below offset %d", x)
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: m.name, Partition: 0, At: x})
			resp, err := adm.DeleteRecords(ctx, os)
			require.NoError(t, err)
			require.NoError(t, resp.Error())
			m.start = x
			if x > m.prunePoint {
				m.unvouched = max(m.unvouched, x)
			}
		}
		t.Logf("step %d: %s %s", step, m.name, what)
		check(step, what)
	}
	t.Logf("prunes that deleted: %d; replays from below the log start proven complete: %d (%d below an unvouched retention's start); ErrPruned for a needed entry gone: %d, for an unvouched retention: %d; reads racing a prune: %d complete, %d ErrPruned",
		deletedByPrune, proved, provedUnvouched, prunedNeeded, prunedUnvouched, racedOK, raceFailed)
	t.Logf("appends refused over MaxEntryBytes: %d; Obsolete refused beyond the log: %d, stale: %d; namespaces re-created: %d, reads across the delete: %d complete, %d failed",
		refusedLarge, refusedFuture, stalePoints, recreated, deleteRaceOK, deleteRaceFailed)
	require.Positive(t, deletedByPrune, "no prune deleted anything")
	require.Positive(t, proved, "no replay needed a proof")
	require.Positive(t, refusedLarge+refusedFuture, "no misuse was tried")
	require.Positive(t, recreated, "no namespace was deleted and re-created")
}

// copyDir copies the files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

// TestPruneSharedTopic: two stores (two datanodes) share one topic,
// regions 1-2 on A, 3-4 on B, and region 5 migrates from A to B mid-run
// (B replays it from its flushed ID + 1, then writes and flushes it; A
// never touches it again). Every round, both stores compute the same prune
// point from the log (one of them restarted without its index directory
// midway), it is exactly the lowest entry any region still needs, Prune
// from either one deletes up to it and never an entry the other still
// needs, and every region replays from its flushed ID + 1 on both.
func TestPruneSharedTopic(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx := context.Background()
	a := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = t.TempDir() })
	b := openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = t.TempDir() })
	topic := newTopic(t)
	require.NoError(t, a.CreateNamespace(ctx, topic))
	owner := map[logstore.RegionID]*kafka.LogStore{1: a, 2: a, 3: b, 4: b, 5: a}
	regions := slices.Sorted(maps.Keys(owner))
	m := &modelNS{name: topic, regions: regions, flushed: map[logstore.RegionID]logstore.EntryID{}}
	rng := rand.New(rand.NewPCG(5, 14))
	const rounds = 10
	for round := range rounds {
		switch round {
		case 4: // region 5 moves from A to B
			from := m.flushed[5] + 1
			got := collect(t, b.Read(ctx, topic, 5, from))
			want := m.want(5, from)
			require.Len(t, got, len(want), "region 5 replayed on B")
			for i, e := range want {
				require.Equal(t, e.data, got[i].Data)
			}
			owner[5] = b
		case 7: // A loses its index directory
			require.NoError(t, a.Close())
			a = openStore(t, brokers, func(c *kafka.Config) { c.IndexDir = t.TempDir() })
			for r, o := range owner {
				if o != b {
					owner[r] = a
				}
			}
		}
		for i := range 3 {
			for _, r := range regions {
				data := fmt.Appendf(nil, "r%d-round%d-%d:%x", r, round, i, payload(rng, 20))
				res, err := owner[r].AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: data}})
				require.NoError(t, err)
				m.entries = append(m.entries, modelEntry{id: res.LastEntryIDs[r], region: r, data: data})
			}
		}
		slices.SortFunc(m.entries, func(x, y modelEntry) int { return int(x.id) - int(y.id) })
		// Each region flushes all but its last entry, some rounds.
		for _, r := range regions {
			if rng.IntN(3) == 0 {
				continue
			}
			var last, prev logstore.EntryID
			for _, e := range m.entries {
				if e.region == r {
					prev, last = last, e.id
				}
			}
			if prev > m.flushed[r] {
				require.NoError(t, owner[r].Obsolete(ctx, topic, r, prev))
				m.flushed[r] = prev
			}
		}
		want := logstore.EntryID(0) // the lowest entry still needed
		for _, e := range m.entries {
			if e.id > m.flushed[e.region] && (want == 0 || e.id < want) {
				want = e.id
			}
		}
		sa, err := a.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
		require.NoError(t, err)
		sb, err := b.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
		require.NoError(t, err)
		require.Equal(t, want, sa.PrunePoint, "round %d: A's prune point", round)
		require.Equal(t, want, sb.PrunePoint, "round %d: B's prune point", round)
		pruner := []*kafka.LogStore{a, b}[round%2]
		first, err := pruner.Prune(ctx, topic)
		require.NoError(t, err)
		require.Equal(t, want, first, "round %d", round)
		m.start = int64(first) - 1
		for _, s := range []*kafka.LogStore{a, b} {
			for _, r := range regions {
				from := m.flushed[r] + 1
				got := collect(t, s.Read(ctx, topic, r, from))
				w := m.want(r, from)
				require.Len(t, got, len(w), "round %d: region %d from %d", round, r, from)
				for i, e := range w {
					require.Equal(t, e.id, got[i].ID)
					require.Equal(t, e.data, got[i].Data)
				}
			}
		}
	}
	require.Greater(t, m.start, int64(rounds*3), "pruning progressed through both stores' regions")
}
