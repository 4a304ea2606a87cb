// Package ledger proves what a write-ahead log did with the entries it was
// given: writers append self-describing entries (region, writer, sequence
// number and a CRC-32C in the payload itself, see Encode), the ledger
// records every call (what it carried, when it started, how long it took,
// whether it was acknowledged and at which entry IDs), and Check compares a
// replay of every region with the record.
//
// The rules Check enforces follow the logstore contract:
//
//   - every acknowledged entry is in the log exactly once, in its region, at
//     the ID its append reported (AppendResult gives the last ID of each
//     region in a call; earlier entries of that region in the call must
//     come before it);
//   - an entry whose append failed, or whose outcome is unknown (the process
//     died during the call), is in the log at most once;
//   - a writer's entries of a region appear in the order the writer
//     appended them, and IDs strictly increase in log order;
//   - nothing else is in the log: no undecodable payload, no entry that was
//     never appended, no entry in another region than its own.
//
// Violations are counted by kind (lost, duplicated, reordered, wrong ID,
// phantom) in a Report, with the first few described in words.
//
// A Ledger may journal every call to an io.Writer as JSON lines (a begin
// line before the call, an end line after it) so that a process killed in
// the middle of appends leaves a record Load can rebuild: a call with a
// begin line and no end line has an unknown outcome.
//
// The package imports only logstore, so any LogStore (and kwal's CLI) can
// use it.
package ledger

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/logstore"
)

// Outcome is what became of an append call.
type Outcome int

const (
	// Pending: begun, not ended (in flight, or the process died during it).
	Pending Outcome = iota
	// Acked: AppendBatch returned nil.
	Acked
	// Failed: AppendBatch returned an error.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Failed:
		return "failed"
	}
	return "pending"
}

// Call is one AppendBatch call as the ledger recorded it.
type Call struct {
	ID        uint64 // the ledger's own number for the call, from 1
	Namespace string
	Tags      []Tag
	// IDs holds, for every tag, the entry ID the call reported for it: for
	// the last tag of each region the region's LastEntryID, 0 (not known
	// exactly) for the others. Nil unless Outcome is Acked.
	IDs     []logstore.EntryID
	Start   time.Time
	Took    time.Duration
	Outcome Outcome
	Err     string // the error's text when Outcome is Failed
}

// End returns when the call ended (Start for a pending call).
func (c Call) End() time.Time { return c.Start.Add(c.Took) }

// Ledger records append calls; it is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	calls   []*Call
	journal io.Writer
	jerr    error
	now     func() time.Time
}

// New returns an empty ledger. journal, if not nil, receives one JSON line
// when a call begins and one when it ends (each in a single Write).
func New(journal io.Writer) *Ledger {
	return &Ledger{journal: journal, now: time.Now}
}

// Appender is what Append needs of a log store.
type Appender interface {
	AppendBatch(ctx context.Context, entries []logstore.Entry) (logstore.AppendResult, error)
}

// Append appends one entry per tag (payload of size bytes, see Encode) to
// namespace ns in a single AppendBatch call, and records the call.
func (l *Ledger) Append(ctx context.Context, s Appender, ns string, tags []Tag, size int) (logstore.AppendResult, error) {
	entries := make([]logstore.Entry, len(tags))
	for i, t := range tags {
		entries[i] = logstore.Entry{Namespace: ns, Region: t.Region, Data: Encode(t, size)}
	}
	c := l.Begin(ns, tags)
	res, err := s.AppendBatch(ctx, entries)
	l.End(c, res, err)
	return res, err
}

type journalLine struct {
	Begin uint64             `json:"b,omitempty"`
	End   uint64             `json:"e,omitempty"`
	NS    string             `json:"ns,omitempty"`
	Tags  [][3]uint64        `json:"tags,omitempty"` // region, writer, seq
	Start int64              `json:"start,omitempty"`
	IDs   []logstore.EntryID `json:"ids,omitempty"`
	Took  int64              `json:"took,omitempty"`
	Err   string             `json:"err,omitempty"`
}

// Begin records that a call carrying tags to ns starts now and returns its
// record for End.
func (l *Ledger) Begin(ns string, tags []Tag) *Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &Call{ID: uint64(len(l.calls) + 1), Namespace: ns, Tags: slices.Clone(tags), Start: l.now()}
	l.calls = append(l.calls, c)
	if l.journal != nil {
		line := journalLine{Begin: c.ID, NS: ns, Start: c.Start.UnixNano()}
		for _, t := range tags {
			line.Tags = append(line.Tags, [3]uint64{uint64(t.Region), uint64(t.Writer), t.Seq})
		}
		l.write(line)
	}
	return c
}

// End records the outcome of a call begun with Begin.
func (l *Ledger) End(c *Call, res logstore.AppendResult, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Took = l.now().Sub(c.Start)
	if err != nil {
		c.Outcome, c.Err = Failed, err.Error()
	} else {
		c.Outcome = Acked
		c.IDs = make([]logstore.EntryID, len(c.Tags))
		seen := map[logstore.RegionID]bool{}
		for i := len(c.Tags) - 1; i >= 0; i-- {
			if r := c.Tags[i].Region; !seen[r] {
				seen[r] = true
				c.IDs[i] = res.LastEntryIDs[r]
			}
		}
	}
	if l.journal != nil {
		l.write(journalLine{End: c.ID, IDs: c.IDs, Took: int64(c.Took), Err: c.Err})
	}
}

func (l *Ledger) write(line journalLine) {
	if l.jerr != nil {
		return
	}
	b, err := json.Marshal(line)
	if err == nil {
		_, err = l.journal.Write(append(b, '\n'))
	}
	if err != nil {
		l.jerr = fmt.Errorf("ledger: journal: %w", err)
	}
}

// JournalErr returns the first error writing the journal, if any.
func (l *Ledger) JournalErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.jerr
}

// Load rebuilds a ledger from journals written by New(journal), one per
// process that wrote (each numbers its calls from 1). A call whose end line
// is missing stays Pending (outcome unknown); a torn last line (the writer
// died mid-write) is ignored; any other malformed line is an error naming
// its journal and line number.
func Load(journals ...io.Reader) (*Ledger, error) {
	l := New(nil)
	for j, r := range journals {
		if err := l.load(r); err != nil {
			return nil, fmt.Errorf("ledger: journal %d: %w", j+1, err)
		}
	}
	return l, nil
}

func (l *Ledger) load(r io.Reader) error {
	byID := map[uint64]*Call{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var torn error
	for n := 1; sc.Scan(); n++ {
		if torn != nil {
			return torn // a malformed line that was not the last one
		}
		var line journalLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			torn = fmt.Errorf("line %d: %w", n, err)
			continue
		}
		switch {
		case line.Begin != 0:
			c := &Call{ID: uint64(len(l.calls) + 1), Namespace: line.NS, Start: time.Unix(0, line.Start)}
			for _, t := range line.Tags {
				c.Tags = append(c.Tags, Tag{Region: logstore.RegionID(t[0]), Writer: uint32(t[1]), Seq: t[2]})
			}
			if byID[line.Begin] != nil {
				return fmt.Errorf("line %d: call %d begins twice", n, line.Begin)
			}
			byID[line.Begin] = c
			l.calls = append(l.calls, c)
		case line.End != 0:
			c := byID[line.End]
			if c == nil {
				return fmt.Errorf("line %d: end of call %d, which never began", n, line.End)
			}
			c.Took = time.Duration(line.Took)
			if line.Err != "" {
				c.Outcome, c.Err = Failed, line.Err
			} else {
				if len(line.IDs) != len(c.Tags) {
					return fmt.Errorf("line %d: call %d has %d tags and %d IDs", n, line.End, len(c.Tags), len(line.IDs))
				}
				c.Outcome, c.IDs = Acked, line.IDs
			}
		default:
			return fmt.Errorf("line %d: neither a begin nor an end", n)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return nil
}

// Calls returns a copy of every call recorded so far, in the order they
// began.
func (l *Ledger) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Call, len(l.calls))
	for i, c := range l.calls {
		out[i] = *c
		out[i].Tags = slices.Clone(c.Tags)
		out[i].IDs = slices.Clone(c.IDs)
	}
	return out
}

// Stats summarises the calls.
type Stats struct {
	Calls, AckedCalls, FailedCalls, PendingCalls int
	// Entries by their call's outcome.
	Acked, Failed, Pending int
	// LongestCall is the longest time any ended call took (the longest
	// append stall a writer saw); LongestFailed the longest a failed call
	// took.
	LongestCall, LongestFailed time.Duration
}

// Stats returns a summary of the calls recorded so far.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s Stats
	for _, c := range l.calls {
		s.Calls++
		switch c.Outcome {
		case Acked:
			s.AckedCalls++
			s.Acked += len(c.Tags)
		case Failed:
			s.FailedCalls++
			s.Failed += len(c.Tags)
			s.LongestFailed = max(s.LongestFailed, c.Took)
		default:
			s.PendingCalls++
			s.Pending += len(c.Tags)
		}
		s.LongestCall = max(s.LongestCall, c.Took)
	}
	return s
}

// FirstAckAfter returns how long after t the first acknowledged call
// ended (the time to the first successful append after t), and false when
// no acknowledged call ended after t.
func (l *Ledger) FirstAckAfter(t time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best time.Duration
	found := false
	for _, c := range l.calls {
		if c.Outcome != Acked || !c.End().After(t) {
			continue
		}
		if d := c.End().Sub(t); !found || d < best {
			best, found = d, true
		}
	}
	return best, found
}
