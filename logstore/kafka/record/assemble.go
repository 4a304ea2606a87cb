package record

import (
	"fmt"
	"sort"

	"github.com/kwal/kwal/internal/kwalerr"
)

// DropReason says why the assembler discarded a record.
type DropReason uint8

const (
	// DropDuplicate: a part seen already (a producer retry wrote it twice).
	DropDuplicate DropReason = iota + 1
	// DropOrphan: a middle or last part whose first part the reader never
	// saw: the read started after it, or it was pruned.
	DropOrphan
	// DropIncomplete: an entry whose writer stopped midway; its parts are
	// never yielded.
	DropIncomplete
)

func (r DropReason) String() string {
	switch r {
	case DropDuplicate:
		return "duplicate"
	case DropOrphan:
		return "orphan"
	case DropIncomplete:
		return "incomplete"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Drop describes records the assembler discarded: the offsets First..Last
// (inclusive) of one region.
type Drop struct {
	Reason      DropReason
	Region      uint64
	First, Last int64
}

// Assembled is a complete entry: its region, the offsets of its first and
// last record, and its data. An entry whose data was spilled while it was
// open (Spill) is complete and checked all the same, but its Data is nil:
// Spilled is set, and Size and CRC say what reading its records
// [First, Last] again must give.
type Assembled struct {
	Region      uint64
	Epoch       uint64 // the owner epoch its parts carry
	First, Last int64
	Data        []byte
	Spilled     bool
	Size, CRC   uint32
}

// Step is what one Add produced: at most one discarded run and at most one
// complete entry (the drop, when both are set, came first in the log).
type Step struct {
	Drop     Drop
	Dropped  bool
	Entry    Assembled
	Complete bool
}

type pending struct {
	hdr   Header // of the first part; Seq is the next expected part
	first int64
	last  int64
	data  []byte // nil once spilled
	n     int64  // data bytes received, spilled or not
	crc   uint32 // CRC-32C of the data received, combined from its parts' (crc.go)
	// spilled is set once Spill dropped the data: the entry goes on being
	// checked part by part without it.
	spilled bool
}

type done struct {
	size, crc uint32
	lastSeq   uint32
	split     bool
}

// Assembler reassembles entries from the parts of many regions, interleaved
// in log order. It is not safe for concurrent use.
//
// A region's writer is known by its owner epoch: one store holds an epoch
// (logstore/kafka's Claim), so a record of another epoch is another
// writer's (an old owner that missed a claim, or the new owner around an
// old owner's late records), and never touches an entry open under this
// one. The rules below hold per region and epoch.
//
// Rules: a whole record is an entry by itself; a first part opens
// an entry, and middle and last parts extend it in seq order; a last part
// completes it, and the whole entry's length and CRC-32C are checked. A part
// repeating one already taken (same size, CRC and a seq already seen) is a
// duplicate and dropped. Anything that breaks the sequence abandons the open
// entry as incomplete; so does a first part, which always starts a new
// entry (a retried entry's ID is that of its latest first part). A part
// with no open entry, or of another entry than the open one, is an orphan.
// Data of open entries is copied, so callers may reuse the buffers they
// pass in.
//
// A reader bounded in memory may Spill an open entry: its data is dropped
// and its parts are still checked in order (lengths and CRC) as they come;
// it completes as an Assembled without data, which the reader reads again.
// Nothing is given up for lack of memory.
type Assembler struct {
	open      map[Writer]*pending
	openBytes int64 // data the open entries hold (not spilled)
	last      map[Writer]done
}

// Writer is who writes a region's entries: the region and its owner epoch.
type Writer struct{ Region, Epoch uint64 }

// NewAssembler returns an empty assembler.
func NewAssembler() *Assembler {
	return &Assembler{open: make(map[Writer]*pending), last: make(map[Writer]done)}
}

// Add takes the part decoded from the record at offset. It returns an error
// when a completed entry fails its end-to-end check (wrapping ErrChecksum
// or ErrMalformed; the entry is then discarded).
func (a *Assembler) Add(offset int64, p Part) (Step, error) {
	var st Step
	if p.Kind == KindMark || p.Kind == KindClaim {
		return st, kwalerr.Errorf("%w: a %s at offset %d is not an entry part", ErrMalformed, p.Kind, offset)
	}
	w := Writer{p.Region, p.Epoch}
	pe := a.open[w]
	switch p.Kind {
	case KindWhole:
		if pe != nil {
			st.Drop, st.Dropped = a.abandon(w, pe, offset-1), true
		}
		a.last[w] = done{size: p.Size, crc: p.EntryCRC}
		st.Entry, st.Complete = Assembled{Region: p.Region, Epoch: p.Epoch, First: offset, Last: offset, Data: p.Data, Size: p.Size, CRC: p.EntryCRC}, true
		return st, nil

	case KindFirst:
		if pe != nil {
			// A first part always starts the entry over, even when it
			// repeats the open one's first part: the writer that wrote it
			// again (a retry) was told the later offset, so the entry's ID
			// comes from the latest first part. The earlier copy is a
			// duplicate when nothing followed it, else an incomplete entry.
			st.Drop, st.Dropped = a.abandon(w, pe, offset-1), true
			if pe.hdr.Seq == 1 && sameEntry(pe.hdr, p.Header) {
				st.Drop = Drop{Reason: DropDuplicate, Region: p.Region, First: pe.first, Last: pe.first}
			}
		}
		hdr := p.Header
		hdr.Seq = 1
		a.open[w] = &pending{hdr: hdr, first: offset, last: offset, data: appendPart(nil, p.Data, p.Size), n: int64(len(p.Data)), crc: p.dataCRC()}
		a.openBytes += int64(len(p.Data))
		return st, nil
	}

	// Middle or last part.
	if pe == nil {
		if d, ok := a.last[w]; ok && d.split && d.size == p.Size && d.crc == p.EntryCRC && p.Seq <= d.lastSeq {
			return Step{Drop: Drop{Reason: DropDuplicate, Region: p.Region, First: offset, Last: offset}, Dropped: true}, nil
		}
		return Step{Drop: Drop{Reason: DropOrphan, Region: p.Region, First: offset, Last: offset}, Dropped: true}, nil
	}
	if !sameEntry(pe.hdr, p.Header) {
		// Another entry's part: not the open entry's writer going on (a
		// writer writes an entry's parts one after another), so another
		// writer's, whose first part the reader did not see. The open
		// entry may still complete.
		return Step{Drop: Drop{Reason: DropOrphan, Region: p.Region, First: offset, Last: offset}, Dropped: true}, nil
	}
	if p.Seq > pe.hdr.Seq {
		// A part missing before this one: the open entry can never
		// complete, and this part has no first.
		return Step{Drop: a.abandon(w, pe, offset), Dropped: true}, nil
	}
	if p.Seq < pe.hdr.Seq {
		pe.last = max(pe.last, offset)
		return Step{Drop: Drop{Reason: DropDuplicate, Region: p.Region, First: offset, Last: offset}, Dropped: true}, nil
	}
	if uint64(pe.n)+uint64(len(p.Data)) > uint64(pe.hdr.Size) {
		return Step{Drop: a.abandon(w, pe, offset), Dropped: true}, nil
	}
	if !pe.spilled {
		pe.data = appendPart(pe.data, p.Data, pe.hdr.Size)
		a.openBytes += int64(len(p.Data))
	}
	pe.n += int64(len(p.Data))
	pe.crc = combine(pe.crc, p.dataCRC(), len(p.Data))
	pe.last = offset
	pe.hdr.Seq++
	if p.Kind == KindMiddle {
		return st, nil
	}
	delete(a.open, w)
	a.openBytes -= int64(len(pe.data))
	a.last[w] = done{size: p.Size, crc: p.EntryCRC, lastSeq: p.Seq, split: true}
	if uint64(pe.n) != uint64(pe.hdr.Size) {
		return st, kwalerr.Errorf("%w: entry of region %d at offsets %d..%d has %d bytes, its header says %d",
			ErrMalformed, p.Region, pe.first, offset, pe.n, pe.hdr.Size)
	}
	if c := pe.crc; c != pe.hdr.EntryCRC {
		return st, kwalerr.Errorf("%w: entry of region %d at offsets %d..%d: CRC %08x, computed %08x",
			ErrChecksum, p.Region, pe.first, offset, pe.hdr.EntryCRC, c)
	}
	st.Entry = Assembled{Region: p.Region, Epoch: pe.hdr.Epoch, First: pe.first, Last: offset, Data: pe.data, Spilled: pe.spilled, Size: pe.hdr.Size, CRC: pe.hdr.EntryCRC}
	st.Complete = true
	return st, nil
}

// Spill drops the data of w's open entry, which goes on being checked
// part by part and completes without data (Assembled.Spilled). It returns
// the bytes freed (0 when w has no open entry with data).
func (a *Assembler) Spill(w Writer) int64 {
	pe := a.open[w]
	if pe == nil || pe.spilled {
		return 0
	}
	n := int64(len(pe.data))
	pe.data, pe.spilled = nil, true
	a.openBytes -= n
	return n
}

// Abandon gives up w's open entry, if any, as incomplete: its writer can
// write no more of it (its later records are fenced).
func (a *Assembler) Abandon(w Writer) (Drop, bool) {
	pe := a.open[w]
	if pe == nil {
		return Drop{}, false
	}
	return a.abandon(w, pe, pe.last), true
}

// EachOpen calls fn with the writer, first offset and data bytes held
// (0 once spilled) of every open entry, until fn returns false.
func (a *Assembler) EachOpen(fn func(w Writer, first, bytes int64) bool) {
	for w, pe := range a.open {
		if !fn(w, pe.first, int64(len(pe.data))) {
			return
		}
	}
}

// Open returns, sorted by first offset, the entries still open: at the end
// of a read they are incomplete (or continue past the read's end).
func (a *Assembler) Open() []Drop {
	out := make([]Drop, 0, len(a.open))
	for w, pe := range a.open {
		out = append(out, Drop{Reason: DropIncomplete, Region: w.Region, First: pe.first, Last: pe.last})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}

func (a *Assembler) abandon(w Writer, pe *pending, last int64) Drop {
	delete(a.open, w)
	a.openBytes -= int64(len(pe.data))
	return Drop{Reason: DropIncomplete, Region: w.Region, First: pe.first, Last: max(pe.last, last)}
}

// reserveFactor bounds how far ahead of the data received an open entry's
// buffer is reserved.
const reserveFactor = 16

// appendPart appends a part's data to buf, the data of an open entry whose
// header declares size bytes. A header is no proof that the rest of its
// entry exists (a 28-byte key may claim 4 GiB), so the buffer is not
// reserved by size up front: it holds at most reserveFactor times the data
// received, which still gives entries of up to that many full parts a
// single allocation, and never more than size, so a complete entry holds no
// slack.
func appendPart(buf, data []byte, size uint32) []byte {
	need := len(buf) + len(data)
	if need > cap(buf) {
		c := max(min(reserveFactor*uint64(need), uint64(size)), uint64(need))
		grown := make([]byte, len(buf), c)
		copy(grown, buf)
		buf = grown
	}
	return append(buf, data...)
}

func sameEntry(a, b Header) bool {
	return a.Size == b.Size && a.EntryCRC == b.EntryCRC && a.Epoch == b.Epoch
}
