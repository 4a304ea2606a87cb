package kafka_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// TestPruneWhereDeleteRecordsIsRefused protects clusters that refuse
// DeleteRecords (some managed services). Under the default PruneMode each
// refusal the brokers answer with (a policy, an ACL, a request they do not
// serve) fails Prune with a one-line error that matches ErrDeleteRefused
// and the broker's error and names the mode to configure, while an error
// that is not a refusal does not match; nothing is deleted and every
// region replays as before. The prune mark written before the refusal stays
// valid: once the retention deletes below it, a fresh store replays every
// region exactly. A mark-only store on the same cluster prunes without
// sending DeleteRecords at all.
func TestPruneWhereDeleteRecordsIsRefused(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("a real broker cannot be made to refuse DeleteRecords (the test broker has no policy or ACLs); the refusal runs on kfake, and TestPruneMarkOnly runs the mark-only mode on this broker")
	}
	c := testutil.NewCluster(t)
	var calls atomic.Int64
	var refusal atomic.Pointer[kerr.Error] // nil: the cluster deletes
	c.ControlKey(int16(kmsg.DeleteRecords), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		calls.Add(1)
		code := refusal.Load()
		if code == nil {
			return nil, nil, false
		}
		req := kreq.(*kmsg.DeleteRecordsRequest)
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = rp.Partition, code.Code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	brokers := c.ListenAddrs()
	reg := prometheus.NewRegistry()
	s := openStore(t, brokers, func(c *kafka.Config) { c.Registerer = reg })
	ctx := context.Background()
	m := newPruneModel(t, s, []logstore.RegionID{1, 2, 3})
	rng := rand.New(rand.NewPCG(3, 14))
	for range 4 {
		m.appendRound(t, ctx, s, rng)
	}
	m.flushAll(t, ctx, s, 2)

	dry, err := s.PruneWith(ctx, m.name, kafka.PruneOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, m.lowestNeeded(), dry.PrunePoint)
	require.Greater(t, dry.PrunePoint, dry.FirstID, "something can go")
	below := int64(dry.PrunePoint) - 1

	refusals := []*kerr.Error{kerr.PolicyViolation, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.UnsupportedVersion, kerr.InvalidRequest}
	for _, code := range refusals {
		refusal.Store(code)
		_, err = s.Prune(ctx, m.name)
		require.ErrorIs(t, err, kafka.ErrDeleteRefused, "%s", code.Message)
		require.ErrorIs(t, err, code)
		var de *kafka.DeleteRefusedError
		require.ErrorAs(t, err, &de)
		require.Equal(t, m.name, de.Namespace)
		require.Equal(t, below, de.Below)
		require.Contains(t, err.Error(), `set Config.PruneMode to "mark-only"`)
		require.NotContains(t, err.Error(), "\n", "one line")
		m.checkReplays(t, ctx, s, "after a refused DeleteRecords ("+code.Message+")")
	}
	t.Logf("a refusal: %v", err)
	require.Equal(t, int64(len(refusals)), calls.Load())
	require.Equal(t, int64(0), logStart(t, brokers, m.name), "nothing was deleted")

	// A failure that is not a refusal is not reported as one.
	refusal.Store(kerr.OffsetOutOfRange)
	_, err = s.Prune(ctx, m.name)
	require.ErrorIs(t, err, kerr.OffsetOutOfRange)
	require.NotErrorIs(t, err, kafka.ErrDeleteRefused)
	runs, _ := metricSum(t, reg, "kwal_prune_runs_total", "outcome", "error")
	require.Equal(t, float64(len(refusals)+1), runs)
	runs, found := metricSum(t, reg, "kwal_prune_runs_total", "outcome", "ok")
	require.True(t, found, "present at zero")
	require.Zero(t, runs)

	// The retention deletes below the point the refused prunes marked
	// (DeleteRecords as its stand-in): the mark vouches for it.
	refusal.Store(nil)
	deleteRecords(t, brokers, m.name, below)
	m.start = below
	m.checkReplays(t, ctx, openStore(t, brokers, nil), "a fresh store, after the retention deleted what the refused prune marked")

	// A mark-only store on the refusing cluster never asks.
	refusal.Store(kerr.PolicyViolation)
	before := calls.Load()
	mo := openStore(t, brokers, func(c *kafka.Config) { c.PruneMode = kafka.PruneMarkOnly })
	for range 3 {
		m.appendRound(t, ctx, s, rng)
	}
	m.flushAll(t, ctx, s, 1)
	res, err := mo.PruneWith(ctx, m.name, kafka.PruneOptions{})
	require.NoError(t, err)
	require.True(t, res.Marked)
	require.False(t, res.Deleted)
	require.Equal(t, logstore.EntryID(below+1), res.FirstID, "the log's start, unchanged")
	require.Equal(t, m.lowestNeeded(), res.PrunePoint)
	require.Equal(t, before, calls.Load(), "no DeleteRecords")
	m.checkReplays(t, ctx, mo, "the mark-only store")
	m.checkReplays(t, ctx, openStore(t, brokers, nil), "a fresh store, after the mark-only prune")
}

// TestPruneWhereNoBrokerServesDeleteRecords: brokers that do not list
// DeleteRecords in their ApiVersions (the client then does not send it)
// are a refusal too.
func TestPruneWhereNoBrokerServesDeleteRecords(t *testing.T) {
	t.Parallel()
	if testutil.RealBrokers() != nil {
		t.Skip("a real broker serves DeleteRecords; this runs on kfake, which can be told not to")
	}
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.DeleteRecords.Int16(), -1)
	c := testutil.NewCluster(t, kfake.MaxVersions(v))
	s := openStore(t, c.ListenAddrs(), nil)
	ctx := context.Background()
	m := newPruneModel(t, s, []logstore.RegionID{1, 2})
	m.appendRound(t, ctx, s, rand.New(rand.NewPCG(4, 14)))
	m.appendRound(t, ctx, s, rand.New(rand.NewPCG(5, 14)))
	m.flushAll(t, ctx, s, 1)
	_, err := s.Prune(ctx, m.name)
	require.ErrorIs(t, err, kafka.ErrDeleteRefused)
	require.Contains(t, err.Error(), "--prune-mode mark-only")
	m.checkReplays(t, ctx, s, "after the refusal")
}

// TestPruneMarkOnly protects PruneMode mark-only, on kfake and on a real
// broker: over rounds of appends and flushes, each Prune marks everything
// below the lowest entry any region still needs (the model's), deletes
// nothing (the log's start stays 0, and on kfake no DeleteRecords is sent),
// and writes no second mark while that point stands; after each round,
// every region replays from its flushed ID + 1 exactly what the model
// holds, through the index and by full scan alike, and so do a reopened
// store and a fresh one without the index. Once the retention deletes below
// the last point marked (DeleteRecords as its stand-in), a fresh store
// still replays every region exactly: the mark vouches for what went.
func TestPruneMarkOnly(t *testing.T) {
	t.Parallel()
	brokers, deletes := brokersCountingDeletes(t)
	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	mode := func(c *kafka.Config) { c.PruneMode = kafka.PruneMarkOnly }
	s := openStore(t, brokers, func(c *kafka.Config) { mode(c); c.IndexDir = dir; c.Registerer = reg })
	ctx := context.Background()
	m := newPruneModel(t, s, []logstore.RegionID{1, 2, 3, 4})
	rng := rand.New(rand.NewPCG(7, 14))
	prunes, marked := 0, 0
	var lastMarked logstore.EntryID
	for round := range 8 {
		m.appendRound(t, ctx, s, rng)
		m.appendRound(t, ctx, s, rng)
		m.flushSome(t, ctx, s, rng)
		res, err := s.PruneWith(ctx, m.name, kafka.PruneOptions{})
		require.NoError(t, err, "round %d", round)
		prunes++
		require.False(t, res.Deleted)
		require.Equal(t, logstore.EntryID(1), res.FirstID, "round %d: the log's start", round)
		require.Equal(t, m.lowestNeeded(), res.PrunePoint, "round %d", round)
		require.Equal(t, res.PrunePoint > res.FirstID, res.Marked, "round %d", round)
		if res.Marked {
			marked++
			lastMarked = res.PrunePoint
		}
		latest, err := s.LatestEntryID(ctx, m.name)
		require.NoError(t, err)
		again, err := s.PruneWith(ctx, m.name, kafka.PruneOptions{})
		require.NoError(t, err)
		prunes++
		require.Equal(t, res.Marked, again.Marked, "round %d", round)
		after, err := s.LatestEntryID(ctx, m.name)
		require.NoError(t, err)
		require.Equal(t, latest, after, "round %d: the point stood, no second mark", round)
		m.checkReplays(t, ctx, s, fmt.Sprintf("round %d", round))
	}
	require.Positive(t, marked, "no round marked anything")
	if deletes != nil {
		require.Zero(t, deletes(), "DeleteRecords was sent")
	}
	require.Equal(t, int64(0), logStart(t, brokers, m.name), "nothing was deleted")
	runs, _ := metricSum(t, reg, "kwal_prune_runs_total", "outcome", "ok")
	require.Equal(t, float64(prunes), runs)
	deleted, _ := metricSum(t, reg, "kwal_prune_deleted_records_total", "namespace", m.name)
	require.Zero(t, deleted)
	last, found := metricSum(t, reg, "kwal_prune_last_success_timestamp_seconds", "namespace", m.name)
	require.True(t, found)
	require.Positive(t, last)

	require.NoError(t, s.Close())
	m.checkReplays(t, ctx, openStore(t, brokers, func(c *kafka.Config) { mode(c); c.IndexDir = dir }), "reopened on its index directory")
	m.checkReplays(t, ctx, openStore(t, brokers, mode), "a fresh store without the index")

	deleteRecords(t, brokers, m.name, int64(lastMarked)-1)
	m.start = int64(lastMarked) - 1
	fresh := openStore(t, brokers, mode)
	m.checkReplays(t, ctx, fresh, "a fresh store, after the retention deleted below the last point marked")
	res, err := fresh.PruneWith(ctx, m.name, kafka.PruneOptions{})
	require.NoError(t, err)
	require.Equal(t, lastMarked, res.FirstID)
	require.Equal(t, m.lowestNeeded(), res.PrunePoint)
}

// TestPruneRetentionHeadroom protects the retention check: on a topic with
// a finite retention, Prune and its dry run report the timestamp of the
// oldest entry still needed (the one at the prune point) and the headroom
// the retention leaves it (retention.ms less its age, or by
// retention.bytes), within what the time around the call allows, flag it
// under the margin and log one warning per call naming the namespace,
// headroom and margin; kwal_retention_headroom_seconds carries it. With
// no retention there is no headroom, no metric and no warning.
func TestPruneRetentionHeadroom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ms, bytes string
		margin    time.Duration
		limit     string // "" for no headroom
		atRisk    bool
	}{
		{name: "1h under a 2h margin", ms: "3600000", bytes: "-1", margin: 2 * time.Hour, limit: "retention.ms", atRisk: true},
		{name: "1 week over a 1h margin", ms: "604800000", bytes: "-1", margin: time.Hour, limit: "retention.ms"},
		{name: "1 byte", ms: "-1", bytes: "1", margin: time.Hour, limit: "retention.bytes", atRisk: true},
		{name: "none", ms: "-1", bytes: "-1", margin: 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokers := testutil.Brokers(t)
			topic := newTopic(t)
			createTopicWith(t, brokers, topic, map[string]*string{"retention.ms": ptr(tc.ms), "retention.bytes": ptr(tc.bytes)})
			reg := prometheus.NewRegistry()
			var mu sync.Mutex
			var logs strings.Builder
			s := openStore(t, brokers, func(c *kafka.Config) {
				c.Registerer, c.RetentionWarnMargin, c.Logger = reg, tc.margin, testLogger(&mu, &logs)
			})
			ctx := context.Background()
			// A real broker's controller creates the topic with its
			// configs; the broker describes them a moment later.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				r, err := s.TopicRetention(ctx, topic)
				require.NoError(c, err)
				assert.Equal(c, tc.ms, fmt.Sprint(r.Ms))
				assert.Equal(c, tc.bytes, fmt.Sprint(r.Bytes))
			}, 30*time.Second, 20*time.Millisecond)

			written := time.Now().Truncate(time.Millisecond) // Kafka keeps milliseconds
			ids := map[logstore.RegionID][]logstore.EntryID{}
			for _, r := range []logstore.RegionID{1, 2, 1, 2} {
				res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: r, Data: []byte("entry")}})
				require.NoError(t, err)
				ids[r] = append(ids[r], res.LastEntryIDs[r])
			}
			writtenBy := time.Now()
			require.NoError(t, s.Obsolete(ctx, topic, 1, ids[1][0]))

			check := func(opts kafka.PruneOptions) {
				t.Helper()
				began := time.Now()
				res, err := s.PruneWith(ctx, topic, opts)
				ended := time.Now()
				require.NoError(t, err)
				require.NoError(t, res.RetentionErr)
				require.Equal(t, ids[2][0], res.PrunePoint, "region 2's first entry is the oldest needed")
				require.Equal(t, tc.limit != "", res.Retention.Finite())
				require.Equal(t, tc.limit, res.RetentionLimit)
				require.Equal(t, tc.atRisk, res.RetentionAtRisk)
				if tc.limit == "" {
					require.Zero(t, res.OldestNeededAt)
					require.Zero(t, res.RetentionHeadroom)
					_, found := metricSum(t, reg, "kwal_retention_headroom_seconds", "namespace", topic)
					require.False(t, found, "no headroom metric without a retention")
					return
				}
				ts := res.OldestNeededAt
				require.False(t, ts.Before(written) || ts.After(writtenBy), "%v is not within [%v, %v]", ts, written, writtenBy)
				// The check ran between began and ended: the entry's age
				// then lay between these.
				minAge, maxAge := began.Sub(ts), ended.Sub(ts)
				lo, hi := -maxAge, time.Duration(0) // retention.bytes=1: all that is needed is over it
				if tc.limit == "retention.ms" {
					ms, _ := time.ParseDuration(tc.ms + "ms")
					lo, hi = ms-maxAge, ms-minAge
				}
				h := res.RetentionHeadroom
				require.True(t, lo <= h && h <= hi, "headroom %v is not within [%v, %v]", h, lo, hi)
				got := gauge(t, reg, "kwal_retention_headroom_seconds", topic)
				require.True(t, lo.Seconds() <= got && got <= hi.Seconds(), "kwal_retention_headroom_seconds %v is not within [%v, %v]", got, lo.Seconds(), hi.Seconds())
			}
			check(kafka.PruneOptions{DryRun: true})
			check(kafka.PruneOptions{})

			mu.Lock()
			out := logs.String()
			mu.Unlock()
			var warnings []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "retention will soon delete") {
					warnings = append(warnings, l)
				}
			}
			if !tc.atRisk {
				require.Empty(t, warnings)
				return
			}
			require.Len(t, warnings, 2, "one per call, the dry run's included")
			for _, w := range warnings {
				require.Contains(t, w, "level=WARN")
				require.Contains(t, w, "namespace="+topic)
				require.Contains(t, w, "margin="+tc.margin.String())
				require.Contains(t, w, "limit="+tc.limit)
				require.Contains(t, w, "headroom=")
				require.Contains(t, w, "region=2")
				require.Contains(t, w, "flush the region holding the prune point back (Obsolete), or raise the topic's "+tc.limit)
			}
		})
	}
}

// TestPruneMetrics protects the prune metrics a dashboard reads: from a
// namespace's first use both run outcomes exist at 0; a Prune that deletes
// counts one ok run, the records (offsets) and the estimated bytes it
// deleted, and sets the last success time and the log's size; a dry run
// counts no run; DeleteNamespace drops the series.
func TestPruneMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := openStore(t, testutil.Brokers(t), func(c *kafka.Config) { c.Registerer = reg })
	ctx := context.Background()
	topic := newTopic(t)
	var ids []logstore.EntryID
	for range 6 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: make([]byte, 512)}})
		require.NoError(t, err)
		ids = append(ids, res.LastEntryIDs[1])
	}
	for _, outcome := range []string{"ok", "error"} {
		v, found := metricSum(t, reg, "kwal_prune_runs_total", "outcome", outcome)
		require.True(t, found, "%s present from the first use", outcome)
		require.Zero(t, v)
	}
	require.NoError(t, s.Obsolete(ctx, topic, 1, ids[3]))
	dry, err := s.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
	require.NoError(t, err)
	runs, _ := metricSum(t, reg, "kwal_prune_runs_total", "namespace", topic)
	require.Zero(t, runs, "a dry run is not a run")
	if dry.LogBytes > 0 {
		require.Equal(t, float64(dry.LogBytes), gauge(t, reg, "kwal_log_bytes", topic))
	}

	began := time.Now()
	res, err := s.PruneWith(ctx, topic, kafka.PruneOptions{})
	require.NoError(t, err)
	require.True(t, res.Deleted)
	require.True(t, res.Marked)
	runs, _ = metricSum(t, reg, "kwal_prune_runs_total", "outcome", "ok")
	require.Equal(t, 1.0, runs)
	require.Equal(t, float64(res.FirstID-res.Before), gauge(t, reg, "kwal_prune_deleted_records_total", topic))
	require.Equal(t, float64(ids[4]-1), gauge(t, reg, "kwal_prune_deleted_records_total", topic))
	require.Equal(t, float64(res.PrunableBytes), gauge(t, reg, "kwal_prune_deleted_bytes_total", topic))
	if res.LogBytes > 0 {
		require.Positive(t, res.PrunableBytes)
	}
	require.GreaterOrEqual(t, gauge(t, reg, "kwal_prune_last_success_timestamp_seconds", topic), float64(began.Unix()))

	require.NoError(t, s.DeleteNamespace(ctx, topic))
	for _, name := range []string{"kwal_prune_runs_total", "kwal_prune_deleted_records_total", "kwal_prune_deleted_bytes_total", "kwal_prune_last_success_timestamp_seconds", "kwal_log_bytes"} {
		_, found := metricSum(t, reg, name, "namespace", topic)
		require.False(t, found, "%s after DeleteNamespace", name)
	}
}

// pruneModel is a namespace's model for the prune tests (modelNS), with
// the helpers that drive it.
type pruneModel struct{ *modelNS }

// newPruneModel creates a new namespace on s for regions.
func newPruneModel(t *testing.T, s *kafka.LogStore, regions []logstore.RegionID) pruneModel {
	t.Helper()
	m := pruneModel{&modelNS{name: newTopic(t), regions: regions, flushed: map[logstore.RegionID]logstore.EntryID{}}}
	require.NoError(t, s.CreateNamespace(context.Background(), m.name))
	return m
}

// appendRound appends one entry to each region, of random sizes (some
// split into parts).
func (m pruneModel) appendRound(t *testing.T, ctx context.Context, s *kafka.LogStore, rng *rand.Rand) {
	t.Helper()
	for _, r := range m.regions {
		data := append(fmt.Appendf(nil, "%s/%d/%d:", m.name, r, len(m.entries)), payload(rng, 10+rng.IntN(3000))...)
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: m.name, Region: r, Data: data}})
		require.NoError(t, err)
		m.entries = append(m.entries, modelEntry{id: res.LastEntryIDs[r], region: r, data: data})
	}
}

// flushSome declares, for each region with a chance of one in two, its
// entries obsolete up to a random one above its flushed point.
func (m pruneModel) flushSome(t *testing.T, ctx context.Context, s *kafka.LogStore, rng *rand.Rand) {
	t.Helper()
	for _, r := range m.regions {
		var ids []logstore.EntryID
		for _, e := range m.entries {
			if e.region == r && e.id > m.flushed[r] {
				ids = append(ids, e.id)
			}
		}
		if len(ids) == 0 || rng.IntN(2) == 0 {
			continue
		}
		upTo := ids[rng.IntN(len(ids))]
		require.NoError(t, s.Obsolete(ctx, m.name, r, upTo))
		m.flushed[r] = upTo
	}
}

// flushAll declares every region's entries obsolete but its last keep.
func (m pruneModel) flushAll(t *testing.T, ctx context.Context, s *kafka.LogStore, keep int) {
	t.Helper()
	for _, r := range m.regions {
		var ids []logstore.EntryID
		for _, e := range m.entries {
			if e.region == r {
				ids = append(ids, e.id)
			}
		}
		if len(ids) > keep && ids[len(ids)-1-keep] > m.flushed[r] {
			upTo := ids[len(ids)-1-keep]
			require.NoError(t, s.Obsolete(ctx, m.name, r, upTo))
			m.flushed[r] = upTo
		}
	}
}

// lowestNeeded is the prune point the model expects: the lowest ID a
// region still needs, or the ID after the last entry when none is.
func (m pruneModel) lowestNeeded() logstore.EntryID {
	var low, last logstore.EntryID
	for _, e := range m.entries {
		last = max(last, e.id)
		if e.id > m.flushed[e.region] && (low == 0 || e.id < low) {
			low = e.id
		}
	}
	if low == 0 {
		return last + 1
	}
	return low
}

// checkReplays replays every region of the model on s from its flushed ID
// + 1, through the index and by full scan, and all of them in one read:
// each must return exactly the model's entries.
func (m pruneModel) checkReplays(t *testing.T, ctx context.Context, s *kafka.LogStore, when string) {
	t.Helper()
	from := map[logstore.RegionID]logstore.EntryID{}
	var all []modelEntry
	for _, r := range m.regions {
		from[r] = m.flushed[r] + 1
		want := m.want(r, from[r])
		all = append(all, want...)
		for _, noIndex := range []bool{false, true} {
			var got []logstore.Entry
			for e, err := range s.ReadWith(ctx, m.name, map[logstore.RegionID]logstore.EntryID{r: from[r]}, kafka.ReadOptions{NoIndex: noIndex}) {
				require.NoError(t, err, "%s: region %d from %d (NoIndex %v)", when, r, from[r], noIndex)
				got = append(got, e)
			}
			require.Len(t, got, len(want), "%s: region %d from %d (NoIndex %v)", when, r, from[r], noIndex)
			for i, e := range want {
				require.Equal(t, e.id, got[i].ID, "%s: region %d entry %d (NoIndex %v)", when, r, i, noIndex)
				require.Equal(t, e.data, got[i].Data, "%s: region %d entry %d (NoIndex %v)", when, r, i, noIndex)
			}
		}
	}
	got := collect(t, s.ReadRegions(ctx, m.name, from))
	require.Len(t, got, len(all), "%s: every region in one read", when)
}

// brokersCountingDeletes returns the test's brokers and, on kfake, a count
// of the DeleteRecords requests the cluster received (nil on a real broker,
// where nothing can watch them).
func brokersCountingDeletes(t *testing.T) ([]string, func() int64) {
	t.Helper()
	if b := testutil.RealBrokers(); b != nil {
		return b, nil
	}
	c := testutil.NewCluster(t)
	var n atomic.Int64
	c.ControlKey(int16(kmsg.DeleteRecords), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return c.ListenAddrs(), n.Load
}

// logStart returns the topic's log start offset, asked with a plain client.
func logStart(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	lo, err := kadm.NewClient(cl).ListStartOffsets(context.Background(), topic)
	require.NoError(t, err)
	require.NoError(t, lo.Error())
	o, ok := lo.Lookup(topic, 0)
	require.True(t, ok)
	return o.Offset
}

// TestRetentionHeadroomOfALargeEntry: the oldest needed record is the
// first part of an entry larger than a batch (and, compressible 100x, of
// a request), while another region appends (its records may fall between
// the parts): the one
// fetch that reads its timestamp gets that part's batch whole, whatever
// its size, and the headroom is the entry's.
func TestRetentionHeadroomOfALargeEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		data func(n int) []byte
	}{
		{"compressible", func(n int) []byte { return bytes.Repeat([]byte("wal row 0123456789 "), n/19+1)[:n] }},
		{"random", func(n int) []byte { b := make([]byte, n); _, _ = crand.Read(b); return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokers := testutil.Brokers(t)
			topic := newTopic(t)
			createTopicWith(t, brokers, topic, map[string]*string{"retention.ms": ptr("3600000")})
			s := openStore(t, brokers, nil)
			ctx := context.Background()
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				r, err := s.TopicRetention(ctx, topic)
				require.NoError(c, err)
				assert.Equal(c, int64(3600000), r.Ms)
			}, 30*time.Second, 20*time.Millisecond)

			written := time.Now().Truncate(time.Millisecond)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // another writer between the large entry's parts
				defer wg.Done()
				for range 20 {
					_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 2, Data: []byte("small")}})
					assert.NoError(t, err)
				}
			}()
			big := tc.data(5 << 20) // 5 parts of a 1 MiB MaxBatchBytes
			res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: 1, Data: big}})
			require.NoError(t, err)
			wg.Wait()
			writtenBy := time.Now()
			// Region 2 flushed everything: region 1's entry holds the log.
			latest, err := s.LatestEntryID(ctx, topic)
			require.NoError(t, err)
			require.NoError(t, s.Obsolete(ctx, topic, 2, latest))

			pr, err := s.PruneWith(ctx, topic, kafka.PruneOptions{DryRun: true})
			require.NoError(t, err)
			require.NoError(t, pr.RetentionErr)
			require.Equal(t, res.LastEntryIDs[1], pr.PrunePoint, "the large entry is the oldest needed")
			ts := pr.OldestNeededAt
			require.False(t, ts.Before(written) || ts.After(writtenBy), "%v is not within [%v, %v]", ts, written, writtenBy)
			require.Equal(t, "retention.ms", pr.RetentionLimit)
			require.True(t, pr.RetentionHeadroom > 0 && pr.RetentionHeadroom <= time.Hour, "headroom %v", pr.RetentionHeadroom)
			got := collect(t, s.Read(ctx, topic, 1, 0))
			require.Len(t, got, 1)
			require.True(t, bytes.Equal(big, got[0].Data))
		})
	}
}
