package worker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"
)

// TestIncrementalPlanMatchesFullPlan protects the incremental plan: after
// any sequence of arrivals, dispatches taking the next group, completions
// and withdrawals, the groups a topic has left to send (the plan continued
// where it could, or redone) are exactly those a plan from scratch over
// the still-queued requests makes, in the same order and with the same
// requests. In particular a request of a region whose group was taken is
// never added to that group (it would never be sent): it is held while the
// group is in flight and forms a new group after.
func TestIncrementalPlanMatchesFullPlan(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			p := &Producer{opts: Options{Topic: "t", MaxBatchBytes: 1000, MaxRegions: 1},
				sem: semaphore.NewWeighted(1 << 30), lanes: &Lanes{}}
			w := newWorker(p)
			p.w = w
			var inflight []*part
			full := 0
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op < 5: // a call arrives, of one region or (rarely) two
					r := &request{w: w, done: make(chan struct{}), enqueued: time.Now(), bytes: int64(1 + rng.IntN(900))}
					r.regions = []uint64{uint64(1 + rng.IntN(6))}
					if rng.IntN(8) == 0 {
						if other := uint64(1 + rng.IntN(6)); other != r.regions[0] {
							r.regions = append(r.regions, other)
						}
					}
					w.pending = append(w.pending, r)
					w.dirty = true
				case op < 7: // a dispatch takes the next group (as pack and send do)
					if w.next < len(w.groups) {
						g := w.groups[w.next]
						w.next++
						if pt := w.take(g); pt != nil {
							w.parts[pt] = struct{}{}
							for _, reg := range pt.regions {
								w.busy[reg]++
							}
							inflight = append(inflight, pt)
						}
					}
				case op < 9: // a dispatch comes back
					if len(inflight) > 0 {
						i := rng.IntN(len(inflight))
						w.complete(inflight[i], &dispatch{})
						inflight = slices.Delete(inflight, i, i+1)
					}
				default: // a caller withdraws a queued call (as Wait does)
					var queued []*request
					for _, r := range w.pending {
						if r.state.Load() == stateQueued {
							queued = append(queued, r)
						}
					}
					if len(queued) > 0 {
						r := queued[rng.IntN(len(queued))]
						r.state.Store(stateCanceled)
						w.withdrawals.Add(1)
						w.dirty = true
					}
				}
				if !w.dirty {
					continue
				}
				before := w.replan || w.merged || w.withdrawals.Load() != w.seenWithdrawals
				if before {
					full++
				}
				w.plan(1 + rng.IntN(3))
				w.dirty = false

				ref := newWorker(p)
				for reg, n := range w.busy {
					ref.busy[reg] = n
				}
				for _, r := range w.pending {
					if r.state.Load() == stateQueued {
						ref.pending = append(ref.pending, r)
					}
				}
				ref.plan(1)
				require.Equal(t, groupsOf(ref.groups), groupsOf(w.groups[w.next:]), "step %d: the plan left to send", step)
			}
			require.Less(t, full, 300, "some plans continued the last one")
			for _, pt := range inflight {
				w.complete(pt, &dispatch{})
			}
		})
	}
}

// groupsOf is each group's requests, by identity.
func groupsOf(gs []*group) [][]*request {
	out := [][]*request{}
	for _, g := range gs {
		out = append(out, slices.Clone(g.reqs))
	}
	return out
}
