package ledger

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/kwal/kwal/logstore"
)

// maxProblems bounds the violations a Report describes in words.
const maxProblems = 20

// Report is the result of checking a replay against the ledger.
type Report struct {
	Namespace string
	// Acked, Failed and Pending count the ledger's entries of the namespace
	// by their call's outcome; FailedPresent counts failed or pending ones
	// found (once) in the log, which the contract allows.
	Acked, Failed, Pending, FailedPresent int
	// Read counts the entries the replay returned.
	Read int
	// Violations.
	Lost       int // acknowledged, not in the log
	Duplicated int // extra copies of an entry (an entry read 3 times counts 2)
	Reordered  int // entries after a later one of the same writer and region, or an ID not above the previous one
	WrongID    int // acknowledged at one ID, read at another
	Phantom    int // undecodable, never appended, or in another region than its own
	// Problems describes the first violations in words.
	Problems []string
}

// OK reports whether the replay had no violation.
func (r Report) OK() bool {
	return r.Lost+r.Duplicated+r.Reordered+r.WrongID+r.Phantom == 0
}

// ErrViolation is matched by Report.Err's error.
var ErrViolation = errors.New("ledger: replay violates the ledger")

// Err returns nil when the replay had no violation, else an error matching
// ErrViolation that gives the counts and the first problems.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("%w: namespace %q: %d lost, %d duplicated, %d reordered, %d at a wrong ID, %d phantom:\n  %s",
		ErrViolation, r.Namespace, r.Lost, r.Duplicated, r.Reordered, r.WrongID, r.Phantom, strings.Join(r.Problems, "\n  "))
}

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Add merges o's counts and problems into r (for a summary over several
// replays or namespaces).
func (r *Report) Add(o Report) {
	r.Acked += o.Acked
	r.Failed += o.Failed
	r.Pending += o.Pending
	r.FailedPresent += o.FailedPresent
	r.Read += o.Read
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.Reordered += o.Reordered
	r.WrongID += o.WrongID
	r.Phantom += o.Phantom
	for _, p := range o.Problems {
		r.problem("%s", p)
	}
}

// want is what the ledger says about one tag.
type want struct {
	outcome Outcome
	id      logstore.EntryID // exact ID, or 0 when not known exactly
	bound   logstore.EntryID // for an acked tag with id 0: the region's last ID of its call, which it must precede
}

// Regions returns the regions the ledger holds entries of in ns, sorted.
func (l *Ledger) Regions(ns string) []logstore.RegionID {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := map[logstore.RegionID]bool{}
	for _, c := range l.calls {
		if c.Namespace == ns {
			for _, t := range c.Tags {
				set[t.Region] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Check compares a replay of namespace ns with the ledger. replay holds
// every region's entries in the order the read returned them; a region of
// the ledger missing from replay was read as empty. Calls still pending
// count as outcome unknown.
func (l *Ledger) Check(ns string, replay map[logstore.RegionID][]logstore.Entry) Report {
	rep := Report{Namespace: ns}
	wants := map[Tag]want{}
	regions := map[logstore.RegionID]bool{}
	l.mu.Lock()
	for _, c := range l.calls {
		if c.Namespace != ns {
			continue
		}
		last := map[logstore.RegionID]logstore.EntryID{}
		for i, t := range c.Tags {
			if c.Outcome == Acked && c.IDs[i] != 0 {
				last[t.Region] = c.IDs[i]
			}
		}
		for i, t := range c.Tags {
			regions[t.Region] = true
			w := want{outcome: c.Outcome}
			switch c.Outcome {
			case Acked:
				rep.Acked++
				w.id, w.bound = c.IDs[i], last[t.Region]
			case Failed:
				rep.Failed++
			default:
				rep.Pending++
			}
			if prev, dup := wants[t]; dup && prev.outcome == Acked {
				continue // a test that reuses a tag; keep the acknowledged record
			}
			wants[t] = w
		}
	}
	l.mu.Unlock()

	seen := map[Tag]int{}
	for _, region := range slices.Sorted(maps.Keys(replay)) {
		lastSeq := map[uint32]uint64{}
		var prevID logstore.EntryID
		for i, e := range replay[region] {
			rep.Read++
			if i > 0 && e.ID <= prevID {
				rep.Reordered++
				rep.problem("region %d: entry %d of the replay has ID %d, not above the previous ID %d", region, i, e.ID, prevID)
			}
			prevID = e.ID
			t, err := Decode(e.Data)
			if err != nil {
				rep.Phantom++
				rep.problem("region %d: ID %d: %v", region, e.ID, err)
				continue
			}
			w, ok := wants[t]
			switch {
			case !ok:
				rep.Phantom++
				rep.problem("region %d: ID %d holds %v, which was never appended", region, e.ID, t)
				continue
			case t.Region != region || e.Region != region:
				rep.Phantom++
				rep.problem("region %d: ID %d holds %v (entry region %d)", region, e.ID, t, e.Region)
				continue
			}
			seen[t]++
			if seen[t] > 1 {
				rep.Duplicated++
				rep.problem("region %d: %v (%s) read again at ID %d", region, t, w.outcome, e.ID)
				continue
			}
			if w.outcome != Acked {
				rep.FailedPresent++
			} else if (w.id != 0 && e.ID != w.id) || (w.id == 0 && w.bound != 0 && e.ID >= w.bound) {
				rep.WrongID++
				if w.id != 0 {
					rep.problem("region %d: %v acknowledged at ID %d, read at ID %d", region, t, w.id, e.ID)
				} else {
					rep.problem("region %d: %v read at ID %d, not before its call's last ID %d", region, t, e.ID, w.bound)
				}
			}
			if s, ok := lastSeq[t.Writer]; ok && t.Seq <= s {
				rep.Reordered++
				rep.problem("region %d: %v at ID %d comes after the writer's seq %d", region, t, e.ID, s)
			} else {
				lastSeq[t.Writer] = t.Seq
			}
		}
	}
	// Lost: acknowledged tags never read, reported in tag order.
	var lost []Tag
	for t, w := range wants {
		if w.outcome == Acked && seen[t] == 0 {
			lost = append(lost, t)
		}
	}
	slices.SortFunc(lost, func(a, b Tag) int {
		if a.Region != b.Region {
			return cmpU(uint64(a.Region), uint64(b.Region))
		}
		if a.Writer != b.Writer {
			return cmpU(uint64(a.Writer), uint64(b.Writer))
		}
		return cmpU(a.Seq, b.Seq)
	})
	rep.Lost = len(lost)
	for _, t := range lost {
		rep.problem("%v acknowledged at ID %d is not in the replay", t, wants[t].id)
	}
	return rep
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ReadFunc reads one region of a namespace from the beginning.
type ReadFunc func(region logstore.RegionID) iter.Seq2[logstore.Entry, error]

// Replay reads every region the ledger holds in ns with read and returns
// the entries by region, or the first read error (naming the region).
func (l *Ledger) Replay(ns string, read ReadFunc) (map[logstore.RegionID][]logstore.Entry, error) {
	out := map[logstore.RegionID][]logstore.Entry{}
	for _, region := range l.Regions(ns) {
		var es []logstore.Entry
		for e, err := range read(region) {
			if err != nil {
				return out, fmt.Errorf("ledger: replay of region %d: %w", region, err)
			}
			es = append(es, e)
		}
		out[region] = es
	}
	return out, nil
}

// Verify replays every region of ns with read and checks the replay.
func (l *Ledger) Verify(ns string, read ReadFunc) (Report, error) {
	replay, err := l.Replay(ns, read)
	if err != nil {
		return Report{Namespace: ns}, err
	}
	return l.Check(ns, replay), nil
}
