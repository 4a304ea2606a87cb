package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"
)

// demoAppend runs the writers and records every acknowledged call in exp.
// Interrupted (ctx ends), it returns ctx's error alone: the calls that
// failed because of it are not errors of their own.
func (a *app) demoAppend(parent context.Context, st logstore.LogStore, o demoOpts, exp *expectation, res *demoResult) error {
	// The first writer to fail stops the others (their appends then fail
	// with the cancellation, which is not an error of its own).
	g, ctx := errgroup.WithContext(parent)
	var entries, nbytes, remaining atomic.Int64
	remaining.Store(o.budget)
	start := time.Now()
	deadline := start.Add(o.duration)
	lats := make([][]time.Duration, o.writers)
	for w := range o.writers {
		g.Go(func() error {
			var owned []logstore.RegionID
			for r := w + 1; r <= o.regions; r += o.writers {
				owned = append(owned, logstore.RegionID(r))
			}
			for i := 0; ctx.Err() == nil; i++ {
				n := o.perCall
				if o.useDeadline && !time.Now().Before(deadline) {
					return nil
				}
				if o.budget > 0 {
					if n = reserve(&remaining, n); n == 0 {
						return nil
					}
				}
				rl := exp.regions[owned[i%len(owned)]]
				batch := make([]logstore.Entry, n)
				for j := range batch {
					batch[j] = logstore.Entry{Namespace: rl.namespace, Region: rl.region, Data: exp.data(rl.region, rl.entries+uint64(j))}
				}
				t := time.Now()
				ar, err := st.AppendBatch(ctx, batch)
				if err != nil && parent.Err() != nil {
					return nil // interrupted: reported once, below
				}
				if err != nil {
					return fmt.Errorf("append to region %d of %s: %w", rl.region, rl.namespace, err)
				}
				lats[w] = append(lats[w], time.Since(t))
				id, ok := ar.LastEntryIDs[rl.region]
				if !ok {
					return fmt.Errorf("append to region %d of %s: the result names no ID for the region", rl.region, rl.namespace)
				}
				rl.calls = append(rl.calls, ackedCall{n: n, lastID: id})
				rl.entries += uint64(n)
				entries.Add(int64(n))
				nbytes.Add(int64(n * o.entrySize))
			}
			return nil
		})
	}

	done := make(chan struct{})
	var progressWG sync.WaitGroup
	if !o.quiet && a.interactive() {
		progressWG.Go(func() { a.demoProgress(done, o, start, &entries, &nbytes) })
	}
	err := g.Wait()
	res.elapsed = time.Since(start)
	close(done)
	progressWG.Wait()

	res.entries, res.bytes = entries.Load(), nbytes.Load()
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	for _, l := range lats {
		res.latencies = append(res.latencies, l...)
	}
	slices.Sort(res.latencies)
	return nil
}

// reserve takes up to n from the budget and returns how many it took.
func reserve(budget *atomic.Int64, n int) int {
	for {
		left := budget.Load()
		if left <= 0 {
			return 0
		}
		take := min(int64(n), left)
		if budget.CompareAndSwap(left, left-take) {
			return int(take)
		}
	}
}

// demoProgress draws the progress bar until done is closed.
func (a *app) demoProgress(done <-chan struct{}, o demoOpts, start time.Time, entries, nbytes *atomic.Int64) {
	total := int64(o.duration / time.Millisecond)
	if o.budget > 0 {
		total = o.budget
	}
	bar := a.progressBar(total, "appending")
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			_ = bar.Finish()
			return
		case <-tick.C:
			el := time.Since(start).Seconds()
			n, b := entries.Load(), nbytes.Load()
			bar.Describe(fmt.Sprintf("appending %9d entries %8.0f entries/s %7.1f MB/s", n, float64(n)/el, mb(b)/el))
			if o.budget > 0 {
				_ = bar.Set64(n)
			} else {
				_ = bar.Set64(min(total, int64(time.Since(start)/time.Millisecond)))
			}
		}
	}
}

// progressBar is the demo's progress bar on stderr (drawn only when it is
// a terminal), cleared when finished.
func (a *app) progressBar(total int64, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetPredictTime(false),
	)
}
