package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// keptRecords is a handler that keeps what reaches it.
type keptRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (k *keptRecords) Enabled(context.Context, slog.Level) bool { return true }
func (k *keptRecords) Handle(_ context.Context, r slog.Record) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.recs = append(k.recs, r.Clone())
	return nil
}
func (k *keptRecords) WithAttrs([]slog.Attr) slog.Handler { return k }
func (k *keptRecords) WithGroup(string) slog.Handler      { return k }

// heldBack is a record's repeats_held_back (0 without one).
func heldBack(r slog.Record) int {
	n := 0
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "repeats_held_back" {
			n = int(a.Value.Int64())
		}
		return true
	})
	return n
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = found || a.Key == key
		return !found
	})
	return found
}

// TestDedupHandler runs random sequences of log records of a few kinds at
// random times through the handler and checks what a broker outage's
// reader relies on: a kind's first record is printed at once, a repeat
// within dedupWindow of the kind's last printed record is not, one later
// is; no record is lost from the count (every record is printed or
// counted in the repeats_held_back of a later line of its kind or of
// flush's line); attributes of loggers derived with With count as the
// same kind; and with holding back off (--log-level debug) every record
// is printed.
func TestDedupHandler(t *testing.T) {
	kinds := []struct {
		level slog.Level
		msg   string
	}{{slog.LevelWarn, "broker gone"}, {slog.LevelWarn, "retrying"}, {slog.LevelError, "broker gone"}}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		now := time.Unix(0, 0)
		kept := &keptRecords{}
		h := newDedupHandler(kept, func() time.Time { return now })
		on := seed%10 != 0
		h.holdBack(on)
		log := slog.New(h)
		derived := log.With("topic", "t") // shares the handler's state
		lastPrinted := map[int]time.Time{}
		want := map[int]int{} // records per kind
		n := 1 + rng.IntN(300)
		for range n {
			now = now.Add(time.Duration(rng.Int64N(int64(dedupWindow / 4))))
			k := rng.IntN(len(kinds))
			want[k]++
			before := len(kept.recs)
			l := log
			if rng.IntN(2) == 0 {
				l = derived
			}
			l.Log(context.Background(), kinds[k].level, kinds[k].msg, "attempt", rng.IntN(10))
			printed := len(kept.recs) > before
			last, seen := lastPrinted[k]
			switch {
			case !on || !seen || now.Sub(last) >= dedupWindow:
				require.True(t, printed, "seed %d: a record of kind %d, first or %v after the last printed, is printed", seed, k, now.Sub(last))
				lastPrinted[k] = now
			default:
				require.False(t, printed, "seed %d: a repeat of kind %d %v after the last printed is held back", seed, k, now.Sub(last))
			}
		}
		h.flush()
		got := map[int]int{}
		for _, r := range kept.recs {
			for k, kd := range kinds {
				if r.Level == kd.level && r.Message == kd.msg {
					got[k] += heldBack(r)
					if hasAttr(r, "attempt") { // flush's lines only count repeats
						got[k]++
					}
				}
			}
		}
		require.Equal(t, want, got, "seed %d: every record is printed or counted once", seed)
		// Flushed: nothing more to say.
		before := len(kept.recs)
		h.flush()
		require.Len(t, kept.recs, before)
	}
}

// TestDedupFlushHonoursTheLevel: once the command was interrupted (its
// level raised to ERROR), the held-back counts of warnings are not
// printed: the command's one line says what it had done.
func TestDedupFlushHonoursTheLevel(t *testing.T) {
	var lvl slog.LevelVar
	kept := &keptRecords{}
	now := time.Unix(0, 0)
	h := newDedupHandler(&levelled{keptRecords: kept, lvl: &lvl}, func() time.Time { return now })
	log := slog.New(h)
	log.Warn("gone")
	log.Warn("gone")
	require.Len(t, kept.recs, 1)
	lvl.Set(slog.LevelError)
	h.flush()
	require.Len(t, kept.recs, 1)
}

// levelled is keptRecords behind a level.
type levelled struct {
	*keptRecords
	lvl *slog.LevelVar
}

func (l *levelled) Enabled(_ context.Context, level slog.Level) bool { return level >= l.lvl.Level() }
