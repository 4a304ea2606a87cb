// Package claim is the ownership state of kwal's regions: which store owns
// a region under which epoch, and where in the region's log each epoch's
// history ends. It is the ground floor of fencing; logstore/kafka writes
// and follows the events, and asks this package what they mean.
//
// # The claims topic
//
// Every store of a cluster shares one claims topic (Config.ClaimsTopic): a
// single partition whose records are Events, keyed by namespace and region.
// It is not compacted, and State folds every event in log order: the
// outcome of two claims racing is decided by which event the log holds
// first, and that needs every event (a compacted topic keeps a key's last
// record, which may be the loser's). A claim costs two events of about 200
// bytes; a cluster that moves a thousand regions a day adds about 150 MB a
// year, read once when a store opens.
//
// # A claim
//
// Claim of region r in namespace ns by a store (logstore/kafka/claim.go):
//
//  1. Catch up with the claims topic; the new epoch E is one above every
//     epoch of r seen, pending or committed.
//  2. Append a Pending event (E, a random token) and catch up through it.
//     The event counts only if no other event of r with an epoch >= E came
//     first; otherwise the claim lost a race and fails.
//  3. Append a claim record (record.KindClaim, epoch E) to r's data log: its
//     offset At is where epoch E begins.
//  4. Catch up again; a newer pending claim of r means this one was
//     overtaken and fails.
//  5. Read r's history below At to find Sealed, its last entry.
//  6. Append a Commit event (E, token, At, Sealed). From the commit on, every
//     store's replay fences r's entries of epochs below E that lie above At.
//
// # The fencing rule
//
// A committed claim (E, At) fences every entry of its region with an epoch
// below E at an offset above At. Committed claims of a region have rising
// epochs at rising offsets (a claim is pending from step 2 on, which fails
// the commit of any older pending claim, and its At is written after that),
// so an entry is fenced exactly when the last committed claim below it has
// a greater epoch (Claims.Fenced). The rule needs nothing but the claims,
// the entry's offset and its epoch: a read from any ID, with or without an
// index, after any prune, on any store, fences the same entries.
//
// # Why a fenced writer is never told "acknowledged"
//
// A writer holding epoch e of r acknowledges an append only after its
// produce returned and a catch-up with the claims topic that began after
// that saw no event of r with an epoch above e (a Pending is enough). Say
// it acknowledged an entry at offset X, and a claim (E > e, At) commits. If
// the catch-up had not seen E's Pending, it read the claims topic's end
// before the Pending was acknowledged; step 3 starts only after that
// acknowledgement, and X was in the log before the catch-up started: X <
// At, so the claim does not fence X. Every acknowledged entry therefore
// lies below the claims that outrank its epoch. An append whose entries
// landed above At is refused with ErrFenced: its catch-up began after its
// produce returned, after X > At was written, after step 2's Pending was
// acknowledged.
//
// Under a lease L (logstore/kafka Fencing "lease") the writer acknowledges
// when the last catch-up that completed began less than L before its
// check, and a claim waits L between its Pending's acknowledgement and
// step 3 (at least the LeaseMS the region's last owner recorded). A
// catch-up that began at T and missed the Pending read the end before the
// Pending was acknowledged at P > T; the claim record is written after
// P + L; the writer's check ran after X was written and before T + L. So
// X < At again. This needs only that the two stores' clocks, each
// measuring one lease, differ by less than the margin the writer keeps.
//
// A pending claim that never commits (its store died) fences writers but
// no entries: readers follow commits only. The next claim of the region
// commits above it and fences from there.
package claim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Op is what an event does.
type Op string

const (
	OpPending Op = "pending" // a claim is under way
	OpCommit  Op = "commit"  // the pending claim with the same token is complete
	OpRelease Op = "release" // the owner of the epoch stopped writing (informational)
)

// Event is one record of the claims topic.
type Event struct {
	Op        Op     `json:"op"`
	Namespace string `json:"ns"`
	Region    uint64 `json:"region"`
	// TopicID is the data topic's ID (hex): claims of a deleted and
	// recreated topic never apply to the new one.
	TopicID string `json:"topic_id"`
	Epoch   uint64 `json:"epoch"`
	Token   string `json:"token"`
	Owner   string `json:"owner,omitempty"`
	// At and Sealed are set on a commit: the claim record's offset in the
	// data log, and the ID of the last entry below it that replay returns
	// (0: none).
	At     int64  `json:"at,omitempty"`
	Sealed uint64 `json:"sealed,omitempty"`
	// UnixMilli is when the event was written (for people).
	UnixMilli int64 `json:"time,omitempty"`
	// LeaseMS is set on a Pending by a claimer that will fence its appends
	// by lease (logstore/kafka Config.Lease): how long, in milliseconds, a
	// look at this topic vouches for its appends. The next claim of the
	// region waits at least that long after its own Pending before it
	// writes its claim record.
	LeaseMS int64 `json:"lease_ms,omitempty"`
}

// ErrMalformed reports an event that does not decode or whose fields
// contradict each other.
var ErrMalformed = errors.New("claim: malformed event")

// Key is the claims topic's record key of a region's events.
func Key(namespace string, region uint64) []byte {
	return []byte(namespace + "/" + strconv.FormatUint(region, 10))
}

// Encode returns ev's record value.
func Encode(ev Event) []byte {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // Event holds only strings and integers
	}
	return b
}

// Decode decodes a claims topic record. Any input gives an event or an
// error wrapping ErrMalformed, never a panic.
func Decode(key, value []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(value, &ev); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case ev.Op != OpPending && ev.Op != OpCommit && ev.Op != OpRelease:
		return Event{}, fmt.Errorf("%w: op %q", ErrMalformed, ev.Op)
	case ev.Epoch == 0:
		return Event{}, fmt.Errorf("%w: epoch 0", ErrMalformed)
	case ev.Namespace == "" || ev.TopicID == "" || ev.Token == "":
		return Event{}, fmt.Errorf("%w: %s without namespace, topic ID or token", ErrMalformed, ev.Op)
	case ev.Op == OpCommit && ev.At < 0:
		return Event{}, fmt.Errorf("%w: commit at offset %d", ErrMalformed, ev.At)
	case ev.LeaseMS < 0:
		return Event{}, fmt.Errorf("%w: lease of %d ms", ErrMalformed, ev.LeaseMS)
	case string(key) != string(Key(ev.Namespace, ev.Region)):
		return Event{}, fmt.Errorf("%w: key %q for namespace %q region %d", ErrMalformed, key, ev.Namespace, ev.Region)
	}
	return ev, nil
}

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
	// Claims are the committed claims, epochs and At rising.
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

// State is the fold of the claims topic. It is not safe for concurrent
// use; its owner guards it.
type State struct {
	regions map[ID]*Region
	// Next is the offset of the next event to fold.
	Next int64
}

// NewState returns the state of an empty claims topic.
func NewState() *State { return &State{regions: make(map[ID]*Region)} }

// Apply folds the event at offset (which must be >= Next) and reports
// whether it counted.
func (s *State) Apply(offset int64, ev Event) bool {
	s.Next = offset + 1
	id := ID{ev.Namespace, ev.TopicID, ev.Region}
	r := s.regions[id]
	if r == nil {
		r = &Region{}
		s.regions[id] = r
	}
	switch ev.Op {
	case OpPending:
		if ev.Epoch <= r.MaxEpoch() {
			r.Lost++
			return false
		}
		p := ev
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
	seen := make(map[string]bool)
	var out []string
	for id := range s.regions {
		if !seen[id.Namespace] {
			seen[id.Namespace] = true
			out = append(out, id.Namespace)
		}
	}
	slices.Sort(out)
	return out
}
