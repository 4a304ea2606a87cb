package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// oneLine asserts what every error of the store reads like (the rule in
// doc.go): one line, "kwal: " once and at its start. It returns the text.
func oneLine(t *testing.T, what string, err error) string {
	t.Helper()
	require.Error(t, err, what)
	msg := err.Error()
	require.NotContains(t, msg, "\n", "%s: %q", what, msg)
	require.True(t, strings.HasPrefix(msg, "kwal: "), "%s: %q", what, msg)
	require.Equal(t, 1, strings.Count(msg, "kwal: "), "%s: %q", what, msg)
	return msg
}

// readError drains a read and returns its error.
func readError(seq func(func(logstore.Entry, error) bool)) error {
	_, err := readErr(seq)
	return err
}

// TestErrorTextsOfAnUnknownNamespace: every call on a namespace that does
// not exist (AutoCreateTopics off) says so in one line that names the
// call and the namespace once, matches ErrUnknownNamespace, and keeps
// Kafka's error in the chain without printing it.
func TestErrorTextsOfAnUnknownNamespace(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The claims topic exists, as on any cluster kwal has claimed on: a
	// Claim then fails for its own namespace, not for the claims topic.
	_, err := openStore(t, brokers, nil).Claim(ctx, newTopic(t), 1)
	require.NoError(t, err)
	s := openStore(t, brokers, func(c *kafka.Config) { c.AutoCreateTopics = false; c.IndexDir = t.TempDir() })
	ns := newTopic(t)

	_, err = s.Claim(ctx, ns, 5)
	require.Equal(t, fmt.Sprintf(`kwal: claim %q region 5: unknown namespace`, ns), oneLine(t, "Claim", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	err = readError(s.Read(ctx, ns, 1, 0))
	require.Equal(t, fmt.Sprintf(`kwal: read %q: unknown namespace`, ns), oneLine(t, "Read", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	require.ErrorIs(t, err, kerr.UnknownTopicOrPartition, "Kafka's error stays in the chain")
	err = readError(s.ReadRegions(ctx, ns, map[logstore.RegionID]logstore.EntryID{1: 0, 2: 7}))
	require.Equal(t, fmt.Sprintf(`kwal: read %q: unknown namespace`, ns), oneLine(t, "ReadRegions", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
	require.Equal(t, fmt.Sprintf(`kwal: append to %q: unknown namespace`, ns), oneLine(t, "AppendBatch", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	_, err = s.LatestEntryID(ctx, ns)
	require.Equal(t, fmt.Sprintf(`kwal: latest entry ID of %q: unknown namespace`, ns), oneLine(t, "LatestEntryID", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)

	err = s.Obsolete(ctx, ns, 1, 1)
	require.Equal(t, fmt.Sprintf(`kwal: obsolete %q region 1 up to 1: unknown namespace`, ns), oneLine(t, "Obsolete", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	_, err = s.Prune(ctx, ns)
	require.Equal(t, fmt.Sprintf(`kwal: prune %q: unknown namespace`, ns), oneLine(t, "Prune", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)
	_, err = s.PruneWith(ctx, ns, kafka.PruneOptions{DryRun: true})
	require.Equal(t, fmt.Sprintf(`kwal: prune %q: unknown namespace`, ns), oneLine(t, "PruneWith", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	_, err = s.Ownership(ctx, ns)
	require.Equal(t, fmt.Sprintf(`kwal: ownership of %q: unknown namespace`, ns), oneLine(t, "Ownership", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	_, err = s.TopicRetention(ctx, ns)
	require.Equal(t, fmt.Sprintf(`kwal: topic retention of %q: unknown namespace`, ns), oneLine(t, "TopicRetention", err))
	require.ErrorIs(t, err, kafka.ErrUnknownNamespace)

	// Deleting what does not exist deletes what is left of it (an index)
	// and is no error.
	require.NoError(t, s.DeleteNamespace(ctx, ns))
}

// TestErrorTextsOfAnInvalidNamespace: every entry point refuses a name
// that cannot be a namespace before it sends anything, in one line that
// names it once.
func TestErrorTextsOfAnInvalidNamespace(t *testing.T) {
	t.Parallel()
	s := openStore(t, testutil.Brokers(t), nil)
	ctx := context.Background()
	const bad = "no spaces"
	calls := map[string]func() error{
		"AppendBatch": func() error {
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: bad, Region: 1, Data: []byte("x")}})
			return err
		},
		"Read":        func() error { return readError(s.Read(ctx, bad, 1, 0)) },
		"ReadRegions": func() error { return readError(s.ReadRegions(ctx, bad, map[logstore.RegionID]logstore.EntryID{1: 0})) },
		"LatestEntryID": func() error {
			_, err := s.LatestEntryID(ctx, bad)
			return err
		},
		"Obsolete":        func() error { return s.Obsolete(ctx, bad, 1, 1) },
		"CreateNamespace": func() error { return s.CreateNamespace(ctx, bad) },
		"DeleteNamespace": func() error { return s.DeleteNamespace(ctx, bad) },
		"Prune": func() error {
			_, err := s.Prune(ctx, bad)
			return err
		},
		"PruneWith": func() error {
			_, err := s.PruneWith(ctx, bad, kafka.PruneOptions{DryRun: true})
			return err
		},
		"Claim": func() error {
			_, err := s.Claim(ctx, bad, 1)
			return err
		},
		"Release": func() error {
			_, err := s.Release(ctx, bad, 1)
			return err
		},
		"Ownership": func() error {
			_, err := s.Ownership(ctx, bad)
			return err
		},
		"TopicRetention": func() error {
			_, err := s.TopicRetention(ctx, bad)
			return err
		},
		"SkipClaimsRecord": func() error { return s.SkipClaimsRecord(ctx, bad, 1, 0) },
	}
	for name, call := range calls {
		err := call()
		msg := oneLine(t, name, err)
		require.ErrorIs(t, err, kafka.ErrInvalidNamespace, name)
		require.Contains(t, msg, `invalid namespace: "no spaces" is not a valid topic name: ' ' is not one of [a-zA-Z0-9._-]`, name)
	}
}

// TestErrorTextsOfRefusedCalls: an ID from the future, an entry too
// large, a fenced append (before and after its write, one region and two)
// and Obsolete, and a read of pruned entries each fail in one line that
// matches its sentinel and keeps its particulars reachable.
func TestErrorTextsOfRefusedCalls(t *testing.T) {
	t.Parallel()
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := openStore(t, brokers, func(c *kafka.Config) { c.Owner = "a"; c.MaxEntryBytes = 1 << 10; c.IndexDir = t.TempDir() })
	b := openStore(t, brokers, func(c *kafka.Config) { c.Owner = "b" })
	ns := newTopic(t)
	var ids []logstore.EntryID
	for i := range 4 {
		res, err := a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: fmt.Appendf(nil, "e%d", i)}})
		require.NoError(t, err)
		ids = append(ids, res.LastEntryIDs[1])
	}
	last := ids[3]

	err := a.Obsolete(ctx, ns, 1, last+5)
	require.Equal(t, fmt.Sprintf("kwal: obsolete %q region 1 up to %d: the namespace's latest entry ID is %d: entry ID beyond the namespace's latest", ns, last+5, last),
		oneLine(t, "Obsolete from the future", err))
	require.ErrorIs(t, err, kafka.ErrFutureID)
	err = readError(a.Read(ctx, ns, 1, last+2))
	require.Equal(t, fmt.Sprintf("kwal: read %q region 1 from ID %d: the namespace's latest entry ID is %d: entry ID beyond the namespace's latest", ns, last+2, last),
		oneLine(t, "Read from the future", err))
	require.ErrorIs(t, err, kafka.ErrFutureID)

	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: make([]byte, 2<<10)}})
	require.Equal(t, fmt.Sprintf("kwal: append: entry 0 of region 1 in %q: 2048 bytes: entry larger than Config.MaxEntryBytes (Config.MaxEntryBytes 1024); nothing was written", ns),
		oneLine(t, "AppendBatch too large", err))
	require.ErrorIs(t, err, kafka.ErrEntryTooLarge)

	// Pruned: region 1 no longer needs its first two entries.
	require.NoError(t, a.Obsolete(ctx, ns, 1, ids[1]))
	first, err := a.Prune(ctx, ns)
	require.NoError(t, err)
	require.Equal(t, ids[2], first)
	err = readError(a.Read(ctx, ns, 1, 0))
	msg := oneLine(t, "Read of pruned entries", err)
	require.ErrorIs(t, err, logstore.ErrPruned)
	var pe *logstore.PrunedError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, ids[2], pe.FirstAvailable)
	require.Contains(t, msg, fmt.Sprintf("the first ID still available is %d", ids[2]))

	// Fenced: B claims regions 1 and 2, which A wrote. A's next append of
	// both is written, then refused for each of them (one line); the
	// next ones are refused before anything is written.
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 2, Data: []byte("r2")}})
	require.NoError(t, err)
	for _, r := range []logstore.RegionID{1, 2} {
		_, err := b.Claim(ctx, ns, r)
		require.NoError(t, err)
	}
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("zombie")}, {Namespace: ns, Region: 2, Data: []byte("zombie")}})
	require.Equal(t, fmt.Sprintf(`kwal: append %q region 1: writer's epoch 0, the region is claimed under epoch 1 by "b": fenced; append %q region 2: writer's epoch 0, the region is claimed under epoch 1 by "b": fenced`, ns, ns),
		oneLine(t, "AppendBatch fenced after its write", err))
	require.ErrorIs(t, err, kafka.ErrFenced)
	fenced := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, fenced, 2, "each region's refusal is in the chain")
	for i, e := range fenced {
		var fe *kafka.FencedError
		require.ErrorAs(t, e, &fe)
		require.Equal(t, logstore.RegionID(i+1), fe.Region)
		require.Equal(t, "b", fe.Owner)
	}
	_, err = a.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("zombie2")}})
	require.Equal(t, fmt.Sprintf(`kwal: append %q region 1: writer's epoch 0, the region is claimed under epoch 1 by "b": fenced; nothing was written`, ns),
		oneLine(t, "AppendBatch fenced before its write", err))
	var fe *kafka.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(1), fe.Newer)
	err = a.Obsolete(ctx, ns, 1, ids[3])
	require.Equal(t, fmt.Sprintf(`kwal: obsolete %q region 1 up to %d: obsolete %q region 1: writer's epoch 0, the region is claimed under epoch 1 by "b": fenced`, ns, ids[3], ns),
		oneLine(t, "Obsolete fenced", err))
	require.ErrorIs(t, err, kafka.ErrFenced)

	_, err = b.Release(ctx, ns, 1)
	require.NoError(t, err)
	_, err = b.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("released")}})
	require.Equal(t, fmt.Sprintf(`kwal: append %q region 1: this store released the region (epoch 1): fenced; nothing was written`, ns),
		oneLine(t, "AppendBatch of a released region", err))
	require.ErrorIs(t, err, kafka.ErrFenced)
}

// TestErrorTextsAfterClose: every call on a closed store fails in one
// line matching ErrClosed.
func TestErrorTextsAfterClose(t *testing.T) {
	t.Parallel()
	s := openStore(t, testutil.Brokers(t), nil)
	ctx := context.Background()
	ns := newTopic(t)
	_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	calls := map[string]func() error{
		"AppendBatch": func() error {
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
			return err
		},
		"Read":        func() error { return readError(s.Read(ctx, ns, 1, 0)) },
		"ReadRegions": func() error { return readError(s.ReadRegions(ctx, ns, map[logstore.RegionID]logstore.EntryID{1: 0})) },
		"LatestEntryID": func() error {
			_, err := s.LatestEntryID(ctx, ns)
			return err
		},
		"Obsolete":        func() error { return s.Obsolete(ctx, ns, 1, 1) },
		"CreateNamespace": func() error { return s.CreateNamespace(ctx, ns) },
		"DeleteNamespace": func() error { return s.DeleteNamespace(ctx, ns) },
		"ListNamespaces": func() error {
			_, err := s.ListNamespaces(ctx)
			return err
		},
		"Prune": func() error {
			_, err := s.Prune(ctx, ns)
			return err
		},
		"PruneWith": func() error {
			_, err := s.PruneWith(ctx, ns, kafka.PruneOptions{})
			return err
		},
		"Claim": func() error {
			_, err := s.Claim(ctx, ns, 1)
			return err
		},
		"Release": func() error {
			_, err := s.Release(ctx, ns, 1)
			return err
		},
		"Ownership": func() error {
			_, err := s.Ownership(ctx, ns)
			return err
		},
		"TopicRetention": func() error {
			_, err := s.TopicRetention(ctx, ns)
			return err
		},
	}
	for name, call := range calls {
		err := call()
		oneLine(t, name, err)
		require.ErrorIs(t, err, logstore.ErrClosed, name)
	}
}

// TestErrorTextOfConfigValidate: every bad field is named, in one line
// with the prefix once, and each field's error is in the chain; Open
// fails with it.
func TestErrorTextOfConfigValidate(t *testing.T) {
	t.Parallel()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = []string{"nohostport"}
	cfg.MaxBatchBytes = 10
	cfg.Fencing = "loose"
	err := cfg.Validate()
	msg := oneLine(t, "Validate", err)
	require.Equal(t, `kwal: config: Fencing: "loose" is not "strict", "lease" or "off"; config: Brokers[0]: "nohostport" is not host:port; config: MaxBatchBytes: 10 is outside [257, 67108864]`, msg)
	parts := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, parts, 3)
	for _, p := range parts {
		oneLine(t, "a field's error", p)
	}
	_, err = kafka.Open(context.Background(), cfg)
	require.Equal(t, msg, oneLine(t, "Open", err))
}
