package claim

import (
	"cmp"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Committed is one complete claim.
type Committed struct {
	Epoch  uint64
	Owner  string
	At     int64  // the claim record's offset in the data log
	Sealed uint64 // the last entry ID of the earlier epochs that replay returns
	Offset int64  // the commit event's offset in the claims topic
	Unix   int64  // UnixMilli of the commit event
	// LeaseMS is the owner's lease (its Pending's LeaseMS; 0: it waits for
	// a look after every append).
	LeaseMS int64
}

// Region is what the claims topic says of one region of one topic
// incarnation.
type Region struct {
	// Claims are the committed claims that can still fence (Trim drops
	// the others), epochs and At rising.
	Claims []Committed
	// Pending is a claim under way (nil: none). Its epoch is above every
	// committed one.
	Pending *Event
	// Released is set when the owner of the last committed epoch released
	// the region and no claim came since.
	Released bool
	// Lost counts events that lost a race or came too late (ignored).
	Lost int
}

// MaxEpoch is the highest epoch of the region, pending or committed: a
// writer holding a lower epoch is fenced.
func (r Region) MaxEpoch() uint64 {
	var e uint64
	if n := len(r.Claims); n > 0 {
		e = r.Claims[n-1].Epoch
	}
	if r.Pending != nil {
		e = max(e, r.Pending.Epoch)
	}
	return e
}

// Last is the last committed claim (zero when none).
func (r Region) Last() Committed {
	if len(r.Claims) == 0 {
		return Committed{}
	}
	return r.Claims[len(r.Claims)-1]
}

// Fenced reports whether an entry of epoch at offset is fenced: the last
// committed claim below offset has a greater epoch.
func Fenced(claims []Committed, offset int64, epoch uint64) bool {
	i := sort.Search(len(claims), func(i int) bool { return claims[i].At >= offset })
	return i > 0 && claims[i-1].Epoch > epoch
}

// ID identifies a region of a topic incarnation.
type ID struct {
	Namespace string
	TopicID   string
	Region    uint64
}

// RegionKey names a region across topic incarnations: what a record's key
// says.
type RegionKey struct {
	Namespace string
	Region    uint64
}

// Unreadable is a region's record that could not be folded: until a Skip
// event names its offset, nothing can tell which of the region's writers
// and entries are fenced.
type Unreadable struct {
	Offset int64
	Err    string
}

// ErrUnreadable is matched by the error of a use of a region whose
// fencing cannot be decided (State.Unreadable).
var ErrUnreadable = errors.New("kwal: claim: the region has an unreadable event")

// Error describes the region's first unreadable record.
func (u Unreadable) Error(k RegionKey) error {
	return kwalerr.Errorf("%w: %q region %d: the claims topic's record at offset %d: %s (repair: kwal regions repair -n %s --region %d --skip %d)",
		ErrUnreadable, k.Namespace, k.Region, u.Offset, u.Err, k.Namespace, k.Region, u.Offset)
}

// Kind is what Fold found a record to be.
type Kind int

const (
	Folded  Kind = iota // an event, folded (it may have lost a race)
	Foreign             // not a region's record: skipped
	Bad                 // a region's record that does not decode: the region is unreadable
)

// State is the fold of the claims topic. It is not safe for concurrent
// use; its owner guards it.
type State struct {
	regions    map[ID]*Region
	unreadable map[RegionKey][]Unreadable
	// strings interns owners and topic IDs: a hundred thousand regions
	// name a few hundred owners and topics.
	strings map[string]string
	// dirty are the regions changed since Changed last returned.
	dirty      map[ID]bool
	dirtyKeys  bool
	namespaces map[string]int // regions per namespace
	// Next is the offset of the next event to fold.
	Next int64
}

// NewState returns the state of an empty claims topic.
func NewState() *State {
	return &State{regions: make(map[ID]*Region), unreadable: make(map[RegionKey][]Unreadable),
		strings: make(map[string]string), dirty: make(map[ID]bool), namespaces: make(map[string]int)}
}

func (s *State) intern(v string) string {
	if w, ok := s.strings[v]; ok {
		return w
	}
	s.strings[v] = v
	return v
}

// Fold folds the record at offset (>= Next): an event of a region, a
// record of a region that does not decode (the region becomes
// unreadable), or a record that is no region's (skipped). The error says
// what was wrong with the record, naming its offset.
func (s *State) Fold(offset int64, key, value []byte) (Kind, error) {
	s.Next = offset + 1
	ns, region, ok := ParseKey(key)
	if !ok {
		return Foreign, kwalerr.Errorf("the record at offset %d has key %.64q, which names no region: skipped", offset, key)
	}
	ev, err := Decode(key, value)
	if err != nil {
		k := RegionKey{ns, region}
		s.unreadable[k] = append(s.unreadable[k], Unreadable{Offset: offset, Err: kwalerr.Bare(err)})
		s.dirtyKeys = true
		return Bad, kwalerr.Errorf("the record at offset %d of %q region %d: %w", offset, ns, region, err)
	}
	s.Apply(offset, ev)
	return Folded, nil
}

// Apply folds the event at offset (which must be >= Next) and reports
// whether it counted.
func (s *State) Apply(offset int64, ev Event) bool {
	s.Next = offset + 1
	if ev.Op == OpSkip {
		return s.skip(RegionKey{ev.Namespace, ev.Region}, ev.Skip)
	}
	id := ID{s.intern(ev.Namespace), s.intern(ev.TopicID), ev.Region}
	r := s.regions[id]
	if r == nil {
		r = &Region{}
		s.regions[id] = r
		s.namespaces[id.Namespace]++
	}
	s.dirty[id] = true
	switch ev.Op {
	case OpPending:
		if ev.Epoch <= r.MaxEpoch() {
			r.Lost++
			return false
		}
		p := ev
		p.Owner, p.TopicID, p.Namespace = s.intern(p.Owner), id.TopicID, id.Namespace
		r.Pending = &p
		return true
	case OpCommit:
		if r.Pending == nil || r.Pending.Token != ev.Token || r.Pending.Epoch != ev.Epoch ||
			(len(r.Claims) > 0 && ev.At <= r.Last().At) {
			r.Lost++
			return false
		}
		r.Claims = append(r.Claims, Committed{Epoch: ev.Epoch, Owner: r.Pending.Owner, At: ev.At, Sealed: ev.Sealed, Offset: offset, Unix: ev.UnixMilli, LeaseMS: r.Pending.LeaseMS})
		r.Pending, r.Released = nil, false
		return true
	case OpRelease:
		if r.Pending != nil || len(r.Claims) == 0 || r.Last().Epoch != ev.Epoch {
			r.Lost++
			return false
		}
		r.Released = true
		return true
	}
	return false
}

func (s *State) skip(k RegionKey, offset int64) bool {
	bad := s.unreadable[k]
	i := slices.IndexFunc(bad, func(u Unreadable) bool { return u.Offset == offset })
	if i < 0 {
		return false
	}
	if bad = slices.Delete(bad, i, i+1); len(bad) == 0 {
		delete(s.unreadable, k)
	} else {
		s.unreadable[k] = bad
	}
	s.dirtyKeys = true
	return true
}

// Unreadable returns the region's unreadable records (none: its fencing
// is decided by its events).
func (s *State) Unreadable(k RegionKey) []Unreadable { return slices.Clone(s.unreadable[k]) }

// AllUnreadable returns every region with unreadable records.
func (s *State) AllUnreadable() map[RegionKey][]Unreadable {
	out := make(map[RegionKey][]Unreadable, len(s.unreadable))
	for k, v := range s.unreadable {
		out[k] = slices.Clone(v)
	}
	return out
}

// Topic is a namespace's topic incarnation.
type Topic struct {
	Namespace, TopicID string
}

// live returns the claims of r that can still fence a record at or above
// logStart: from the last claim whose At lies below logStart on.
func live(claims []Committed, logStart int64) []Committed {
	i := sort.Search(len(claims), func(i int) bool { return claims[i].At >= logStart })
	return claims[max(i-1, 0):]
}

// Changed returns the regions changed since the last call, and whether
// the set of unreadable records changed.
func (s *State) Changed() (ids []ID, unreadable bool) {
	for id := range s.dirty {
		ids = append(ids, id)
	}
	clear(s.dirty)
	unreadable, s.dirtyKeys = s.dirtyKeys, false
	return ids, unreadable
}

// Region returns a copy of what the state holds of id (zero when nothing).
func (s *State) Region(id ID) Region {
	r := s.regions[id]
	if r == nil {
		return Region{}
	}
	c := *r
	c.Claims = slices.Clone(r.Claims)
	return c
}

// Regions returns the IDs of the regions of namespace (of any topic
// incarnation), sorted.
func (s *State) Regions(namespace string) []ID {
	var ids []ID
	for id := range s.regions {
		if id.Namespace == namespace {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b ID) int {
		return cmp.Or(strings.Compare(a.TopicID, b.TopicID), cmp.Compare(a.Region, b.Region))
	})
	return ids
}

// Namespaces returns the namespaces with any event, sorted.
func (s *State) Namespaces() []string {
	out := make([]string, 0, len(s.namespaces))
	for ns := range s.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// Len is the number of regions the state holds.
func (s *State) Len() int { return len(s.regions) }
