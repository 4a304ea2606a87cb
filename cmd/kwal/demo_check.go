package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"

	"github.com/kwal/kwal/logstore"
)

// ackedCall is one acknowledged append call of a region.
type ackedCall struct {
	n      int              // entries
	lastID logstore.EntryID // the ID AppendBatch returned for its last entry
}

// regionLog is what was acknowledged for one region, in order. Entry seq
// (0, 1, ...) is the region's seq-th entry; its data is expectation.data.
type regionLog struct {
	namespace string
	region    logstore.RegionID
	calls     []ackedCall
	entries   uint64
}

// expectation holds every region's acknowledged calls; entry data is
// rebuilt from the seed instead of being kept in memory.
type expectation struct {
	seed    uint64
	size    int
	regions map[logstore.RegionID]*regionLog
}

func newExpectation(seed uint64, size int) *expectation {
	return &expectation{seed: seed, size: size, regions: map[logstore.RegionID]*regionLog{}}
}

func (x *expectation) addRegion(ns string, r logstore.RegionID) *regionLog {
	rl := &regionLog{namespace: ns, region: r}
	x.regions[r] = rl
	return rl
}

// data returns the data of the region's entry seq: a readable header
// "r<region>#<seq>;" followed by pseudo-random bytes.
func (x *expectation) data(r logstore.RegionID, seq uint64) []byte {
	d := make([]byte, x.size)
	rng := rand.New(rand.NewPCG(x.seed^(uint64(r)*0x9e3779b97f4a7c15), seq))
	i := 0
	for ; i+8 <= len(d); i += 8 {
		binary.LittleEndian.PutUint64(d[i:], rng.Uint64())
	}
	for ; i < len(d); i++ {
		d[i] = byte(rng.Uint32())
	}
	copy(d, fmt.Sprintf("r%d#%d;", r, seq))
	return d
}

// parseHeader reads the region and seq from an entry's header.
func parseHeader(d []byte) (logstore.RegionID, uint64, bool) {
	rest, ok := bytes.CutPrefix(d, []byte("r"))
	if !ok {
		return 0, 0, false
	}
	rs, rest, ok := bytes.Cut(rest, []byte("#"))
	if !ok {
		return 0, 0, false
	}
	ss, _, ok := bytes.Cut(rest, []byte(";"))
	if !ok || len(ss) > 20 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseUint(string(rs), 10, 64)
	s, err2 := strconv.ParseUint(string(ss), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return logstore.RegionID(r), s, true
}

// problem is one difference between the replay and what was acknowledged.
type problem struct {
	namespace string
	region    logstore.RegionID
	id        logstore.EntryID
	what      string
}

type problemList struct {
	max     int
	total   int
	list    []problem
	regions map[logstore.RegionID]bool
}

func (p *problemList) add(ns string, r logstore.RegionID, id logstore.EntryID, format string, args ...any) {
	p.total++
	p.regions[r] = true
	if len(p.list) < p.max {
		p.list = append(p.list, problem{namespace: ns, region: r, id: id, what: fmt.Sprintf(format, args...)})
	}
}

func (p *problemList) print(w io.Writer) {
	for _, q := range p.list {
		id := "-"
		if q.id > 0 {
			id = strconv.FormatUint(uint64(q.id), 10)
		}
		fmt.Fprintf(w, "MISMATCH namespace %s region %d ID %s: %s\n", q.namespace, q.region, id, q.what)
	}
	if p.total > len(p.list) {
		fmt.Fprintf(w, "... and %d more\n", p.total-len(p.list))
	}
}

// regionCheck compares one region's replay with its acknowledged calls,
// entry by entry.
type regionCheck struct {
	x        *expectation
	rl       *regionLog
	problems *problemList
	call     int              // index of the call the next entry belongs to
	inCall   int              // index of the next entry within it
	seq      uint64           // seq of the next expected entry
	lastID   logstore.EntryID // ID of the last entry seen
}

func (x *expectation) check(r logstore.RegionID, problems *problemList) *regionCheck {
	rl := x.regions[r]
	if rl == nil {
		rl = &regionLog{region: r}
	}
	return &regionCheck{x: x, rl: rl, problems: problems}
}

func (c *regionCheck) fail(id logstore.EntryID, format string, args ...any) {
	c.problems.add(c.rl.namespace, c.rl.region, id, format, args...)
}

// advance moves the cursor to the entry after the current one.
func (c *regionCheck) advance() {
	c.seq++
	c.inCall++
	if c.call < len(c.rl.calls) && c.inCall >= c.rl.calls[c.call].n {
		c.call++
		c.inCall = 0
	}
}

// add checks the next replayed entry.
func (c *regionCheck) add(e logstore.Entry) {
	if e.Region != c.rl.region {
		c.fail(e.ID, "entry of region %d in this region's replay", e.Region)
		return
	}
	if e.ID <= c.lastID {
		c.fail(e.ID, "out of order: ID %d after ID %d", e.ID, c.lastID)
	}
	if c.seq >= c.rl.entries {
		c.fail(e.ID, "unexpected entry after the last acknowledged one (%d bytes, %s)", len(e.Data), preview(e.Data, 16))
		c.lastID = max(c.lastID, e.ID)
		return
	}
	// An entry's header names its seq: when it is ahead of the cursor,
	// entries are missing; when behind, it came back twice or out of order.
	if r, seq, ok := parseHeader(e.Data); ok && r == c.rl.region && seq != c.seq {
		if seq < c.seq {
			c.fail(e.ID, "entry #%d of the region came back again (or out of order) after entry #%d", seq, c.seq-1)
			c.lastID = max(c.lastID, e.ID)
			return
		}
		if seq < c.rl.entries {
			firstMissing := c.seq
			for c.seq < seq {
				c.advance()
			}
			c.fail(e.ID, "%d acknowledged entries missing before it (entries #%d..#%d of the region)", seq-firstMissing, firstMissing, seq-1)
		}
	}
	call := c.rl.calls[c.call]
	last := c.inCall == call.n-1
	want := c.x.data(c.rl.region, c.seq)
	if d := diff(e.Data, want); d != "" {
		c.fail(e.ID, "entry #%d of the region: data differs: %s", c.seq, d)
	}
	switch {
	case last && e.ID != call.lastID:
		c.fail(e.ID, "entry #%d ends an append call acknowledged with ID %d, but came back with ID %d", c.seq, call.lastID, e.ID)
	case !last && e.ID >= call.lastID:
		c.fail(e.ID, "entry #%d came back with ID %d, not below its call's acknowledged last ID %d", c.seq, e.ID, call.lastID)
	}
	c.lastID = max(c.lastID, e.ID)
	c.advance()
}

// finish reports acknowledged entries the replay did not return.
func (c *regionCheck) finish() {
	if c.seq < c.rl.entries {
		lastID := c.rl.calls[len(c.rl.calls)-1].lastID
		c.fail(0, "%d acknowledged entries missing at the end (entries #%d..#%d of the region, the last acknowledged with ID %d)",
			c.rl.entries-c.seq, c.seq, c.rl.entries-1, lastID)
	}
}

// diff describes how got differs from want, or returns "".
func diff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	if i == n {
		return fmt.Sprintf("%d bytes, %d expected (equal up to byte %d)", len(got), len(want), n)
	}
	sizes := fmt.Sprintf("%d bytes", len(got))
	if len(got) != len(want) {
		sizes = fmt.Sprintf("%d bytes, %d expected", len(got), len(want))
	}
	return fmt.Sprintf("first difference at byte %d: 0x%02x, expected 0x%02x (%s)", i, got[i], want[i], sizes)
}
