package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/testutil"
)

// fenceEntry is an entry the fencing model knows of, named by its data.
type fenceEntry struct {
	data   string
	region logstore.RegionID
	id     logstore.EntryID // known once acknowledged or seen in a replay
}

// fenceHeld is what a store held of the claimed region when it closed on
// an index directory: what its held-epochs file says.
type fenceHeld struct {
	epoch    uint64
	released bool
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
	// held is, per index directory the store closed on, what it held
	// then: a store reopened on one resumes it.
	held map[string]fenceHeld
}

// fenceModel is the namespace as the fencing rule says replay must see it.
type fenceModel struct {
	// history is each region's replay: every acknowledged entry, and the
	// entries of failed calls that a replay returned once (then every
	// replay must), in log order.
	history map[logstore.RegionID][]fenceEntry
	// maybe holds the entries of failed calls whose place is not known yet:
	// a call that fails after its produce may have written them below the
	// claim that fenced it. The next replay of their region decides, for
	// good.
	maybe map[string]fenceEntry
	// never holds the entries no replay may return: those of appends a
	// stale or released store issued after the claim or release returned,
	// those of calls refused before they wrote, and those of failed calls
	// that a replay did not return.
	never   map[string]bool
	flushed map[logstore.RegionID]logstore.EntryID
	start   int64  // the log's start offset (Prune moves it)
	epoch   uint64 // the claimed region's last committed epoch
	owner   string // and its claimer
	// bad are each region's records of the claims topic that do not
	// decode and were not skipped (their offsets, rising): while a region
	// has any, its appends, Obsolete, claims and reads fail naming the
	// first.
	bad map[logstore.RegionID][]int64
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

func (m *fenceModel) anyBad() bool {
	for _, b := range m.bad {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

// firstBad is the unreadable record a read of from's regions must name:
// the first of the lowest region that has any.
func (m *fenceModel) firstBad(from map[logstore.RegionID]logstore.EntryID) (int64, bool) {
	for _, reg := range slices.Sorted(maps.Keys(from)) {
		if b := m.bad[reg]; len(b) > 0 {
			return b[0], true
		}
	}
	return 0, false
}

// TestFencingModel is the model-based property test of fenced region
// ownership. Three stores own one region in turn (and all write a
// bystander region nobody claims), with random steps: claims by any store
// (the owner too), releases, appends by the owner, by stale owners (after
// a claim they may not have learned of), by a store that released and by
// a restarted one, Obsolete by the owner and by stale stores, restarts
// with the index directory (which resumes the epochs and releases the
// store held there, also after another store claimed while it was down),
// with an older index directory of its own, without the index and with a
// fresh empty directory, prunes, and a store appending in a loop while
// another claims. Others write to the claims topic too: records that are
// no region's or of another namespace or topic incarnation (nothing may
// change), and records of a region that do not decode or come in a newer
// format (that region fails closed, naming the record, on every store and
// for every call, until a SkipClaimsRecord step repairs it; the other
// goes on). An old owner that missed a claim writes an Obsolete mark of
// the new owner's entries (strict or lease: after its produce, so the
// call fails; a store fencing "off": never looking, so it succeeds).
//
// The model is the list of acknowledged entries in log order: the exact
// replay, as the rule says that fenced writers are never acknowledged and
// acknowledged entries are never fenced. After every step, every store's
// replay and a fresh store's, with and without the index and through
// ReadRegions, equal the model: every acknowledged entry exactly once, in
// order, with its ID; nothing that was not acknowledged but by a failed
// call, which once seen stays; nothing a stale store appended after a
// claim returned or a call refused before it wrote; or, for a region with
// an unreadable record, an error naming it. Every append, Obsolete,
// Claim, Release and SkipClaimsRecord returns what the ownership the model
// tracks says; Claim's SealedID is the last entry replay returns below it,
// Release's ID the store's last acknowledged one; the claims topic's
// ownership and unreadable records are those the model holds; and Prune
// deletes no entry a replay still needs and counts exactly the Obsolete
// points of the calls that succeeded (not an old owner's late mark).
func TestFencingModel(t *testing.T) {
	t.Parallel()
	steps, seeds := 80, 3
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

// The kinds of step of the fencing model.
const (
	stepAppend       = "append"
	stepClaim        = "claim"
	stepRelease      = "release"
	stepObsolete     = "obsolete"
	stepPrune        = "prune"
	stepRestart      = "restart"
	stepRace         = "race"
	stepNoise        = "noise"         // records of the claims topic that change nothing
	stepBad          = "bad"           // a region's record that does not decode
	stepRepair       = "repair"        // SkipClaimsRecord of one
	stepLateOff      = "late-off"      // an old owner fencing "off" marks the new owner's entries obsolete
	stepLateOwner    = "late-owner"    // an old owner fencing as the run does tries to
	stepRestartOwner = "restart-owner" // the owner restarts on its index directory
	stepRestartDown  = "restart-down"  // and another store claims while it is down
	stepRestartRel   = "restart-rel"   // the owner releases, then restarts on its index directory
)

func runFencingModel(t *testing.T, seed uint64, steps int, fencing string) {
	rng := rand.New(rand.NewPCG(seed, 25))
	brokers := testutil.Brokers(t)
	// Generous: the package's tests run in parallel on few cores.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topic := newTopic(t)
	claims := topic + "-claims"
	const r, by = logstore.RegionID(7), logstore.RegionID(8)
	regions := []logstore.RegionID{r, by}
	other := func(reg logstore.RegionID) logstore.RegionID { return r + by - reg }
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
			// The model knows every prune (a background one would move
			// the log's start behind its back) and every look at the
			// claims topic (a background prune looks, which would make a
			// store's view current where a step needs it stale).
			c.PruneInterval = 0
		})
	}
	nodes := make([]*fenceNode, 3)
	for i := range nodes {
		n := &fenceNode{name: fmt.Sprintf("node%d", i), dir: t.TempDir(), acked: map[logstore.RegionID]logstore.EntryID{}, held: map[string]fenceHeld{}}
		n.s = open(n.name, n.dir)
		nodes[i] = n
	}
	require.NoError(t, nodes[0].s.CreateNamespace(ctx, topic))
	// A producer that is not kwal writes the records kwal did not.
	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer raw.Close()
	var txn *kgo.Client
	defer func() {
		if txn != nil {
			txn.Close()
		}
	}()
	td, err := kadm.NewClient(raw).ListTopics(ctx, topic)
	require.NoError(t, err)
	topicID := td[topic].ID.String()
	produceClaims := func(recs ...*kgo.Record) []int64 {
		t.Helper()
		for _, rec := range recs {
			rec.Topic = claims
		}
		res := raw.ProduceSync(ctx, recs...)
		require.NoError(t, res.FirstErr())
		offs := make([]int64, len(res))
		for i, pr := range res {
			offs[i] = pr.Record.Offset
		}
		return offs
	}
	m := &fenceModel{history: map[logstore.RegionID][]fenceEntry{}, maybe: map[string]fenceEntry{},
		never: map[string]bool{}, flushed: map[logstore.RegionID]logstore.EntryID{}, bad: map[logstore.RegionID][]int64{}}
	owns := func(n *fenceNode) bool { return !n.released && n.epoch == m.epoch }
	owner := func() *fenceNode {
		for _, n := range nodes {
			if owns(n) {
				return n
			}
		}
		return nil
	}
	anyBut := func(n *fenceNode) *fenceNode {
		others := slices.DeleteFunc(slices.Clone(nodes), func(o *fenceNode) bool { return o == n })
		return others[rng.IntN(len(others))]
	}
	seq := 0
	newEntry := func(n *fenceNode, reg logstore.RegionID) logstore.Entry {
		seq++
		return logstore.Entry{Namespace: topic, Region: reg, Data: fmt.Appendf(nil, "%s/r%d/%d:%x", n.name, reg, seq, payload(rng, 8+rng.IntN(40)))}
	}
	// zoff is a store fencing "off", opened at its first use: the old
	// owner that never looks at the claims topic after its writes.
	var zoff *fenceNode
	zombie := func() *fenceNode {
		if zoff == nil {
			zoff = &fenceNode{name: "zoff", acked: map[logstore.RegionID]logstore.EntryID{}}
			zoff.s = openStore(t, brokers, func(c *kafka.Config) {
				c.Owner, c.ClaimsTopic, c.Fencing = zoff.name, claims, kafka.FencingOff
				c.AutoCreateTopics, c.DisableIndex, c.PruneInterval, c.ProduceLanes = true, true, 0, 2
			})
		}
		return zoff
	}
	// What the run exercised, so that it cannot pass vacuously.
	var acked, fencedCalls, fencedSkipped, maybeSeen, maybeGone, racedAcked, racedFenced, obsoleteFenced, prunes, restarts int
	var noise, badRecords, repairs, refusedUnreadable, readsUnreadable, readsBlind, leaseAckedUnreadable int
	var lateMarks, lateOff, resumedAcked, resumedFenced, resumedReleased, claimsWhileDown, olderDirs int

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

	// refusal is how a call of n carrying regs (in the call's order) fails
	// before it writes, when n's view of the claims topic holds every
	// event written before the call: the first of its regions that n
	// released, that has an unreadable record or that a newer claim
	// outranks decides (nil: it does not fail). For an unreadable region
	// it returns the record the error names.
	refusal := func(n *fenceNode, regs []logstore.RegionID) (error, int64) {
		for _, reg := range regs {
			switch {
			case reg == r && n.released:
				return kafka.ErrFenced, 0
			case len(m.bad[reg]) > 0:
				return claim.ErrUnreadable, m.bad[reg][0]
			case reg == r && !owns(n):
				return kafka.ErrFenced, 0
			}
		}
		return nil, 0
	}

	// appendBy makes n append batch and checks the outcome. current says
	// n's view of the claims topic holds every event written before the
	// call (every store's does after a step's check); stale as for
	// record.
	appendBy := func(where string, n *fenceNode, batch []logstore.Entry, current, stale bool) {
		t.Helper()
		var regs, badRegs []logstore.RegionID
		var badFirst []int64
		for _, e := range batch {
			if !slices.Contains(regs, e.Region) {
				regs = append(regs, e.Region)
				if b := m.bad[e.Region]; len(b) > 0 {
					badRegs, badFirst = append(badRegs, e.Region), append(badFirst, b[0])
				}
			}
		}
		hasR := regs[0] == r
		res, err := n.s.AppendBatch(ctx, batch)
		if len(badRegs) == 0 {
			if !stale {
				require.NoError(t, err, where)
			}
			record(where, n, batch, res, err, stale)
			return
		}
		// A region of the call has an unreadable record: its fencing
		// cannot be decided, so the call is never acknowledged on a look
		// that began after its produce.
		if current {
			want, off := refusal(n, regs)
			require.ErrorIs(t, err, want, where)
			if errors.Is(want, claim.ErrUnreadable) {
				requireUnreadable(t, err, where, off)
				refusedUnreadable++
			}
			for _, e := range batch {
				m.never[string(e.Data)] = true // refused before the write
			}
			return
		}
		if err == nil {
			// Only a lease lets a look that began before the produce (and
			// before the record was written) vouch for it.
			require.True(t, fencing == kafka.FencingLease && !(hasR && stale), "%s: %s was acknowledged though region %v has an unreadable record that its look after the produce saw", where, n.name, badRegs)
			leaseAckedUnreadable++
			record(where, n, batch, res, err, stale)
			return
		}
		switch {
		case hasR && n.released:
			require.ErrorIs(t, err, kafka.ErrFenced, where)
		case hasR && !owns(n) && errors.Is(err, kafka.ErrFenced):
		default:
			requireUnreadable(t, err, where, badFirst...)
			refusedUnreadable++
		}
		for _, e := range batch {
			if e.Region == r && (stale || n.released) {
				m.never[string(e.Data)] = true
			} else {
				m.maybe[string(e.Data)] = fenceEntry{data: string(e.Data), region: e.Region}
			}
		}
	}

	// obsoleteBy makes n mark reg obsolete up to upTo, with n's view of
	// the claims topic current: it counts, or it is refused before the
	// mark is written.
	obsoleteBy := func(where string, n *fenceNode, reg logstore.RegionID, upTo logstore.EntryID) {
		t.Helper()
		err := n.s.Obsolete(ctx, topic, reg, upTo)
		switch want, off := refusal(n, []logstore.RegionID{reg}); {
		case want == nil:
			require.NoError(t, err, where)
			m.flushed[reg] = upTo
		case errors.Is(want, claim.ErrUnreadable):
			requireUnreadable(t, err, where, off)
			refusedUnreadable++
		default:
			require.ErrorIs(t, err, want, where)
			obsoleteFenced++
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
				require.False(t, m.never[d], "%s: entry %d %q was appended by a fenced store after the claim returned, or by a call refused before it wrote, or by a failed call a replay did not return before", where, e.ID, d)
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

	read := func(s *kafka.LogStore, from map[logstore.RegionID]logstore.EntryID, noIndex bool) ([]logstore.Entry, error) {
		var st kafka.ReadStats
		got, err := readErr(s.ReadWith(ctx, topic, from, kafka.ReadOptions{NoIndex: noIndex, Stats: &st}))
		fencedSkipped = max(fencedSkipped, int(st.Fenced))
		return got, err
	}

	// expectRead checks a replay's outcome: the model's entries, or for a
	// region with an unreadable record an error naming it (a store whose
	// view predates the record may yield entries first).
	expectRead := func(where string, got []logstore.Entry, err error, from map[logstore.RegionID]logstore.EntryID, resolve bool) {
		t.Helper()
		if off, ok := m.firstBad(from); ok {
			if err == nil {
				// A read with nothing to fetch does not look at the claims
				// topic: on a store whose view predates the record it
				// returns nothing, which no claim could fence. One that
				// yields anything has looked, and fails.
				require.Zero(t, len(got), "%s: replay of %v succeeded with entries, though a region has an unreadable record at offset %d", where, from, off)
				for reg := range from {
					require.Empty(t, m.want(reg), "%s: replay of %v succeeded with nothing, though region %d has an unreadable record at offset %d and entries to replay", where, from, reg, off)
				}
				readsBlind++
				return
			}
			requireUnreadable(t, err, fmt.Sprintf("%s: replay of %v", where, from), off)
			readsUnreadable++
			return
		}
		require.NoError(t, err, "%s: replay of %v", where, from)
		compare(where, got, from, resolve)
	}

	// checkOwnership checks what s says of the regions' claims: the last
	// committed claim of the claimed region, no claim of the bystander,
	// no pending claim, and each region's unreadable records.
	checkOwnership := func(where string, s *kafka.LogStore) {
		t.Helper()
		own, err := s.Ownership(ctx, topic)
		require.NoError(t, err, where)
		for _, reg := range regions {
			i := slices.IndexFunc(own, func(o kafka.RegionOwnership) bool { return o.Region == reg })
			var o kafka.RegionOwnership
			if i >= 0 {
				o = own[i]
			}
			var offs []int64
			for _, u := range o.Unreadable {
				offs = append(offs, u.Offset)
			}
			if len(m.bad[reg]) == 0 {
				require.Empty(t, offs, "%s: region %d's unreadable records", where, reg)
			} else {
				require.Equal(t, m.bad[reg], offs, "%s: region %d's unreadable records", where, reg)
			}
			if reg == r {
				require.Equal(t, m.epoch, o.Epoch, "%s: region %d's epoch", where, reg)
				require.Equal(t, m.owner, o.Owner, "%s: region %d's owner", where, reg)
			} else {
				require.Zero(t, o.Epoch, "%s: region %d was never claimed", where, reg)
			}
			require.Zero(t, o.Pending, "%s: region %d has no claim under way", where, reg)
		}
	}

	check := func(step int, what string) {
		t.Helper()
		fresh := open("fresh", "")
		defer func() { require.NoError(t, fresh.Close()) }()
		both := map[logstore.RegionID]logstore.EntryID{r: m.flushed[r] + 1, by: m.flushed[by] + 1}
		// The reference replay reads the regions whose fencing can be
		// decided; the failed calls' entries of the others wait.
		readable := map[logstore.RegionID]logstore.EntryID{}
		for reg, from := range both {
			if len(m.bad[reg]) == 0 {
				readable[reg] = from
			}
		}
		where := fmt.Sprintf("step %d (%s): fresh store, NoIndex", step, what)
		if len(readable) > 0 {
			got, err := read(fresh, readable, true)
			expectRead(where, got, err, readable, true)
		}
		if len(readable) < len(both) {
			got, err := read(fresh, both, true)
			expectRead(where, got, err, both, false)
		}
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
					got, err := read(s, one, noIndex)
					expectRead(where, got, err, one, false)
				}
				got, err := read(s, both, noIndex)
				expectRead(where, got, err, both, false)
			}
			where := fmt.Sprintf("step %d (%s): %s, ReadRegions", step, what, names[i])
			got, err := readErr(s.ReadRegions(ctx, topic, both))
			expectRead(where, got, err, both, false)
		}
		checkOwnership(fmt.Sprintf("step %d (%s): fresh store", step, what), fresh)
	}

	// checkPrune checks what a prune (or a dry run) found: it keeps every
	// entry a replay still needs, and it counts each region's Obsolete
	// point as the model holds it (the calls that succeeded, not an old
	// owner's late mark). While a region is unreadable, marks a store
	// learns by scanning wait out of its index, so its points may lag.
	checkPrune := func(where string, st kafka.PruneStatus) {
		t.Helper()
		for _, reg := range regions {
			w := m.want(reg)
			for _, e := range w {
				require.GreaterOrEqual(t, e.id, st.PrunePoint, "%s: the prune point %d is above entry %d, which region %d still needs", where, st.PrunePoint, e.id, reg)
			}
			if len(w) == 0 || (len(st.Holders) == 0 && st.PrunePoint == st.FirstID) {
				continue // nothing to hold, or the index cannot tell (st.Reason): nothing goes
			}
			i := slices.IndexFunc(st.Holders, func(h kafka.PruneHolder) bool { return h.Region == reg })
			require.GreaterOrEqual(t, i, 0, "%s: region %d still needs entries from %d but holds nothing back: %+v", where, reg, w[0].id, st.Holders)
			h := st.Holders[i]
			require.LessOrEqual(t, h.FirstNeeded, w[0].id, "%s: region %d", where, reg)
			if m.anyBad() {
				require.LessOrEqual(t, h.ObsoleteUpTo, m.flushed[reg], "%s: region %d's Obsolete point", where, reg)
			} else {
				require.Equal(t, m.flushed[reg], h.ObsoleteUpTo, "%s: region %d's Obsolete point", where, reg)
			}
		}
	}

	// dryRuns checks every store's prune report.
	dryRuns := func(where string) {
		t.Helper()
		for _, n := range nodes {
			if n.dir == "" {
				continue
			}
			dry, err := n.s.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
			require.NoError(t, err, "%s: %s's dry run", where, n.name)
			checkPrune(fmt.Sprintf("%s: %s's dry run", where, n.name), dry.PruneStatus)
		}
	}

	claimBy := func(where string, n *fenceNode) kafka.Claim {
		t.Helper()
		c, err := n.s.Claim(ctx, topic, r)
		require.NoError(t, err, where)
		require.Equal(t, m.epoch+1, c.Epoch, "%s: the new epoch is one above the last", where)
		m.epoch, m.owner, n.epoch, n.released = c.Epoch, n.name, c.Epoch, false
		return c
	}
	// claimNow is claimBy checking SealedID at once: the region's history
	// holds every entry below the claim when no failed call's entries of
	// it wait for a replay.
	claimNow := func(where string, n *fenceNode) {
		t.Helper()
		c := claimBy(where, n)
		require.Equal(t, m.sealed(r), c.SealedID, "%s: SealedID", where)
	}
	// claimRefused is a claim of a region with an unreadable record.
	claimRefused := func(where string, n *fenceNode, reg logstore.RegionID) {
		t.Helper()
		_, err := n.s.Claim(ctx, topic, reg)
		requireUnreadable(t, err, where, m.bad[reg][0])
		refusedUnreadable++
	}

	// race has one store append in a loop while another claims. Calls
	// issued before the claim returned may go either way; those issued
	// after must fail.
	race := func(step int) (string, kafka.Claim) {
		t.Helper()
		app := owner()
		if app == nil {
			app = nodes[rng.IntN(len(nodes))]
		}
		cl := anyBut(app)
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
		// is fenced fail at once, and need not spin. The bystander is
		// left out while it is unreadable.
		batches := make([][]logstore.Entry, 1000)
		for i := range batches {
			batches[i] = []logstore.Entry{newEntry(app, r)}
			if rng.IntN(3) == 0 && len(m.bad[by]) == 0 {
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

	// restart closes n and opens it again (mode: 0 on its index
	// directory, 1 without the index, 2 on a fresh directory, 3 on an
	// older directory of its own). With down, another store claims the
	// region while n is closed. With appendAfter, n appends to the
	// region at once, before anything else made it look at the claims
	// topic.
	restart := func(step int, n *fenceNode, mode int, down, appendAfter bool) string {
		t.Helper()
		var older []string
		for d := range n.held {
			if d != n.dir {
				older = append(older, d)
			}
		}
		slices.Sort(older)
		if mode == 3 && len(older) == 0 {
			mode = 0
		}
		what := fmt.Sprintf("%s (owner: %v, released: %v) restarts %s", n.name, owns(n), n.released,
			[]string{"with its index directory", "without the index", "with a fresh index directory", "with an older index directory of its own"}[mode])
		require.NoError(t, n.s.Close())
		if n.dir != "" {
			n.held[n.dir] = fenceHeld{n.epoch, n.released}
		}
		if down {
			b := anyBut(n)
			what += fmt.Sprintf(", %s claims meanwhile", b.name)
			claimNow(fmt.Sprintf("step %d: %s", step, what), b)
			claimsWhileDown++
		}
		switch mode {
		case 1:
			n.dir = ""
		case 2:
			n.dir = t.TempDir()
		case 3:
			n.dir = older[rng.IntN(len(older))]
			olderDirs++
		default:
			if n.dir == "" {
				n.dir = t.TempDir()
			}
		}
		n.s = open(n.name, n.dir)
		// The held epochs file of the directory says what the store held
		// when it last closed on it; without one the store holds nothing.
		h := n.held[n.dir]
		if n.dir == "" {
			h = fenceHeld{}
		}
		n.epoch, n.released, n.acked = h.epoch, h.released, map[logstore.RegionID]logstore.EntryID{}
		restarts++
		if appendAfter {
			batch := []logstore.Entry{newEntry(n, r)}
			stale := !owns(n)
			what += fmt.Sprintf(", then appends at once (owner: %v)", !stale)
			appendBy(fmt.Sprintf("step %d: %s", step, what), n, batch, false, stale)
			switch {
			case !stale && n.epoch > 0 && len(m.bad[r]) == 0:
				resumedAcked++
			case stale && n.epoch > 0 && !n.released:
				resumedFenced++
			case n.released:
				resumedReleased++
			}
		}
		// The store resumed exactly what it held there: its release, and
		// its epoch (which it may drop when the claims it keeps no longer
		// show it, as a newer claim fences it all the same).
		own, err := n.s.Ownership(ctx, topic)
		require.NoError(t, err)
		if i := slices.IndexFunc(own, func(o kafka.RegionOwnership) bool { return o.Region == r }); i >= 0 {
			o := own[i]
			where := fmt.Sprintf("step %d: %s: what it holds of region %d", step, what, r)
			require.Equal(t, n.released, o.HeldReleased, where)
			if n.released || owns(n) {
				require.Equal(t, n.epoch, o.HeldEpoch, where)
			} else {
				require.Contains(t, []uint64{0, n.epoch}, o.HeldEpoch, where)
			}
		} else {
			require.Zero(t, m.epoch, "step %d: %s: region %d was claimed, but its ownership is not listed", step, what, r)
		}
		return what
	}

	// late has an old owner that missed a claim write an Obsolete mark of
	// the new owner's entries, after they were written. A store fencing
	// "off" never looks at the claims topic after its writes: the call
	// succeeds. One fencing as the run does looks after the mark's produce
	// (its lease ran out while the claim waited one) and fails. Either
	// way the mark lies above the new claim, with the old epoch: every
	// store ignores it (the off store's own index, which takes it in, is
	// off here), while the legitimate owners' marks count.
	late := func(step int, viaOff bool) string {
		t.Helper()
		var old *fenceNode
		var what string
		if viaOff {
			old = zombie()
			what = fmt.Sprintf("%s (fencing off) claims", old.name)
			claimNow(fmt.Sprintf("step %d: %s", step, what), old)
			for range 1 + rng.IntN(2) {
				appendBy(fmt.Sprintf("step %d: %s appends", step, what), old, []logstore.Entry{newEntry(old, r)}, true, false)
			}
			if rng.IntN(2) == 0 {
				ids := m.want(r)
				upTo := ids[rng.IntN(len(ids))].id
				require.NoError(t, old.s.Obsolete(ctx, topic, r, upTo), "step %d: %s: its Obsolete as the owner", step, what)
				m.flushed[r] = upTo
				what += fmt.Sprintf(", marks region %d obsolete up to %d", r, upTo)
			}
			what += "; it "
			lateOff++
		} else {
			if old = owner(); old == nil {
				old = nodes[rng.IntN(len(nodes))]
				what = fmt.Sprintf("%s claims, ", old.name)
				claimNow(fmt.Sprintf("step %d: %s", step, what), old)
			}
			what += fmt.Sprintf("%s (owner, epoch %d) ", old.name, old.epoch)
		}
		b := anyBut(old)
		what += fmt.Sprintf("misses %s's claim", b.name)
		claimNow(fmt.Sprintf("step %d: %s", step, what), b)
		var upTo logstore.EntryID
		for range 1 + rng.IntN(3) {
			e := newEntry(b, r)
			appendBy(fmt.Sprintf("step %d: %s: the new owner appends", step, what), b, []logstore.Entry{e}, true, false)
			upTo = m.history[r][len(m.history[r])-1].id
		}
		what += fmt.Sprintf(" and marks region %d obsolete up to %d, the new owner's last entry", r, upTo)
		err := old.s.Obsolete(ctx, topic, r, upTo)
		if viaOff {
			require.NoError(t, err, "step %d: %s: its view predates the claim, and it does not look after the write", step, what)
			// Fencing off, it is told "acknowledged" for entries the
			// replay fences: they lie above the claim.
			e := newEntry(old, r)
			if _, err := old.s.AppendBatch(ctx, []logstore.Entry{e}); err != nil {
				require.ErrorIs(t, err, kafka.ErrFenced, "step %d: %s, then appends", step, what)
			}
			m.never[string(e.Data)] = true
			what += ", then appends"
		} else {
			require.ErrorIs(t, err, kafka.ErrFenced, "step %d: %s: the look after its write sees the claim", step, what)
		}
		lateMarks++
		if rng.IntN(2) == 0 {
			ids := m.want(r)
			upTo := ids[rng.IntN(len(ids))].id
			require.NoError(t, b.s.Obsolete(ctx, topic, r, upTo), "step %d: %s: the new owner's Obsolete", step, what)
			m.flushed[r] = upTo
			what += fmt.Sprintf("; the new owner marks it obsolete up to %d", upTo)
		}
		dryRuns(fmt.Sprintf("step %d: %s", step, what))
		return what
	}

	// The steps every run makes at least once, at random places; a step
	// that cannot be made (its region is unreadable) waits for the next.
	plan := map[int]string{}
	schedule := func(kind string, from int) {
		for s := from; s < steps; s++ {
			if _, taken := plan[s]; !taken {
				plan[s] = kind
				return
			}
		}
	}
	schedule(stepBad, rng.IntN(steps/2))
	for _, kind := range []string{stepRace, stepNoise, stepLateOff, stepLateOwner, stepRestartOwner, stepRestartDown, stepRestartRel} {
		schedule(kind, rng.IntN(steps*2/3))
	}
	pick := func(step int) string {
		switch op := rng.IntN(100); {
		case op < 30:
			return stepAppend
		case op < 42:
			return stepClaim
		case op < 47:
			return stepRelease
		case op < 57:
			return stepObsolete
		case op < 65:
			return stepPrune
		case op < 74:
			return stepRestart
		case op < 82:
			return stepRace
		case op < 87:
			return stepNoise
		case op < 91:
			if step < steps*2/3 && len(m.bad[r])+len(m.bad[by]) < 3 {
				return stepBad
			}
			return stepAppend
		default:
			return []string{stepLateOff, stepLateOwner}[rng.IntN(2)]
		}
	}

	for step := range steps {
		kind, planned := plan[step]
		if !planned {
			kind = pick(step)
		}
		switch kind {
		case stepLateOff, stepLateOwner, stepRestartOwner, stepRestartDown, stepRestartRel:
			if len(m.bad[r]) > 0 {
				if planned {
					schedule(kind, step+1)
				}
				kind = stepClaim // refused
			}
		}
		n := nodes[rng.IntN(len(nodes))]
		var what string
		// sealed is a claim of the step, whose SealedID is checked once
		// the step's replay placed the failed calls' entries.
		var sealed *kafka.Claim
		switch kind {
		case stepAppend:
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
			appendBy(fmt.Sprintf("step %d: %s", step, what), n, batch, true, stale)
		case stepClaim:
			what = fmt.Sprintf("%s claims (owner: %v)", n.name, owns(n))
			if len(m.bad[r]) > 0 {
				what += ", which is refused: the region is unreadable"
				claimRefused(fmt.Sprintf("step %d: %s", step, what), n, r)
				break
			}
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
				what += fmt.Sprintf(", then %s appends at once", z.name)
				appendBy(fmt.Sprintf("step %d: %s", step, what), z, batch, false, true)
			}
		case stepRelease:
			what = fmt.Sprintf("%s releases (owner: %v)", n.name, owns(n))
			id, err := n.s.Release(ctx, topic, r)
			require.NoError(t, err, "step %d: %s", step, what)
			require.Equal(t, n.acked[r], id, "step %d: %s: Release returns the store's last acknowledged ID", step, what)
			n.released = true
		case stepObsolete:
			reg := regions[rng.IntN(2)]
			ids := m.want(reg)
			if len(ids) == 0 {
				what = fmt.Sprintf("%s: obsolete region %d: nothing to mark", n.name, reg)
				break
			}
			upTo := ids[rng.IntN(len(ids))].id
			what = fmt.Sprintf("%s: obsolete region %d up to %d (owner: %v, unreadable: %v)", n.name, reg, upTo, owns(n), len(m.bad[reg]) > 0)
			obsoleteBy(fmt.Sprintf("step %d: %s", step, what), n, reg, upTo)
		case stepPrune:
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
			// What it found before it deleted.
			found := res.PruneStatus
			found.FirstID = res.Before
			checkPrune(fmt.Sprintf("step %d: %s", step, what), found)
			if res.Deleted {
				m.start = int64(res.FirstID) - 1
				prunes++
			}
			what += fmt.Sprintf(" to %d", res.FirstID)
		case stepRestart:
			what = restart(step, n, rng.IntN(4), len(m.bad[r]) == 0 && rng.IntN(4) == 0, rng.IntN(2) == 0)
		case stepRestartOwner, stepRestartDown, stepRestartRel:
			// An owner under a claim (before any, every store writes
			// under epoch 0), with an index directory to resume it from.
			o := owner()
			if o == nil || o.dir == "" || o.epoch == 0 {
				var withDir []*fenceNode
				for _, c := range nodes {
					if c.dir != "" {
						withDir = append(withDir, c)
					}
				}
				if len(withDir) == 0 {
					schedule(kind, step+1) // every store runs without its index
					what = "no store has an index directory"
					break
				}
				o = withDir[rng.IntN(len(withDir))]
				claimNow(fmt.Sprintf("step %d: %s claims", step, o.name), o)
				what = fmt.Sprintf("%s claims; ", o.name)
			}
			if kind == stepRestartRel {
				id, err := o.s.Release(ctx, topic, r)
				require.NoError(t, err, "step %d: %s releases", step, o.name)
				require.Equal(t, o.acked[r], id, "step %d: %s releases: Release returns the store's last acknowledged ID", step, o.name)
				o.released = true
				what += fmt.Sprintf("%s releases; ", o.name)
			}
			what += restart(step, o, 0, kind == stepRestartDown, true)
		case stepRace:
			if len(m.bad[r]) > 0 {
				what = fmt.Sprintf("%s claims (owner: %v), which is refused: the region is unreadable", n.name, owns(n))
				claimRefused(fmt.Sprintf("step %d: %s", step, what), n, r)
				break
			}
			var c kafka.Claim
			what, c = race(step)
			sealed = &c
		case stepNoise:
			// Records kwal did not write: no region changes. A store that
			// folds them at once (an append's or a claim's look) goes on.
			recs, desc := claimsNoise(rng, topic, topicID, uint64(r))
			// A skip naming an offset that is not an unreadable record of
			// the region.
			reg := regions[rng.IntN(2)]
			off := rng.Int64N(1 << 20)
			for slices.Contains(m.bad[reg], off) {
				off++
			}
			ev := claim.Event{Op: claim.OpSkip, Namespace: topic, Region: uint64(reg), Skip: off, Owner: "intruder"}
			recs = append(recs, &kgo.Record{Key: claim.Key(topic, uint64(reg)), Value: claim.Encode(ev)})
			rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			produceClaims(recs...)
			what = fmt.Sprintf("%s; region %d's skip of offset %d, which is not unreadable", desc, reg, off)
			if rng.IntN(2) == 0 {
				// Another program's transaction: its markers take offsets
				// that hold no record.
				if txn == nil {
					txn, err = kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(claims), kgo.RecordPartitioner(kgo.ManualPartitioner()))
					require.NoError(t, err)
				}
				commit := rng.IntN(2) == 0
				require.NoError(t, txn.BeginTransaction())
				rec := &kgo.Record{Topic: claims, Key: []byte("someone else's"), Value: claim.Encode(intruderEvent(topic, topicID, uint64(r)))}
				require.NoError(t, txn.ProduceSync(ctx, rec).FirstErr())
				require.NoError(t, txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
				what += fmt.Sprintf("; a foreign record in a transaction (committed: %v)", commit)
			}
			what = "the claims topic gets " + what
			noise++
			if rng.IntN(2) == 0 && len(m.bad[r]) == 0 {
				what += fmt.Sprintf(", then %s claims", n.name)
				c := claimBy(fmt.Sprintf("step %d: %s", step, what), n)
				sealed = &c
			} else {
				batch := []logstore.Entry{newEntry(n, r), newEntry(n, by)}
				what += fmt.Sprintf(", then %s appends (owner: %v)", n.name, owns(n))
				appendBy(fmt.Sprintf("step %d: %s", step, what), n, batch, true, !owns(n))
			}
		case stepBad:
			reg := regions[rng.IntN(2)]
			if len(m.bad[reg]) >= 2 {
				reg = other(reg)
			}
			val, desc := badClaimsValue(rng, topic, topicID, uint64(reg))
			off := produceClaims(&kgo.Record{Key: claim.Key(topic, uint64(reg)), Value: val})[0]
			m.bad[reg] = append(m.bad[reg], off)
			badRecords++
			schedule(stepRepair, step+2+rng.IntN(8))
			what = fmt.Sprintf("the claims topic gets %s as region %d's record at offset %d", desc, reg, off)
			// At once, before any store looked at the claims topic again:
			// an append carrying the region (its look after the produce
			// sees the record), and a claim (which looks first).
			var batch []logstore.Entry
			if reg == r || rng.IntN(2) == 0 {
				batch = append(batch, newEntry(n, r))
			}
			if reg == by || rng.IntN(2) == 0 {
				batch = append(batch, newEntry(n, by))
			}
			hasR := batch[0].Region == r
			what += fmt.Sprintf("; %s appends %d entries at once (owner: %v)", n.name, len(batch), owns(n))
			appendBy(fmt.Sprintf("step %d: %s", step, what), n, batch, false, hasR && !owns(n))
			c := nodes[rng.IntN(len(nodes))]
			what += fmt.Sprintf(", %s claims region %d", c.name, reg)
			claimRefused(fmt.Sprintf("step %d: %s", step, what), c, reg)
			// The claim looked: the claimer's Obsolete of the region is
			// refused before it writes.
			if ids := m.want(reg); len(ids) > 0 {
				upTo := ids[rng.IntN(len(ids))].id
				what += fmt.Sprintf(", then marks it obsolete up to %d", upTo)
				obsoleteBy(fmt.Sprintf("step %d: %s", step, what), c, reg, upTo)
			}
		case stepRepair:
			var reg logstore.RegionID
			for _, g := range regions {
				if len(m.bad[g]) > 0 && (reg == 0 || rng.IntN(2) == 0) {
					reg = g
				}
			}
			if reg == 0 {
				what = "nothing to repair"
				break
			}
			i := rng.IntN(len(m.bad[reg]))
			off := m.bad[reg][i]
			where := fmt.Sprintf("step %d: %s skips region %d's record at offset %d", step, n.name, reg, off)
			// It refuses what is not an unreadable record of the region.
			notBad := off + 1
			for slices.Contains(m.bad[reg], notBad) {
				notBad++
			}
			require.ErrorIs(t, n.s.SkipClaimsRecord(ctx, topic, reg, notBad), kafka.ErrNotUnreadable, "%s: offset %d", where, notBad)
			if !slices.Contains(m.bad[other(reg)], off) {
				require.ErrorIs(t, n.s.SkipClaimsRecord(ctx, topic, other(reg), off), kafka.ErrNotUnreadable, "%s: region %d", where, other(reg))
			}
			require.NoError(t, n.s.SkipClaimsRecord(ctx, topic, reg, off), where)
			m.bad[reg] = slices.Delete(m.bad[reg], i, i+1)
			require.ErrorIs(t, n.s.SkipClaimsRecord(ctx, topic, reg, off), kafka.ErrNotUnreadable, "%s: again", where)
			repairs++
			what = fmt.Sprintf("%s skips region %d's record at offset %d (unreadable still: %v)", n.name, reg, off, m.bad[reg])
			if len(m.bad[reg]) == 0 {
				// At once, another store whose view still holds the record
				// appends to the region: it looks again rather than fail.
				a := anyBut(n)
				stale := reg == r && !owns(a)
				what += fmt.Sprintf("; %s appends to it at once (owner: %v)", a.name, !stale)
				appendBy(fmt.Sprintf("step %d: %s", step, what), a, []logstore.Entry{newEntry(a, reg)}, true, stale)
			}
		case stepLateOff:
			what = late(step, true)
		case stepLateOwner:
			what = late(step, false)
		default:
			t.Fatalf("step %d: no step %q", step, kind)
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
	t.Logf("acknowledged calls %d, fenced calls %d (racing a claim: %d acknowledged, %d fenced); failed calls' entries replayed %d, never written or fenced %d; most fenced entries skipped by one read %d; Obsolete fenced %d; prunes %d; restarts %d (on an older directory %d, a claim while down %d; then acknowledged under a resumed epoch %d, fenced %d, refused as released %d)",
		acked, fencedCalls, racedAcked, racedFenced, maybeSeen, maybeGone, fencedSkipped, obsoleteFenced, prunes, restarts, olderDirs, claimsWhileDown, resumedAcked, resumedFenced, resumedReleased)
	t.Logf("claims topic: noise steps %d, unreadable records %d, repairs %d; calls refused as unreadable %d, reads %d (with nothing to fetch, on a view that predates it, returning nothing %d), appends acknowledged on a lease meanwhile %d; late Obsolete marks of old owners %d (fencing off %d)",
		noise, badRecords, repairs, refusedUnreadable, readsUnreadable, readsBlind, leaseAckedUnreadable, lateMarks, lateOff)
	require.Positive(t, fencedCalls, "no append was fenced")
	require.Positive(t, fencedSkipped, "no fenced entry was written and skipped by a replay")
	require.Positive(t, noise, "no record kwal did not write")
	require.Positive(t, badRecords, "no unreadable record")
	require.Positive(t, repairs, "no repair")
	require.Positive(t, refusedUnreadable, "no call refused for an unreadable record")
	require.Positive(t, readsUnreadable, "no read refused for an unreadable record")
	require.Positive(t, lateOff, "no late Obsolete by an old owner fencing off")
	require.Greater(t, lateMarks, lateOff, "no late Obsolete by an old owner fencing as the run does")
	require.Positive(t, resumedAcked, "no restart resumed the owner's epoch")
	require.Positive(t, resumedFenced, "no restart resumed an epoch another store's claim outranked meanwhile")
	require.Positive(t, resumedReleased, "no restart resumed a release")
}
