package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// fenceEntry is an entry the fencing model knows of, named by its data.
type fenceEntry struct {
	data   string
	region logstore.RegionID
	id     logstore.EntryID // known once acknowledged or seen in a replay
}

// fenceNode is one datanode: a store and what the model says it holds.
type fenceNode struct {
	name  string
	s     *kafka.LogStore
	dir   string // its IndexDir ("": DisableIndex)
	epoch uint64 // the epoch it writes the claimed region under
	// released is set by Release, cleared by its next Claim.
	released bool
	// acked is the last ID this store instance acknowledged per region:
	// what Release must return.
	acked map[logstore.RegionID]logstore.EntryID
}

// fenceModel is the namespace as the fencing rule says replay must see it.
type fenceModel struct {
	// history is each region's replay: every acknowledged entry, and the
	// entries of failed calls that a replay returned once (then every
	// replay must), in log order.
	history map[logstore.RegionID][]fenceEntry
	// maybe holds the entries of failed calls whose place is not known yet:
	// a call that fails after its produce may have written them below the
	// claim that fenced it. The next replay decides, for good.
	maybe map[string]fenceEntry
	// never holds the entries no replay may return: those of appends a
	// stale or released store issued after the claim or release returned,
	// and those of failed calls that a replay did not return.
	never   map[string]bool
	flushed map[logstore.RegionID]logstore.EntryID
	start   int64  // the log's start offset (Prune moves it)
	epoch   uint64 // the claimed region's last committed epoch
}

func (m *fenceModel) want(r logstore.RegionID) []fenceEntry {
	var out []fenceEntry
	for _, e := range m.history[r] {
		if e.id > m.flushed[r] {
			out = append(out, e)
		}
	}
	return out
}

func (m *fenceModel) addHistory(e fenceEntry) {
	h := append(m.history[e.region], e)
	slices.SortFunc(h, func(a, b fenceEntry) int { return int(a.id) - int(b.id) })
	m.history[e.region] = h
}

// sealed is what Claim.SealedID must be: the last entry of the region's
// history still in the log (everything in history lies below the claim
// being made, since the model's claims are made one at a time and the
// claimer appends only after its claim returned).
func (m *fenceModel) sealed(r logstore.RegionID) logstore.EntryID {
	var id logstore.EntryID
	for _, e := range m.history[r] {
		if int64(e.id)-1 >= m.start {
			id = e.id
		}
	}
	return id
}

// TestFencingModel is the model-based property test of fenced region
// ownership. Three stores own one region in turn (and all write a
// bystander region nobody claims), with random steps: claims by any store
// (the owner too), releases, appends by the owner, by stale owners (after
// a claim they may not have learned of), by a store that released and by
// a restarted one (its epoch is gone with the process), Obsolete by the
// owner and by stale stores, restarts with the index directory, without
// the index and with a fresh empty directory, prunes, and a store
// appending in a loop while another claims. The model is the list of
// acknowledged entries in log order: the exact replay, as the rule says
// that fenced writers are never acknowledged and acknowledged entries are
// never fenced. After every step, every store's replay and a fresh
// store's, with and without the index and through ReadRegions, equal the
// model: every acknowledged entry exactly once, in order, with its ID;
// nothing that was not acknowledged but by a failed call, which once seen
// stays; nothing a stale store appended after a claim returned. Every
// append, Obsolete and Release returns what the ownership the model tracks
// says; Claim's SealedID is the last entry replay returns below it and
// Release's ID the store's last acknowledged one.
func TestFencingModel(t *testing.T) {
	t.Parallel()
	steps, seeds := 60, 3
	if testutil.RealBrokers() != nil {
		steps, seeds = 100, 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runFencingModel(t, uint64(seed), steps, kafka.FencingStrict)
		})
	}
	// Under a lease the same model holds: an append trusted on a look
	// that began less than a lease ago is never above a newer claim. The
	// lease is short, so that claims (which wait it) stay quick and
	// appends find it both fresh and run out.
	for seed := range seeds - 1 {
		t.Run(fmt.Sprint("lease/seed", seed), func(t *testing.T) {
			t.Parallel()
			runFencingModel(t, uint64(seed)+100, steps, kafka.FencingLease)
		})
	}
}

func runFencingModel(t *testing.T, seed uint64, steps int, fencing string) {
	rng := rand.New(rand.NewPCG(seed, 25))
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := newTopic(t)
	claims := topic + "-claims"
	const r, by = logstore.RegionID(7), logstore.RegionID(8)
	regions := []logstore.RegionID{r, by}
	open := func(name, dir string) *kafka.LogStore {
		return openStore(t, brokers, func(c *kafka.Config) {
			c.Owner = name
			c.ClaimsTopic = claims
			c.Fencing = fencing
			if fencing == kafka.FencingLease {
				c.Lease = 40 * time.Millisecond
			}
			c.AutoCreateTopics = true
			c.IndexDir = dir
			c.DisableIndex = dir == ""
			c.ProduceLanes = 2
		})
	}
	nodes := make([]*fenceNode, 3)
	for i := range nodes {
		n := &fenceNode{name: fmt.Sprintf("node%d", i), dir: t.TempDir(), acked: map[logstore.RegionID]logstore.EntryID{}}
		n.s = open(n.name, n.dir)
		nodes[i] = n
	}
	require.NoError(t, nodes[0].s.CreateNamespace(ctx, topic))
	m := &fenceModel{history: map[logstore.RegionID][]fenceEntry{}, maybe: map[string]fenceEntry{},
		never: map[string]bool{}, flushed: map[logstore.RegionID]logstore.EntryID{}}
	owns := func(n *fenceNode) bool { return !n.released && n.epoch == m.epoch }
	seq := 0
	newEntry := func(n *fenceNode, reg logstore.RegionID) logstore.Entry {
		seq++
		return logstore.Entry{Namespace: topic, Region: reg, Data: fmt.Appendf(nil, "%s/r%d/%d:%x", n.name, reg, seq, payload(rng, 8+rng.IntN(40)))}
	}
	// What the run exercised, so that it cannot pass vacuously.
	var acked, fencedCalls, fencedSkipped, maybeSeen, maybeGone, racedAcked, racedFenced, obsoleteFenced, prunes, restarts int

	// record takes an append's outcome into the model. stale says the
	// call was issued after a claim or release that outranks its store
	// had returned: its entries of the claimed region must never replay.
	record := func(where string, n *fenceNode, batch []logstore.Entry, res logstore.AppendResult, err error, stale bool) {
		t.Helper()
		if err == nil {
			require.False(t, stale, "%s: %s was acknowledged though a newer claim or its release had returned", where, n.name)
			for _, e := range batch {
				id := res.LastEntryIDs[e.Region]
				m.addHistory(fenceEntry{data: string(e.Data), region: e.Region, id: id})
				n.acked[e.Region] = max(n.acked[e.Region], id)
			}
			acked++
			return
		}
		require.ErrorIs(t, err, kafka.ErrFenced, "%s: %s", where, n.name)
		fencedCalls++
		for _, e := range batch {
			if e.Region == r && stale {
				m.never[string(e.Data)] = true
			} else {
				m.maybe[string(e.Data)] = fenceEntry{data: string(e.Data), region: e.Region}
			}
		}
	}

	// compare checks one replay of from's regions against the model; the
	// reference replay (resolve) first takes the failed calls' entries it
	// returns into the model and forgets those it does not.
	compare := func(where string, got []logstore.Entry, from map[logstore.RegionID]logstore.EntryID, resolve bool) {
		t.Helper()
		if resolve {
			seen := map[string]bool{}
			for _, e := range got {
				d := string(e.Data)
				seen[d] = true
				require.False(t, m.never[d], "%s: entry %d %q was appended by a fenced store after the claim returned (or by a failed call a replay did not return before)", where, e.ID, d)
				if f, ok := m.maybe[d]; ok {
					require.Equal(t, f.region, e.Region, "%s: entry %q", where, d)
					f.id = e.ID
					m.addHistory(f)
					delete(m.maybe, d)
					maybeSeen++
				}
			}
			for d, f := range m.maybe {
				if _, asked := from[f.region]; asked && !seen[d] {
					m.never[d] = true
					delete(m.maybe, d)
					maybeGone++
				}
			}
		}
		var want []fenceEntry
		for _, reg := range regions {
			if _, ok := from[reg]; ok {
				want = append(want, m.want(reg)...)
			}
		}
		slices.SortFunc(want, func(a, b fenceEntry) int { return int(a.id) - int(b.id) })
		gotS := make([]string, len(got))
		for i, e := range got {
			gotS[i] = fmt.Sprintf("%d %s", e.ID, e.Data)
		}
		wantS := make([]string, len(want))
		for i, e := range want {
			wantS[i] = fmt.Sprintf("%d %s", e.id, e.data)
		}
		require.Equal(t, wantS, gotS, "%s: replay of %v", where, from)
	}

	read := func(s *kafka.LogStore, from map[logstore.RegionID]logstore.EntryID, noIndex bool) []logstore.Entry {
		t.Helper()
		var st kafka.ReadStats
		var got []logstore.Entry
		for e, err := range s.ReadWith(ctx, topic, from, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}) {
			require.NoError(t, err, "replay of %v (NoIndex %v)", from, noIndex)
			got = append(got, e)
		}
		fencedSkipped = max(fencedSkipped, int(st.Fenced))
		return got
	}

	check := func(step int, what string) {
		t.Helper()
		fresh := open("fresh", "")
		defer func() { require.NoError(t, fresh.Close()) }()
		both := map[logstore.RegionID]logstore.EntryID{r: m.flushed[r] + 1, by: m.flushed[by] + 1}
		where := fmt.Sprintf("step %d (%s): fresh store, NoIndex", step, what)
		compare(where, read(fresh, both, true), both, true)
		stores := []*kafka.LogStore{fresh}
		names := []string{"fresh"}
		for _, n := range nodes {
			stores, names = append(stores, n.s), append(names, n.name)
		}
		for i, s := range stores {
			for _, noIndex := range []bool{false, true} {
				where := fmt.Sprintf("step %d (%s): %s, NoIndex %v", step, what, names[i], noIndex)
				for _, reg := range regions {
					one := map[logstore.RegionID]logstore.EntryID{reg: m.flushed[reg] + 1}
					compare(where, read(s, one, noIndex), one, false)
				}
				compare(where, read(s, both, noIndex), both, false)
			}
			where := fmt.Sprintf("step %d (%s): %s, ReadRegions", step, what, names[i])
			compare(where, collect(t, s.ReadRegions(ctx, topic, both)), both, false)
		}
	}

	claimBy := func(where string, n *fenceNode) kafka.Claim {
		t.Helper()
		c, err := n.s.Claim(ctx, topic, r)
		require.NoError(t, err, where)
		require.Equal(t, m.epoch+1, c.Epoch, "%s: the new epoch is one above the last", where)
		m.epoch, n.epoch, n.released = c.Epoch, c.Epoch, false
		return c
	}

	// race has one store append in a loop while another claims. Calls
	// issued before the claim returned may go either way; those issued
	// after must fail.
	race := func(step int) (string, kafka.Claim) {
		t.Helper()
		var app *fenceNode
		for _, n := range nodes {
			if owns(n) {
				app = n
			}
		}
		if app == nil {
			app = nodes[rng.IntN(len(nodes))]
		}
		others := slices.DeleteFunc(slices.Clone(nodes), func(n *fenceNode) bool { return n == app })
		cl := others[rng.IntN(len(others))]
		wasOwner := owns(app)
		type call struct {
			batch []logstore.Entry
			res   logstore.AppendResult
			err   error
			after bool // issued after Claim returned
		}
		// The appender's entries are made up front (the rng is not shared
		// with its goroutine), more than a claim's round trips leave room
		// for. After its first failed call it waits for the claim to
		// return, then makes one more: the calls of a store that knows it
		// is fenced fail at once, and need not spin.
		batches := make([][]logstore.Entry, 1000)
		for i := range batches {
			batches[i] = []logstore.Entry{newEntry(app, r)}
			if rng.IntN(3) == 0 {
				batches[i] = append(batches[i], newEntry(app, by))
			}
		}
		claimed := make(chan struct{})
		done := make(chan []call, 1)
		go func() {
			var calls []call
			for _, b := range batches {
				var after bool
				select {
				case <-claimed:
					after = true
				default:
				}
				if !after && len(calls) > 0 && (calls[len(calls)-1].err != nil || len(calls) == len(batches)-1) {
					<-claimed
					after = true
				}
				res, err := app.s.AppendBatch(ctx, b)
				calls = append(calls, call{b, res, err, after})
				if after {
					break
				}
			}
			done <- calls
		}()
		c := claimBy(fmt.Sprintf("step %d: %s claims while %s appends", step, cl.name, app.name), cl)
		close(claimed)
		calls := <-done
		last := logstore.EntryID(0)
		for i, c := range calls {
			where := fmt.Sprintf("step %d: racing call %d of %s (issued after the claim returned: %v)", step, i, app.name, c.after)
			if c.err == nil {
				require.Greater(t, c.res.LastEntryIDs[r], last, "%s: acknowledged out of order", where)
				last = c.res.LastEntryIDs[r]
				racedAcked++
			} else {
				racedFenced++
			}
			record(where, app, c.batch, c.res, c.err, c.after || !wasOwner)
		}
		require.True(t, calls[len(calls)-1].after, "step %d: the appender stopped before the claim returned", step)
		return fmt.Sprintf("%s appends %d calls while %s claims", app.name, len(calls), cl.name), c
	}

	for step := range steps {
		n := nodes[rng.IntN(len(nodes))]
		var what string
		// sealed is a claim of the step, whose SealedID is checked once
		// the step's replay placed the failed calls' entries.
		var sealed *kafka.Claim
		switch op := rng.IntN(100); {
		case op < 38:
			var batch []logstore.Entry
			if rng.IntN(5) != 0 {
				batch = append(batch, newEntry(n, r))
			}
			if len(batch) == 0 || rng.IntN(2) == 0 {
				batch = append(batch, newEntry(n, by))
			}
			hasR := batch[0].Region == r
			stale := hasR && !owns(n)
			what = fmt.Sprintf("%s appends %d entries (claimed region: %v, owner: %v)", n.name, len(batch), hasR, owns(n))
			res, err := n.s.AppendBatch(ctx, batch)
			if !stale {
				require.NoError(t, err, "step %d: %s", step, what)
			}
			record(fmt.Sprintf("step %d: %s", step, what), n, batch, res, err, stale)
		case op < 52:
			what = fmt.Sprintf("%s claims (owner: %v)", n.name, owns(n))
			c := claimBy(fmt.Sprintf("step %d: %s", step, what), n)
			sealed = &c
			// Every replay catches its store up with the claims topic, so
			// a stale store learns of a claim at the next check. A zombie
			// appends before that: its entries land above the claim.
			if z := nodes[rng.IntN(len(nodes))]; z != n && rng.IntN(2) == 0 {
				batch := []logstore.Entry{newEntry(z, r)}
				if rng.IntN(2) == 0 {
					batch = append(batch, newEntry(z, by))
				}
				res, err := z.s.AppendBatch(ctx, batch)
				what += fmt.Sprintf(", then %s appends at once", z.name)
				record(fmt.Sprintf("step %d: %s", step, what), z, batch, res, err, true)
			}
		case op < 58:
			what = fmt.Sprintf("%s releases (owner: %v)", n.name, owns(n))
			id, err := n.s.Release(ctx, topic, r)
			require.NoError(t, err, "step %d: %s", step, what)
			require.Equal(t, n.acked[r], id, "step %d: %s: Release returns the store's last acknowledged ID", step, what)
			n.released = true
		case op < 70:
			reg := regions[rng.IntN(2)]
			var ids []logstore.EntryID
			for _, e := range m.history[reg] {
				if e.id > m.flushed[reg] {
					ids = append(ids, e.id)
				}
			}
			if len(ids) == 0 {
				continue
			}
			upTo := ids[rng.IntN(len(ids))]
			may := reg == by || owns(n)
			what = fmt.Sprintf("%s: obsolete region %d up to %d (owner: %v)", n.name, reg, upTo, owns(n))
			err := n.s.Obsolete(ctx, topic, reg, upTo)
			if may {
				require.NoError(t, err, "step %d: %s", step, what)
				m.flushed[reg] = upTo
			} else {
				require.ErrorIs(t, err, kafka.ErrFenced, "step %d: %s", step, what)
				obsoleteFenced++
			}
		case op < 80:
			what = fmt.Sprintf("%s prunes", n.name)
			res, err := n.s.PruneWith(ctx, topic, kafka.PruneOptions{})
			if n.dir == "" {
				require.ErrorIs(t, err, kafka.ErrCannotPrune, "step %d: %s without an index", step, what)
				break
			}
			require.NoError(t, err, "step %d: %s", step, what)
			for _, reg := range regions {
				for _, e := range m.want(reg) {
					require.GreaterOrEqual(t, e.id, res.FirstID, "step %d: %s deleted entry %d, which region %d still needs", step, what, e.id, reg)
				}
			}
			if res.Deleted {
				m.start = int64(res.FirstID) - 1
				prunes++
			}
			what += fmt.Sprintf(" to %d", res.FirstID)
		case op < 90:
			mode := rng.IntN(3)
			what = fmt.Sprintf("%s restarts %s", n.name, []string{"with its index directory", "without the index", "with a fresh index directory"}[mode])
			require.NoError(t, n.s.Close())
			switch mode {
			case 1:
				n.dir = ""
			case 2:
				n.dir = t.TempDir()
			default:
				if n.dir == "" {
					n.dir = t.TempDir()
				}
			}
			n.s = open(n.name, n.dir)
			// A restarted store writes under no epoch until it claims again.
			n.epoch, n.released, n.acked = 0, false, map[logstore.RegionID]logstore.EntryID{}
			restarts++
		default:
			var c kafka.Claim
			what, c = race(step)
			sealed = &c
		}
		t.Logf("step %d: %s", step, what)
		check(step, what)
		if sealed != nil {
			// Every entry of the region's history lies below the claim
			// (its owner appends only after it returned; entries of calls
			// racing it that replay returns are not fenced, so below it):
			// it seals the last one still in the log.
			require.Equal(t, m.sealed(r), sealed.SealedID, "step %d (%s): SealedID", step, what)
		}
	}
	t.Logf("acknowledged calls %d, fenced calls %d (racing a claim: %d acknowledged, %d fenced); failed calls' entries replayed %d, never written or fenced %d; most fenced entries skipped by one read %d; Obsolete fenced %d; prunes %d; restarts %d",
		acked, fencedCalls, racedAcked, racedFenced, maybeSeen, maybeGone, fencedSkipped, obsoleteFenced, prunes, restarts)
	require.Positive(t, fencedCalls, "no append was fenced")
	require.Positive(t, fencedSkipped, "no fenced entry was written and skipped by a replay")
}
