package kafka

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleHeldEpochs() heldEpochsBody {
	return heldEpochsBody{Owner: "node-1", Held: []heldRegion{
		{Namespace: "wal-1", TopicID: "0a1b", Region: 3, Epoch: 2},
		{Namespace: "wal-1", TopicID: "0a1b", Region: 4, Epoch: 1, Released: true},
		{Namespace: "wal-2", TopicID: "ffee", Region: 0, Released: true},
	}}
}

// TestHeldEpochsFileRoundTrips: what the store writes, it reads back as
// written, also after an operator reformats the JSON (the checksum covers
// the body's compact form, not its layout).
func TestHeldEpochsFileRoundTrips(t *testing.T) {
	want := sampleHeldEpochs()
	data := encodeHeldEpochs(want)
	got, err := decodeHeldEpochs(data)
	require.NoError(t, err)
	require.Equal(t, want, got)

	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, data))
	got, err = decodeHeldEpochs(compact.Bytes())
	require.NoError(t, err)
	require.Equal(t, want, got)

	empty, err := decodeHeldEpochs(encodeHeldEpochs(heldEpochsBody{Owner: "x"}))
	require.NoError(t, err)
	require.Equal(t, "x", empty.Owner)
	require.Empty(t, empty.Held)
}

// TestHeldEpochsFileRefusesDamage: a changed field (a flipped released
// flag or epoch would otherwise pass for what the store held), a torn
// file, a newer format version and contradictory entries are all refused
// with errHeldEpochsCorrupt, and no input panics.
func TestHeldEpochsFileRefusesDamage(t *testing.T) {
	good := string(encodeHeldEpochs(sampleHeldEpochs()))
	for name, data := range map[string]string{
		"empty":           "",
		"not JSON":        "garbage\x00\xff",
		"released flip":   strings.Replace(good, `"released":true`, `"released":false`, 1),
		"epoch changed":   strings.Replace(good, `"epoch":2`, `"epoch":9`, 1),
		"checksum":        strings.Replace(good, `"crc32c":"`, `"crc32c":"0`, 1),
		"newer version":   strings.Replace(good, `"version":1`, `"version":2`, 1),
		"truncated":       good[:len(good)/2],
		"no owner":        string(encodeHeldEpochs(heldEpochsBody{})),
		"no topic ID":     string(encodeHeldEpochs(heldEpochsBody{Owner: "a", Held: []heldRegion{{Namespace: "n", Region: 1, Epoch: 1}}})),
		"bad namespace":   string(encodeHeldEpochs(heldEpochsBody{Owner: "a", Held: []heldRegion{{Namespace: "a/b", TopicID: "t", Region: 1, Epoch: 1}}})),
		"nothing held":    string(encodeHeldEpochs(heldEpochsBody{Owner: "a", Held: []heldRegion{{Namespace: "n", TopicID: "t", Region: 1}}})),
		"region twice":    string(encodeHeldEpochs(heldEpochsBody{Owner: "a", Held: []heldRegion{{Namespace: "n", TopicID: "t", Region: 1, Epoch: 1}, {Namespace: "n", TopicID: "t", Region: 1, Epoch: 2}}})),
		"unknown field":   strings.Replace(good, `"owner":`, `"owners":`, 1),
		"body not object": `{"version":1,"crc32c":"00000000","body":[1]}`,
	} {
		require.NotEqual(t, good, data, name)
		_, err := decodeHeldEpochs([]byte(data))
		require.ErrorIs(t, err, errHeldEpochsCorrupt, name)
	}
	// Every cut short of the closing brace (the newline after it is
	// layout).
	for i := range len(good) - 1 {
		_, err := decodeHeldEpochs([]byte(good[:i]))
		require.ErrorIs(t, err, errHeldEpochsCorrupt, "truncated to %d bytes", i)
	}
}
