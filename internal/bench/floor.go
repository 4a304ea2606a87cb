package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker's floors of the recovery benchmark: the batches a replay cannot
// do without (one region's: one fetch per run of consecutive batches holding
// its records, since a fetch request takes one offset per partition; every
// region's from its flushed point, within the recovery target's byte bound;
// a whole topic's), fetched at once by plain franz-go clients on connections
// that were warmed first, at most one fetch on the wire per connection, as
// kwal's reads do. Nothing is decoded or checked beyond the response's size:
// it is what the broker and the network cost, the least any reader of that
// layout pays on this broker, measured in the same run as kwal's reads. An
// indexed replay of one region cannot beat its full scan by more than full
// scan ÷ floor.

// OffsetRange is a half-open range of a topic's partition-0 offsets and
// the bytes of the record batches in it.
type OffsetRange struct {
	Topic      string
	Start, End int64
	Bytes      int64
}

// RegionRuns lists the runs of consecutive batches of l (topic's layout)
// that hold a record of region, in log order.
func (l Layout) RegionRuns(topic string, region uint64) []OffsetRange {
	return l.runs(topic, func(b BatchSpan) bool { _, ok := b.Last[region]; return ok }, 0, 0)
}

// NeededRuns lists what a replay of the regions, each from its own offset
// (from, as NeededBytes), fetches at the least when it may read extra
// times the needed bytes beyond them to save fetches: the runs of needed
// batches, with the smallest gaps between them merged while their bytes
// stay within the budget (which merges the most gaps, so leaves the fewest
// fetches), cut into chunks of about chunk bytes.
func (l Layout) NeededRuns(topic string, from map[uint64]int64, extra float64, chunk int64) []OffsetRange {
	needed := func(b BatchSpan) bool {
		for region, last := range b.Last {
			if f, ok := from[region]; ok && last >= f {
				return true
			}
		}
		return false
	}
	return l.runs(topic, needed, int64(extra*float64(l.NeededBytes(from))), chunk)
}

// ScanRuns is the whole topic in chunks of about chunk bytes.
func (l Layout) ScanRuns(topic string, chunk int64) []OffsetRange {
	return l.runs(topic, func(BatchSpan) bool { return true }, 0, chunk)
}

// runs lists the runs of consecutive batches that want takes, merges the
// smallest gaps between runs while the gaps' bytes stay within budget, and
// cuts the runs into chunks of at least one batch and about chunk bytes (0:
// no cutting).
func (l Layout) runs(topic string, want func(BatchSpan) bool, budget, chunk int64) []OffsetRange {
	type run struct{ first, last int } // span indexes, inclusive
	var rs []run
	for i, b := range l.Spans {
		if !want(b) {
			continue
		}
		if n := len(rs); n > 0 && rs[n-1].last == i-1 {
			rs[n-1].last = i
		} else {
			rs = append(rs, run{i, i})
		}
	}
	if budget > 0 && len(rs) > 1 {
		gapBytes := make([]int64, len(rs)-1) // gap k lies between rs[k] and rs[k+1]
		gaps := make([]int, len(rs)-1)
		for k := range gaps {
			gaps[k] = k
			for _, b := range l.Spans[rs[k].last+1 : rs[k+1].first] {
				gapBytes[k] += b.Bytes
			}
		}
		slices.SortStableFunc(gaps, func(a, b int) int { return cmp.Compare(gapBytes[a], gapBytes[b]) })
		merge := make([]bool, len(rs)-1)
		for _, k := range gaps {
			if gapBytes[k] > budget {
				break
			}
			budget -= gapBytes[k]
			merge[k] = true
		}
		merged := rs[:1]
		for k, m := range merge {
			if m {
				merged[len(merged)-1].last = rs[k+1].last
			} else {
				merged = append(merged, rs[k+1])
			}
		}
		rs = merged
	}
	var out []OffsetRange
	for _, r := range rs {
		cur := OffsetRange{Topic: topic, Start: l.Spans[r.first].Base}
		for i := r.first; i <= r.last; i++ {
			b := l.Spans[i]
			cur.End, cur.Bytes = b.End, cur.Bytes+b.Bytes
			if chunk > 0 && cur.Bytes >= chunk && i < r.last {
				out = append(out, cur)
				cur = OffsetRange{Topic: topic, Start: b.End}
			}
		}
		out = append(out, cur)
	}
	return out
}

// FloorResult is one timed run of FetchFloor.
type FloorResult struct {
	Elapsed time.Duration
	Fetches int
	Bytes   int64
}

// FetchFloor fetches each range (of its topic's partition 0) once over conns
// plain franz-go clients and times the fetches alone: the clients are
// created, and each one's connection to every leader of the ranges is
// opened and used once, before the clock starts. A response that holds
// fewer bytes than its range is an error (the floor would be too low).
func FetchFloor(ctx context.Context, ranges []OffsetRange, conns int, opts ...kgo.Opt) (FloorResult, error) {
	var res FloorResult
	if len(ranges) == 0 {
		return res, errors.New("bench: floor: no ranges")
	}
	conns = max(min(conns, len(ranges)), 1)
	clients := make([]*kgo.Client, 0, conns)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for range conns {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return res, err
		}
		clients = append(clients, cl)
	}
	var topics []string
	for _, r := range ranges {
		if !slices.Contains(topics, r.Topic) {
			topics = append(topics, r.Topic)
		}
	}
	td, err := kadm.NewClient(clients[0]).ListTopics(ctx, topics...)
	if err != nil {
		return res, err
	}
	for _, t := range topics {
		if _, ok := td[t].Partitions[0]; !ok {
			return res, fmt.Errorf("bench: floor: %s has no partition 0", t)
		}
	}
	fetch := func(cl *kgo.Client, r OffsetRange) (int64, error) {
		// The broker returns whole batches up to the limit: exactly the range.
		rp, err := fetchAt(ctx, cl, td[r.Topic].Partitions[0].Leader, r.Topic, td[r.Topic].ID, r.Start, int32(min(max(r.Bytes, 1), 1<<30)))
		if err != nil {
			return 0, fmt.Errorf("bench: floor: %w", err)
		}
		return int64(len(rp.RecordBatches)), nil
	}
	// Warm every connection: dial, API versions and one fetch of one batch
	// on each client for each leader.
	var warm []OffsetRange
	leaders := map[int32]bool{}
	for _, r := range ranges {
		if leader := td[r.Topic].Partitions[0].Leader; !leaders[leader] {
			leaders[leader] = true
			warm = append(warm, OffsetRange{Topic: r.Topic, Start: r.Start, End: r.Start + 1, Bytes: 1})
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i, cl := range clients {
		wg.Go(func() {
			for _, r := range warm {
				if _, errs[i] = fetch(cl, r); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}

	next := make(chan OffsetRange, len(ranges))
	for _, r := range ranges {
		next <- r
	}
	close(next)
	got := make([]int64, conns)
	began := time.Now()
	for i, cl := range clients {
		wg.Go(func() {
			for r := range next {
				n, err := fetch(cl, r)
				if err == nil && n < r.Bytes {
					err = fmt.Errorf("bench: floor: fetch %s at %d: %d bytes, the range holds %d", r.Topic, r.Start, n, r.Bytes)
				}
				if err != nil {
					errs[i] = err
					return
				}
				got[i] += n
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(began)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	res.Fetches, res.Bytes = len(ranges), sumInt64(got)
	return res, nil
}

func sumInt64(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// medianFloor times runs calls of one and reports their median (and
// range) as a RecoveryRead.
func medianFloor(runs int, one func() (FloorResult, error)) (RecoveryRead, error) {
	var out RecoveryRead
	var times []time.Duration
	for range max(runs, 1) {
		r, err := one()
		if err != nil {
			return out, err
		}
		times = append(times, r.Elapsed)
		out.Fetches, out.FetchedBytes = r.Fetches, r.Bytes
	}
	slices.Sort(times)
	out.MedianMS, out.MinMS, out.MaxMS = ms(times[len(times)/2]), ms(times[0]), ms(times[len(times)-1])
	out.Plan = "floor"
	return out, nil
}
