package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/testutil"
)

// heldFile is the held-epochs file of an IndexDir.
func heldFile(dir string) string { return filepath.Join(dir, "held-epochs.json") }

// heldOnDisk is what the held-epochs file in dir lists, as
// "namespace/region" -> epoch (negated when released).
func heldOnDisk(t *testing.T, dir string) (owner string, held map[string]int64) {
	t.Helper()
	data, err := os.ReadFile(heldFile(dir))
	require.NoError(t, err)
	var doc struct {
		Body struct {
			Owner string `json:"owner"`
			Held  []struct {
				NS       string `json:"ns"`
				Region   uint64 `json:"region"`
				Epoch    int64  `json:"epoch"`
				Released bool   `json:"released"`
			} `json:"held"`
		} `json:"body"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	held = map[string]int64{}
	for _, h := range doc.Body.Held {
		e := h.Epoch
		if h.Released {
			e = -e
		}
		held[fmt.Sprintf("%s/%d", h.NS, h.Region)] = e
	}
	return doc.Body.Owner, held
}

// held returns the store's HeldEpoch and HeldReleased of region (zeros
// when the region was never claimed in the namespace's current topic).
func held(ctx context.Context, t *testing.T, s *kafka.LogStore, ns string, r logstore.RegionID) (uint64, bool) {
	t.Helper()
	own, err := s.Ownership(ctx, ns)
	require.NoError(t, err)
	for _, o := range own {
		if o.Region == r {
			return o.HeldEpoch, o.HeldReleased
		}
	}
	return 0, false
}

func appendTo(ctx context.Context, s *kafka.LogStore, ns string, r logstore.RegionID, data string) error {
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: r, Data: []byte(data)}})
	return err
}

// create creates the namespaces before the test claims their regions.
func create(ctx context.Context, t *testing.T, s *kafka.LogStore, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		require.NoError(t, s.CreateNamespace(ctx, ns))
	}
}

func claimEpoch(ctx context.Context, t *testing.T, s *kafka.LogStore, ns string, r logstore.RegionID) uint64 {
	t.Helper()
	c, err := s.Claim(ctx, ns, r)
	require.NoError(t, err)
	return c.Epoch
}

// withDir keeps the store's index and held epochs in dir.
func withDir(dir, owner string, more ...func(*kafka.Config)) func(*kafka.Config) {
	return func(c *kafka.Config) {
		c.IndexDir, c.Owner, c.PruneInterval = dir, owner, 0
		for _, m := range more {
			m(c)
		}
	}
}

// TestRestartResumesHeldEpochs: a store reopened on its IndexDir appends
// to the regions it claimed under the same epochs, without claiming them
// again, in strict and lease fencing; Ownership shows the epochs held; a
// store that reads the log afterwards fences none of those entries. An
// empty Owner reuses the name the epochs were claimed under, so claims
// made after the restart carry it too.
func TestRestartResumesHeldEpochs(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{kafka.FencingStrict, kafka.FencingLease} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			brokers := testutil.Brokers(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			topic := newTopic(t)
			dir := t.TempDir()
			fencing := func(c *kafka.Config) { c.Fencing, c.Lease = mode, 50*time.Millisecond }

			a := openStore(t, brokers, withDir(dir, "node-a", fencing))
			create(ctx, t, a, topic)
			// Region 1 is claimed twice: the epoch resumed is the latest.
			claimEpoch(ctx, t, a, topic, 1)
			e1 := claimEpoch(ctx, t, a, topic, 1)
			e2 := claimEpoch(ctx, t, a, topic, 2)
			require.Equal(t, uint64(2), e1)
			for _, r := range []logstore.RegionID{1, 2} {
				require.NoError(t, appendTo(ctx, a, topic, r, "before"))
			}
			require.NoError(t, a.Close())

			a = openStore(t, brokers, withDir(dir, "", fencing))
			h1, rel1 := held(ctx, t, a, topic, 1)
			h2, _ := held(ctx, t, a, topic, 2)
			require.Equal(t, e1, h1, "Ownership shows the resumed epoch")
			require.Equal(t, e2, h2)
			require.False(t, rel1)
			for _, r := range []logstore.RegionID{1, 2} {
				require.NoError(t, appendTo(ctx, a, topic, r, "after"), "region %d is written without a new claim", r)
			}
			claimEpoch(ctx, t, a, topic, 3)
			own, err := a.Ownership(ctx, topic)
			require.NoError(t, err)
			require.Len(t, own, 3)
			for _, o := range own {
				require.Equal(t, "node-a", o.Owner, "the kept owner name is reused")
			}
			require.Equal(t, 4, int(own[0].Claims+own[1].Claims+own[2].Claims), "resuming made no claim")

			fresh := openStore(t, brokers, func(c *kafka.Config) { c.DisableIndex = true })
			for _, r := range []logstore.RegionID{1, 2} {
				got, st := regionData(ctx, t, fresh, topic, r, true)
				require.Equal(t, []string{"before", "after"}, got, "the entries written after the restart carry the held epoch: nothing is fenced")
				require.Zero(t, st.Fenced)
			}
		})
	}
}

// TestRestartResumedEpochIsFencedByANewerClaim: a region another store
// claimed while this one was closed is fenced at this store's first
// append after the restart (naming both epochs), exactly as it would have
// been without the restart; its other regions are written as before.
func TestRestartResumedEpochIsFencedByANewerClaim(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)
	dir := t.TempDir()

	a := openStore(t, brokers, withDir(dir, "node-a"))
	create(ctx, t, a, topic)
	e1 := claimEpoch(ctx, t, a, topic, 1)
	claimEpoch(ctx, t, a, topic, 2)
	for _, r := range []logstore.RegionID{1, 2} {
		require.NoError(t, appendTo(ctx, a, topic, r, "a"))
	}
	require.NoError(t, a.Close())

	b := openStore(t, brokers, func(c *kafka.Config) { c.Owner = "node-b" })
	eb := claimEpoch(ctx, t, b, topic, 1)
	require.NoError(t, appendTo(ctx, b, topic, 1, "b"))

	a = openStore(t, brokers, withDir(dir, "node-a"))
	err := appendTo(ctx, a, topic, 1, "zombie")
	require.ErrorIs(t, err, kafka.ErrFenced)
	var fe *kafka.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, e1, fe.Epoch, "the resumed epoch is the one fenced")
	require.Equal(t, eb, fe.Newer)
	require.Equal(t, "node-b", fe.Owner)
	require.NoError(t, appendTo(ctx, a, topic, 2, "a again"), "the region nobody claimed is still a's")

	got, st := regionData(ctx, t, b, topic, 1, true)
	require.Equal(t, []string{"a", "b"}, got)
	require.Zero(t, st.Fenced, "the fenced append wrote nothing: the store knew the claim before it wrote")
}

// TestRestartKeepsReleasedRegionsReleased: a region the store released
// stays released after a restart (its appends fail with ErrFenced, saying
// so) until the store claims it again.
func TestRestartKeepsReleasedRegionsReleased(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)
	dir := t.TempDir()

	a := openStore(t, brokers, withDir(dir, "node-a"))
	create(ctx, t, a, topic)
	e := claimEpoch(ctx, t, a, topic, 1)
	require.NoError(t, appendTo(ctx, a, topic, 1, "a"))
	_, err := a.Release(ctx, topic, 1)
	require.NoError(t, err)
	require.NoError(t, a.Close())

	a = openStore(t, brokers, withDir(dir, "node-a"))
	h, released := held(ctx, t, a, topic, 1)
	require.Equal(t, e, h)
	require.True(t, released, "Ownership shows the region released")
	err = appendTo(ctx, a, topic, 1, "after release")
	var fe *kafka.FencedError
	require.ErrorAs(t, err, &fe)
	require.True(t, fe.Released)

	require.Equal(t, e+1, claimEpoch(ctx, t, a, topic, 1))
	require.NoError(t, appendTo(ctx, a, topic, 1, "claimed again"))
}

// TestRestartWithAnotherOwnerResumesNothing: a store reopened with an
// Owner other than the one its epochs were claimed under holds nothing
// (logged at INFO), so its appends of those regions are fenced by its old
// claims; the new name is kept from then on.
func TestRestartWithAnotherOwnerResumesNothing(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)
	dir := t.TempDir()

	a := openStore(t, brokers, withDir(dir, "node-a"))
	create(ctx, t, a, topic)
	e := claimEpoch(ctx, t, a, topic, 1)
	require.NoError(t, a.Close())

	logs := &recordingHandler{}
	b := openStore(t, brokers, withDir(dir, "node-b", func(c *kafka.Config) { c.Logger = slog.New(logs) }))
	h, _ := held(ctx, t, b, topic, 1)
	require.Zero(t, h)
	err := appendTo(ctx, b, topic, 1, "b")
	var fe *kafka.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, e, fe.Newer)
	require.Equal(t, "node-a", fe.Owner)
	lines := logs.find("kwal: Config.Owner is not the owner the held epochs were claimed under: resuming none")
	require.Len(t, lines, 1)
	require.Equal(t, "node-b", lines[0]["owner"])
	require.Equal(t, "node-a", lines[0]["held_by"])
	require.NoError(t, b.Close())
	owner, _ := heldOnDisk(t, dir)
	require.Equal(t, "node-b", owner)
}

// TestRestartWithoutIndexDirHoldsNothing: without a writable IndexDir or
// IndexStore nothing is kept, as before: a restarted store holds no
// region and its appends are fenced by its own earlier claims. A store
// opened read-only on another store's directory neither resumes that
// store's epochs (it would write as that store) nor writes the file.
func TestRestartWithoutIndexDirHoldsNothing(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)

	unindexed := t.TempDir()
	for _, c := range []struct {
		name   string
		region logstore.RegionID
		mutate func(*kafka.Config)
	}{
		{"no IndexDir", 1, func(c *kafka.Config) { c.Owner = "memory" }},
		{"DisableIndex", 2, func(c *kafka.Config) { c.Owner, c.IndexDir, c.DisableIndex = "noindex", unindexed, true }},
	} {
		s := openStore(t, brokers, c.mutate)
		create(ctx, t, s, topic)
		claimEpoch(ctx, t, s, topic, c.region)
		require.NoError(t, s.Close())
		s = openStore(t, brokers, c.mutate)
		h, _ := held(ctx, t, s, topic, c.region)
		require.Zero(t, h, c.name)
		require.ErrorIs(t, appendTo(ctx, s, topic, c.region, "x"), kafka.ErrFenced, c.name)
		require.NoError(t, s.Close())
	}
	require.NoFileExists(t, heldFile(unindexed), "without the index nothing is kept")

	dir := t.TempDir()
	w := openStore(t, brokers, withDir(dir, "writer"))
	e := claimEpoch(ctx, t, w, topic, 7)
	require.NoError(t, w.Close())
	before, err := os.ReadFile(heldFile(dir))
	require.NoError(t, err)
	ro := openStore(t, brokers, withDir(dir, "", func(c *kafka.Config) { c.IndexReadOnly = true }))
	h, _ := held(ctx, t, ro, topic, 7)
	require.Zero(t, h, "a read-only store resumes nothing")
	require.ErrorIs(t, appendTo(ctx, ro, topic, 7, "ro"), kafka.ErrFenced)
	claimEpoch(ctx, t, ro, topic, 8)
	require.NoError(t, ro.Close())
	after, err := os.ReadFile(heldFile(dir))
	require.NoError(t, err)
	require.Equal(t, before, after, "a read-only store never writes the file")

	w = openStore(t, brokers, withDir(dir, "writer"))
	h, _ = held(ctx, t, w, topic, 7)
	require.Equal(t, e, h, "the writer's epochs are intact")
}

// TestRestartWithACorruptHeldEpochsFile: a held-epochs file that is not
// valid (garbage, or an edited field that the checksum catches) is
// logged as a warning naming the file and counted, the store opens
// holding nothing (its old claims fence it: safe) and rewrites a valid
// file, which the next open reads without a warning.
func TestRestartWithACorruptHeldEpochsFile(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)
	dir := t.TempDir()

	a := openStore(t, brokers, withDir(dir, "node-a"))
	create(ctx, t, a, topic)
	e := claimEpoch(ctx, t, a, topic, 1)
	require.NoError(t, a.Close())
	good, err := os.ReadFile(heldFile(dir))
	require.NoError(t, err)

	for name, data := range map[string][]byte{
		"garbage": []byte("\x00not json"),
		"edited":  []byte(replaceOnce(t, string(good), `"epoch":1`, `"epoch":9`)),
	} {
		require.NoError(t, os.WriteFile(heldFile(dir), data, 0o644))
		logs := &recordingHandler{}
		reg := prometheus.NewRegistry()
		a = openStore(t, brokers, withDir(dir, "node-a", func(c *kafka.Config) { c.Logger, c.Registerer = slog.New(logs), reg }))
		warned := logs.find("kwal: the held-epochs file is unreadable; the store holds no region until it claims them again (it is rewritten)")
		require.Len(t, warned, 1, name)
		require.Equal(t, heldFile(dir), warned[0]["file"])
		n, _ := metricSum(t, reg, "kwal_held_epochs_file_errors_total", "op", "read")
		require.Equal(t, 1.0, n, name)
		h, _ := held(ctx, t, a, topic, 1)
		require.Zero(t, h, name)
		err := appendTo(ctx, a, topic, 1, "x")
		var fe *kafka.FencedError
		require.ErrorAs(t, err, &fe, name)
		require.Equal(t, e, fe.Newer, "its own old claim fences it")
		require.NoError(t, a.Close())

		logs = &recordingHandler{}
		a = openStore(t, brokers, withDir(dir, "node-a", func(c *kafka.Config) { c.Logger = slog.New(logs) }))
		require.Empty(t, logs.find("kwal: the held-epochs file is unreadable; the store holds no region until it claims them again (it is rewritten)"), "the file was rewritten valid")
		require.NoError(t, a.Close())
	}
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "%q in %q", old, s)
	return strings.Replace(s, old, new, 1)
}

// TestRestartResumesOnlyWhatTheClaimsTopicGranted: a valid file (its
// checksum right) that holds an epoch the claims topic never granted this
// owner (here one above the region's claims, which no claim would then
// fence) is not resumed: the store warns and holds nothing of the region.
func TestRestartResumesOnlyWhatTheClaimsTopicGranted(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)
	dir := t.TempDir()

	a := openStore(t, brokers, withDir(dir, "node-a"))
	create(ctx, t, a, topic)
	e := claimEpoch(ctx, t, a, topic, 1)
	require.NoError(t, a.Close())
	data, err := os.ReadFile(heldFile(dir))
	require.NoError(t, err)
	var doc struct {
		Body json.RawMessage `json:"body"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	body := replaceOnce(t, string(doc.Body), fmt.Sprintf(`"epoch":%d`, e), fmt.Sprintf(`"epoch":%d`, e+5))
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, []byte(body)))
	forged := fmt.Sprintf(`{"version":1,"crc32c":"%08x","body":%s}`, crc32.Checksum(compact.Bytes(), crc32.MakeTable(crc32.Castagnoli)), body)
	require.NoError(t, os.WriteFile(heldFile(dir), []byte(forged), 0o644))

	logs := &recordingHandler{}
	a = openStore(t, brokers, withDir(dir, "node-a", func(c *kafka.Config) { c.Logger = slog.New(logs) }))
	require.Empty(t, logs.find("kwal: the held-epochs file is unreadable; the store holds no region until it claims them again (it is rewritten)"), "the forged file is valid")
	require.Len(t, logs.find("kwal: not resuming a held epoch: the claims topic holds no claim of it by this owner"), 1)
	h, _ := held(ctx, t, a, topic, 1)
	require.Zero(t, h)
	require.ErrorIs(t, appendTo(ctx, a, topic, 1, "x"), kafka.ErrFenced)
}

// TestRestartAfterNamespaceRecreatedResumesNothing: epochs held of a
// namespace deleted while the store was closed are not resumed, whether
// the namespace was recreated (its new topic starts unclaimed: the
// store's next claim is its first epoch, not one above the old topic's)
// or not; the file forgets them.
func TestRestartAfterNamespaceRecreatedResumesNothing(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recreated, deleted, kept := newTopic(t), newTopic(t)+"-d", newTopic(t)+"-k"
	dir := t.TempDir()

	a := openStore(t, brokers, withDir(dir, "node-a"))
	create(ctx, t, a, recreated, deleted, kept)
	claimEpoch(ctx, t, a, recreated, 1)
	require.Equal(t, uint64(2), claimEpoch(ctx, t, a, recreated, 1))
	claimEpoch(ctx, t, a, deleted, 1)
	ek := claimEpoch(ctx, t, a, kept, 1)
	require.NoError(t, appendTo(ctx, a, recreated, 1, "old topic"))
	require.NoError(t, a.Close())

	b := openStore(t, brokers, nil)
	require.NoError(t, b.DeleteNamespace(ctx, recreated))
	require.NoError(t, b.DeleteNamespace(ctx, deleted))
	require.NoError(t, b.CreateNamespace(ctx, recreated))

	logs := &recordingHandler{}
	a = openStore(t, brokers, withDir(dir, "node-a", func(c *kafka.Config) { c.Logger = slog.New(logs) }))
	require.Len(t, logs.find("kwal: not resuming a held epoch: the namespace's topic was recreated"), 1)
	require.Len(t, logs.find("kwal: not resuming a held epoch: the namespace was deleted"), 1)
	_, onDisk := heldOnDisk(t, dir)
	require.Equal(t, map[string]int64{kept + "/1": int64(ek)}, onDisk, "the file forgets the deleted namespaces' epochs")
	h, _ := held(ctx, t, a, kept, 1)
	require.Equal(t, ek, h)

	require.NoError(t, appendTo(ctx, a, recreated, 1, "new topic"), "the new topic has no claim: epoch 0 writes")
	require.Equal(t, uint64(1), claimEpoch(ctx, t, a, recreated, 1), "the old topic's epoch 2 does not carry over")
}

// failingStore is an index.Store whose writes of the held-epochs file
// fail while fail is set.
type failingStore struct {
	index.Store
	fail atomic.Bool
}

var errInjected = errors.New("injected write failure")

func (f *failingStore) Put(ctx context.Context, name string, data []byte) error {
	if name == "held-epochs.json" && f.fail.Load() {
		return errInjected
	}
	return f.Store.Put(ctx, name, data)
}

// TestHeldEpochsWriteFailureDoesNotFailClaim: a Claim that committed
// returns its claim even when the held-epochs file cannot be written (the
// failure is logged and counted, the epoch is held in memory and
// appends use it), and Close writes the file again, so a restart resumes
// the claim.
func TestHeldEpochsWriteFailureDoesNotFailClaim(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(t)
	dir := t.TempDir()
	ds, err := index.NewDirStore(dir)
	require.NoError(t, err)
	st := &failingStore{Store: ds}
	reg := prometheus.NewRegistry()
	logs := &recordingHandler{}
	a := openStore(t, brokers, func(c *kafka.Config) {
		c.IndexStore, c.Owner, c.PruneInterval, c.Registerer, c.Logger = st, "node-a", 0, reg, slog.New(logs)
	})
	create(ctx, t, a, topic)
	st.fail.Store(true)
	e := claimEpoch(ctx, t, a, topic, 1)
	n, _ := metricSum(t, reg, "kwal_held_epochs_file_errors_total", "op", "write")
	require.Equal(t, 1.0, n)
	failed := logs.find("kwal: writing the held epochs failed: they are held in memory, and a restart before the next write that succeeds resumes the file's older state")
	require.Len(t, failed, 1)
	require.ErrorIs(t, failed[0]["err"].(error), errInjected)
	require.NoError(t, appendTo(ctx, a, topic, 1, "a"))
	st.fail.Store(false)
	require.NoError(t, a.Close(), "Close writes the file the claim could not")

	a = openStore(t, brokers, func(c *kafka.Config) { c.IndexStore, c.Owner, c.PruneInterval = st, "node-a", 0 })
	h, _ := held(ctx, t, a, topic, 1)
	require.Equal(t, e, h)
	require.NoError(t, appendTo(ctx, a, topic, 1, "after restart"))
}
