package replay

import (
	"context"
	"encoding/binary"
	"errors"
	"iter"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/internal/retry"
)

// The wire side of reads: one fetch request and what Kafka's answers mean
// (retry after a leader lookup, ErrPruned, a final error).

// fetchResult is one fetch request's outcome. Its record batches stay as
// the broker sent them until they are decoded one at a time: by the fetch
// goroutine while the fetch's charge allows (decodeEarly), the rest by the
// decoder (batches).
type fetchResult struct {
	raw []byte // the partition's record batches
	off int64  // the offset fetched at: records below it are not returned
	// early are the first batches of raw (control batches included, as
	// empty ones), decoded by the fetch goroutine (decodeEarly);
	// earlyBytes is what their records took out of compressed batches,
	// earlyWire those batches' bytes, and earlyCharged what decodeEarly
	// charged to the Pool beyond the fetch's own charge.
	early        []decoded
	earlyBytes   int64
	earlyWire    int64
	earlyCharged int64
	next         int64
	control      []offsetSpan  // offsets of the control batches fetched (controlSpans)
	bytes        int           // record batch bytes fetched
	base         int64         // first offset of the first batch (may be below the offset asked for)
	took         time.Duration // the request's round trip
	retry        error         // a retriable failure: fetch again (after a leader lookup)
	err          error         // a final failure
}

// newFetchRequest is a sessionless consumer fetch request with no topic
// yet.
func newFetchRequest(maxWaitMillis, minBytes, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMillis
	req.MinBytes = minBytes
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	return req
}

// withPartition adds the topic's partition to req, fetched from off with
// at most maxBytes.
func withPartition(req *kmsg.FetchRequest, topic string, topicID [16]byte, off int64, maxBytes int32) *kmsg.FetchRequest {
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, topicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, off, maxBytes
	p.LogStartOffset, p.CurrentLeaderEpoch = -1, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// fetchOnce issues one fetch request for topic at off to m's leader
// through cl. It touches no pass state, so several may run at once.
func (r *Reads) fetchOnce(ctx context.Context, cl *kgo.Client, topic string, m topicMeta, off int64, maxBytes int32, mode string) fetchResult {
	req := withPartition(newFetchRequest(100, 1, max(maxBytes, 1)), topic, m.id, off, max(maxBytes, 1))
	began := time.Now()
	kresp, err := cl.Broker(int(m.leader)).Request(ctx, req)
	took := time.Since(began)
	r.metrics.fetchLatency.Observe(took.Seconds())
	r.metrics.fetches.WithLabelValues(topic, mode).Inc()
	if err != nil {
		return fetchResult{retry: err}
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fetchResult{retry: err}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fetchResult{err: kwalerr.Errorf("read %q: fetch at offset %d: malformed response", topic, off)}
	}
	rp := &resp.Topics[0].Partitions[0]
	perr := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case perr == nil:
		raw := rp.RecordBatches
		r.metrics.fetchedBytes.WithLabelValues(topic, mode).Add(float64(len(raw)))
		base := off
		if len(raw) >= 8 {
			base = min(off, int64(binary.BigEndian.Uint64(raw)))
		}
		return fetchResult{raw: raw, off: off, next: r.frameEnd(topic, raw, off), bytes: len(raw), base: base, took: took, control: controlSpans(raw)}
	case errors.Is(perr, kerr.OffsetOutOfRange):
		return fetchResult{err: r.outOfRange(ctx, topic, off, perr)}
	case errors.Is(perr, kerr.UnknownTopicOrPartition), errors.Is(perr, kerr.UnknownTopicID):
		// Perhaps a cached topic ID went stale; the metadata lookup before
		// the retry tells a deleted topic apart.
		r.meta.forget(topic)
		return fetchResult{retry: perr}
	case kerr.IsRetriable(perr):
		return fetchResult{retry: perr}
	default:
		return fetchResult{err: kwalerr.Errorf("read %q: fetch at offset %d: %w", topic, off, perr)}
	}
}

// fetchAt issues fetch requests for topic at off until one succeeds, fails
// for good, or RequestTimeout passes, looking the leader up again between
// attempts. Reads use it for what they fetch outside their pipeline (a
// retried chunk, a spilled entry read again, the search for a prune mark).
// ld is the caller's leader (looked up when zero), kept up to date.
func (r *Reads) fetchAt(ctx context.Context, topic string, ld *leader, off int64, maxBytes int32, mode string) (fetchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	var res fetchResult
	ended, err := retry.Every(ctx, r.opts.RetryBackoff, func(attempt int) (bool, error) {
		if attempt > 0 || !ld.known {
			if err := ld.refresh(ctx, r, topic); err != nil {
				if res.retry != nil {
					return true, kwalerr.Errorf("%w (after a fetch at offset %d failed: %w)", err, off, res.retry)
				}
				return true, err
			}
		}
		res = r.fetchOnce(ctx, r.opts.Host.FetchClient(r.opts.Conns-1), topic, ld.m, off, maxBytes, mode)
		if res.err != nil {
			return true, res.err
		}
		if res.retry != nil {
			r.log.Debug("kwal: retrying fetch", "topic", topic, "offset", off, "attempt", attempt, "err", res.retry)
			return false, res.retry
		}
		return true, nil
	})
	if ended {
		return res, kwalerr.Errorf("read %q: fetch at offset %d: %w", topic, off, err)
	}
	return res, err
}

// leader is a caller's view of a topic's partition-0 leader: looked up
// from the store's cache first, from the broker after a fetch found it
// stale.
type leader struct {
	m     topicMeta
	known bool
	stale bool // the next lookup goes to the broker
}

// refresh looks the leader up (see leader).
func (ld *leader) refresh(ctx context.Context, r *Reads, topic string) error {
	m, err := r.topicMeta(ctx, topic, ld.stale)
	if err != nil {
		return kwalerr.Errorf("read %q: %w", topic, err)
	}
	ld.m, ld.known, ld.stale = m, true, true
	return nil
}

// outOfRange turns an OFFSET_OUT_OF_RANGE into ErrPruned when the log
// start moved past off (retention or pruning ran during the read); the
// fetcher then checks whether the pass needed what went (startMovedError).
func (r *Reads) outOfRange(ctx context.Context, topic string, off int64, cause error) error {
	start, end, err := r.opts.Host.Offsets(ctx, topic)
	if err == nil && start > off {
		return &startMovedError{
			pruned: &logstore.PrunedError{Namespace: topic, Requested: logstore.EntryID(off + 1), FirstAvailable: logstore.EntryID(start + 1)},
			start:  start, end: end, cause: cause,
		}
	}
	return kwalerr.Errorf("read %q: fetch at offset %d: %w", topic, off, cause)
}

// offsetSpan is the offsets [from, to).
type offsetSpan struct{ from, to int64 }

// controlSpans returns the offsets of the complete control batches in a
// fetch response's record batches: they hold no record, and are no gap.
func controlSpans(raw []byte) []offsetSpan {
	var control []offsetSpan
	for b := range batchFrames(raw) {
		if b.control && b.next > 0 {
			control = append(control, offsetSpan{from: b.base, to: b.next})
		}
	}
	return control
}

// frameEnd is the offset after the last complete batch of raw (off when
// there is none): format 2 batches say it in their header; an older
// message set is decoded to find its last offset.
func (r *Reads) frameEnd(topic string, raw []byte, off int64) int64 {
	next := off
	for b := range batchFrames(raw) {
		if b.v2 && b.next > 0 {
			next = max(next, b.next)
			continue
		}
		_, n := r.processBatch(topic, b.raw, off)
		next = max(next, n)
	}
	return next
}

// batch is the records of one record batch of a response at or above the
// offset fetched.
type batch struct {
	records []*kgo.Record
	// uncharged: its records point into a buffer no Pool charge covers (a
	// batch the decoder decompressed): the decoder copies out what it keeps.
	uncharged bool
}

// decoded is one frame of a response as decode leaves it.
type decoded struct {
	batch
	skip bool // a control batch, or one wholly below the offset fetched
	err  error
}

// decode decodes the frame b of res (kgo checks its CRC and decompresses
// it); an error names its first offset.
func (r *Reads) decode(topic string, res *fetchResult, b batchFrame) decoded {
	if b.control || (b.next > 0 && b.next <= res.off) {
		return decoded{skip: true}
	}
	fp, _ := r.processBatch(topic, b.raw, res.off)
	if fp.Err != nil {
		return decoded{err: &logstore.CorruptError{Namespace: topic, Offset: max(b.base, res.off), Err: fp.Err}}
	}
	return decoded{batch: batch{records: fp.Records, uncharged: b.compressed}}
}

// decodeEarly decodes res's batches that begin below end (the chunk's; the
// decoder reads no further) in the fetch goroutine, ahead of the decoder:
// within what the fetch was charged when it started (charged, its bytes
// times the expansion measured), and beyond it while budget b of the Pool
// has room, charging the excess batch by batch. It never waits, and leaves
// the rest to the decoder. A pass's decoder is one goroutine: this is what
// spreads decompression over the fetch connections. Each fetch goroutine
// passes the budget by at most one batch.
func (r *Reads) decodeEarly(topic string, res *fetchResult, b budget, charged, end int64) {
	for f := range batchFrames(res.raw) {
		if f.base >= end || int64(res.bytes)+res.earlyBytes >= charged+res.earlyCharged && !r.pool.room(b) {
			return
		}
		d := r.decode(topic, res, f)
		if d.uncharged {
			for _, rec := range d.records {
				res.earlyBytes += int64(len(rec.Key) + len(rec.Value))
			}
			res.earlyWire += int64(len(f.raw))
			d.uncharged = false // charged with the response from here on
		}
		if over := int64(res.bytes) + res.earlyBytes - charged - res.earlyCharged; over > 0 {
			r.pool.add(b, over)
			res.earlyCharged += over
		}
		res.early = append(res.early, d)
		if d.err != nil {
			return
		}
	}
}

// batches yields res's complete record batches in order, control batches
// left out: those decodeEarly decoded, then the rest, each decoded only
// when its turn comes (what a decoder holds beyond the response is then
// the one batch it decodes). A batch that fails kgo's checks (its CRC, its
// decompression) ends the walk with an error naming its first offset.
func (r *Reads) batches(topic string, res *fetchResult) iter.Seq2[batch, error] {
	return func(yield func(batch, error) bool) {
		i := 0
		for f := range batchFrames(res.raw) {
			var d decoded
			if i < len(res.early) {
				d, res.early[i] = res.early[i], decoded{}
			} else {
				d = r.decode(topic, res, f)
			}
			i++
			switch {
			case d.err != nil:
				yield(batch{}, d.err)
				return
			case d.skip:
			case !yield(d.batch, nil):
				return
			}
		}
	}
}

// processBatch decodes one record batch (kgo checks its CRC and
// decompresses it), keeping the records at or above off.
func (r *Reads) processBatch(topic string, raw []byte, off int64) (kgo.FetchPartition, int64) {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.RecordBatches = partition, raw
	return kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: topic, Partition: partition}, &rp, r.decompress, nil)
}

// batchFrame is what the framing of one record batch in a fetch response
// says. Every batch format frames a batch as base offset (8 bytes), length
// (4) and that many bytes; format 2 (the only one kwal's brokers write, and
// the only one with control batches) has its attributes at bytes 21-22
// (bit 0x20: control) and its last offset delta at bytes 23-26, inside a
// 61-byte header; the low 3 bits of its attributes name its compression
// codec (0: none).
type batchFrame struct {
	base int64  // base offset (a log's is never negative; the walk does not check)
	raw  []byte // the whole batch, framing included
	// v2: format 2, with a whole header; control and next are valid.
	v2         bool
	control    bool
	compressed bool
	next       int64 // one past the batch's last offset; 0 when it would overflow or lies below base
}

// batchFrames walks the complete batches at the start of raw (a fetch
// response's record bytes, which the broker sent: any bytes), stopping at
// a partial batch or a frame too short to be one.
func batchFrames(raw []byte) iter.Seq[batchFrame] {
	return func(yield func(batchFrame) bool) {
		for len(raw) >= 17 {
			length := int64(int32(binary.BigEndian.Uint32(raw[8:12])))
			if length < 5 || 12+length > int64(len(raw)) {
				return // a partial batch at the end of the response
			}
			b := batchFrame{base: int64(binary.BigEndian.Uint64(raw[0:8])), raw: raw[:12+length]}
			if raw[16] == 2 && len(b.raw) >= 61 {
				b.v2 = true
				attrs := binary.BigEndian.Uint16(raw[21:23])
				b.control, b.compressed = attrs&0x20 != 0, attrs&0x07 != 0
				last := int64(int32(binary.BigEndian.Uint32(raw[23:27])))
				if b.base >= 0 && last >= 0 && b.base <= math.MaxInt64-last-1 {
					b.next = b.base + last + 1
				}
			}
			if !yield(b) {
				return
			}
			raw = raw[len(b.raw):]
		}
	}
}
