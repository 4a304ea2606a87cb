package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/kwal/kwal/testutil"
)

// TestKcatSeesWhatKwalWrote is a cross-client check against a real broker:
// kcat (librdkafka, an independent client) reads the topic kwal wrote and
// agrees on the record count, the offsets, each record's region marker in
// the key, and the offsets of the entries kwal acknowledged. It runs only
// with KWAL_KAFKA_BROKERS set (kcat cannot reach an in-process kfake
// through anything kwal controls) and kcat installed.
func TestKcatSeesWhatKwalWrote(t *testing.T) {
	brokers := testutil.RealBrokers()
	if len(brokers) == 0 {
		t.Skip("needs a real broker: set " + testutil.BrokersEnv)
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian package kcat)")
	}
	t.Parallel()
	s := openStore(t, brokers, func(c *kafka.Config) { c.MaxBatchBytes = 2048 })
	ctx := context.Background()
	topic := newTopic(t)
	type want struct {
		region logstore.RegionID
		id     logstore.EntryID
	}
	var acked []want
	for i := range 20 {
		region := logstore.RegionID(i%3 + 1)
		size := 100
		if i%5 == 0 {
			size = 5000 // split into parts
		}
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: topic, Region: region, Data: bytes.Repeat([]byte{byte(i)}, size)}})
		require.NoError(t, err)
		acked = append(acked, want{region, res.LastEntryIDs[region]})
	}
	latest, err := s.LatestEntryID(ctx, topic)
	require.NoError(t, err)

	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, kcat, "-C", "-b", strings.Join(brokers, ","), "-t", topic, "-p", "0",
		"-o", "beginning", "-e", "-q", "-f", "%o|%K|%S|%k\n")
	out, err := cmd.Output()
	require.NoError(t, err, "kcat: %s", out)

	// Parse "<offset>|<key length>|<value length>|<key bytes>\n" records;
	// the key is binary, so it is taken by its length.
	type seen struct {
		offset int64
		key    []byte
	}
	var recs []seen
	for len(out) > 0 {
		var fields [3]int64
		for i := range fields {
			j := bytes.IndexByte(out, '|')
			require.Positive(t, j+1, "malformed kcat output")
			n, err := strconv.ParseInt(string(out[:j]), 10, 64)
			require.NoError(t, err)
			fields[i], out = n, out[j+1:]
		}
		klen := int(fields[1])
		require.Equal(t, record.KeySize, klen, "kwal keys are %d bytes", record.KeySize)
		recs = append(recs, seen{offset: fields[0], key: append([]byte(nil), out[:klen]...)})
		require.Equal(t, byte('\n'), out[klen])
		out = out[klen+1:]
	}
	require.Len(t, recs, int(latest), "kcat sees as many records as the log's end offset")
	byOffset := map[int64][]byte{}
	for i, r := range recs {
		require.Equal(t, int64(i), r.offset, "offsets are contiguous from 0")
		require.True(t, record.IsKwal(r.key), "offset %d carries kwal's magic", r.offset)
		byOffset[r.offset] = r.key
	}
	for _, a := range acked {
		key := byOffset[int64(a.id)-1]
		require.NotNil(t, key, "acknowledged ID %d", a.id)
		require.Equal(t, uint64(a.region), binary.BigEndian.Uint64(key[4:12]), "region marker at offset %d", a.id-1)
		kind := record.Kind(key[3])
		require.Contains(t, []record.Kind{record.KindWhole, record.KindFirst}, kind, fmt.Sprintf("an entry's ID points at its first record (offset %d)", a.id-1))
	}
}
