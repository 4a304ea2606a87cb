package kafka_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore/kafka/claim"
)

// Records of the claims topic that kwal did not write, for the fencing
// model (fencing_prop_test.go).

// intruderEvent is a well-formed event that would outrank every claim of
// region, were it folded as region's: a record that must change nothing
// carries it where it can, so that folding it by mistake shows.
func intruderEvent(ns, topicID string, region uint64) claim.Event {
	return claim.Event{Op: claim.OpPending, Namespace: ns, Region: region, TopicID: topicID, Epoch: 1000, Token: "intruder", Owner: "intruder"}
}

// claimsNoise returns records of the claims topic that must change nothing
// of namespace ns's regions, and what they are, one of each kind: records
// whose key names no region (whatever their value, a well-formed event of
// region included), a record of a region of another namespace (readable
// or not), and well-formed events of region of another topic incarnation
// (topic ID). A skip naming an offset that is not unreadable, and a
// transaction's markers, are made by the model.
func claimsNoise(rng *rand.Rand, ns, topicID string, region uint64) ([]*kgo.Record, string) {
	intruder := claim.Encode(intruderEvent(ns, topicID, region))
	keys := []struct {
		key  []byte
		what string
	}{
		{nil, "a null key"},
		{[]byte{}, "an empty key"},
		{[]byte("someone else's"), "a key of another program"},
		{[]byte(ns), "the namespace alone"},
		{[]byte(ns + "/"), "no region"},
		{fmt.Appendf(nil, "%s/0%d", ns, region), "a region with a leading zero"},
		{fmt.Appendf(nil, "%s/+%d", ns, region), "a region with a sign"},
		{fmt.Appendf(nil, "%s/%d ", ns, region), "a region with a trailing space"},
		{fmt.Appendf(nil, "%s/%d/x", ns, region), "a path below the region"},
		{fmt.Appendf(nil, "/%d", region), "no namespace"},
		{fmt.Appendf(nil, "not a namespace!/%d", region), "a namespace that is no topic name"},
		{[]byte(ns + "/18446744073709551616"), "a region beyond uint64"},
	}
	values := []struct {
		value []byte
		what  string
	}{
		{intruder, "the region's well-formed event of epoch 1000"},
		{nil, "a null value"},
		{[]byte("{garbage"), "broken JSON"},
		{payload(rng, 1+rng.IntN(64)), "random bytes"},
	}
	var recs []*kgo.Record
	var whats []string
	for _, i := range rng.Perm(len(keys))[:3] {
		v := values[rng.IntN(len(values))]
		recs = append(recs, &kgo.Record{Key: keys[i].key, Value: v.value})
		whats = append(whats, fmt.Sprintf("%s with %s", keys[i].what, v.what))
	}
	other := ns + "-other"
	if rng.IntN(2) == 0 {
		recs = append(recs, &kgo.Record{Key: claim.Key(other, region), Value: []byte("{garbage")})
		whats = append(whats, fmt.Sprintf("an unreadable record of region %d of namespace %q", region, other))
	} else {
		recs = append(recs, &kgo.Record{Key: claim.Key(other, region), Value: claim.Encode(intruderEvent(other, topicID, region))})
		whats = append(whats, fmt.Sprintf("a claim of region %d of namespace %q", region, other))
	}
	ev := intruderEvent(ns, "00000000000000000000000000000001", region)
	commit := ev
	commit.Op, commit.At = claim.OpCommit, 0
	recs = append(recs, &kgo.Record{Key: claim.Key(ns, region), Value: claim.Encode(ev)}, &kgo.Record{Key: claim.Key(ns, region), Value: claim.Encode(commit)})
	whats = append(whats, "a claim of the region (epoch 1000, pending and committed) in another topic incarnation")
	return recs, strings.Join(whats, "; ")
}

// badClaimsValue returns a value of region's key that makes region
// unreadable: one that does not decode, whose fields contradict each
// other, or of a newer format version. Those that parse would outrank
// every claim of region, were they folded.
func badClaimsValue(rng *rand.Rand, ns, topicID string, region uint64) ([]byte, string) {
	head := fmt.Sprintf(`"ns":%q,"region":%d,"topic_id":%q,"token":"intruder","owner":"intruder"`, ns, region, topicID)
	values := []struct {
		value string
		what  string
	}{
		{"{garbage", "broken JSON"},
		{"", "an empty value"},
		{"null", "JSON null"},
		{"[1,2,3]", "a JSON array"},
		{"42", "a JSON number"},
		{fmt.Sprintf(`{"v":9,"op":"pending",%s,"epoch":1000}`, head), "a pending claim of format version 9"},
		{fmt.Sprintf(`{"v":2,"op":"commit",%s,"epoch":1000,"at":1}`, head), "a commit of format version 2"},
		{fmt.Sprintf(`{"op":"pending","ns":%q,"region":%d,"topic_id":%q,"token":"t","epoch":1000}`, ns, region+1000, topicID), "another region's event under this region's key"},
		{fmt.Sprintf(`{"op":"steal",%s,"epoch":1000}`, head), "an unknown op"},
		{fmt.Sprintf(`{"op":"pending",%s,"epoch":0}`, head), "a pending claim of epoch 0"},
		{fmt.Sprintf(`{"op":"pending","ns":%q,"region":%d,"topic_id":%q,"epoch":1000}`, ns, region, topicID), "a pending claim without a token"},
		{fmt.Sprintf(`{"op":"commit",%s,"epoch":1000,"at":-5}`, head), "a commit at a negative offset"},
		{fmt.Sprintf(`{"op":"pending",%s,"epoch":1000,"lease_ms":-1}`, head), "a negative lease"},
		{fmt.Sprintf(`{"op":"skip","ns":%q,"region":%d,"skip":-1}`, ns, region), "a skip of a negative offset"},
		{fmt.Sprintf(`{"op":"pending","ns":%q,"region":"seven"}`, ns), "a field of the wrong type"},
	}
	i := rng.IntN(len(values) + 1)
	if i == len(values) {
		return payload(rng, 1+rng.IntN(64)), "random bytes"
	}
	v := values[i]
	if v.value == "" && rng.IntN(2) == 0 {
		return nil, "a null value"
	}
	return []byte(v.value), v.what
}

// requireUnreadable checks that err says a region's fencing cannot be
// decided (claim.ErrUnreadable), naming one of offsets: the unreadable
// record the operator is to look at.
func requireUnreadable(t *testing.T, err error, where string, offsets ...int64) {
	t.Helper()
	require.ErrorIs(t, err, claim.ErrUnreadable, where)
	for _, off := range offsets {
		if regexp.MustCompile(fmt.Sprintf(`\boffset %d\b`, off)).MatchString(err.Error()) {
			return
		}
	}
	require.Failf(t, "the error names no unreadable record", "%s: %v names none of the offsets %v", where, err, offsets)
}
