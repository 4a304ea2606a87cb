package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// dedupWindow is how long repeats of a log line are held back after it
// was printed: a broker outage makes every request log the same warning,
// and one line a minute says as much as hundreds.
const dedupWindow = time.Minute

// dedupHandler passes each record to the handler underneath, except
// repeats: a record with the level and message of one printed less than
// dedupWindow ago is counted instead of printed. The count goes with the
// next record of that kind printed, or out with flush when the command
// ends. At --log-level debug nothing is held back.
type dedupHandler struct {
	next  slog.Handler
	state *dedupState // shared by the handlers WithAttrs and WithGroup derive
}

type dedupState struct {
	on   atomic.Bool
	now  func() time.Time
	root slog.Handler // flush writes through it: a count is of no one logger

	mu    sync.Mutex
	kinds map[dedupKey]*dedupKind
	order []dedupKey // kinds in the order first seen, for flush
}

type dedupKey struct {
	level slog.Level
	msg   string
}

// dedupKind is one kind of record: when it was last printed and how many
// repeats were held back since.
type dedupKind struct {
	last time.Time
	held int
}

func newDedupHandler(next slog.Handler, now func() time.Time) *dedupHandler {
	h := &dedupHandler{next: next, state: &dedupState{now: now, root: next, kinds: map[dedupKey]*dedupKind{}}}
	h.state.on.Store(true)
	return h
}

// holdBack turns holding repeats back on or off.
func (h *dedupHandler) holdBack(on bool) { h.state.on.Store(on) }

func (h *dedupHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *dedupHandler) Handle(ctx context.Context, r slog.Record) error {
	st := h.state
	if !st.on.Load() {
		return h.next.Handle(ctx, r)
	}
	key := dedupKey{r.Level, r.Message}
	now := st.now()
	st.mu.Lock()
	k := st.kinds[key]
	if k != nil && now.Sub(k.last) < dedupWindow {
		k.held++
		st.mu.Unlock()
		return nil
	}
	if k == nil {
		k = &dedupKind{}
		st.kinds[key] = k
		st.order = append(st.order, key)
	}
	held := k.held
	k.last, k.held = now, 0
	st.mu.Unlock()
	if held > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeats_held_back", held))
	}
	return h.next.Handle(ctx, r)
}

// flush logs, for every kind with repeats held back, one record saying
// how many (unless the level now hides that kind: once interrupted, the
// command says only what it had done).
func (h *dedupHandler) flush() {
	st := h.state
	st.mu.Lock()
	var out []slog.Record
	for _, key := range st.order {
		if k := st.kinds[key]; k.held > 0 {
			r := slog.NewRecord(st.now(), key.level, key.msg, 0)
			r.AddAttrs(slog.Int("repeats_held_back", k.held))
			out = append(out, r)
			k.held = 0
		}
	}
	st.mu.Unlock()
	ctx := context.Background()
	for _, r := range out {
		if st.root.Enabled(ctx, r.Level) {
			_ = st.root.Handle(ctx, r)
		}
	}
}

func (h *dedupHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &dedupHandler{next: h.next.WithAttrs(as), state: h.state}
}

func (h *dedupHandler) WithGroup(name string) slog.Handler {
	return &dedupHandler{next: h.next.WithGroup(name), state: h.state}
}
