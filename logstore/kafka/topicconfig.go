package kafka

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Only Prune deletes a WAL record: an entry that AppendBatch acknowledged
// stays in the log until its region declared it obsolete. A topic's
// retention (time or size) deletes records whatever the regions still
// need, and compaction deletes records from the middle of the log. So kwal
// creates its topics with neither, unless Config.TopicConfigs says
// otherwise, and checks the topics it did not create the first time it
// uses them (a pool made by an operator, by another tool, or before).

// walTopicDefaults are the configs of a topic kwal creates, unless
// Config.TopicConfigs sets them (max.message.bytes comes from
// MaxBatchBytes).
var walTopicDefaults = map[string]string{
	"retention.ms":    "-1",
	"retention.bytes": "-1",
	"cleanup.policy":  "delete",
}

// ErrCompactedTopic is matched by the error of a call that would write a
// namespace whose topic is compacted (cleanup.policy contains compact):
// compaction deletes records from the middle of the log, entries that
// regions still need. Change the topic's cleanup.policy to delete.
var ErrCompactedTopic = errors.New("kwal: the topic is compacted, which deletes entries that are still needed")

// Retention is what a namespace's topic lets the broker delete on its own,
// whatever the regions still need.
type Retention struct {
	Namespace string
	// Ms and Bytes are the topic's retention.ms and retention.bytes: -1
	// deletes nothing by age or size.
	Ms, Bytes int64
	// CleanupPolicy is the topic's cleanup.policy ("delete" for kwal's).
	CleanupPolicy string
}

// Finite reports whether the broker deletes records by age or size.
func (r Retention) Finite() bool { return r.Ms >= 0 || r.Bytes >= 0 }

// Compacted reports whether the broker compacts the topic.
func (r Retention) Compacted() bool { return strings.Contains(r.CleanupPolicy, "compact") }

// String says what the broker may delete.
func (r Retention) String() string {
	var parts []string
	if r.Ms >= 0 {
		parts = append(parts, "retention.ms="+strconv.FormatInt(r.Ms, 10))
	}
	if r.Bytes >= 0 {
		parts = append(parts, "retention.bytes="+strconv.FormatInt(r.Bytes, 10))
	}
	if r.Compacted() {
		parts = append(parts, "cleanup.policy="+r.CleanupPolicy)
	}
	if len(parts) == 0 {
		return "none (only Prune deletes)"
	}
	return strings.Join(parts, " ")
}

// TopicRetention returns what the namespace's topic lets the broker delete
// on its own (an extension of the logstore contract). kwal's own topics
// delete nothing; a finite retention on a topic kwal uses is logged once
// per store as a warning and exported as kwal_topic_retention_seconds and
// kwal_topic_retention_bytes.
func (s *LogStore) TopicRetention(ctx context.Context, namespace string) (_ Retention, err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("topic retention"); err != nil {
		return Retention{}, err
	}
	defer s.end()
	if err := s.checkNamespace(namespace); err != nil {
		return Retention{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	r, err := s.describeRetention(ctx, namespace)
	if err != nil {
		return Retention{}, kwalerr.Errorf("topic retention of %q: %w", namespace, err)
	}
	return r, nil
}

// describeRetention asks the broker for the topic's deleting configs.
func (s *LogStore) describeRetention(ctx context.Context, topic string) (Retention, error) {
	rcs, err := s.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return Retention{}, stepErr("describe configs", err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return Retention{}, stepErr("describe configs", err)
	}
	r := Retention{Namespace: topic, Ms: -1, Bytes: -1, CleanupPolicy: "delete"}
	for _, c := range rc.Configs {
		if c.Value == nil {
			continue
		}
		v := *c.Value
		switch c.Key {
		case "retention.ms", "retention.bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return Retention{}, kwalerr.Errorf("config %s=%q is not a number", c.Key, v)
			}
			if c.Key == "retention.ms" {
				r.Ms = max(n, -1)
			} else {
				r.Bytes = max(n, -1)
			}
		case "cleanup.policy":
			r.CleanupPolicy = v
		}
	}
	return r, nil
}

// retentionOfCreated is the retention of a topic kwal created with configs.
func retentionOfCreated(topic string, configs map[string]*string) Retention {
	r := Retention{Namespace: topic, Ms: -1, Bytes: -1, CleanupPolicy: "delete"}
	num := func(k string) int64 {
		if v, ok := configs[k]; ok && v != nil {
			if n, err := strconv.ParseInt(*v, 10, 64); err == nil {
				return max(n, -1)
			}
		}
		return -1
	}
	r.Ms, r.Bytes = num("retention.ms"), num("retention.bytes")
	if v, ok := configs["cleanup.policy"]; ok && v != nil {
		r.CleanupPolicy = *v
	}
	return r
}

// checkTopic is the check of a topic's configs at its first use by this
// store (its producer's creation): a compacted topic is refused; a finite
// retention is logged once as a warning naming the topic and the setting,
// and exported. A broker that refuses to describe configs (ACLs) leaves
// the topic unchecked: logged, not fatal.
func (s *LogStore) checkTopic(ctx context.Context, topic string, created *Retention) error {
	r := Retention{}
	if created != nil {
		r = *created
	} else {
		var err error
		if r, err = s.describeRetention(ctx, topic); err != nil {
			if errors.Is(err, ErrUnknownNamespace) {
				return err
			}
			s.log.Warn("kwal: could not check the topic's retention and cleanup policy; records may be deleted by the broker", "topic", topic, "err", err)
			return nil
		}
	}
	s.metrics.retentionSeconds.WithLabelValues(topic).Set(retentionSeconds(r.Ms))
	s.metrics.retentionBytes.WithLabelValues(topic).Set(float64(r.Bytes))
	if r.Compacted() {
		return kwalerr.Errorf("cleanup.policy=%q: %w", r.CleanupPolicy, ErrCompactedTopic)
	}
	if r.Finite() {
		s.log.Warn("kwal: the topic deletes records by age or size, whatever the regions still need: acknowledged entries of a region that does not flush in time will be lost (kwal's own topics keep everything until Prune)",
			"topic", topic, "retention", r.String())
	} else if s.cfg.PruneMode == PruneMarkOnly {
		s.log.Warn("kwal: PruneMode is mark-only, which leaves deleting to the topic's retention, but the topic has none: its log only grows (set a retention.ms longer than any region goes without a flush, or use PruneMode delete where DeleteRecords is allowed)",
			"topic", topic)
	}
	return nil
}

// retentionSeconds is a retention.ms in seconds; -1 (none) stays -1.
func retentionSeconds(ms int64) float64 {
	if ms < 0 {
		return -1
	}
	return float64(ms) / 1000
}

// topicConfigsForCreate are the configs a created topic gets:
// Config.TopicConfigs over kwal's defaults.
func (s *LogStore) topicConfigsForCreate() map[string]*string {
	configs := map[string]*string{}
	for k, v := range walTopicDefaults {
		configs[k] = &v
	}
	for k, v := range s.cfg.TopicConfigs {
		configs[k] = &v
	}
	if _, ok := configs["max.message.bytes"]; !ok {
		v := strconv.Itoa(s.cfg.MaxBatchBytes + 64<<10)
		configs["max.message.bytes"] = &v
	}
	return configs
}
