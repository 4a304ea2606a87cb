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
// bytes.
//
// # What one record can stop
//
// State.Fold sorts every record of the topic into one of three kinds, so
// that nothing but a region's own events can stop that region's fencing:
//
//   - a record whose key is not a region's key (namespace "/" region) is
//     not kwal's: it is skipped (Foreign), whatever its value;
//   - a region's record that does not decode, whose fields contradict each
//     other or that carries a newer format Version is unreadable: the
//     region's fencing can no longer be decided, so State.Unreadable
//     reports it and every use of the region fails closed, naming the
//     offset, until a Skip event of the region names that offset (an
//     operator's repair, after deciding what the record was);
//   - everything else is an Event, folded by Apply.
//
// Regions of other keys never wait for an unreadable record.
//
// # Snapshots
//
// A fold can be saved (State.MarshalTrimmed) and resumed from the offset
// it reached, so a store opening reads only the events written since. The
// snapshot leaves out a region's claims that can no longer fence anything
// readable (those below the last claim before its log's start), so what a
// store resumes follows the live regions and their live claims, not the
// history.
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
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Version is the event format this package writes and the newest it
// reads. Events of a newer version make their region unreadable (fail
// closed): a rolling upgrade moves every store to the new reader before
// any writes the new format. Events written before versions existed read
// as version 1.
const Version = 1

// Op is what an event does.
type Op string

const (
	OpPending Op = "pending" // a claim is under way
	OpCommit  Op = "commit"  // the pending claim with the same token is complete
	OpRelease Op = "release" // the owner of the epoch stopped writing (informational)
	// OpSkip is an operator's repair: the region's unreadable record at
	// offset Skip is to be ignored (kwal regions repair).
	OpSkip Op = "skip"
)

// Event is one record of the claims topic.
type Event struct {
	// V is the format version (0 reads as 1).
	V         int    `json:"v,omitempty"`
	Op        Op     `json:"op"`
	Namespace string `json:"ns"`
	Region    uint64 `json:"region"`
	// TopicID is the data topic's ID (hex): claims of a deleted and
	// recreated topic never apply to the new one.
	TopicID string `json:"topic_id,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
	Token   string `json:"token,omitempty"`
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
	// Skip is set on an OpSkip: the offset of the unreadable record.
	Skip int64 `json:"skip,omitempty"`
}

// ErrMalformed reports an event that does not decode or whose fields
// contradict each other.
var ErrMalformed = errors.New("kwal: claim: malformed event")

// ErrNewerFormat reports an event of a format newer than Version.
var ErrNewerFormat = errors.New("kwal: claim: event of a newer format")

// Key is the claims topic's record key of a region's events.
func Key(namespace string, region uint64) []byte {
	return []byte(namespace + "/" + strconv.FormatUint(region, 10))
}

// ParseKey returns the namespace and region a key names, and false for a
// key that is not a region's: a namespace of Kafka topic name characters,
// "/", the region in canonical decimal.
func ParseKey(key []byte) (namespace string, region uint64, ok bool) {
	k := string(key)
	i := strings.LastIndexByte(k, '/')
	if i < 1 || i > 249 {
		return "", 0, false
	}
	for _, c := range k[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", 0, false
		}
	}
	r, err := strconv.ParseUint(k[i+1:], 10, 64)
	if err != nil || strconv.FormatUint(r, 10) != k[i+1:] {
		return "", 0, false
	}
	return k[:i], r, true
}

// Encode returns ev's record value (of the current Version).
func Encode(ev Event) []byte {
	ev.V = Version
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // Event holds only strings and integers
	}
	return b
}

// Decode decodes a claims topic record of a region. Any input gives an
// event or an error wrapping ErrMalformed or ErrNewerFormat, never a
// panic.
func Decode(key, value []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(value, &ev); err != nil {
		return Event{}, kwalerr.Errorf("%w: %v", ErrMalformed, err)
	}
	if ev.V > Version {
		return Event{}, kwalerr.Errorf("%w: version %d (this kwal reads up to %d)", ErrNewerFormat, ev.V, Version)
	}
	if ev.V == 0 {
		ev.V = Version
	}
	switch {
	case string(key) != string(Key(ev.Namespace, ev.Region)) || ev.Namespace == "":
		return Event{}, kwalerr.Errorf("%w: key %q for namespace %q region %d", ErrMalformed, key, ev.Namespace, ev.Region)
	case ev.Op == OpSkip:
		if ev.Skip < 0 {
			return Event{}, kwalerr.Errorf("%w: skip of offset %d", ErrMalformed, ev.Skip)
		}
		return ev, nil
	case ev.Op != OpPending && ev.Op != OpCommit && ev.Op != OpRelease:
		return Event{}, kwalerr.Errorf("%w: op %q", ErrMalformed, ev.Op)
	case ev.Epoch == 0:
		return Event{}, kwalerr.Errorf("%w: epoch 0", ErrMalformed)
	case ev.TopicID == "" || ev.Token == "":
		return Event{}, kwalerr.Errorf("%w: %s without topic ID or token", ErrMalformed, ev.Op)
	case ev.Op == OpCommit && ev.At < 0:
		return Event{}, kwalerr.Errorf("%w: commit at offset %d", ErrMalformed, ev.At)
	case ev.LeaseMS < 0:
		return Event{}, kwalerr.Errorf("%w: lease of %d ms", ErrMalformed, ev.LeaseMS)
	}
	return ev, nil
}
