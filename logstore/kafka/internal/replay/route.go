package replay

import (
	"bytes"
	"context"
	"slices"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/record"
)

// router hands the decoder's complete entries to the reads of their
// regions, each read's in ID order, and keeps what they hold within the
// store's hold budget. Only the decoder goroutine uses it.
//
// Order. A region's entries complete in ID order (an entry's ID is its
// first record's offset + 1, and its writer writes a region's entries one
// after another: a first or whole record of the region abandons an entry
// still open), so a read of one region takes each entry as it completes.
// A read of several regions (ReadRegions) yields them in log order: an
// entry waits (held) while an entry of another of the read's regions that
// began before it is still open.
//
// Memory. Entry data that reads hold before yielding it (the open entries'
// parts, held entries, and entries handed over with data of their own)
// counts in the store's hold budget (Options.HoldBytes). When the budget
// is over, the pass spills the largest entry it holds: an open entry goes
// on being checked part by part without its data (record.Assembler.Spill),
// a held one keeps only where it lies; either is read back from the log
// when its read takes it (readBack). Nothing is given up for lack of
// memory: an entry no longer than Options.MaxEntryBytes is always
// returned.
type router struct {
	reads    *Reads
	topic    string
	asm      *record.Assembler
	regions  map[uint64][]*route
	routes   []*route
	waiting  []*route      // routes of several regions with held entries
	flushed  chan struct{} // closed at the first hand-over
	cur      *charge       // the Pool charge of the response being decoded
	ld       leader        // for reading spilled entries back
	spilled  int           // entries spilled
	readBack int           // entries read back
}

// route is one read's queue of entries for the response being decoded.
type route struct {
	sub     *sub
	batch   delivery
	charged bool // batch holds a reference to the router's cur
	held    []heldEntry
	gone    bool
}

// heldEntry is an entry that waits for an open entry of its read.
type heldEntry struct {
	a     assembled
	bytes int64 // its bytes in the hold budget; 0 once spilled
}

func newRouter(r *Reads, flushed chan struct{}) *router {
	return &router{reads: r, regions: make(map[uint64][]*route), flushed: flushed}
}

// add registers a joining read; from, the decoder's lowest wanted offset
// per region, takes its regions in.
func (rt *router) add(sb *sub, from map[uint64]int64) {
	ro := &route{sub: sb, batch: delivery{budget: &rt.reads.hold}}
	rt.routes = append(rt.routes, ro)
	for region, off := range sb.from {
		rt.regions[region] = append(rt.regions[region], ro)
		if cur, ok := from[region]; !ok || off < cur {
			from[region] = off
		}
	}
}

// dispatch hands a complete entry to every read of its region that wants
// it. Two reads of one region each get their own copy of the data.
func (rt *router) dispatch(ctx context.Context, a assembled) error {
	given := false
	for _, ro := range rt.regions[a.Region] {
		if ro.gone || a.First < ro.sub.from[a.Region] {
			continue
		}
		e := a
		if given && e.Data != nil {
			e.Data, e.inResponse = bytes.Clone(e.Data), false
		}
		given = true
		if !ro.sub.multi {
			if err := rt.deliver(ctx, ro, e); err != nil {
				return err
			}
			continue
		}
		if len(ro.held) == 0 {
			if first, open := rt.firstOpen(ro); !open || first > e.First {
				// Nothing of the read's regions begun before it is still
				// open: its turn, as for a read of one region.
				if err := rt.deliver(ctx, ro, e); err != nil {
					return err
				}
				continue
			}
		}
		if e.inResponse {
			// Held, it would pin its response: a copy holds only its own
			// bytes.
			e.Data, e.inResponse = bytes.Clone(e.Data), false
		}
		h := heldEntry{a: e}
		if !e.Spilled {
			h.bytes = int64(len(e.Data))
			rt.reads.hold.add(h.bytes)
		}
		i, _ := slices.BinarySearchFunc(ro.held, e.First, func(x heldEntry, first int64) int {
			return int(min(max(x.a.First-first, -1), 1))
		})
		ro.held = slices.Insert(ro.held, i, h)
		if len(ro.held) == 1 {
			rt.waiting = append(rt.waiting, ro)
		}
	}
	return nil
}

// deliver puts an entry into ro's batch, reading it back first when it
// was spilled.
func (rt *router) deliver(ctx context.Context, ro *route, a assembled) error {
	if a.Spilled {
		data, err := rt.readBackEntry(ctx, a.Assembled)
		if err != nil {
			return err
		}
		a.Data, a.inResponse = data, false
		rt.readBack++
	}
	ro.batch.entries = append(ro.batch.entries, logstore.Entry{Namespace: rt.topic, Region: logstore.RegionID(a.Region), ID: logstore.EntryID(a.First + 1), Data: a.Data})
	if a.inResponse {
		if !ro.charged && rt.cur != nil {
			rt.cur.hold()
			ro.batch.charges = append(ro.batch.charges, rt.cur)
			ro.charged = true
		}
		return nil
	}
	n := int64(len(a.Data))
	rt.reads.hold.add(n)
	ro.batch.hold += n
	if ro.batch.hold >= rt.reads.opts.HoldBytes/4 || rt.reads.hold.over() {
		// Entries read back (or held long) add up: hand them over now
		// rather than build a batch of everything that waited.
		return rt.flushRoute(ctx, ro)
	}
	return nil
}

// release hands the reads of several regions the held entries that no
// open entry of theirs precedes any more (all of them with all set: at the
// end of the pass, open entries are incomplete).
func (rt *router) release(ctx context.Context, all bool) error {
	kept := rt.waiting[:0]
	for _, ro := range rt.waiting {
		limit, open := int64(0), false
		if !all {
			limit, open = rt.firstOpen(ro)
		}
		n := 0
		for _, h := range ro.held {
			if open && h.a.First > limit {
				break
			}
			n++
			rt.reads.hold.add(-h.bytes)
			if !ro.gone {
				if err := rt.deliver(ctx, ro, h.a); err != nil {
					return err
				}
			}
		}
		clear(ro.held[:n])
		ro.held = ro.held[n:]
		if len(ro.held) > 0 {
			kept = append(kept, ro)
		} else {
			ro.held = nil
		}
	}
	clear(rt.waiting[len(kept):])
	rt.waiting = kept
	return nil
}

// firstOpen is the first offset of the earliest entry still open in one of
// ro's regions; open is false when none is.
func (rt *router) firstOpen(ro *route) (first int64, open bool) {
	rt.asm.EachOpen(func(w record.Writer, f, _ int64) bool {
		if _, mine := ro.sub.from[w.Region]; mine && (!open || f < first) {
			first, open = f, true
		}
		return true
	})
	return first, open
}

// fit spills the pass's largest entries while the store's hold budget is
// over (see router). The open entries' bytes are the assembler's.
func (rt *router) fit() {
	for rt.reads.hold.over() {
		var bestOpen record.Writer
		best, isOpen := int64(0), false
		var bestHeld *heldEntry
		rt.asm.EachOpen(func(w record.Writer, _, n int64) bool {
			if n > best {
				best, bestOpen, isOpen = n, w, true
			}
			return true
		})
		for _, ro := range rt.waiting {
			for i := range ro.held {
				if h := &ro.held[i]; h.bytes > best {
					best, bestHeld, isOpen = h.bytes, h, false
				}
			}
		}
		switch {
		case best == 0:
			return // nothing of this pass's left to spill
		case isOpen:
			rt.reads.hold.add(-rt.asm.Spill(bestOpen))
		default:
			rt.reads.hold.add(-bestHeld.bytes)
			bestHeld.bytes = 0
			bestHeld.a.Data, bestHeld.a.Spilled = nil, true
		}
		rt.spilled++
		rt.reads.metrics.spilled.Inc()
	}
}

// flush hands each read its batch, waiting only for a read that has a
// batch waiting already. This is what bounds a pass's memory: it runs at
// most two responses ahead of its slowest read, however many reads it
// serves.
func (rt *router) flush(ctx context.Context) error {
	for _, ro := range rt.routes {
		if err := rt.flushRoute(ctx, ro); err != nil {
			return err
		}
	}
	return nil
}

// flushRoute hands ro's read its batch (see flush).
func (rt *router) flushRoute(ctx context.Context, ro *route) error {
	ro.charged = false
	defer func() { ro.batch = delivery{budget: &rt.reads.hold} }()
	if len(ro.batch.entries) == 0 || ro.gone {
		ro.batch.release()
		return nil
	}
	if rt.flushed != nil {
		close(rt.flushed)
		rt.flushed = nil
	}
	select {
	case <-ro.sub.gone:
		ro.gone = true
		ro.batch.release()
		return nil
	default:
	}
	select {
	case ro.sub.out <- ro.batch:
		select {
		case <-ro.sub.gone:
			// The read left as the batch went: nobody takes it now.
			ro.gone = true
			ro.sub.drain()
		default:
		}
	case <-ro.sub.gone:
		ro.gone = true
		ro.batch.release()
	case <-ctx.Done():
		ro.batch.release()
		return ctx.Err()
	}
	return nil
}

// abandon releases what the router still holds when the pass ends early.
func (rt *router) abandon() {
	for _, ro := range rt.routes {
		ro.batch.release()
		for _, h := range ro.held {
			rt.reads.hold.add(-h.bytes)
		}
		ro.held = nil
	}
	rt.waiting = nil
}

// readBackEntry reads a spilled entry again from the log: its region's
// records in [a.First, a.Last], reassembled and checked against the length
// and CRC the pass checked when it first passed.
func (rt *router) readBackEntry(ctx context.Context, a record.Assembled) ([]byte, error) {
	r := rt.reads
	asm := record.NewAssembler()
	fail := func(err error) ([]byte, error) {
		return nil, kwalerr.Errorf("read %q: reading back the entry of region %d at offsets [%d, %d]: %w", rt.topic, a.Region, a.First, a.Last, err)
	}
	select {
	case r.readBackTurn <- struct{}{}:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	defer func() { <-r.readBackTurn }()
	for off := a.First; off <= a.Last; {
		r.pool.add(headBudget, int64(r.opts.FetchMaxBytes))
		data, next, err := rt.readBackFrom(ctx, asm, a, off)
		r.pool.release(headBudget, int64(r.opts.FetchMaxBytes))
		if err != nil || data != nil {
			if err != nil {
				return fail(err)
			}
			return data, nil
		}
		off = next
	}
	return fail(&logstore.CorruptError{Namespace: rt.topic, Offset: a.First, Err: kwalerr.Errorf("its records no longer make the entry")})
}

// readBackFrom is one fetch of readBackEntry, at off: the entry's data
// once it completed, or the offset to fetch next.
func (rt *router) readBackFrom(ctx context.Context, asm *record.Assembler, a record.Assembled, off int64) ([]byte, int64, error) {
	r := rt.reads
	res, err := r.fetchAt(ctx, rt.topic, &rt.ld, off, r.opts.FetchMaxBytes, "read_back")
	if err != nil {
		return nil, 0, err
	}
	for b, err := range r.batches(rt.topic, &res) {
		if err != nil {
			return nil, 0, err
		}
		for _, rec := range b.records {
			if rec.Offset > a.Last {
				break
			}
			p, err := record.Decode(rec.Key, rec.Value)
			if err != nil || p.Kind == record.KindMark || p.Kind == record.KindClaim || p.Region != a.Region || p.Epoch != a.Epoch {
				continue
			}
			st, err := asm.Add(rec.Offset, p)
			if err == nil && st.Complete && st.Entry.First == a.First {
				if st.Entry.Size != a.Size || st.Entry.CRC != a.CRC {
					return nil, 0, &logstore.CorruptError{Namespace: rt.topic, Offset: a.First, Err: kwalerr.Errorf("%d bytes with CRC %08x, where %d bytes with CRC %08x were read", st.Entry.Size, st.Entry.CRC, a.Size, a.CRC)}
				}
				return bytes.Clone(st.Entry.Data), 0, nil
			}
		}
	}
	if res.next <= off {
		return nil, 0, kwalerr.Errorf("fetch at offset %d returned no complete record (%d bytes)", off, res.bytes)
	}
	return nil, res.next, nil
}
