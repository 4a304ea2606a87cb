package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/testutil/ledger"
)

// memLog is a one-namespace log in memory whose appends fail on demand:
// failNext makes the next call fail, with its entries written or not.
type memLog struct {
	entries  []logstore.Entry
	failNext int // 0: succeed, 1: fail and write nothing, 2: fail after writing
}

var errInjected = errors.New("injected append failure")

func (m *memLog) AppendBatch(_ context.Context, es []logstore.Entry) (logstore.AppendResult, error) {
	mode := m.failNext
	m.failNext = 0
	if mode == 1 {
		return logstore.AppendResult{}, errInjected
	}
	res := logstore.AppendResult{LastEntryIDs: map[logstore.RegionID]logstore.EntryID{}}
	for _, e := range es {
		e.ID = logstore.EntryID(len(m.entries) + 1)
		m.entries = append(m.entries, e)
		res.LastEntryIDs[e.Region] = e.ID
	}
	if mode == 2 {
		return logstore.AppendResult{}, errInjected
	}
	return res, nil
}

// replay groups a log's entries by region, as a per-region read would
// return them.
func replay(log []logstore.Entry) map[logstore.RegionID][]logstore.Entry {
	out := map[logstore.RegionID][]logstore.Entry{}
	for _, e := range log {
		out[e.Region] = append(out[e.Region], e)
	}
	return out
}

// workload appends a random workload (4 writers, 6 regions, calls of 1-3
// entries, some failing with or without writing) and returns the ledger
// and the log.
func workload(t *testing.T, seed uint64, journal *bytes.Buffer) (*ledger.Ledger, *memLog) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	var l *ledger.Ledger
	if journal != nil {
		l = ledger.New(journal)
	} else {
		l = ledger.New(nil)
	}
	m := &memLog{}
	seqs := make([]uint64, 4)
	for range 300 {
		w := rng.IntN(4)
		var tags []ledger.Tag
		for range 1 + rng.IntN(3) {
			seqs[w]++
			tags = append(tags, ledger.Tag{Region: logstore.RegionID(1 + rng.IntN(6)), Writer: uint32(w), Seq: seqs[w]})
		}
		switch p := rng.IntN(10); {
		case p == 0:
			m.failNext = 1
		case p == 1:
			m.failNext = 2
		}
		_, _ = l.Append(context.Background(), m, "ns", tags, ledger.MinPayloadSize+rng.IntN(64))
	}
	return l, m
}

// TestCheckAcceptsAFaithfulReplay protects against false alarms: over
// random workloads with failed calls (written or not), the log as written
// passes, and the counts add up.
func TestCheckAcceptsAFaithfulReplay(t *testing.T) {
	for seed := range uint64(20) {
		l, m := workload(t, seed, nil)
		rep := l.Check("ns", replay(m.entries))
		require.NoError(t, rep.Err(), "seed %d", seed)
		st := l.Stats()
		require.Equal(t, st.Acked, rep.Acked)
		require.Equal(t, st.Failed, rep.Failed)
		require.Equal(t, len(m.entries), rep.Read)
		require.Equal(t, rep.Read, rep.Acked+rep.FailedPresent, "seed %d: every entry read is acked or a failed one present once", seed)
		require.Positive(t, rep.Failed)
		require.Positive(t, rep.FailedPresent, "seed %d: the workload has failed calls that wrote", seed)
	}
}

// TestCheckCatchesViolations protects the checker's purpose: each kind of
// corruption of a faithful replay is caught and counted as what it is.
func TestCheckCatchesViolations(t *testing.T) {
	// acked returns the tags whose calls were acknowledged.
	acked := func(l *ledger.Ledger) map[ledger.Tag]bool {
		out := map[ledger.Tag]bool{}
		for _, c := range l.Calls() {
			if c.Outcome == ledger.Acked {
				for _, tg := range c.Tags {
					out[tg] = true
				}
			}
		}
		return out
	}
	tagOf := func(e logstore.Entry) ledger.Tag {
		tg, err := ledger.Decode(e.Data)
		require.NoError(t, err)
		return tg
	}
	cases := []struct {
		name   string
		mutate func(rng *rand.Rand, log []logstore.Entry, ack map[ledger.Tag]bool) []logstore.Entry
		check  func(t *testing.T, r ledger.Report)
	}{
		{"loss", func(rng *rand.Rand, log []logstore.Entry, ack map[ledger.Tag]bool) []logstore.Entry {
			for {
				i := rng.IntN(len(log))
				if ack[tagOf(log[i])] {
					return slices.Delete(log, i, i+1)
				}
			}
		}, func(t *testing.T, r ledger.Report) { require.Equal(t, 1, r.Lost) }},
		{"duplication", func(rng *rand.Rand, log []logstore.Entry, _ map[ledger.Tag]bool) []logstore.Entry {
			i := rng.IntN(len(log))
			dup := log[i]
			dup.ID = log[len(log)-1].ID + 1
			return append(log, dup)
		}, func(t *testing.T, r ledger.Report) { require.Equal(t, 1, r.Duplicated) }},
		{"reordering", func(rng *rand.Rand, log []logstore.Entry, _ map[ledger.Tag]bool) []logstore.Entry {
			// Swap the payloads of two entries of one writer and region
			// (IDs stay increasing; the writer's order breaks).
			for {
				i := rng.IntN(len(log))
				a := tagOf(log[i])
				for j := i + 1; j < len(log); j++ {
					if b := tagOf(log[j]); b.Region == a.Region && b.Writer == a.Writer {
						log[i].Data, log[j].Data = log[j].Data, log[i].Data
						return log
					}
				}
			}
		}, func(t *testing.T, r ledger.Report) {
			require.Positive(t, r.Reordered)
			require.Zero(t, r.Lost+r.Duplicated+r.Phantom)
		}},
		{"IDs out of order", func(rng *rand.Rand, log []logstore.Entry, _ map[ledger.Tag]bool) []logstore.Entry {
			for {
				i := rng.IntN(len(log))
				for j := i + 1; j < len(log); j++ {
					if log[j].Region == log[i].Region {
						log[i], log[j] = log[j], log[i]
						return log
					}
				}
			}
		}, func(t *testing.T, r ledger.Report) { require.Positive(t, r.Reordered) }},
		{"wrong ID", func(rng *rand.Rand, log []logstore.Entry, ack map[ledger.Tag]bool) []logstore.Entry {
			// Shift every ID up by one: the order is intact, the IDs are not
			// the acknowledged ones.
			for i := range log {
				log[i].ID++
			}
			return log
		}, func(t *testing.T, r ledger.Report) {
			require.Positive(t, r.WrongID)
			require.Zero(t, r.Lost+r.Duplicated+r.Phantom+r.Reordered)
		}},
		{"phantom: never appended", func(rng *rand.Rand, log []logstore.Entry, _ map[ledger.Tag]bool) []logstore.Entry {
			e := logstore.Entry{Region: 1, ID: log[len(log)-1].ID + 1, Data: ledger.Encode(ledger.Tag{Region: 1, Writer: 99, Seq: 1}, 64)}
			return append(log, e)
		}, func(t *testing.T, r ledger.Report) { require.Equal(t, 1, r.Phantom) }},
		{"phantom: corrupt payload", func(rng *rand.Rand, log []logstore.Entry, _ map[ledger.Tag]bool) []logstore.Entry {
			i := rng.IntN(len(log))
			d := slices.Clone(log[i].Data)
			d[len(d)/2] ^= 0x40
			log[i].Data = d
			return log
		}, func(t *testing.T, r ledger.Report) { require.Equal(t, 1, r.Phantom) }},
		{"phantom: another region's entry", func(rng *rand.Rand, log []logstore.Entry, _ map[ledger.Tag]bool) []logstore.Entry {
			i := rng.IntN(len(log))
			log[i].Region = log[i].Region%6 + 1
			return log
		}, func(t *testing.T, r ledger.Report) { require.Equal(t, 1, r.Phantom) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(10) {
				l, m := workload(t, seed, nil)
				rng := rand.New(rand.NewPCG(seed, 7))
				log := tc.mutate(rng, slices.Clone(m.entries), acked(l))
				rep := l.Check("ns", replay(log))
				require.ErrorIs(t, rep.Err(), ledger.ErrViolation, "seed %d", seed)
				require.NotEmpty(t, rep.Problems)
				tc.check(t, rep)
			}
		})
	}
}

// TestFailedAppendAtMostOnce protects the rule for failed appends: absent
// or once is fine, twice is a duplicate.
func TestFailedAppendAtMostOnce(t *testing.T) {
	l := ledger.New(nil)
	m := &memLog{failNext: 2}
	tag := ledger.Tag{Region: 1, Writer: 1, Seq: 1}
	_, err := l.Append(context.Background(), m, "ns", []ledger.Tag{tag}, 40)
	require.ErrorIs(t, err, errInjected)
	require.NoError(t, l.Check("ns", nil).Err(), "absent")
	require.NoError(t, l.Check("ns", replay(m.entries)).Err(), "once")
	twice := append(slices.Clone(m.entries), logstore.Entry{Region: 1, ID: 2, Data: m.entries[0].Data})
	rep := l.Check("ns", replay(twice))
	require.Equal(t, 1, rep.Duplicated)
	require.Equal(t, 1, rep.FailedPresent)
}

// TestJournalRoundTrip protects crash recovery of the ledger itself: a
// journal loads into a ledger that checks the same; a call with no end
// line is pending (at most once), and a torn last line is ignored while a
// torn line in the middle is an error.
func TestJournalRoundTrip(t *testing.T) {
	var j bytes.Buffer
	l, m := workload(t, 3, &j)
	require.NoError(t, l.JournalErr())
	loaded, err := ledger.Load(bytes.NewReader(j.Bytes()))
	require.NoError(t, err)
	want := l.Check("ns", replay(m.entries))
	got := loaded.Check("ns", replay(m.entries))
	require.NoError(t, got.Err())
	require.Equal(t, want.Acked, got.Acked)
	require.Equal(t, want.Failed, got.Failed)
	require.Equal(t, l.Stats(), loaded.Stats())

	// The process dies during a call that wrote its entry: pending, and the
	// entry's presence is fine; a torn line after it is ignored.
	c := l.Begin("ns", []ledger.Tag{{Region: 1, Writer: 9, Seq: 1}})
	_, _ = m.AppendBatch(context.Background(), []logstore.Entry{{Namespace: "ns", Region: 1, Data: ledger.Encode(c.Tags[0], 50)}})
	crashed := append(slices.Clone(j.Bytes()), []byte(`{"e":1,"ids":[`)...)
	loaded, err = ledger.Load(bytes.NewReader(crashed))
	require.NoError(t, err)
	rep := loaded.Check("ns", replay(m.entries))
	require.NoError(t, rep.Err())
	require.Equal(t, 1, rep.Pending)
	require.Equal(t, 1, loaded.Stats().PendingCalls)

	torn := append([]byte(`{"b":1,"ns":`+"\n"), j.Bytes()...)
	_, err = ledger.Load(bytes.NewReader(torn))
	require.ErrorContains(t, err, "journal 1: line 1")

	// Two processes' journals, each numbering its calls from 1, load as one
	// ledger.
	var j2 bytes.Buffer
	l2 := ledger.New(&j2)
	_, err = l2.Append(context.Background(), m, "ns", []ledger.Tag{{Region: 2, Writer: 77, Seq: 1}}, 40)
	require.NoError(t, err)
	both, err := ledger.Load(bytes.NewReader(j.Bytes()), bytes.NewReader(j2.Bytes()))
	require.NoError(t, err)
	require.Equal(t, l.Stats().Calls+1, both.Stats().Calls)
	require.NoError(t, both.Check("ns", replay(m.entries)).Err())
}

// TestPayloadRoundTrip protects the entry format: Encode then Decode gives
// the tag back at every size, and any flipped bit is caught.
func TestPayloadRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		tag := ledger.Tag{Region: logstore.RegionID(rng.Uint64()), Writer: rng.Uint32(), Seq: rng.Uint64()}
		b := ledger.Encode(tag, rng.IntN(300))
		got, err := ledger.Decode(b)
		require.NoError(t, err)
		require.Equal(t, tag, got)
		i := rng.IntN(len(b))
		b[i] ^= 1 << rng.IntN(8)
		_, err = ledger.Decode(b)
		require.ErrorIs(t, err, ledger.ErrNotLedger, "flipped bit %d of byte %d", i, len(b))
	}
}

// FuzzDecode protects the decoder against any input: an error or a tag
// that encodes back to the same bytes, never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(ledger.Encode(ledger.Tag{Region: 1, Writer: 2, Seq: 3}, 40))
	f.Add([]byte("KWLG"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tag, err := ledger.Decode(b)
		if err != nil {
			return
		}
		require.Equal(t, b[:28], ledger.Encode(tag, len(b))[:28], "the header encodes back")
	})
}

// TestVerifyReportsReadErrors protects Verify: a read error ends it with
// the region named.
func TestVerifyReportsReadErrors(t *testing.T) {
	l := ledger.New(nil)
	m := &memLog{}
	_, err := l.Append(context.Background(), m, "ns", []ledger.Tag{{Region: 4, Writer: 1, Seq: 1}}, 40)
	require.NoError(t, err)
	boom := errors.New("boom")
	_, err = l.Verify("ns", func(logstore.RegionID) iter.Seq2[logstore.Entry, error] {
		return func(yield func(logstore.Entry, error) bool) { yield(logstore.Entry{}, boom) }
	})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "region 4")
	rep, err := l.Verify("ns", func(r logstore.RegionID) iter.Seq2[logstore.Entry, error] {
		return func(yield func(logstore.Entry, error) bool) {
			for _, e := range replay(m.entries)[r] {
				if !yield(e, nil) {
					return
				}
			}
		}
	})
	require.NoError(t, err)
	require.NoError(t, rep.Err())
	require.Equal(t, 1, rep.Acked)
}
