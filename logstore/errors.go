package logstore

import "fmt"

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
		return fmt.Sprintf("logstore: namespace %q: entries from the log's beginning were pruned; the first ID still available is %d",
			e.Namespace, e.FirstAvailable)
	}
	return fmt.Sprintf("logstore: namespace %q: entries from ID %d were pruned; the first ID still available is %d",
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
	return fmt.Sprintf("logstore: namespace %q: corrupt record at offset %d: %v", e.Namespace, e.Offset, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }
