package worker

import (
	"container/heap"
	"time"
)

// Deadline bounds a request from outside the worker: past At, the
// dispatcher resolves the request with Cause (wrapped to say whether its
// entries may have been written), wherever it is: queued (it is withdrawn
// and never sent) or on a lane (it is abandoned; the lane keeps its records
// until franz-go returns them). The zero Deadline bounds nothing.
//
// One AppendBatch's requests share one Deadline; the dispatcher keeps every
// bounded request in one heap ordered by At and arms its wake timer for the
// earliest, so a call costs a heap push and a removal instead of a context
// with its own runtime timer.
type Deadline struct {
	At    time.Time
	Cause error
}

// deadlines is a min-heap of the unresolved requests that have a Deadline,
// earliest first. Only the dispatcher goroutine touches it; a request's
// dlIdx is its position + 1 (0: not in the heap).
type deadlines []*request

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].deadline.At.Before(h[j].deadline.At) }
func (h deadlines) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].dlIdx, h[j].dlIdx = i+1, j+1
}
func (h *deadlines) Push(x any) {
	r := x.(*request)
	r.dlIdx = len(*h) + 1
	*h = append(*h, r)
}
func (h *deadlines) Pop() any {
	old := *h
	n := len(old) - 1
	r := old[n]
	old[n] = nil
	*h = old[:n]
	r.dlIdx = 0
	return r
}

// add puts r in the heap if it has a deadline.
func (h *deadlines) add(r *request) {
	if !r.deadline.At.IsZero() && r.dlIdx == 0 {
		heap.Push(h, r)
	}
}

// remove takes r out of the heap (a resolved request); no-op if not in it.
func (h *deadlines) remove(r *request) {
	if r.dlIdx > 0 {
		heap.Remove(h, r.dlIdx-1)
	}
}

// expire resolves every request whose deadline is not after now, and
// returns the earliest deadline left (zero when none).
func (d *dispatcher) expire(now time.Time) time.Time {
	h := &d.l.deadlines
	for len(*h) > 0 {
		r := (*h)[0]
		if r.deadline.At.After(now) {
			return r.deadline.At
		}
		heap.Pop(h)
		r.w.expire(r)
	}
	return time.Time{}
}
