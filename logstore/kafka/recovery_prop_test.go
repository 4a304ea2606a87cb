package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/rawlog"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// readTimeout is how long one read of a log of logBytes (entry data) may
// take before the tests of this file call it hung: a minute, and a second
// more per 32 MiB it may have to fetch and decode.
func readTimeout(logBytes int64) time.Duration {
	return time.Minute + time.Duration(logBytes/(32<<20))*time.Second
}

// drainRead runs read to its end in a goroutine of its own under a context
// of timeout, handing each entry to each (which must not call t's methods
// that stop the goroutine; an error it returns ends the read). It returns
// how many entries each took. A read that fails, or whose each fails,
// fails the test naming what; a read that does not end within timeout (a
// hang) fails it with how many entries it yielded, rather than hanging the
// suite.
func drainRead(t testing.TB, what string, timeout time.Duration, read func(context.Context) iter.Seq2[logstore.Entry, error], each func(logstore.Entry) error) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		var err error
		for e, rerr := range read(ctx) {
			if rerr != nil {
				err = rerr
				break
			}
			if err = each(e); err != nil {
				break
			}
			n.Add(1)
		}
		done <- err
	}()
	hung := func(err error) {
		t.Helper()
		t.Fatalf("%s: the read did not end within %v: it hung after %d entries (cancelled, it returned %v)", what, timeout, n.Load(), err)
	}
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			hung(err)
		}
		require.NoError(t, err, "%s: after %d entries", what, n.Load())
	case <-ctx.Done():
		// Give the read a little time to honour its cancelled context, so
		// that it does not outlive the test when it does.
		grace := time.NewTimer(10 * time.Second)
		defer grace.Stop()
		select {
		case err := <-done:
			hung(err)
		case <-grace.C:
			t.Fatalf("%s: the read did not end within %v: it hung after %d entries, and went on after its context was cancelled", what, timeout, n.Load())
		}
	}
	return int(n.Load())
}

// repeatedPattern is what entry i of TestCompressibleEntriesReplayEnds
// repeats: 24 bytes that name i.
func repeatedPattern(i int) []byte { return fmt.Appendf(nil, "%08d:lz4-likes-this|", i) }

// repeatedData is entry i of TestCompressibleEntriesReplayEnds: size bytes
// repeating its pattern (lz4 shrinks them about 100 times).
func repeatedData(i, size int) []byte {
	p := repeatedPattern(i)
	return bytes.Repeat(p, size/len(p)+1)[:size]
}

// checkRepeated reports whether data is repeatedData(i, size), comparing
// in blocks (a byte loop is slow under the race detector).
func checkRepeated(data []byte, i, size int) error {
	if len(data) != size {
		return fmt.Errorf("%d bytes, %d appended", len(data), size)
	}
	p := len(repeatedPattern(i))
	block := repeatedData(i, 64<<10-(64<<10)%p)
	for off := 0; off < len(data); off += len(block) {
		end := min(off+len(block), len(data))
		if !bytes.Equal(data[off:end], block[:end-off]) {
			return fmt.Errorf("bytes %d..%d differ from those appended (begin %q)", off, end, data[off:min(off+p, end)])
		}
	}
	return nil
}

// TestCompressibleEntriesReplayEnds protects every read's end on a log of
// entries that compress far better than the read can guess: region 1
// appends entries of 0.9 to 2.5 MiB of repeated bytes (lz4, the default
// codec, shrinks them about 100 times, so that a 1 MiB part becomes a
// batch of a few KiB) while region 2 of the same namespace appends
// 100-byte entries, at once. A scan of region 1 on the writer
// (NoIndex) and an indexed Read on a fresh store must end, and return
// every acknowledged entry of the region exactly once, in ID order,
// byte-identical. Each read runs under a timeout, so that a hang fails the
// test with how far the read got. (Region 2's entries are what the reads
// of region 1 skip; each read of this log moves its 480 MB through the
// decoder, about 15 s under the race detector, so region 2 is not read
// here.) On the read path before this test, the scan of region 1 hung
// after 110 to 180 entries (of 300 appended).
func TestCompressibleEntriesReplayEnds(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	w := openStore(t, brokers, nil) // DefaultConfig: lz4, 1 MiB batches
	require.Equal(t, "lz4", kafka.DefaultConfig().Compression)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, w.CreateNamespace(ctx, topic))

	const large = 300
	rng := rand.New(rand.NewPCG(32, 1))
	sizes := make([]int, large)
	var total int64
	for i := range sizes {
		sizes[i] = 900<<10 + rng.IntN(1600<<10+1)
		total += int64(sizes[i])
	}
	// Region 1's entries, two goroutines appending every other one, each
	// with the ID its call reported.
	type acked struct {
		id logstore.EntryID
		i  int
	}
	var region1 [2][]acked
	region2 := 0
	stop := make(chan struct{})
	var writers, wg sync.WaitGroup
	start := time.Now()
	for g := range region1 {
		writers.Go(func() {
			for i := g; i < len(sizes); i += len(region1) {
				res, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: repeatedData(i, sizes[i])}})
				if err != nil {
					t.Errorf("region 1: append %d: %v", i, err)
					return
				}
				region1[g] = append(region1[g], acked{res.LastEntryIDs[1], i})
			}
		})
	}
	wg.Go(func() {
		defer close(stop)
		writers.Wait()
	})
	wg.Go(func() {
		for ; ; region2++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 2, Data: repeatedData(region2, 100)}}); err != nil {
				t.Errorf("region 2: append %d: %v", region2, err)
				return
			}
		}
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	byID := slices.Concat(region1[0], region1[1])
	slices.SortFunc(byID, func(a, b acked) int { return int(a.id) - int(b.id) })
	t.Logf("appended %d entries (%d MiB) to region 1 and %d of 100 bytes to region 2 in %v", len(byID), total>>20, region2, time.Since(start).Round(time.Millisecond))

	fresh := openStore(t, brokers, nil)
	for _, rd := range []struct {
		what string
		read func(context.Context) iter.Seq2[logstore.Entry, error]
	}{
		{"region 1, scan (ReadWith NoIndex) on the writer", func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
			return w.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{1: 0}, kafka.ReadOptions{NoIndex: true})
		}},
		{"region 1, indexed Read on a fresh store", func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
			return fresh.Read(ctx, topic, 1, 0)
		}},
	} {
		k := 0
		start = time.Now()
		n := drainRead(t, rd.what, readTimeout(total), rd.read, func(e logstore.Entry) error {
			if k >= len(byID) {
				return fmt.Errorf("entry %d (ID %d): more entries than the %d acknowledged", k, e.ID, len(byID))
			}
			want := byID[k]
			if e.ID != want.id || e.Region != 1 {
				return fmt.Errorf("entry %d: ID %d of region %d, appended as ID %d of region 1 (an entry lost, repeated or out of order)", k, e.ID, e.Region, want.id)
			}
			if err := checkRepeated(e.Data, want.i, sizes[want.i]); err != nil {
				return fmt.Errorf("entry %d (ID %d): %w", k, e.ID, err)
			}
			k++
			return nil
		})
		require.Equal(t, len(byID), n, "%s: entries returned, of those acknowledged", rd.what)
		t.Logf("%s: %d entries in %v", rd.what, n, time.Since(start).Round(time.Millisecond))
	}
}

// randomBytes returns n bytes of ChaCha8 keyed by a and b (faster than
// payload under the race detector, for entries of megabytes).
func randomBytes(a, b uint64, n int) []byte {
	var k [32]byte
	binary.BigEndian.PutUint64(k[:], a)
	binary.BigEndian.PutUint64(k[8:], b)
	d := make([]byte, n)
	_, _ = rand.NewChaCha8(k).Read(d)
	return d
}

// rawPart is a record of the log as the record codec decodes its key,
// without its data.
type rawPart struct {
	offset int64
	record.Header
}

// rawParts reads every record of topic with a plain franz-go consumer,
// independently of kwal's read path, and decodes their keys (checking
// their record CRCs).
func rawParts(t testing.TB, brokers []string, topic string) []rawPart {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var out []rawPart
	var derr error
	_, _, err = rawlog.Consume(ctx, cl, topic, 0, 20*time.Second, func(r *kgo.Record) bool {
		p, err := record.Decode(r.Key, r.Value)
		if err != nil {
			derr = fmt.Errorf("offset %d: %w", r.Offset, err)
			return false
		}
		out = append(out, rawPart{offset: r.Offset, Header: p.Header})
		return true
	})
	require.NoError(t, err)
	require.NoError(t, derr)
	return out
}

// rawSpan is an entry whose parts the log holds complete, as the raw
// records show it: its region, its writer's epoch, and the offsets of its
// first and last part.
type rawSpan struct {
	region      uint64
	epoch       uint64
	first, last int64
}

// rawLayout is what the raw records say of a log's claims and entries.
type rawLayout struct {
	parts []rawPart
	// claimAt is the offset of each claim record, by region and epoch.
	claimAt map[[2]uint64]int64
	// spans are the complete entries, split or whole, in the order of
	// their last parts (a first part opens an entry of its region and
	// epoch, the parts that follow in order complete it).
	spans []rawSpan
}

func layoutOf(parts []rawPart) rawLayout {
	l := rawLayout{parts: parts, claimAt: make(map[[2]uint64]int64)}
	type key struct{ region, epoch uint64 }
	open := make(map[key]rawPart)
	next := make(map[key]uint32)
	for _, p := range parts {
		k := key{p.Region, p.Epoch}
		switch p.Kind {
		case record.KindClaim:
			l.claimAt[[2]uint64{p.Region, p.Epoch}] = p.offset
		case record.KindWhole:
			l.spans = append(l.spans, rawSpan{p.Region, p.Epoch, p.offset, p.offset})
		case record.KindFirst:
			open[k], next[k] = p, 1
		case record.KindMiddle, record.KindLast:
			o, ok := open[k]
			if !ok || o.Size != p.Size || o.EntryCRC != p.EntryCRC || p.Seq != next[k] {
				continue // a duplicate, or a part of an entry never completed
			}
			next[k]++
			if p.Kind == record.KindLast {
				l.spans = append(l.spans, rawSpan{p.Region, p.Epoch, o.offset, p.offset})
				delete(open, k)
			}
		}
	}
	return l
}

// straddling counts region's entries of epochs below epoch whose parts lie
// on both sides of offset at: entries whose writer was between parts when
// a claim record landed there.
func (l rawLayout) straddling(region, epoch uint64, at int64) int {
	n := 0
	for _, s := range l.spans {
		if s.region == region && s.epoch < epoch && s.first < at && at < s.last {
			n++
		}
	}
	return n
}

// TestOldOwnerBetweenPartsCostsNothing protects the new owner's entries
// from an old owner that missed the claim: A claims region r and appends,
// B claims r (strict fencing), and A, which does not look at the claims
// topic before acknowledging (Fencing "off"), keeps appending small
// entries to r while B appends 24 entries of 2.5 MiB, three parts each.
// A's records land between the parts of B's entries; they are fenced (an
// older epoch above B's claim), and must cost B nothing: every replay of
// r, B's own (indexed and NoIndex) and a fresh store's, returns A's
// entries acknowledged before the claim (their last is the claim's
// SealedID), then every entry B acknowledged, in order, byte-identical,
// and none of A's entries written after the claim. Before this test the
// replays returned between none and half of B's 24 entries: A's records
// between parts made the reader abandon B's open entries.
func TestOldOwnerBetweenPartsCostsNothing(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := openStore(t, brokers, func(c *kafka.Config) {
		c.Owner, c.ClaimsTopic, c.Fencing = "a", claims, kafka.FencingOff
	})
	b := openStore(t, brokers, func(c *kafka.Config) {
		c.Owner, c.ClaimsTopic, c.Compression = "b", claims, "none" // random data: the parts really split
	})
	require.Equal(t, kafka.FencingStrict, kafka.DefaultConfig().Fencing)
	const r = logstore.RegionID(5)
	const entries, size = 24, 5 << 19 // 2.5 MiB: three parts of at most 1 MiB
	require.NoError(t, a.CreateNamespace(ctx, topic))
	ca, err := a.Claim(ctx, topic, r)
	require.NoError(t, err)

	type acked struct {
		id   logstore.EntryID
		data []byte
	}
	var before []acked
	for i := range 4 {
		d := fmt.Appendf(nil, "a before the claim %d", i)
		res, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: d}})
		require.NoError(t, err)
		before = append(before, acked{res.LastEntryIDs[r], d})
	}
	cb, err := b.Claim(ctx, topic, r)
	require.NoError(t, err)
	require.Greater(t, cb.Epoch, ca.Epoch)
	require.Equal(t, before[len(before)-1].id, cb.SealedID, "nothing was in flight: the sealed ID is A's last acknowledged entry")

	// A goes on appending (a call at a time) until B is done; B starts
	// once A's first call after the claim returned.
	const zombiePrefix = "a after the claim "
	var zombieAcked, zombieFailed int
	zombieIDs := make(map[logstore.EntryID]bool)
	stop, going := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			if i == 1 {
				close(going)
			}
			select {
			case <-stop:
				return
			default:
			}
			res, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: fmt.Appendf(nil, "%s%d", zombiePrefix, i)}})
			if err != nil {
				// Maybe written. Once A learned of the claim (ErrFenced
				// before writing) it writes nothing more.
				zombieFailed++
				if errors.Is(err, kafka.ErrFenced) {
					return
				}
				continue
			}
			zombieAcked++
			zombieIDs[res.LastEntryIDs[r]] = true
		}
	})
	<-going
	bData := func(i int) []byte { return randomBytes(5, uint64(i), size) }
	var bIDs []logstore.EntryID
	for i := range entries {
		res, err := b.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: bData(i)}})
		require.NoError(t, err, "B's append %d: the owner's appends are acknowledged", i)
		bIDs = append(bIDs, res.LastEntryIDs[r])
	}
	close(stop)
	wg.Wait()

	l := layoutOf(rawParts(t, brokers, topic))
	at, ok := l.claimAt[[2]uint64{uint64(r), cb.Epoch}]
	require.True(t, ok, "B's claim record is in the log")
	between := 0
	for _, s := range l.spans {
		if s.region != uint64(r) || s.epoch != cb.Epoch || s.first == s.last {
			continue
		}
		for _, p := range l.parts {
			if p.offset > s.first && p.offset < s.last && p.Region == uint64(r) && p.Epoch < cb.Epoch {
				between++
				break
			}
		}
	}
	t.Logf("A appended %d entries after B's claim (%d acknowledged, %d failed); %d of B's %d entries have A's records between their parts; claim record at offset %d",
		zombieAcked+zombieFailed, zombieAcked, zombieFailed, between, entries, at)

	fresh := openStore(t, brokers, func(c *kafka.Config) { c.ClaimsTopic = claims })
	// wantData gives the data of every entry a replay must return, by ID.
	wantData := make(map[logstore.EntryID]func() []byte)
	for _, w := range before {
		wantData[w.id] = func() []byte { return w.data }
	}
	for i, id := range bIDs {
		wantData[id] = func() []byte { return bData(i) }
	}
	for _, rd := range []struct {
		what string
		s    *kafka.LogStore
		opts kafka.ReadOptions
	}{
		{"B, indexed read", b, kafka.ReadOptions{}},
		{"B, scan (NoIndex)", b, kafka.ReadOptions{NoIndex: true}},
		{"fresh store, indexed read", fresh, kafka.ReadOptions{}},
		{"fresh store, scan (NoIndex)", fresh, kafka.ReadOptions{NoIndex: true}},
	} {
		var st kafka.ReadStats
		rd.opts.Stats = &st
		var last logstore.EntryID
		got := make(map[logstore.EntryID]bool)
		var zombies []logstore.EntryID
		drainRead(t, rd.what, readTimeout(entries*size), func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
			return rd.s.ReadWith(ctx, topic, map[logstore.RegionID]logstore.EntryID{r: 0}, rd.opts)
		}, func(e logstore.Entry) error {
			if e.ID <= last {
				return fmt.Errorf("entry ID %d after ID %d: not in ID order", e.ID, last)
			}
			last = e.ID
			if zombieIDs[e.ID] || bytes.HasPrefix(e.Data, []byte(zombiePrefix)) {
				zombies = append(zombies, e.ID)
				return nil
			}
			data, ok := wantData[e.ID]
			if !ok {
				return fmt.Errorf("entry ID %d (%d bytes %.24q): nobody appended it", e.ID, len(e.Data), e.Data)
			}
			if !bytes.Equal(e.Data, data()) {
				return fmt.Errorf("entry ID %d: its %d bytes differ from those appended", e.ID, len(e.Data))
			}
			got[e.ID] = true
			return nil
		})
		gotBefore, gotB := 0, 0
		for _, w := range before {
			if got[w.id] {
				gotBefore++
			}
		}
		for _, id := range bIDs {
			if got[id] {
				gotB++
			}
		}
		assert.Empty(t, zombies, "%s: returned A's entries appended after B's claim (SealedID %d)", rd.what, cb.SealedID)
		assert.Equal(t, len(before), gotBefore, "%s: A's entries acknowledged before the claim returned", rd.what)
		assert.Equal(t, entries, gotB, "%s: B's acknowledged entries returned (A's records lie between the parts of %d of them)", rd.what, between)
		t.Logf("%s: %d of B's %d entries; %d fenced records skipped", rd.what, gotB, entries, st.Fenced)
	}
}

// readAllWithin drains a read like collect, under drainRead's hang
// detection.
func readAllWithin(t testing.TB, what string, timeout time.Duration, read func(context.Context) iter.Seq2[logstore.Entry, error]) []logstore.Entry {
	t.Helper()
	var out []logstore.Entry
	drainRead(t, what, timeout, read, func(e logstore.Entry) error {
		out = append(out, e)
		return nil
	})
	return out
}

// replayKinds are the reads a replay check makes of a store: an indexed
// read and a scan, of one region or several at once.
var replayKinds = []struct {
	name string
	opts kafka.ReadOptions
}{{"indexed", kafka.ReadOptions{}}, {"scan (NoIndex)", kafka.ReadOptions{NoIndex: true}}}

// TestSealedIDAgreesWithReplay protects Claim.SealedID's meaning when the
// old owner was between the parts of a split entry as the claim landed:
// SealedID is exactly the region's last entry below the claim record that
// every replay returns, and every replay (indexed or not, of the region or
// of several, on any store) agrees with it. The first cases write the
// straddling entry (its first parts below the claim record, the rest
// above) by hand, deterministically: the old owner never claimed (epoch
// 0) or claimed (epoch 1), one or two of its three parts below the claim,
// the rest written after the claim returned. A replay between the two
// returns the entries up to the one before it, so SealedID is that one,
// and no later replay may return the straddling entry: its parts above
// the claim are an older epoch's, fenced. "real writer" has an old owner
// that missed the claim append split entries through AppendBatch while
// the new owner claims four regions, and checks the same agreement
// however each claim landed. Before this test, replays returned the
// straddling entry once it was complete, above its claim's SealedID.
func TestSealedIDAgreesWithReplay(t *testing.T) {
	t.Parallel()
	for _, claimed := range []bool{false, true} {
		for _, below := range []int{1, 2} {
			t.Run(fmt.Sprintf("claimed=%v/parts_below=%d", claimed, below), func(t *testing.T) {
				t.Parallel()
				sealedAcrossHandWrittenStraddle(t, claimed, below)
			})
		}
	}
	t.Run("real writer", func(t *testing.T) {
		t.Parallel()
		sealedAcrossWriter(t)
	})
}

func sealedAcrossHandWrittenStraddle(t *testing.T, claimed bool, below int) {
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const batch = 64 << 10
	open := func(owner string) *kafka.LogStore {
		return openStore(t, brokers, func(c *kafka.Config) {
			c.Owner, c.ClaimsTopic, c.MaxBatchBytes = owner, claims, batch
		})
	}
	a, b := open("a"), open("b")
	const r = logstore.RegionID(9)
	require.NoError(t, a.CreateNamespace(ctx, topic))
	var epoch uint64
	if claimed {
		c, err := a.Claim(ctx, topic, r)
		require.NoError(t, err)
		epoch = c.Epoch
	}
	var want []logstore.Entry
	add := func(s *kafka.LogStore, d string) {
		t.Helper()
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte(d)}})
		require.NoError(t, err)
		want = append(want, logstore.Entry{Namespace: topic, Region: r, ID: res.LastEntryIDs[r], Data: []byte(d)})
	}
	add(a, "a1")
	add(a, "a2")
	// A's next entry, three parts of A's epoch, as A's producer would
	// write them; the claim record lands after the first below.
	parts, err := record.Split(uint64(r), payload(rand.New(rand.NewPCG(9, uint64(below))), 2*batch+batch/2), batch)
	require.NoError(t, err)
	require.Len(t, parts, 3)
	recs := make([]*kgo.Record, len(parts))
	for i := range parts {
		parts[i].Epoch = epoch
		recs[i] = &kgo.Record{Topic: topic, Key: parts[i].Key(), Value: parts[i].Data}
	}
	rawProduce(t, brokers, recs[:below]...)
	c, err := b.Claim(ctx, topic, r)
	require.NoError(t, err)
	// Between the claim and the rest of the entry, a replay returns A's
	// entries up to a2 (the straddling one is incomplete): SealedID is a2,
	// and since it is what every replay returns below the claim, no later
	// replay may return the straddling entry either.
	require.Equal(t, want[1].ID, c.SealedID, "SealedID is A's last entry below the claim")
	require.Equal(t, entrySummaries(want), entrySummaries(readAllWithin(t, "B, read between the claim and the rest of the straddling entry", readTimeout(0),
		func(ctx context.Context) iter.Seq2[logstore.Entry, error] { return b.Read(ctx, topic, r, 0) })))
	rawProduce(t, brokers, recs[below:]...)
	add(b, "b1")
	add(b, "b2")

	l := layoutOf(rawParts(t, brokers, topic))
	at, ok := l.claimAt[[2]uint64{uint64(r), c.Epoch}]
	require.True(t, ok, "B's claim record is in the log")
	require.Equal(t, 1, l.straddling(uint64(r), c.Epoch, at), "the entry straddles the claim record")

	fresh := open("fresh")
	for _, s := range []struct {
		name string
		s    *kafka.LogStore
	}{{"A", a}, {"B", b}, {"fresh store", fresh}} {
		for _, k := range replayKinds {
			for _, from := range []map[logstore.RegionID]logstore.EntryID{{r: 0}, {r: 0, 10: 0}} {
				what := fmt.Sprintf("%s, %s read of %d region(s)", s.name, k.name, len(from))
				got := readAllWithin(t, what, readTimeout(0), func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
					return s.s.ReadWith(ctx, topic, from, k.opts)
				})
				var lastBelow logstore.EntryID
				for _, e := range got {
					if int64(e.ID) <= at {
						lastBelow = e.ID
					}
				}
				require.Equal(t, c.SealedID, lastBelow, "%s: SealedID is the last entry below the claim record (offset %d) that replay returns", what, at)
				require.Equal(t, entrySummaries(want), entrySummaries(got), "%s", what)
			}
		}
	}
}

// entrySummaries names entries by ID, region, size and the start of their
// data, for comparisons that print readably.
func entrySummaries(es []logstore.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("ID %d region %d: %d bytes %.16q", e.ID, e.Region, len(e.Data), e.Data)
	}
	return out
}

func sealedAcrossWriter(t *testing.T) {
	brokers := testutil.Brokers(t)
	topic := newTopic(t)
	claims := topic + "-claims"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const batch, size = 64 << 10, 2*(64<<10) + 1000 // three parts
	open := func(owner, fencing string) *kafka.LogStore {
		return openStore(t, brokers, func(c *kafka.Config) {
			c.Owner, c.ClaimsTopic, c.MaxBatchBytes, c.Compression, c.Fencing = owner, claims, batch, "none", fencing
		})
	}
	a, b := open("a", kafka.FencingOff), open("b", kafka.FencingStrict)
	require.NoError(t, a.CreateNamespace(ctx, topic))
	const regions = 4
	type aEntry struct {
		id    logstore.EntryID // 0: the call failed (maybe written)
		data  []byte
		after bool // appended after B's claim returned
	}
	type regionRun struct {
		a      []aEntry
		b      []logstore.Entry
		claim  kafka.Claim
		errs   []error
		marker chan struct{} // closed once A acknowledged two entries
		stop   chan struct{} // closed once B is done
	}
	runs := make([]*regionRun, regions)
	var wg sync.WaitGroup
	for i := range runs {
		r := logstore.RegionID(i + 1)
		_, err := a.Claim(ctx, topic, r)
		require.NoError(t, err)
		run := &regionRun{marker: make(chan struct{}), stop: make(chan struct{})}
		runs[i] = run
		claimed := make(chan struct{})
		wg.Go(func() { // A, the old owner, appends split entries until B is done
			for n := 0; ; n++ {
				if n == 2 {
					close(run.marker)
				}
				var after bool
				select {
				case <-run.stop:
					return
				case <-claimed:
					after = true
				default:
				}
				d := randomBytes(10, uint64(r)<<32|uint64(n), size)
				res, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: d}})
				run.a = append(run.a, aEntry{id: res.LastEntryIDs[r], data: d, after: after})
				if errors.Is(err, kafka.ErrFenced) {
					return // A learned of the claim: it writes nothing more
				}
			}
		})
		wg.Go(func() { // B claims once A is under way, then appends
			defer close(run.stop)
			<-run.marker
			c, err := b.Claim(ctx, topic, r)
			close(claimed)
			if err != nil {
				run.errs = append(run.errs, err)
				return
			}
			run.claim = c
			for j := range 2 {
				d := fmt.Appendf(nil, "b%d of region %d", j, r)
				res, err := b.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: d}})
				if err != nil {
					run.errs = append(run.errs, err)
					return
				}
				run.b = append(run.b, logstore.Entry{Namespace: topic, Region: r, ID: res.LastEntryIDs[r], Data: d})
			}
		})
	}
	wg.Wait()
	for i, run := range runs {
		require.Empty(t, run.errs, "region %d: B's claim and appends", i+1)
	}

	l := layoutOf(rawParts(t, brokers, topic))
	fresh := open("fresh", kafka.FencingStrict)
	straddles := 0
	from := make(map[logstore.RegionID]logstore.EntryID)
	for i := range runs {
		from[logstore.RegionID(i+1)] = 0
	}
	for _, s := range []struct {
		name string
		s    *kafka.LogStore
	}{{"B", b}, {"fresh store", fresh}} {
		for _, k := range replayKinds {
			what := fmt.Sprintf("%s, %s read of the %d regions", s.name, k.name, regions)
			got := readAllWithin(t, what, readTimeout(0), func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
				return s.s.ReadWith(ctx, topic, from, k.opts)
			})
			byRegion := make(map[logstore.RegionID][]logstore.Entry)
			for _, e := range got {
				byRegion[e.Region] = append(byRegion[e.Region], e)
			}
			for i, run := range runs {
				r := logstore.RegionID(i + 1)
				at, ok := l.claimAt[[2]uint64{uint64(r), run.claim.Epoch}]
				require.True(t, ok, "region %d: B's claim record is in the log", r)
				if s.name == "B" && !k.opts.NoIndex {
					straddles += l.straddling(uint64(r), run.claim.Epoch, at)
				}
				// What replay must return: A's acknowledged entries up to
				// SealedID, A's failed calls' entries as found (each at most
				// once, below the claim), then B's entries.
				var want []logstore.Entry
				maybe := make(map[string]bool)
				for _, e := range run.a {
					switch {
					case e.id == 0:
						maybe[string(e.data)] = true
					case e.id <= run.claim.SealedID:
						want = append(want, logstore.Entry{Namespace: topic, Region: r, ID: e.id, Data: e.data})
					}
				}
				var gotA, gotMaybe []logstore.Entry
				var lastBelow logstore.EntryID
				for _, e := range byRegion[r] {
					if int64(e.ID) <= at {
						lastBelow = e.ID
					}
					switch {
					case maybe[string(e.Data)]:
						require.LessOrEqual(t, e.ID, run.claim.SealedID, "%s: region %d: A's failed call's entry returned above SealedID", what, r)
						delete(maybe, string(e.Data))
						gotMaybe = append(gotMaybe, e)
					case int64(e.ID) <= at:
						gotA = append(gotA, e)
					}
				}
				require.Equal(t, run.claim.SealedID, lastBelow, "%s: region %d: SealedID is the last entry below the claim record (offset %d) that replay returns", what, r, at)
				require.Equal(t, entrySummaries(want), entrySummaries(gotA), "%s: region %d: A's entries (SealedID %d)", what, r, run.claim.SealedID)
				require.Equal(t, entrySummaries(run.b), entrySummaries(byRegion[r][len(gotA)+len(gotMaybe):]), "%s: region %d: B's entries after A's", what, r)
			}
		}
	}
	t.Logf("%d of the %d claims landed between the parts of an entry of A", straddles, regions)
}

// The generative recovery test: a random workload through the real write
// path, then every kind of read against a model of what was acknowledged.

// genHeaderLen is the header every entry of the generative test of at
// least this size begins with: "KG", the writer (uint16), the region, the
// writer's sequence number, the entry's size (uint32 each) and its payload
// kind, so that a replayed entry names what it must be.
const genHeaderLen = 17

// Payload kinds: how well an entry compresses.
const (
	genZeros  = 0
	genText   = 1
	genRandom = 2
)

var genWords = []string{"region ", "flush ", "put ", "k=", "v=", "ts=1733212800000 ", "host=h07 ", "cpu=12.25 ", "mem=40.5\n", "delete ", "memtable ", "sst ", "wal "}

// genPayload is writer w's entry seq of region r: a header, then the
// payload of the kind; an entry shorter than the header is that many
// bytes of its own (such an entry is known by its ID).
func genPayload(seed uint64, w uint16, r logstore.RegionID, seq uint32, size int, kind byte) []byte {
	var k [32]byte
	binary.BigEndian.PutUint64(k[0:], seed)
	binary.BigEndian.PutUint64(k[8:], uint64(w))
	binary.BigEndian.PutUint64(k[16:], uint64(seq))
	src := rand.NewChaCha8(k)
	d := make([]byte, size)
	if size < genHeaderLen {
		_, _ = src.Read(d)
		return d
	}
	copy(d, "KG")
	binary.BigEndian.PutUint16(d[2:], w)
	binary.BigEndian.PutUint32(d[4:], uint32(r))
	binary.BigEndian.PutUint32(d[8:], seq)
	binary.BigEndian.PutUint32(d[12:], uint32(size))
	d[16] = kind
	body := d[genHeaderLen:]
	switch kind {
	case genText:
		rng := rand.New(src)
		for i := 0; i < len(body); {
			i += copy(body[i:], genWords[rng.IntN(len(genWords))])
		}
	case genRandom:
		_, _ = src.Read(body)
	}
	return d
}

// genStore is one of the run's stores.
type genStore struct {
	name    string
	s       *kafka.LogStore
	fencing string
	codec   string
	claims  int // claims it made (each reads the region's history)
}

// genEntry is an entry a writer appended (or tried to).
type genEntry struct {
	w      *genWriter
	seq    uint32
	region logstore.RegionID
	data   []byte
	acked  bool
	doomed bool
	// id is the entry's ID when its call was acknowledged with it as its
	// region's last entry (0: unknown).
	id logstore.EntryID
}

// genWriter is one goroutine appending with one store.
type genWriter struct {
	g     *genRun
	id    uint16
	name  string
	store *genStore
	rng   *rand.Rand
	seq   uint32
	// entries, in the order appended; unexpected are outcomes the rules
	// forbid (reported once the workload ended).
	entries    []*genEntry
	unexpected []string
	calls      int
	failed     int
}

// genClaim is a claim of a region the run made.
type genClaim struct {
	by     *genStore
	epoch  uint64
	sealed logstore.EntryID
	// older are the stores that wrote the region before the claim, under
	// older epochs: the claim fences them.
	older []*genStore
}

// genRegion is one region of the run and what happens to it: "plain" (one
// store writes it, nobody claims it), "handover" (z writes it, a claims it
// while z goes on writing) or "double" (then b claims it from a while a
// writes).
type genRegion struct {
	id     logstore.RegionID
	plan   string
	claims []*genClaim
	// fencedBy is, per store that wrote the region, the first claim that
	// outranked it.
	fencedBy map[*genStore]*genClaim
}

// genRun is one seed's run.
type genRun struct {
	seed            uint64
	topic           string
	batch, maxEntry int
	hold, fetch     int64
	lanes           int
	stores          map[string]*genStore
	regions         []*genRegion
	writers         []*genWriter
	byKey           map[[2]uint32]*genEntry
	tiny            map[[2]uint64]*genEntry
	bytes           int64
}

// claim claims region r for st. A claim reads the region's history (its
// sealed ID): it must end within a read's timeout, like any read.
func (g *genRun) claim(ctx context.Context, st *genStore, r logstore.RegionID) (kafka.Claim, error) {
	timeout := readTimeout(g.maxBytes())
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := st.s.Claim(cctx, g.topic, r)
	switch {
	case err != nil && ctx.Err() == nil && cctx.Err() != nil:
		return c, fmt.Errorf("%s's claim of region %d did not end within %v (its read of the region's history hung?): %w", st.name, r, timeout, err)
	case err != nil:
		return c, fmt.Errorf("%s's claim of region %d: %w", st.name, r, err)
	}
	return c, nil
}

// maxBytes bounds the bytes the run appends: every writer's most calls of
// the largest entries.
func (g *genRun) maxBytes() int64 { return int64(len(g.regions)) * 400 * int64(g.maxEntry) }

func (g *genRun) where() string {
	return fmt.Sprintf("seed %d (rerun with KWAL_GEN_SEED=%d)", g.seed, g.seed)
}

func (g *genRun) newWriter(name string, st *genStore) *genWriter {
	w := &genWriter{g: g, id: uint16(len(g.writers) + 1), name: name, store: st}
	w.rng = rand.New(rand.NewPCG(g.seed, uint64(w.id)))
	g.writers = append(g.writers, w)
	return w
}

// size draws an entry size: a few shorter than the header (when tiny is
// allowed), many within one record, many split into two to four parts.
func (w *genWriter) size(tiny, split bool) int {
	maxPart := w.g.batch - record.Overhead
	p := w.rng.IntN(100)
	switch {
	case split:
	case tiny && p < 8:
		return 1 + w.rng.IntN(genHeaderLen-1)
	case p < 40:
		return genHeaderLen + w.rng.IntN(2048)
	case p < 70:
		return 2048 + w.rng.IntN(maxPart-2048+1)
	}
	return maxPart + 1 + w.rng.IntN(w.g.maxEntry-maxPart)
}

func (w *genWriter) entry(r logstore.RegionID, size int) *genEntry {
	w.seq++
	return &genEntry{w: w, seq: w.seq, region: r, data: genPayload(w.g.seed, w.id, r, w.seq, size, byte(w.rng.IntN(3)))}
}

// makeCall draws a call of n entries over regions (1 to 3 entries when n
// is 0). A doomed call holds split entries only, and its context ends
// within 4 ms: it may fail between the parts of an entry; so do the calls
// made while a claim is under way (split), so that claims land between
// parts. Entries shorter than the header are only made where the call
// cannot fail and is its region's last in the call (their ID is then
// known).
func (w *genWriter) makeCall(regions []logstore.RegionID, n int, doomed, split, tinyOK bool) []*genEntry {
	if n == 0 {
		n = 1 + w.rng.IntN(3)
	}
	regs := make([]logstore.RegionID, n)
	for i := range regs {
		regs[i] = regions[w.rng.IntN(len(regions))]
	}
	es := make([]*genEntry, n)
	for i, r := range regs {
		last := !slices.Contains(regs[i+1:], r)
		es[i] = w.entry(r, w.size(tinyOK && !doomed && last, doomed || split))
		es[i].doomed = doomed
	}
	return es
}

// call appends es (doomed: under a context that ends within 4 ms) and
// takes the outcome into the model.
func (w *genWriter) call(ctx context.Context, es []*genEntry, doomed bool) error {
	batch := make([]logstore.Entry, len(es))
	for i, e := range es {
		batch[i] = logstore.Entry{Namespace: w.g.topic, Region: e.region, Data: e.data}
	}
	cctx := ctx
	if doomed {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, time.Duration(w.rng.IntN(4000))*time.Microsecond)
		defer cancel()
	}
	res, err := w.store.s.AppendBatch(cctx, batch)
	w.calls++
	w.entries = append(w.entries, es...)
	if err != nil {
		w.failed++
		return err
	}
	for i, e := range es {
		e.acked = true
		if !slices.ContainsFunc(es[i+1:], func(o *genEntry) bool { return o.region == e.region }) {
			e.id = res.LastEntryIDs[e.region]
		}
	}
	return nil
}

func (w *genWriter) unexpectedf(format string, args ...any) {
	w.unexpected = append(w.unexpected, fmt.Sprintf("%s: ", w.name)+fmt.Sprintf(format, args...))
}

// genCodecs are Config.Compression's values; each seed gives its three
// writing stores three of them, in turn.
var genCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// TestRecoveryGenerative is the property test of recovery: for each seed a
// random workload through the real write path, then every kind of read,
// on every writing store and on a fresh one, checked against a model of
// what was acknowledged. The workload: 2 to 5 regions of one namespace,
// entries of 1 byte to three batches (split into up to four parts) that
// compress well (zeros, text) or not at all (random bytes), three stores
// writing with three different codecs (every codec over five seeds), and
// per region one of: a single store writing it (two goroutines at times);
// a handover, where store a claims the region while store z, its old
// owner, which missed the claim (Fencing "off"), goes on writing it; or a
// double handover, where b then claims it from a while a writes. Calls
// fail mid-entry (a context that ends within 4 ms). Every read (indexed
// Read of each region, a scan of each region, ReadRegions of all regions
// from their first entry and from random IDs) must end within its timeout,
// and return exactly: every acknowledged entry that no claim fences, each
// once, in ID order, byte-identical, with the ID its call reported; an
// entry of a failed call at most once and whole (the same on every read);
// no entry of an old owner above the claim that fenced it (an ID above
// the claim's SealedID), and every entry the old owner got acknowledged at
// or below it. Each claim's SealedID is the last entry of the older owners
// that replay returns, the last entry below its claim record. The reads
// keep the store's fetch and hold budgets (Config.ReadMemoryBound's
// parts) and release them when they end.
//
// KWAL_GEN_SEED=n[,m...] runs those seeds only (a failure names its seed).
func TestRecoveryGenerative(t *testing.T) {
	t.Parallel()
	seeds := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	switch {
	case os.Getenv("KWAL_GEN_SEED") != "":
		seeds = nil
		for _, f := range strings.Split(os.Getenv("KWAL_GEN_SEED"), ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			require.NoError(t, err, "KWAL_GEN_SEED=%q", os.Getenv("KWAL_GEN_SEED"))
			seeds = append(seeds, n)
		}
	case testing.Short():
		seeds = seeds[:3]
	case testutil.RealBrokers() != nil:
		seeds = seeds[:5]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rerun this seed: KWAL_GEN_SEED=%d go test -count=1 -run 'TestRecoveryGenerative' ./logstore/kafka/", seed)
				}
			})
			runRecoveryGenerative(t, seed)
		})
	}
}

func runRecoveryGenerative(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6e6))
	brokers := testutil.Brokers(t)
	g := &genRun{seed: seed, topic: newTopic(t), stores: make(map[string]*genStore)}
	claims := g.topic + "-claims"
	g.batch = []int{16 << 10, 64 << 10}[rng.IntN(2)]
	g.maxEntry = 3 * g.batch
	g.hold = int64(g.maxEntry) * []int64{1, 4}[rng.IntN(2)]
	g.fetch = []int64{2 * int64(g.batch), 512 << 10}[rng.IntN(2)]
	g.lanes = []int{2, 8}[rng.IntN(2)]
	var bound int64
	open := func(name, fencing, codec string) *genStore {
		st := &genStore{name: name, fencing: fencing, codec: codec}
		st.s = openStore(t, brokers, func(c *kafka.Config) {
			c.Owner, c.ClaimsTopic, c.Fencing, c.Compression = name, claims, fencing, codec
			c.MaxBatchBytes, c.MaxEntryBytes, c.ReadHoldBytes, c.FetchMaxBytes = g.batch, int64(g.maxEntry), g.hold, int32(g.fetch)
			c.ProduceLanes = g.lanes
			bound = c.ReadMemoryBound()
		})
		g.stores[name] = st
		return st
	}
	z := open("z", kafka.FencingOff, genCodecs[seed%5])
	a := open("a", kafka.FencingStrict, genCodecs[(seed+1)%5])
	b := open("b", kafka.FencingStrict, genCodecs[(seed+2)%5])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, z.s.CreateNamespace(ctx, g.topic))

	n := 2 + rng.IntN(4)
	for i := range n {
		plan := []string{"plain", "handover", "double"}[rng.IntN(3)]
		switch {
		case i == 0:
			plan = []string{"handover", "double"}[seed%2]
		case i == 1 && n >= 3:
			plan = "plain"
		}
		g.regions = append(g.regions, &genRegion{id: logstore.RegionID(i + 1), plan: plan, fencedBy: make(map[*genStore]*genClaim)})
	}

	// The workload. fail ends it at the first broken rule of the writers'
	// own (a claim failing); the rest are checked once it ended.
	var failOnce sync.Once
	var failure string
	fail := func(format string, args ...any) {
		failOnce.Do(func() { failure = fmt.Sprintf(format, args...) })
		cancel()
	}
	wait := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, reg := range g.regions {
		if reg.plan != "plain" && rng.IntN(2) == 0 {
			// z owns the region under a claim of its own at first.
			c, err := g.claim(ctx, z, reg.id)
			require.NoError(t, err, g.where())
			reg.claims = append(reg.claims, &genClaim{by: z, epoch: c.Epoch, sealed: c.SealedID})
		}
	}
	var wg sync.WaitGroup
	// Plain regions: one store each (a or b), one or two goroutines of it
	// over all of its plain regions.
	plain := map[*genStore][]logstore.RegionID{}
	for _, reg := range g.regions {
		if reg.plan == "plain" {
			st := []*genStore{a, b}[rng.IntN(2)]
			plain[st] = append(plain[st], reg.id)
		}
	}
	for _, st := range []*genStore{a, b} {
		regs := plain[st]
		if len(regs) == 0 {
			continue
		}
		for j := range 1 + rng.IntN(2) {
			w := g.newWriter(fmt.Sprintf("%s/plain#%d", st.name, j), st)
			calls := 6 + w.rng.IntN(10)
			wg.Go(func() {
				for range calls {
					doomed := w.rng.IntN(8) == 0
					err := w.call(ctx, w.makeCall(regs, 0, doomed, false, true), doomed)
					if err != nil && !doomed && ctx.Err() == nil {
						w.unexpectedf("a call of a region nobody claims failed: %v", err)
					}
				}
			})
		}
	}
	// Claimed regions.
	for _, reg := range g.regions {
		if reg.plan == "plain" {
			continue
		}
		r := reg.id
		zw := g.newWriter(fmt.Sprintf("z/r%d", r), z)
		aw := g.newWriter(fmt.Sprintf("a/r%d", r), a)
		var bw *genWriter
		if reg.plan == "double" {
			bw = g.newWriter(fmt.Sprintf("b/r%d", r), b)
		}
		// z makes k0 calls before a claims, then goes on while the region's
		// last owner writes (at least 3 calls after the claim returned, at
		// most zAfter; zMax in all). Its first calls while the claim is
		// under way are of split entries.
		k0 := 2 + zw.rng.IntN(5)
		const zAfter, zMax, zSplit = 24, 60, 6
		var claim1, claim2 atomic.Bool // under way or done
		claimNow1, claimed1 := make(chan struct{}), make(chan struct{})
		claimNow2, claimed2 := make(chan struct{}), make(chan struct{})
		ownerDone := make(chan struct{})
		wg.Go(func() { // z: the first owner, then the old owner that missed the claims
			after, during := 0, 0
			for i := 0; i < zMax && after < zAfter && ctx.Err() == nil; i++ {
				if i == k0 {
					close(claimNow1)
				}
				select {
				case <-ownerDone:
					if after >= 3 {
						return
					}
				default:
				}
				claimed := false
				select {
				case <-claimed1:
					claimed = true
					after++
				default:
				}
				started := claim1.Load()
				split := started && !claimed && during < zSplit
				if started && !claimed {
					during++
				}
				doomed := zw.rng.IntN(8) == 0
				err := zw.call(ctx, zw.makeCall([]logstore.RegionID{r}, 1, doomed, split, false), doomed)
				contested := started || claim1.Load()
				switch {
				case err == nil:
				case errors.Is(err, kafka.ErrFenced):
					if !contested {
						zw.unexpectedf("fenced before any claim: %v", err)
					}
					return // z learned of the claim: it writes nothing more
				case !doomed && !contested && ctx.Err() == nil:
					zw.unexpectedf("a call failed before any claim: %v", err)
				}
			}
		})
		wg.Go(func() { // a claims, then writes; in a double handover b claims from it
			if !wait(claimNow1) {
				return
			}
			claim1.Store(true)
			c, err := g.claim(ctx, a, r)
			if err != nil {
				fail("%v", err)
				return
			}
			reg.claims = append(reg.claims, &genClaim{by: a, epoch: c.Epoch, sealed: c.SealedID, older: []*genStore{z}})
			close(claimed1)
			nA := 6 + aw.rng.IntN(10)
			k1 := 2 + aw.rng.IntN(nA-2)
			for i := 0; ctx.Err() == nil; i++ {
				if bw == nil && i == nA {
					close(ownerDone)
					return
				}
				if bw != nil && i == k1 {
					close(claimNow2)
				}
				var after bool // b's claim returned before this call began
				select {
				case <-claimed2:
					after = true
				default:
				}
				if bw != nil && !after && i >= nA {
					if !wait(claimed2) {
						return
					}
					after = true
				}
				started := claim2.Load()
				doomed := !after && aw.rng.IntN(8) == 0
				err := aw.call(ctx, aw.makeCall([]logstore.RegionID{r}, 0, doomed, started, false), doomed)
				contested := started || claim2.Load()
				if after {
					// Strict fencing: an append issued after a newer claim
					// returned is never acknowledged.
					if !errors.Is(err, kafka.ErrFenced) {
						aw.unexpectedf("a call issued after b's claim returned ended with %v, not ErrFenced", err)
					}
					return
				}
				switch {
				case err == nil:
				case contested && errors.Is(err, kafka.ErrFenced):
					// b's claim landed: wait for it, then one call more.
					if !wait(claimed2) {
						return
					}
				case !doomed && ctx.Err() == nil:
					aw.unexpectedf("a call failed (b's claim under way: %v): %v", contested, err)
				}
			}
		})
		if bw != nil {
			wg.Go(func() { // b claims from a, then writes
				defer close(ownerDone)
				if !wait(claimNow2) {
					return
				}
				claim2.Store(true)
				c, err := g.claim(ctx, b, r)
				if err != nil {
					fail("%v", err)
					return
				}
				reg.claims = append(reg.claims, &genClaim{by: b, epoch: c.Epoch, sealed: c.SealedID, older: []*genStore{z, a}})
				close(claimed2)
				for range 4 + bw.rng.IntN(8) {
					doomed := bw.rng.IntN(8) == 0
					err := bw.call(ctx, bw.makeCall([]logstore.RegionID{r}, 0, doomed, false, false), doomed)
					if err != nil && !doomed && ctx.Err() == nil {
						bw.unexpectedf("a call of the region's owner failed: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	require.Empty(t, failure, g.where())
	require.NoError(t, ctx.Err(), "%s: the workload did not end within its time", g.where())
	var unexpected []string
	for _, w := range g.writers {
		unexpected = append(unexpected, w.unexpected...)
	}
	require.Empty(t, unexpected, "%s: appends' outcomes", g.where())
	for _, st := range g.stores {
		for _, reg := range g.regions {
			for _, c := range reg.claims {
				if c.by == st {
					st.claims++
				}
			}
		}
	}
	g.check(t, brokers, open("fresh", kafka.FencingStrict, "lz4"), bound)
}

// genGot is an entry a read returned, as the model knows it.
type genGot struct {
	id     logstore.EntryID
	region logstore.RegionID
	e      *genEntry
}

func (x genGot) String() string {
	return fmt.Sprintf("ID %d region %d (%s #%d, %d bytes, acknowledged %v)", x.id, x.region, x.e.w.name, x.e.seq, len(x.e.data), x.e.acked)
}

// identify finds the entry a read returned in the model, checking that it
// is byte for byte what its writer appended.
func (g *genRun) identify(e logstore.Entry) (genGot, error) {
	var ge *genEntry
	if len(e.Data) < genHeaderLen {
		ge = g.tiny[[2]uint64{uint64(e.Region), uint64(e.ID)}]
		if ge == nil {
			return genGot{}, fmt.Errorf("ID %d region %d: %d bytes %q, no writer appended such an entry with that ID (a part of an entry, or corrupt)", e.ID, e.Region, len(e.Data), e.Data)
		}
	} else {
		d := e.Data
		if string(d[:2]) != "KG" {
			return genGot{}, fmt.Errorf("ID %d region %d: %d bytes that no writer appended (begin %q)", e.ID, e.Region, len(d), d[:genHeaderLen])
		}
		w, r, seq := binary.BigEndian.Uint16(d[2:]), binary.BigEndian.Uint32(d[4:]), binary.BigEndian.Uint32(d[8:])
		ge = g.byKey[[2]uint32{uint32(w), seq}]
		if ge == nil || logstore.RegionID(r) != e.Region {
			return genGot{}, fmt.Errorf("ID %d region %d: its header names writer %d, region %d, entry %d, which was never appended", e.ID, e.Region, w, r, seq)
		}
	}
	if ge.region != e.Region || !bytes.Equal(ge.data, e.Data) {
		i := 0
		for i < min(len(e.Data), len(ge.data)) && e.Data[i] == ge.data[i] {
			i++
		}
		return genGot{}, fmt.Errorf("ID %d region %d: %d bytes, %s appended entry %d of region %d as %d bytes: they differ from byte %d (partial or corrupt)",
			e.ID, e.Region, len(e.Data), ge.w.name, ge.seq, ge.region, len(ge.data), i)
	}
	return genGot{id: e.ID, region: e.Region, e: ge}, nil
}

// read runs one read under drainRead's hang detection and identifies its
// entries.
func (g *genRun) read(t *testing.T, what string, read func(context.Context) iter.Seq2[logstore.Entry, error]) []genGot {
	t.Helper()
	var out []genGot
	drainRead(t, g.where()+": "+what, readTimeout(g.bytes), read, func(e logstore.Entry) error {
		x, err := g.identify(e)
		if err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out
}

// check reads the log every way and holds the reads to the model.
func (g *genRun) check(t *testing.T, brokers []string, fresh *genStore, bound int64) {
	t.Helper()
	g.byKey = make(map[[2]uint32]*genEntry)
	g.tiny = make(map[[2]uint64]*genEntry)
	var acked, failedEntries int
	for _, w := range g.writers {
		for _, e := range w.entries {
			g.byKey[[2]uint32{uint32(w.id), e.seq}] = e
			if len(e.data) < genHeaderLen {
				require.True(t, e.acked && e.id > 0, "%s: a tiny entry's ID is known", g.where())
				g.tiny[[2]uint64{uint64(e.region), uint64(e.id)}] = e
			}
			g.bytes += int64(len(e.data))
			if e.acked {
				acked++
			} else {
				failedEntries++
			}
		}
	}
	for _, reg := range g.regions {
		for _, c := range reg.claims {
			for _, st := range c.older {
				if reg.fencedBy[st] == nil {
					reg.fencedBy[st] = c
				}
			}
		}
	}
	all := make(map[logstore.RegionID]logstore.EntryID)
	for _, reg := range g.regions {
		all[reg.id] = 0
	}

	// The reference: the fresh store's scan of every region; the model
	// checks it, and every other read must return the same.
	var st kafka.ReadStats
	start := time.Now()
	ref := g.read(t, "fresh store, scan of every region (reference)", func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
		return fresh.s.ReadWith(ctx, g.topic, all, kafka.ReadOptions{NoIndex: true, Stats: &st})
	})
	refTime := time.Since(start)
	g.checkModel(t, ref)
	straddles := g.checkSealed(t, brokers, ref)

	rng := rand.New(rand.NewPCG(g.seed, 0x7ead))
	differ := &violations{rule: "a read differs from the reference (a fresh store's scan of every region)"}
	var peaks []string
	reads := 0
	start = time.Now()
	for _, s := range []*genStore{fresh, g.stores["a"], g.stores["z"], g.stores["b"]} {
		type readKind struct {
			what string
			from map[logstore.RegionID]logstore.EntryID
			read func(context.Context) iter.Seq2[logstore.Entry, error]
		}
		var kinds []readKind
		for _, reg := range g.regions {
			if s != fresh && s != g.stores["a"] {
				// z and b read every region at once only: the reads of one
				// region (each scan reads the whole log) are the fresh
				// store's and the region's new owner's.
				break
			}
			one := map[logstore.RegionID]logstore.EntryID{reg.id: 0}
			kinds = append(kinds,
				readKind{fmt.Sprintf("Read of region %d", reg.id), one, func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
					return s.s.Read(ctx, g.topic, reg.id, 0)
				}},
				readKind{fmt.Sprintf("scan (ReadWith NoIndex) of region %d", reg.id), one, func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
					return s.s.ReadWith(ctx, g.topic, one, kafka.ReadOptions{NoIndex: true})
				}})
		}
		kinds = append(kinds, readKind{"ReadRegions of every region", all, func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
			return s.s.ReadRegions(ctx, g.topic, all)
		}})
		if s != fresh {
			kinds = append(kinds, readKind{"scan (ReadWith NoIndex) of every region", all, func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
				return s.s.ReadWith(ctx, g.topic, all, kafka.ReadOptions{NoIndex: true})
			}})
		}
		// From random IDs: an entry's, one past the region's last, or 0.
		mid := make(map[logstore.RegionID]logstore.EntryID)
		for _, reg := range g.regions {
			var ids []logstore.EntryID
			for _, x := range ref {
				if x.region == reg.id {
					ids = append(ids, x.id)
				}
			}
			switch p := rng.IntN(4); {
			case len(ids) == 0 || p == 0:
				mid[reg.id] = 0
			case p == 1:
				mid[reg.id] = ids[len(ids)-1] + 1
			default:
				mid[reg.id] = ids[rng.IntN(len(ids))]
			}
		}
		kinds = append(kinds, readKind{fmt.Sprintf("ReadRegions from %v", mid), mid, func(ctx context.Context) iter.Seq2[logstore.Entry, error] {
			return s.s.ReadRegions(ctx, g.topic, mid)
		}})
		for _, k := range kinds {
			what := fmt.Sprintf("%s store, %s", s.name, k.what)
			got := g.read(t, what, k.read)
			reads++
			var want []genGot
			for _, x := range ref {
				if from, ok := k.from[x.region]; ok && x.id >= from {
					want = append(want, x)
				}
			}
			g.compare(differ, what, want, got)
		}
		// The store's reads kept ReadMemoryBound, and released what they
		// held. Its fetch part is all but the entry data; the entry data
		// is ReadHoldBytes and an entry
		// (one more per pass running at once beyond the first: a claim
		// reads the region's history, and a store's claims may run at
		// once).
		passes := int64(1 + s.claims)
		fetchPart := bound - g.hold - int64(g.maxEntry)
		pool, hold := kafka.ReadPoolPeak(s.s), kafka.ReadHoldPeak(s.s)
		peaks = append(peaks, fmt.Sprintf("%s %d+%d", s.name, pool, hold))
		assert.LessOrEqual(t, pool, fetchPart,
			"%s: %s store: the most fetched bytes held at once, over their part of ReadMemoryBound (%d of %d)", g.where(), s.name, fetchPart, bound)
		assert.LessOrEqual(t, pool+hold, bound+(passes-1)*int64(g.maxEntry),
			"%s: %s store: the most fetched bytes (%d) and entry data (%d) held at once, over ReadMemoryBound (%d; %d passes at most)", g.where(), s.name, pool, hold, bound, passes)
		assert.Zero(t, kafka.ReadPoolUsed(s.s), "%s: %s store: fetch budget held after every read ended", g.where(), s.name)
		assert.Zero(t, kafka.ReadHoldUsed(s.s), "%s: %s store: hold budget held after every read ended", g.where(), s.name)
	}
	g.report(t, differ)

	plans := make([]string, len(g.regions))
	for i, reg := range g.regions {
		plans[i] = fmt.Sprintf("%d:%s", reg.id, reg.plan)
		for _, c := range reg.claims {
			plans[i] += fmt.Sprintf("/%s@%d(sealed %d)", c.by.name, c.epoch, c.sealed)
		}
	}
	maybeBack := 0
	for _, x := range ref {
		if !x.e.acked {
			maybeBack++
		}
	}
	t.Logf("%s: regions %v; codecs z=%s a=%s b=%s; batch %d KiB, hold %d KiB, fetch %d KiB, %d lanes; %d entries acknowledged, %d of failed calls (%d of them replayed); %.1f MiB; %d entries replayed (%d fenced records skipped, %d spilled, %d read back); %d claims between an old owner's parts; reference read %v, %d more reads %v; the most fetched and entry bytes held %v (ReadMemoryBound %d)",
		g.where(), plans, g.stores["z"].codec, g.stores["a"].codec, g.stores["b"].codec, g.batch>>10, g.hold>>10, g.fetch>>10, g.lanes,
		acked, failedEntries, maybeBack, float64(g.bytes)/(1<<20), len(ref), st.Fenced, st.Spilled, st.ReadBack, straddles,
		refTime.Round(time.Millisecond), reads, time.Since(start).Round(time.Millisecond), peaks, bound)
}

// violations collects what broke one rule, for one failure each rule.
type violations struct {
	rule string
	n    int
	some []string
}

func (v *violations) add(format string, args ...any) {
	v.n++
	if len(v.some) < 6 {
		v.some = append(v.some, fmt.Sprintf(format, args...))
	}
}

func (g *genRun) report(t *testing.T, vs ...*violations) {
	t.Helper()
	for _, v := range vs {
		if v.n > 0 {
			assert.Failf(t, v.rule, "%s: %d times, such as:\n\t%s", g.where(), v.n, strings.Join(v.some, "\n\t"))
		}
	}
}

// checkModel holds the reference read to the model.
func (g *genRun) checkModel(t *testing.T, ref []genGot) {
	t.Helper()
	var (
		order    = &violations{rule: "entries out of ID order"}
		dup      = &violations{rule: "an entry returned twice"}
		wrongID  = &violations{rule: "an acknowledged entry returned under another ID than its call reported"}
		byWriter = &violations{rule: "a writer's entries of a region out of the order of its calls (a region's calls reach the log in the order they were queued)"}
		fenced   = &violations{rule: "an old owner's entry above the claim that fenced it returned"}
		missing  = &violations{rule: "an acknowledged entry that no claim fences not returned"}
		above    = &violations{rule: "an entry acknowledged under strict fencing above the SealedID of the claim that outranked its store"}
	)
	seen := make(map[*genEntry]logstore.EntryID)
	type writerRegion struct {
		w *genWriter
		r logstore.RegionID
	}
	lastOf := make(map[writerRegion]genGot)
	var last logstore.EntryID
	regions := make(map[logstore.RegionID]*genRegion)
	for _, reg := range g.regions {
		regions[reg.id] = reg
	}
	for _, x := range ref {
		e := x.e
		if x.id <= last {
			order.add("%s after ID %d", x, last)
		}
		last = x.id
		if id, ok := seen[e]; ok {
			dup.add("%s, also as ID %d", x, id)
		}
		seen[e] = x.id
		if e.id != 0 && e.id != x.id {
			wrongID.add("%s: its call was acknowledged with ID %d", x, e.id)
		}
		if p, ok := lastOf[writerRegion{e.w, x.region}]; ok && e.seq <= p.e.seq {
			byWriter.add("%s after %s", x, p)
		}
		lastOf[writerRegion{e.w, x.region}] = x
		if c := regions[x.region].fencedBy[e.w.store]; c != nil && x.id > c.sealed {
			fenced.add("%s: %s wrote it under an older epoch than %s's claim (epoch %d), above its SealedID %d", x, e.w.store.name, c.by.name, c.epoch, c.sealed)
		}
	}
	for _, w := range g.writers {
		for _, e := range w.entries {
			if !e.acked {
				continue
			}
			c := regions[e.region].fencedBy[w.store]
			desc := fmt.Sprintf("%s #%d, region %d, ID %d, %d bytes", w.name, e.seq, e.region, e.id, len(e.data))
			if c != nil && w.store.fencing != kafka.FencingOff && e.id > c.sealed {
				above.add("%s: %s's claim (epoch %d) has SealedID %d", desc, c.by.name, c.epoch, c.sealed)
			}
			if _, ok := seen[e]; ok {
				continue
			}
			switch {
			case c == nil:
				missing.add("%s", desc)
			case w.store.fencing != kafka.FencingOff:
				missing.add("%s (acknowledged under strict fencing: below %s's claim, whose SealedID is %d)", desc, c.by.name, c.sealed)
			case e.id == 0:
				require.Failf(t, "test bug", "%s: %s's acknowledged entry %d has no known ID", g.where(), w.name, e.seq)
			case e.id <= c.sealed:
				missing.add("%s (at or below SealedID %d of %s's claim)", desc, c.sealed, c.by.name)
			}
		}
	}
	g.report(t, order, dup, wrongID, byWriter, fenced, missing, above)
}

// checkSealed checks each claim's SealedID against the reference read and
// the raw log, and returns how many claims landed between an old owner's
// parts.
func (g *genRun) checkSealed(t *testing.T, brokers []string, ref []genGot) int {
	t.Helper()
	l := layoutOf(rawParts(t, brokers, g.topic))
	straddles := 0
	wrong := &violations{rule: "a claim's SealedID is not the last entry below its claim record that replay returns"}
	for _, reg := range g.regions {
		for _, c := range reg.claims {
			at, ok := l.claimAt[[2]uint64{uint64(reg.id), c.epoch}]
			require.True(t, ok, "%s: region %d: %s's claim record is in the log", g.where(), reg.id, c.by.name)
			n := l.straddling(uint64(reg.id), c.epoch, at)
			straddles += n
			var older, below logstore.EntryID
			for _, x := range ref {
				if x.region != reg.id {
					continue
				}
				if slices.Contains(c.older, x.e.w.store) {
					older = x.id
				}
				if int64(x.id) <= at {
					below = x.id
				}
			}
			if below != c.sealed || older != c.sealed {
				wrong.add("region %d: %s's claim (epoch %d, record at offset %d, %d entries of older epochs across it): SealedID %d; replay's last entry below the record %d, the older owners' last entry %d",
					reg.id, c.by.name, c.epoch, at, n, c.sealed, below, older)
			}
		}
	}
	g.report(t, wrong)
	return straddles
}

// compare holds a read to the reference's entries of the regions and from
// points it asked for.
func (g *genRun) compare(v *violations, what string, want, got []genGot) {
	i := 0
	for i < min(len(want), len(got)) && want[i].id == got[i].id && want[i].e == got[i].e {
		i++
	}
	if i == len(want) && i == len(got) {
		return
	}
	wantIDs := make(map[logstore.EntryID]bool)
	for _, x := range want {
		wantIDs[x.id] = true
	}
	gotIDs := make(map[logstore.EntryID]bool)
	for _, x := range got {
		gotIDs[x.id] = true
	}
	var missing, extra []string
	for _, x := range want {
		if !gotIDs[x.id] && len(missing) < 3 {
			missing = append(missing, x.String())
		}
	}
	for _, x := range got {
		if !wantIDs[x.id] && len(extra) < 3 {
			extra = append(extra, x.String())
		}
	}
	at := func(xs []genGot) string {
		if i < len(xs) {
			return xs[i].String()
		}
		return "the end"
	}
	v.add("%s: %d entries, the reference %d; first difference at entry %d: %s, the reference %s; missing %v; extra %v",
		what, len(got), len(want), i, at(got), at(want), missing, extra)
}
