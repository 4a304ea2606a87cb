// Package retry is the store's one retry loop of whole calls: waiting for a
// new topic's leader, listing offsets and fetching all pace their attempts
// through it. franz-go retries the requests it issues itself; these are the
// loops around whole calls whose retriable failures it hands back.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Every calls attempt (n = 0, 1, ...) until it reports done, pausing
// every between attempts. attempt returns done with its final result (nil
// or an error that retrying cannot cure), or not done with the retriable
// cause. When ctx ends before the next attempt, Every returns ended
// and ctx's error naming the last cause; errors.Is matches both. An
// attempt that failed only because ctx ended during it (its cause is ctx's
// error) does not replace the cause before it: "deadline exceeded (last
// error: deadline exceeded)" would hide why the call kept retrying.
func Every(ctx context.Context, every time.Duration, attempt func(n int) (done bool, err error)) (ended bool, err error) {
	var last error
	for n := 0; ; n++ {
		done, cause := attempt(n)
		if done {
			return false, cause
		}
		if cause != nil && (last == nil || ctx.Err() == nil || !errors.Is(cause, ctx.Err())) {
			last = cause
		}
		if ctx.Err() == nil {
			t := time.NewTimer(every)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
			}
		}
		if last == nil {
			return true, ctx.Err()
		}
		return true, kwalerr.Errorf("%w (last error: %w)", ctx.Err(), last)
	}
}
