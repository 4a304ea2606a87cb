package claim

import (
	"cmp"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strings"

	"github.com/kwal/kwal/internal/kwalerr"
)

// A snapshot is the fold of the claims topic below Next, so that a store
// resumes the fold there instead of at the topic's start:
//
//	+--------------+--------+-------------+--------------------------------+
//	| "kwal-claims" | format | CRC-32C     | body                           |
//	| 11 bytes      | 1 byte | 4 bytes, BE | of the body                    |
//	+--------------+--------+-------------+--------------------------------+
//
// The body is uvarints (v) and varints (z): Next(v), the strings table
// (count(v), then each as length(v) and bytes; owners, topic IDs,
// namespaces and tokens are indexes into it), the regions (count(v); each:
// namespace, topic ID, region, lost, flags(v: 1 released, 2 pending), the
// pending claim's epoch, token, owner and lease when flagged, the claims'
// count(v), each claim's epoch, owner, At(z), sealed, offset(z), unix(z),
// lease(z)), then the unreadable records (count(v); each: namespace,
// region, count(v), each offset(z) and error string).
const snapshotMagic = "kwal-claims"

const snapshotFormat = 1

// ErrBadSnapshot reports a snapshot that does not decode.
var ErrBadSnapshot = errors.New("kwal: claim: bad snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarshalBinary encodes the state as a snapshot.
func (s *State) MarshalBinary() ([]byte, error) { return s.MarshalTrimmed(nil) }

// MarshalTrimmed encodes the state as a snapshot without the claims that
// can no longer fence a record of their topic: those below the last claim
// whose At lies below the topic's log start (logStart; topics absent keep
// every claim). The state resumed from it fences every record at or above
// those log starts as this one does, and what it holds follows the live
// claims, not the history.
func (s *State) MarshalTrimmed(logStart map[Topic]int64) ([]byte, error) {
	idx := make(map[string]uint64)
	var table []string
	str := func(v string) uint64 {
		i, ok := idx[v]
		if !ok {
			i = uint64(len(table))
			idx[v] = i
			table = append(table, v)
		}
		return i
	}
	ids := make([]ID, 0, len(s.regions))
	for id := range s.regions {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.TopicID, b.TopicID), cmp.Compare(a.Region, b.Region))
	})
	keys := make([]RegionKey, 0, len(s.unreadable))
	for k := range s.unreadable {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b RegionKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Region, b.Region))
	})
	// The regions first, into a buffer of their own: they fill the table.
	var regs []byte
	v := func(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }
	z := func(b []byte, x int64) []byte { return binary.AppendVarint(b, x) }
	regs = v(regs, uint64(len(ids)))
	for _, id := range ids {
		r := s.regions[id]
		regs = v(regs, str(id.Namespace))
		regs = v(regs, str(id.TopicID))
		regs = v(regs, id.Region)
		regs = v(regs, uint64(r.Lost))
		var flags uint64
		if r.Released {
			flags |= 1
		}
		if r.Pending != nil {
			flags |= 2
		}
		regs = v(regs, flags)
		if p := r.Pending; p != nil {
			regs = v(regs, p.Epoch)
			regs = v(regs, str(p.Token))
			regs = v(regs, str(p.Owner))
			regs = z(regs, p.LeaseMS)
		}
		claims := r.Claims
		if start, ok := logStart[Topic{id.Namespace, id.TopicID}]; ok {
			claims = live(claims, start)
		}
		regs = v(regs, uint64(len(claims)))
		for _, c := range claims {
			regs = v(regs, c.Epoch)
			regs = v(regs, str(c.Owner))
			regs = z(regs, c.At)
			regs = v(regs, c.Sealed)
			regs = z(regs, c.Offset)
			regs = z(regs, c.Unix)
			regs = z(regs, c.LeaseMS)
		}
	}
	regs = v(regs, uint64(len(keys)))
	for _, k := range keys {
		regs = v(regs, str(k.Namespace))
		regs = v(regs, k.Region)
		bad := s.unreadable[k]
		regs = v(regs, uint64(len(bad)))
		for _, u := range bad {
			regs = z(regs, u.Offset)
			regs = v(regs, str(u.Err))
		}
	}
	body := v(nil, uint64(s.Next))
	body = v(body, uint64(len(table)))
	for _, t := range table {
		body = v(body, uint64(len(t)))
		body = append(body, t...)
	}
	body = append(body, regs...)
	out := append([]byte(snapshotMagic), snapshotFormat)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

// snapshotReader reads a snapshot's body; the first error sticks.
type snapshotReader struct {
	b     []byte
	off   int
	err   error
	table []string
}

func (r *snapshotReader) fail(field string) {
	if r.err == nil {
		r.err = kwalerr.Errorf("%w: %s at byte %d", ErrBadSnapshot, field, r.off)
	}
}

func (r *snapshotReader) uv(field string) uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(field)
		return 0
	}
	r.off += n
	return x
}

func (r *snapshotReader) sv(field string) int64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail(field)
		return 0
	}
	r.off += n
	return x
}

// count reads a count of items of at least one byte each.
func (r *snapshotReader) count(field string) int {
	n := r.uv(field)
	if n > uint64(len(r.b)-r.off) {
		r.fail(field + " count")
		return 0
	}
	return int(n)
}

func (r *snapshotReader) str(field string) string {
	i := r.uv(field)
	if r.err == nil && i >= uint64(len(r.table)) {
		r.fail(field + " string index")
	}
	if r.err != nil {
		return ""
	}
	return r.table[i]
}

// UnmarshalBinary replaces the state with a snapshot's. Any input gives
// a state or an error wrapping ErrBadSnapshot, never a panic.
func (s *State) UnmarshalBinary(data []byte) error {
	h := len(snapshotMagic) + 5
	if len(data) < h || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return kwalerr.Errorf("%w: not a claims snapshot", ErrBadSnapshot)
	}
	if f := data[len(snapshotMagic)]; f != snapshotFormat {
		return kwalerr.Errorf("%w: format %d (this kwal reads %d)", ErrBadSnapshot, f, snapshotFormat)
	}
	body := data[h:]
	if want, got := binary.BigEndian.Uint32(data[h-4:h]), crc32.Checksum(body, castagnoli); want != got {
		return kwalerr.Errorf("%w: checksum %08x, the body's is %08x", ErrBadSnapshot, want, got)
	}
	r := &snapshotReader{b: body}
	next := r.uv("next")
	for n := r.count("strings"); n > 0 && r.err == nil; n-- {
		l := r.uv("string length")
		if r.err == nil && l > uint64(len(body)-r.off) {
			r.fail("string length")
		}
		if r.err != nil {
			break
		}
		r.table = append(r.table, string(body[r.off:r.off+int(l)]))
		r.off += int(l)
	}
	t := NewState()
	t.Next = int64(next)
	if next > 1<<62 {
		r.fail("next")
	}
	for n := r.count("regions"); n > 0 && r.err == nil; n-- {
		id := ID{Namespace: t.intern(r.str("namespace")), TopicID: t.intern(r.str("topic ID")), Region: r.uv("region")}
		reg := &Region{Lost: int(min(r.uv("lost"), 1<<31))}
		flags := r.uv("flags")
		reg.Released = flags&1 != 0
		if flags&2 != 0 {
			p := Event{V: Version, Op: OpPending, Namespace: id.Namespace, TopicID: id.TopicID, Region: id.Region}
			p.Epoch, p.Token, p.Owner, p.LeaseMS = r.uv("pending epoch"), r.str("pending token"), t.intern(r.str("pending owner")), r.sv("pending lease")
			reg.Pending = &p
		}
		for c := r.count("claims"); c > 0 && r.err == nil; c-- {
			reg.Claims = append(reg.Claims, Committed{Epoch: r.uv("epoch"), Owner: t.intern(r.str("owner")), At: r.sv("at"),
				Sealed: r.uv("sealed"), Offset: r.sv("offset"), Unix: r.sv("unix"), LeaseMS: r.sv("lease")})
		}
		if r.err != nil {
			break
		}
		if _, dup := t.regions[id]; dup {
			r.fail("region listed twice")
			break
		}
		t.regions[id] = reg
		t.namespaces[id.Namespace]++
	}
	for n := r.count("unreadable"); n > 0 && r.err == nil; n-- {
		k := RegionKey{Namespace: r.str("unreadable namespace"), Region: r.uv("unreadable region")}
		for c := r.count("unreadable records"); c > 0 && r.err == nil; c-- {
			t.unreadable[k] = append(t.unreadable[k], Unreadable{Offset: r.sv("unreadable offset"), Err: r.str("unreadable error")})
		}
	}
	if r.err == nil && r.off != len(body) {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return r.err
	}
	*s = *t
	return nil
}
