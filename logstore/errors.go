package logstore

import (
	"fmt"
	"strings"
)

// PrunedError reports a read that asked for entries no longer in the log.
// It matches ErrPruned with errors.Is.
type PrunedError struct {
	Namespace string
	// Requested is the first ID the read asked for.
	Requested EntryID
	// FirstAvailable is the lowest ID the log still holds.
	FirstAvailable EntryID
}

func (e *PrunedError) Error() string {
	if e.Requested == 0 { // ID 0 is "none": the read asked for everything
		return fmt.Sprintf("kwal: namespace %q: entries from the log's beginning were pruned; the first ID still available is %d",
			e.Namespace, e.FirstAvailable)
	}
	return fmt.Sprintf("kwal: namespace %q: entries from ID %d were pruned; the first ID still available is %d",
		e.Namespace, e.Requested, e.FirstAvailable)
}

// Is makes errors.Is(err, ErrPruned) true.
func (e *PrunedError) Is(target error) bool { return target == ErrPruned }

// CorruptError reports a record that could not be decoded or failed its
// checksum. It matches ErrCorrupt with errors.Is, and unwraps to the cause.
type CorruptError struct {
	Namespace string
	// Offset is the record's position in the log (for the Kafka store, the
	// Kafka offset; the record's entry ID would be Offset+1).
	Offset int64
	Err    error
}

func (e *CorruptError) Error() string {
	// The cause is shown without a "kwal: " of its own: the text says it
	// once, at its start.
	return fmt.Sprintf("kwal: namespace %q: corrupt record at offset %d: %s", e.Namespace, e.Offset, strings.TrimPrefix(fmt.Sprint(e.Err), "kwal: "))
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// MissingError reports offsets that the log should hold but does not: a
// gap between the records of the range a read covered (records deleted
// from the middle of the log, by compaction or damage), or records that an
// index knew of and the log no longer has (a truncated log, lost broker
// data, a topic recreated under the store). Entries there are lost; the
// read does not go on as if they never existed. It matches ErrCorrupt with
// errors.Is.
type MissingError struct {
	Namespace string
	// From and To bound the missing offsets: [From, To).
	From, To int64
	// Why says how the read found out.
	Why string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("kwal: namespace %q: offsets [%d, %d) are missing from the log: %s", e.Namespace, e.From, e.To, e.Why)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *MissingError) Is(target error) bool { return target == ErrCorrupt }
