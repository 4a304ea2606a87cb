package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/schollz/progressbar/v3"
)

// demoAppend runs the writers and records every acknowledged call in exp.
// Interrupted (ctx ends), it returns ctx's error alone: the calls that
// failed because of it are not errors of their own.
func (a *app) demoAppend(parent context.Context, st logstore.LogStore, o demoOpts, exp *expectation, res *demoResult) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		entries, nbytes atomic.Int64
		remaining       atomic.Int64
		mu              sync.Mutex
		errs            []error
		wg              sync.WaitGroup
	)
	remaining.Store(o.budget)
	start := time.Now()
	deadline := start.Add(o.duration)
	lats := make([][]time.Duration, o.writers)
	for w := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var owned []logstore.RegionID
			for r := w + 1; r <= o.regions; r += o.writers {
				owned = append(owned, logstore.RegionID(r))
			}
			for i := 0; ctx.Err() == nil; i++ {
				n := o.perCall
				if o.useDeadline && !time.Now().Before(deadline) {
					return
				}
				if o.budget > 0 {
					if n = reserve(&remaining, n); n == 0 {
						return
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
					return // interrupted: reported once, by the caller
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("append to region %d of %s: %w", rl.region, rl.namespace, err))
					mu.Unlock()
					cancel()
					return
				}
				lats[w] = append(lats[w], time.Since(t))
				id, ok := ar.LastEntryIDs[rl.region]
				if !ok {
					mu.Lock()
					errs = append(errs, fmt.Errorf("append to region %d of %s: the result names no ID for the region", rl.region, rl.namespace))
					mu.Unlock()
					cancel()
					return
				}
				rl.calls = append(rl.calls, ackedCall{n: n, lastID: id})
				rl.entries += uint64(n)
				entries.Add(int64(n))
				nbytes.Add(int64(n * o.entrySize))
			}
		}()
	}

	done := make(chan struct{})
	var progressWG sync.WaitGroup
	if !o.quiet && a.interactive() {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			a.demoProgress(done, o, start, &entries, &nbytes)
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	close(done)
	progressWG.Wait()

	res.entries, res.bytes = entries.Load(), nbytes.Load()
	if err := parent.Err(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
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
