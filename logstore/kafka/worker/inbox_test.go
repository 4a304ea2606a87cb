package worker

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kicked reports whether the inbox's wake-up channel holds a signal, and
// consumes it.
func kicked(in *inbox) bool {
	select {
	case <-in.kick:
		return true
	default:
		return false
	}
}

// TestInboxSignalsWhatCanEndAHold protects the inbox's wake-up rule: when
// the dispatcher is not holding, every arrival wakes it; while it holds,
// only an arrival that could end the hold does (its topic already has a
// ready group or another request in the inbox, the inbox's bytes exceed
// the held dispatch's room, its deadline falls before the hold's end, or
// it is a closing marker). Whatever arrives is taken whole, in arrival
// order, and a closed inbox refuses arrivals.
func TestInboxSignalsWhatCanEndAHold(t *testing.T) {
	in := newInbox()
	a, b, c := &worker{}, &worker{}, &worker{}
	req := func(w *worker, bytes int64) *request { return &request{w: w, bytes: bytes} }

	r1 := req(a, 10)
	require.True(t, in.put(r1))
	require.True(t, kicked(in), "not holding: an arrival wakes the dispatcher")

	now := time.Now()
	in.release()
	require.Equal(t, []*request{r1}, in.take())
	in.hold(100, now.Add(time.Hour))
	r2 := req(a, 10)
	require.True(t, in.put(r2))
	require.False(t, kicked(in), "holding: a cold topic's first arrival waits for the dispatcher's wake")
	r3 := req(a, 10)
	require.True(t, in.put(r3))
	require.True(t, kicked(in), "a second arrival of a topic may be a second ready group")
	b.hot.Store(true)
	r4 := req(b, 10)
	require.True(t, in.put(r4))
	require.True(t, kicked(in), "a topic with a ready group cannot add a second to the held dispatch")
	r5 := req(c, 71)
	require.True(t, in.put(r5))
	require.True(t, kicked(in), "the inbox's 101 bytes exceed the held dispatch's room of 100")

	in.release()
	require.Equal(t, []*request{r2, r3, r4, r5}, in.take(), "taken whole, in arrival order")
	require.Zero(t, a.inboxed, "take resets the topics' arrival counts")
	b.hot.Store(false)
	in.hold(100, now.Add(time.Second))
	r6 := req(c, 1)
	r6.deadline = Deadline{At: now.Add(2 * time.Second)}
	require.True(t, in.put(r6))
	require.False(t, kicked(in), "a deadline after the hold's end is met by the dispatcher's wake")
	r7 := req(b, 1)
	r7.deadline = Deadline{At: now.Add(time.Millisecond)}
	require.True(t, in.put(r7))
	require.True(t, kicked(in), "a deadline before the hold's end must reach the deadline heap now")
	marker := &request{w: a, closing: true}
	require.True(t, in.put(marker))
	require.True(t, kicked(in), "a closing marker always wakes the dispatcher")

	require.Equal(t, []*request{r6, r7, marker}, in.close())
	require.False(t, in.put(req(a, 1)), "a closed inbox refuses arrivals")
	require.Empty(t, in.take())
}

// TestInboxLosesNoArrival runs many putters against a dispatcher loop
// that, after every wake, releases, takes, and then either holds (and
// wakes again on its own, as its timer would) or parks until signalled.
// Every arrival must be taken exactly once and each putter's in its
// order; a lost wake-up leaves the loop parked with arrivals in the inbox
// and the test hangs. (Every arrival is its own topic's first, so only
// the hold decides whether it signals.)
func TestInboxLosesNoArrival(t *testing.T) {
	in := newInbox()
	const putters, each = 8, 2000
	var wg sync.WaitGroup
	for i := range putters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				// A topic of its own: only the hold decides whether it signals.
				// (dlIdx: the putter, for the check.)
				r := &request{w: &worker{}, bytes: int64(j), dlIdx: i}
				require.True(t, in.put(r))
			}
		}()
	}
	next := make([]int, putters)
	taken := 0
	for turn := 0; ; turn++ {
		in.release()
		for _, r := range in.take() {
			require.Equal(t, int64(next[r.dlIdx]), r.bytes, "putter %d's arrivals in order", r.dlIdx)
			next[r.dlIdx]++
			taken++
		}
		if taken == putters*each {
			break
		}
		if turn%3 == 0 {
			in.hold(math.MaxInt64, time.Now().Add(time.Hour))
			continue // the hold's own wake
		}
		<-in.kick
	}
	wg.Wait()
	for i := range putters {
		require.Equal(t, each, next[i])
	}
	require.Zero(t, in.len())
}
