package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// KindMark is a record that holds no entry but a statement about the log
// (a Mark): which regions' entries are obsolete, and, for a prune mark, what
// the records below a prune point were. Its key is a whole record's key
// (seq 0, size and entry CRC of the value) with region 0; its value is the
// mark's payload:
//
//	+-------+-------------+-------------+-----------+======================+
//	| flags | uv(from)    | uv(point)   | uv(n)     | n x (uv(region delta) |
//	| uint8 |             |             |           |      uv(before))      |
//	+-------+-------------+-------------+-----------+======================+
//
//	flags    bit 0: a prune mark (From and Point are meaningful); the other
//	         bits are 0
//	from     prune mark: the lowest offset its table speaks for
//	point    prune mark: the offset below which its writer deletes; >= from
//	region   ascending: the first as is, each next one as id - previous - 1
//	before   the region's Obsolete point: it needs none of its records at
//	         offsets < before; > 0
//
// uv is an unsigned varint in shortest form. An Obsolete mark (flags 0,
// from and point 0) carries one region. A prune mark's table states: every
// kwal record at an offset in [From, Point) belongs to a listed region and
// lies below that region's before; so a region absent from the table has no
// record there. (logstore/kafka/index/doc.go gives the argument built on it.)
const KindMark Kind = 5

// markFlagPrune marks a prune mark.
const markFlagPrune = 1

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
// at offsets < Before.
type RegionPoint struct {
	Region uint64
	Before int64
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
	}
	return dst
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
		return Mark{}, fmt.Errorf("%w: mark %s: %v", ErrMalformed, field, err)
	}
	if len(b) == 0 {
		return bad("flags", errors.New("empty payload"))
	}
	flags := b[0]
	if flags&^markFlagPrune != 0 {
		return bad("flags", fmt.Errorf("unknown bits %#x", flags))
	}
	m.Prune = flags&markFlagPrune != 0
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
		return bad("point", fmt.Errorf("from %d or point %d exceeds the offset range", from, point))
	case m.Prune && from > point:
		return bad("point", fmt.Errorf("from %d above point %d", from, point))
	case !m.Prune && (from != 0 || point != 0):
		return bad("point", fmt.Errorf("an obsolete mark with from %d, point %d", from, point))
	case count > maxMarkRegions || count > uint64(len(b))/2:
		// Each region takes at least two bytes.
		return bad("count", fmt.Errorf("%d regions in %d bytes", count, len(b)))
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
				return bad("region", fmt.Errorf("region %d: id overflows", i))
			}
			id = prev + 1 + d
		}
		before, n, err := markVarint(b)
		if err != nil {
			return bad("before", err)
		}
		b = b[n:]
		if before == 0 || before > math.MaxInt64 {
			return bad("before", fmt.Errorf("region %d: obsolete point %d", id, before))
		}
		m.Obsolete = append(m.Obsolete, RegionPoint{Region: id, Before: int64(before)})
		prev = id
	}
	if len(b) > 0 {
		return bad("payload", fmt.Errorf("%d bytes after the table", len(b)))
	}
	return m, nil
}

// Before returns region's Obsolete point in the mark's table (0 when absent).
func (m *Mark) Before(region uint64) int64 {
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
		return m.Obsolete[lo].Before
	}
	return 0
}
