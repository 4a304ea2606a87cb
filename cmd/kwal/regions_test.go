package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/claim"
)

// openNode opens a store playing a datanode named owner on the flags'
// brokers, with an index dir of its own.
func openNode(t *testing.T, flags []string, owner string) *kafka.LogStore {
	t.Helper()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = strings.Split(flagValue(flags, "--brokers"), ",")
	cfg.IndexDir = t.TempDir()
	cfg.Owner = owner
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// showRow returns the fields of region's row in a regions show table.
func showRow(t *testing.T, stdout string, region int) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Regexp(t, `^REGION +OWNER +EPOCH +CLAIM OFFSET +SEALED ID +CLAIMS +PENDING +RELEASED +CLAIMED AT +FENCED ENTRIES SEEN +UNREADABLE EVENTS$`, lines[0])
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == fmt.Sprint(region) {
			return f
		}
	}
	t.Fatalf("no row of region %d in\n%s", region, stdout)
	return nil
}

// TestRegionsClaimShowRelease protects what the regions commands say of a
// region moving between owners: a claim from the CLI fences the datanode
// that wrote the region (its next append fails, and show counts the entry
// it left above the claim), show reports each claim's owner, epoch, claim
// offset and sealed ID as the library's Ownership and Claim return them, a
// second claim from another store takes over, and a release from the CLI
// says it changed nothing (exit 1) while the datanode's own release shows.
func TestRegionsClaimShowRelease(t *testing.T) {
	flags := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "owned"
	a := openNode(t, flags, "node-a")
	require.NoError(t, a.CreateNamespace(ctx, ns))
	var lastA logstore.EntryID
	for i := range 3 {
		res, err := a.AppendBatch(ctx, []logstore.Entry{
			{Namespace: ns, Region: 1, Data: []byte(fmt.Sprintf("a%d", i))},
			{Namespace: ns, Region: 2, Data: []byte(fmt.Sprintf("other%d", i))},
		})
		require.NoError(t, err)
		lastA = res.LastEntryIDs[1]
	}

	r := kwal(t, nil, append([]string{"regions", "claim", "-n", ns, "-r", "1", "--owner", "operator"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "claimed region 1 of owned: epoch 1, owner operator\n")
	require.Contains(t, r.stdout, fmt.Sprintf("; sealed ID %d:", lastA))
	require.Contains(t, r.stdout, "previously never claimed (epoch 0)")
	claimOffset := regexp.MustCompile(`claim record at offset (\d+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, claimOffset, r.stdout)

	// The old owner is fenced: its append lands above the claim, is
	// refused, and no replay returns it.
	_, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("zombie")}})
	require.ErrorIs(t, err, kafka.ErrFenced)

	r = kwal(t, nil, append([]string{"regions", "show", "-n", ns}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 2, "only the claimed region is listed:\n%s", r.stdout)
	row := showRow(t, r.stdout, 1)
	// REGION OWNER EPOCH OFFSET SEALED CLAIMS PENDING RELEASED AT FENCED
	require.Equal(t, []string{"1", "operator", "1", claimOffset[1], fmt.Sprint(lastA), "1", "-", "no"}, row[:8])
	_, err = time.Parse(time.RFC3339, row[8])
	require.NoError(t, err, "claimed at: %s", row[8])
	require.Equal(t, "1", row[9], "the zombie entry is a fenced entry seen")

	r = kwal(t, nil, append([]string{"regions", "show", "-n", ns, "-r", "1", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var got regionRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Equal(t, "operator", got.Owner)
	require.Equal(t, uint64(1), got.Epoch)
	require.Equal(t, claimOffset[1], fmt.Sprint(got.ClaimOffset))
	require.Equal(t, uint64(lastA), got.SealedID)
	require.NotNil(t, got.FencedSeen)
	require.Equal(t, int64(1), *got.FencedSeen)
	require.NotNil(t, got.ClaimedAt)

	r = kwal(t, nil, append([]string{"regions", "show", "-n", ns, "--no-read"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "-", showRow(t, r.stdout, 1)[9], "no read, no count")

	// A second claim, from another store: it takes over under epoch 2, and
	// the zombie entry stays outside the sealed history.
	b := openNode(t, flags, "node-b")
	c, err := b.Claim(ctx, ns, 1)
	require.NoError(t, err)
	require.Equal(t, uint64(2), c.Epoch)
	require.Equal(t, lastA, c.SealedID)
	res, err := b.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("b0")}})
	require.NoError(t, err)
	lastB := res.LastEntryIDs[1]
	require.Greater(t, lastB, lastA)

	r = kwal(t, nil, append([]string{"regions", "show", "-n", ns, "-r", "1"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	row = showRow(t, r.stdout, 1)
	require.Equal(t, []string{"node-b", "2"}, row[1:3])
	require.Equal(t, []string{fmt.Sprint(lastA), "2", "-", "no"}, row[4:8])
	require.Equal(t, "1", row[9])

	// The CLI's release changes nothing, and says so.
	r = kwal(t, nil, append([]string{"regions", "release", "-n", ns, "-r", "1"}, flags...)...)
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, "region 1 of owned: owned by node-b under epoch 2\n", r.stdout)
	require.Contains(t, r.stderr, "release of region 1 of owned changed nothing: this kwal process holds no claim of it")
	res, err = b.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("b1")}})
	require.NoError(t, err, "the owner still writes")
	require.Greater(t, res.LastEntryIDs[1], lastB)

	// The owner's own release is shown.
	last, err := b.Release(ctx, ns, 1)
	require.NoError(t, err)
	require.Equal(t, res.LastEntryIDs[1], last)
	r = kwal(t, nil, append([]string{"regions", "show", "-n", ns, "-r", "1", "--no-read"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "yes", showRow(t, r.stdout, 1)[7])
	r = kwal(t, nil, append([]string{"regions", "release", "-n", ns, "-r", "1"}, flags...)...)
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, "region 1 of owned: owned by node-b under epoch 2, released by it\n", r.stdout)

	// Taken over again from the CLI: the sealed ID is the released owner's
	// last acknowledged entry.
	r = kwal(t, nil, append([]string{"regions", "claim", "-n", ns, "-r", "1", "--owner", "operator"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "claimed region 1 of owned: epoch 3, owner operator\n")
	require.Contains(t, r.stdout, fmt.Sprintf("; sealed ID %d:", last))
	require.Contains(t, r.stdout, "previous owner node-b (epoch 2)")
}

// TestRegionsNeverClaimed protects what the commands say of regions and
// namespaces without claims, and of a namespace that does not exist.
func TestRegionsNeverClaimed(t *testing.T) {
	flags := cluster(t)
	populate(t, flags, "unclaimed", []logstore.RegionID{1, 2}, 2, 10)

	r := kwal(t, nil, append([]string{"regions", "show", "-n", "unclaimed"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no region of unclaimed was ever claimed: every region writes under epoch 0 and nothing is fenced\n", r.stdout)

	r = kwal(t, nil, append([]string{"regions", "claim", "-n", "unclaimed", "-r", "2"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = kwal(t, nil, append([]string{"regions", "claim", "-n", "unclaimed", "-r", "3"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "; sealed ID 0: the region had no earlier entry,", "region 3 never wrote")
	r = kwal(t, nil, append([]string{"regions", "show", "-n", "unclaimed", "-r", "1"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "region 1 of unclaimed: never claimed (epoch 0): its entries are written under epoch 0 and none of them is fenced\n", r.stdout)
	r = kwal(t, nil, append([]string{"regions", "show", "-n", "unclaimed"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 3, r.stdout)
	require.Equal(t, "0", showRow(t, r.stdout, 2)[9], "nothing fenced")
	require.Equal(t, "0", showRow(t, r.stdout, 3)[4], "no sealed entry")

	r = kwal(t, nil, append([]string{"regions", "release", "-n", "unclaimed", "-r", "1"}, flags...)...)
	require.Equal(t, 1, r.code)
	require.Equal(t, "region 1 of unclaimed: never claimed (epoch 0)\n", r.stdout)
	require.Contains(t, r.stderr, "changed nothing")

	for _, args := range [][]string{
		{"regions", "show", "-n", "nowhere"},
		{"regions", "claim", "-n", "nowhere", "-r", "1"},
		{"regions", "release", "-n", "nowhere", "-r", "1"},
	} {
		r = kwal(t, nil, append(args, flags...)...)
		require.Equal(t, 1, r.code, args)
		require.Contains(t, r.stderr, `namespace "nowhere"`, args)
		require.Contains(t, r.stderr, "unknown namespace", args)
		require.Empty(t, r.stdout, args)
	}
	r = kwal(t, nil, append([]string{"namespaces", "list"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"unclaimed"}, listed(r.stdout), "no claim created a namespace, and the claims topic is not one")
}

func TestRegionsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"regions", "show"}, "--namespace is required"},
		{[]string{"regions", "claim", "-n", "ns"}, "--region is required"},
		{[]string{"regions", "claim", "-r", "1"}, "--namespace is required"},
		{[]string{"regions", "release", "-n", "ns"}, "--region is required"},
		{[]string{"regions", "show", "-n", "ns", "-r", "-1"}, "--region"},
		{[]string{"regions", "show", "-n", "ns", "extra"}, "unknown command"},
		{[]string{"regions", "show", "-n", "ns", "--claims-topic", "bad/name"}, "ClaimsTopic"},
	} {
		r := kwal(t, nil, append(c.args, "--brokers", "127.0.0.1:1", "--data-dir", t.TempDir())...)
		require.Equal(t, 1, r.code, c.args)
		require.Contains(t, r.stderr, c.want, c.args)
		require.Empty(t, r.stdout, c.args)
	}
}

// TestRegionsRepair: a record keyed as a region's claims event that does
// not decode shows in regions show with its offset, stops only that
// region's appends, and regions repair refuses an offset that is not an
// unreadable record of the region and repairs it with the right one.
func TestRegionsRepair(t *testing.T) {
	flags := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "repaired"
	a := openNode(t, flags, "node-a")
	require.NoError(t, a.CreateNamespace(ctx, ns))
	for _, r := range []logstore.RegionID{1, 2} {
		_, err := a.Claim(ctx, ns, r)
		require.NoError(t, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(flagValue(flags, "--brokers"), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	rec := &kgo.Record{Topic: kafka.DefaultConfig().ClaimsTopic, Key: claim.Key(ns, 1), Value: []byte("not an event")}
	require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
	require.ErrorIs(t, err, claim.ErrUnreadable)
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 2, Data: []byte("x")}})
	require.NoError(t, err)

	r := kwal(t, nil, append([]string{"regions", "show", "-n", ns}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, strings.Join(showRow(t, r.stdout, 1), " "), fmt.Sprintf("at offsets [%d]", rec.Offset))
	require.Equal(t, "-", showRow(t, r.stdout, 2)[len(showRow(t, r.stdout, 2))-1])

	r = kwal(t, nil, append([]string{"regions", "repair", "-n", ns, "-r", "1", "--skip", fmt.Sprint(rec.Offset - 1)}, flags...)...)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "not an unreadable record of the region")
	r = kwal(t, nil, append([]string{"regions", "repair", "-n", ns, "-r", "1", "--skip", fmt.Sprint(rec.Offset)}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "the region's fencing is decided again")
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
}
