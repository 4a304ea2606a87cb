// Package rawlog reads a topic with a plain franz-go consumer, independent
// of kwal's read path: the baseline of the benchmarks, the ground truth of
// the tests, and what `kwal dump` and `kwal index show` print.
package rawlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUnknownTopic is matched by Consume's error when the topic does not
// exist.
var ErrUnknownTopic = errors.New("rawlog: unknown topic")

// Consume reads partition 0 of topic with cl, a client created without
// consume options, from offset from (or the log start, if later) up to the
// end offset listed when it starts, calling fn for each record until fn
// returns false. It returns the log's start and end offsets. Each poll
// waits at most pollTimeout; a poll that brings nothing within it ends the
// read (the rest holds no record a consumer sees: transaction markers,
// compacted records). It honours ctx.
func Consume(ctx context.Context, cl *kgo.Client, topic string, from int64, pollTimeout time.Duration, fn func(*kgo.Record) bool) (start, end int64, err error) {
	adm := kadm.NewClient(cl)
	octx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	td, err := adm.ListTopics(octx, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("topic %q: metadata: %w", topic, err)
	}
	if t, ok := td[topic]; !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return 0, 0, fmt.Errorf("topic %q: %w", topic, ErrUnknownTopic)
	} else if t.Err != nil {
		return 0, 0, fmt.Errorf("topic %q: %w", topic, t.Err)
	}
	starts, err := adm.ListStartOffsets(octx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("topic %q: start offset: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(octx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("topic %q: end offset: %w", topic, err)
	}
	so, _ := starts.Lookup(topic, 0)
	eo, _ := ends.Lookup(topic, 0)
	start, end = so.Offset, eo.Offset
	at := max(from, start)
	if at >= end {
		return start, end, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(at)}})
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: {0}})
	next := at
	for next < end {
		pctx, pcancel := context.WithTimeout(ctx, pollTimeout)
		fetches := cl.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		pcancel()
		if err := ctx.Err(); err != nil {
			return start, end, err
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return start, end, fmt.Errorf("topic %q: fetch at offset %d: %w", topic, next, fe.Err)
		}
		progressed, stop := false, false
		fetches.EachRecord(func(rec *kgo.Record) {
			if stop || rec.Offset < next || rec.Offset >= end {
				return
			}
			progressed = true
			next = rec.Offset + 1
			if !fn(rec) {
				stop = true
			}
		})
		if stop || (!progressed && timedOut) {
			return start, end, nil
		}
	}
	return start, end, nil
}
