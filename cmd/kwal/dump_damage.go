package main

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka/record"
)

// dumpChecks collects what a dump can tell of a damaged log without kwal's
// read path, from the records it sees in offset order:
//
//   - kwal records that fail their checksum or do not decode (an entry, or
//     part of one, is lost there);
//   - offsets missing between records: dump keeps control records
//     (transaction markers), so in a kwal topic (cleanup.policy=delete,
//     only a prefix ever deleted) every offset from where it starts to the
//     log's end holds a record, and a jump means records were cut from the
//     middle of the log (damage, compaction turned on by hand);
//   - a log that ends before every offset it listed was seen;
//   - a log start that no prune mark vouches for (records deleted below it
//     by retention past every prune point, or by another program): reads
//     from below it fail with ErrPruned unless an index proves them. Not
//     damage, but reported.
//
// The index, when one is there, adds what the log alone cannot show: the
// log ending below offsets the index accounted for (its tail was lost).
type dumpChecks struct {
	first      int64 // the offset of the first record seen; -1 before it
	next       int64 // the offset the next record should have
	corrupt    []int64
	nCorrupt   int64
	lead       *span64  // offsets missing before the first record seen
	gaps       []span64 // the first maxNamed gaps between records and at the end
	nGaps      int      // every gap, lead included
	missing    int64
	control    int64
	prunePoint int64 // the highest Point of the prune marks seen; -1 when none
}

// span64 is the offsets [from, to).
type span64 struct{ from, to int64 }

// maxNamed bounds the offsets and gaps a report names one by one.
const maxNamed = 10

func newDumpChecks() *dumpChecks {
	return &dumpChecks{first: -1, prunePoint: -1}
}

// controlRecord takes in a control record (a transaction marker): it holds
// an offset, no entry.
func (c *dumpChecks) controlRecord(rec *kgo.Record) {
	c.control++
	c.offset(rec.Offset)
}

// record takes in a record as decodeRecord saw it.
func (c *dumpChecks) record(rec *kgo.Record, d dumpRecord) {
	c.offset(rec.Offset)
	if !d.ChecksumOK && !d.Foreign {
		c.nCorrupt++
		if len(c.corrupt) < maxNamed {
			c.corrupt = append(c.corrupt, rec.Offset)
		}
	}
	if !d.ChecksumOK {
		return
	}
	if p, err := record.Decode(rec.Key, rec.Value); err == nil && p.Kind == record.KindMark {
		if m, err := record.DecodeMark(p.Data); err == nil && m.Prune {
			c.prunePoint = max(c.prunePoint, m.Point)
		}
	}
}

// offset notes a record at off and any offsets skipped before it.
func (c *dumpChecks) offset(off int64) {
	switch {
	case c.first < 0:
		c.first = off
	case off > c.next:
		c.gap(c.next, off)
	}
	c.next = max(c.next, off+1)
}

func (c *dumpChecks) gap(from, to int64) {
	c.missing += to - from
	c.nGaps++
	if len(c.gaps) < maxNamed {
		c.gaps = append(c.gaps, span64{from, to})
	}
}

// finish takes in the bounds of the dump, known once it ended: it read
// from offset at (the larger of --from and the log start), and up to the
// log's end when complete (no --limit cut it short).
func (c *dumpChecks) finish(at, end int64, complete bool) {
	if c.first < 0 {
		if complete && at < end {
			c.gap(at, end)
		}
		return
	}
	if c.first > at {
		c.lead = &span64{at, c.first}
		c.missing += c.first - at
		c.nGaps++
	}
	if complete && c.next < end {
		c.gap(c.next, end)
	}
}

// report returns the report's lines about damage (each a reason to exit
// non-zero) and notes (reported only).
func (c *dumpChecks) report(start, end int64, complete, fromStart bool, indexW int64, indexed bool) (damage, notes []string) {
	if c.nCorrupt > 0 {
		damage = append(damage, fmt.Sprintf("DAMAGED: %d kwal record(s) fail their checksum or do not decode, at offset(s) %s: the entries they held are lost",
			c.nCorrupt, namedOffsets(c.corrupt, c.nCorrupt)))
	}
	if c.missing > 0 {
		var named []span64
		if c.lead != nil {
			named = append(named, *c.lead)
		}
		named = append(named, c.gaps...)
		named = named[:min(len(named), maxNamed)]
		spans := make([]string, len(named))
		for i, g := range named {
			spans[i] = fmt.Sprintf("[%d, %d)", g.from, g.to)
		}
		more := ""
		if c.nGaps > len(named) {
			more = fmt.Sprintf(" and %d more ranges", c.nGaps-len(named))
		}
		damage = append(damage, fmt.Sprintf("MISSING: %d offset(s) hold no record, at %s%s: records were cut from the log",
			c.missing, strings.Join(spans, ", "), more))
	}
	if indexed && indexW > end {
		damage = append(damage, fmt.Sprintf("MISSING: the log ends at offset %d, below the offsets the index accounted for (up to %d): records [%d, %d) were lost",
			end, indexW, end, indexW))
	}
	if complete && fromStart && start > 0 && c.prunePoint < start {
		why := "no prune mark is in the log"
		if c.prunePoint >= 0 {
			why = fmt.Sprintf("the prune marks speak for offsets below %d only", c.prunePoint)
		}
		notes = append(notes, fmt.Sprintf("UNVOUCHED: the log starts at offset %d and %s: the records below it were deleted by retention or another program, and a read from below it fails with ErrPruned unless an index proves it lost nothing",
			start, why))
	}
	return damage, notes
}

// namedOffsets lists offsets, saying when there are more than named.
func namedOffsets(offs []int64, n int64) string {
	s := make([]string, len(offs))
	for i, o := range offs {
		s[i] = fmt.Sprint(o)
	}
	out := strings.Join(s, ", ")
	if n > int64(len(offs)) {
		out += fmt.Sprintf(" and %d more", n-int64(len(offs)))
	}
	return out
}
