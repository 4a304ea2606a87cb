package replay

import (
	"context"

	"github.com/kwal/kwal/logstore/kafka/record"
)

// Fenced marks.
//
// A mark's statement of a region carries the epoch its writer held for the
// region (record.RegionPoint.Epoch) and counts only where the fencing rule
// would not fence a record of the region with that epoch at the mark's
// offset (package claim): a paused old owner's Obsolete, landing above a
// newer owner's claim record, cannot raise the new owner's Obsolete point
// and so cannot make Prune delete entries the new owner needs. There is no
// special case: epoch 0 is fenced by any committed claim below the mark,
// as a record of epoch 0 is.
//
// The index takes a statement in for good: it drops the region's records
// below the point, and nothing gives them back. So it takes in only what
// is decided:
//
//   - Whoever notes marks judges them with a view of the claims topic
//     caught up after they were in the log: a pass syncs before it
//     decodes, below an end it listed before; ScanIntoIndex and
//     findPruneMark sync after their callers listed the end; the store
//     checks its own Obsolete mark after writing it, as it checks an
//     append. A claim missing from such a view wrote its claim record
//     after the look began, above every mark judged: it fences none.
//   - A claim the view holds as pending has no claim record offset yet:
//     it fences a mark exactly when its record lies below the mark, which
//     only its commit will say. A statement of an older epoch is held
//     undecided, out of the index, and judged again after each later sync
//     (SettleMarks): it goes in once the commit shows its claim record
//     above the mark, and is dropped once a commit fences it. The store
//     keeps at most maxUndecided of them per topic, in memory only; one it
//     drops or forgets (a restart) never counts on this store, so the
//     region keeps more records until its owner's next Obsolete.
//
// Reads judge a prune mark's statements where they use them, against the
// claims the read's sync saw (pruneMark.covers).

// Verdict is what the fencing rule says of a region's statement in a mark.
type Verdict uint8

const (
	// MarkCounts: no committed claim fences it, and no claim the store
	// knows of may.
	MarkCounts Verdict = iota
	// MarkFenced: a committed claim below the mark has a greater epoch.
	MarkFenced
	// MarkUndecided: the store's view cannot tell yet (a claim of the
	// region with a greater epoch is pending, or the region's claims do
	// not decode).
	MarkUndecided
)

// maxUndecided bounds the undecided statements a store holds per topic.
// Statements are undecided only while a claim of their region is pending,
// which a claim that completes ends in milliseconds.
const maxUndecided = 4096

// statementAt identifies a statement: the mark's offset and the region.
type statementAt struct {
	offset int64
	region uint64
}

// undecidedStatement is a statement held out of the index until a claim
// decides it, with the topic's generation when it was noted.
type undecidedStatement struct {
	gen uint64
	rp  record.RegionPoint
}

// takeStatements hands the statements of m (noted at offset) that count to
// the index and holds the undecided ones. It runs under the gate.
func (r *Reads) takeStatements(topic string, gen uint64, offset int64, m record.Mark) {
	for _, rp := range m.Obsolete {
		switch r.opts.Host.JudgeMark(topic, rp.Region, offset, rp.Epoch) {
		case MarkCounts:
			r.opts.Index.Obsolete(topic, rp.Region, rp.Before)
		case MarkFenced:
			// Every pass that reads the mark comes here again.
			r.log.Debug("kwal: ignoring a fenced statement of a mark", "topic", topic, "offset", offset,
				"region", rp.Region, "before", rp.Before, "epoch", rp.Epoch, "prune_mark", m.Prune)
		case MarkUndecided:
			r.holdUndecided(topic, statementAt{offset, rp.Region}, undecidedStatement{gen, rp})
		}
	}
}

func (r *Reads) holdUndecided(topic string, at statementAt, u undecidedStatement) {
	k := &r.marks
	k.mu.Lock()
	defer k.mu.Unlock()
	held := k.undecided[topic]
	if held == nil {
		held = make(map[statementAt]undecidedStatement)
		k.undecided[topic] = held
	}
	if _, ok := held[at]; !ok && len(held) >= maxUndecided {
		r.log.Warn("kwal: too many marks wait for a pending claim; this one never counts on this store (the region keeps more records until its owner's next Obsolete)",
			"topic", topic, "offset", at.offset, "region", at.region, "epoch", u.rp.Epoch)
		return
	}
	held[at] = u
}

// SettleMarks judges the topic's undecided statements again with the
// store's view of the claims as it is now: those that count go to the
// index, those fenced are dropped, the others wait.
func (r *Reads) SettleMarks(topic string) {
	k := &r.marks
	k.mu.Lock()
	held := k.undecided[topic]
	delete(k.undecided, topic)
	k.mu.Unlock()
	for at, u := range held {
		switch r.opts.Host.JudgeMark(topic, at.region, at.offset, u.rp.Epoch) {
		case MarkCounts:
			r.gate.update(topic, u.gen, func() { r.opts.Index.Obsolete(topic, u.rp.Region, u.rp.Before) })
		case MarkUndecided:
			r.gate.update(topic, u.gen, func() { r.holdUndecided(topic, at, u) })
		}
	}
}

// SyncMarks brings the store's view of the claims up to date (Host.Sync)
// and settles the statements that waited for it.
func (r *Reads) SyncMarks(ctx context.Context, topic string) error { return r.syncClaims(ctx, topic) }

func (r *Reads) syncClaims(ctx context.Context, topic string) error {
	if err := r.opts.Host.Sync(ctx, topic); err != nil {
		return err
	}
	r.SettleMarks(topic)
	return nil
}
