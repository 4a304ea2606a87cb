package record

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/kwal/kwal/internal/kwalerr"
)

// KindMark is a record that holds no entry but a statement about the log
// (a Mark): which regions' entries are obsolete, and, for a prune mark, what
// the records below a prune point were. Its key is a whole record's key
// (seq 0, size and entry CRC of the value) with region 0; its value is the
// mark's payload:
//
//	+-------+-------------+-------------+-----------+=======================+
//	| flags | uv(from)    | uv(point)   | uv(n)     | n x (uv(region delta) |
//	| uint8 |             |             |           |      uv(before)       |
//	|       |             |             |           |      [uv(epoch)])     |
//	+-------+-------------+-------------+-----------+=======================+
//
//	flags    bit 0: a prune mark (From and Point are meaningful); bit 1:
//	         every region carries an epoch; the other bits are 0
//	from     prune mark: the lowest offset its table speaks for
//	point    prune mark: the offset below which its writer deletes; >= from
//	region   ascending: the first as is, each next one as id - previous - 1
//	before   the region's Obsolete point: it needs none of its records at
//	         offsets < before; > 0
//	epoch    (bit 1 only) the region's owner epoch its statement is made
//	         under; without bit 1, every region's is 0
//
// uv is an unsigned varint in shortest form. An Obsolete mark (bit 0 clear,
// from and point 0) carries one region. A prune mark's table states: every
// kwal record at an offset in [From, Point) belongs to a listed region and
// lies below that region's before; so a region absent from the table has no
// record there. (logstore/kafka/index/doc.go gives the argument built on it.)
//
// A region's statement is ignored where a record of its region with its
// epoch at the mark's offset would be fenced (package claim): a paused old
// owner's mark cannot move the new owner's pruning. Bit 1 is set only when
// some epoch is not 0, so a mark whose regions were never claimed keeps the
// layout marks had before they carried epochs, byte for byte, and marks of
// that layout read as epoch 0.
const KindMark Kind = 5

// Mark flags: markFlagPrune marks a prune mark, markFlagEpochs a table
// whose regions carry epochs.
const (
	markFlagPrune  = 1
	markFlagEpochs = 2
)

// Mark is the decoded payload of a KindMark record.
type Mark struct {
	// Prune is set on a prune mark; From and Point are 0 otherwise.
	Prune       bool
	From, Point int64
	// Obsolete lists regions and their Obsolete points, ascending by
	// region.
	Obsolete []RegionPoint
}

// RegionPoint is one region's Obsolete point: it needs none of its records
// at offsets < Before. Epoch is the region's owner epoch the statement is
// made under (0: the region was never claimed, or the writer does not
// fence).
type RegionPoint struct {
	Region uint64
	Before int64
	Epoch  uint64
}

// maxMarkRegions bounds a mark's table so that its length check cannot
// overflow (a real table is bounded by MaxBatchBytes long before).
const maxMarkRegions = 1 << 24

// MarkPart encodes m as a KindMark part. m must be valid: regions strictly
// ascending, every Before > 0, From <= Point for a prune mark.
func MarkPart(m Mark) Part {
	data := appendMark(nil, m)
	c := sum(data)
	return Part{Header: Header{Kind: KindMark, Size: uint32(len(data)), EntryCRC: c.crc}, Data: data, crc: c}
}

func appendMark(dst []byte, m Mark) []byte {
	var flags byte
	if m.Prune {
		flags |= markFlagPrune
	}
	epochs := m.hasEpochs()
	if epochs {
		flags |= markFlagEpochs
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(m.From))
	dst = binary.AppendUvarint(dst, uint64(m.Point))
	dst = binary.AppendUvarint(dst, uint64(len(m.Obsolete)))
	for i, rp := range m.Obsolete {
		d := rp.Region
		if i > 0 {
			d = rp.Region - m.Obsolete[i-1].Region - 1
		}
		dst = binary.AppendUvarint(dst, d)
		dst = binary.AppendUvarint(dst, uint64(rp.Before))
		if epochs {
			dst = binary.AppendUvarint(dst, rp.Epoch)
		}
	}
	return dst
}

// hasEpochs reports whether a region of m has an epoch other than 0.
func (m *Mark) hasEpochs() bool {
	for _, rp := range m.Obsolete {
		if rp.Epoch != 0 {
			return true
		}
	}
	return false
}

var errMarkVarint = errors.New("bad varint")

// markVarint decodes a shortest-form uvarint.
func markVarint(b []byte) (uint64, int, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || (n > 1 && b[n-1] == 0) {
		return 0, 0, errMarkVarint
	}
	return v, n, nil
}

// DecodeMark decodes a mark's payload (a KindMark part's Data). Any input
// gives a Mark or an error wrapping ErrMalformed, never a panic; a decoded
// mark re-encodes to the same bytes.
func DecodeMark(b []byte) (Mark, error) {
	var m Mark
	bad := func(field string, err error) (Mark, error) {
		return Mark{}, kwalerr.Errorf("%w: mark %s: %v", ErrMalformed, field, err)
	}
	if len(b) == 0 {
		return bad("flags", errors.New("empty payload"))
	}
	flags := b[0]
	if flags&^(markFlagPrune|markFlagEpochs) != 0 {
		return bad("flags", kwalerr.Errorf("unknown bits %#x", flags))
	}
	m.Prune = flags&markFlagPrune != 0
	epochs := flags&markFlagEpochs != 0
	b = b[1:]
	var vals [3]uint64
	for i, name := range []string{"from", "point", "count"} {
		v, n, err := markVarint(b)
		if err != nil {
			return bad(name, err)
		}
		vals[i], b = v, b[n:]
	}
	from, point, count := vals[0], vals[1], vals[2]
	switch {
	case from > math.MaxInt64 || point > math.MaxInt64:
		return bad("point", kwalerr.Errorf("from %d or point %d exceeds the offset range", from, point))
	case m.Prune && from > point:
		return bad("point", kwalerr.Errorf("from %d above point %d", from, point))
	case !m.Prune && (from != 0 || point != 0):
		return bad("point", kwalerr.Errorf("an obsolete mark with from %d, point %d", from, point))
	case count > maxMarkRegions || count > uint64(len(b))/2:
		// Each region takes at least two bytes.
		return bad("count", kwalerr.Errorf("%d regions in %d bytes", count, len(b)))
	}
	m.From, m.Point = int64(from), int64(point)
	if count > 0 {
		m.Obsolete = make([]RegionPoint, 0, count)
	}
	var prev uint64
	for i := range count {
		d, n, err := markVarint(b)
		if err != nil {
			return bad("region", err)
		}
		b = b[n:]
		id := d
		if i > 0 {
			if d > math.MaxUint64-prev-1 {
				return bad("region", kwalerr.Errorf("region %d: id overflows", i))
			}
			id = prev + 1 + d
		}
		before, n, err := markVarint(b)
		if err != nil {
			return bad("before", err)
		}
		b = b[n:]
		if before == 0 || before > math.MaxInt64 {
			return bad("before", kwalerr.Errorf("region %d: obsolete point %d", id, before))
		}
		var epoch uint64
		if epochs {
			if epoch, n, err = markVarint(b); err != nil {
				return bad("epoch", err)
			}
			b = b[n:]
		}
		m.Obsolete = append(m.Obsolete, RegionPoint{Region: id, Before: int64(before), Epoch: epoch})
		prev = id
	}
	if len(b) > 0 {
		return bad("payload", kwalerr.Errorf("%d bytes after the table", len(b)))
	}
	if epochs && !m.hasEpochs() {
		// The writer sets the flag only for an epoch other than 0: this
		// mark would re-encode to other bytes.
		return bad("flags", errors.New("epochs flagged, but every epoch is 0"))
	}
	return m, nil
}

// Before returns region's Obsolete point in the mark's table (0 when absent).
func (m *Mark) Before(region uint64) int64 {
	rp, _ := m.Region(region)
	return rp.Before
}

// Region returns region's statement in the mark's table.
func (m *Mark) Region(region uint64) (RegionPoint, bool) {
	lo, hi := 0, len(m.Obsolete)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.Obsolete[mid].Region < region {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(m.Obsolete) && m.Obsolete[lo].Region == region {
		return m.Obsolete[lo], true
	}
	return RegionPoint{}, false
}
